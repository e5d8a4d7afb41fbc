#!/usr/bin/env python3
# Prints torch.distributed.pipelining's pipeline_order for a schedule shape,
# without GPUs or a process group: the stages are stand-ins that carry only
# their indices.  Used to make torch_pipeline_orders.txt:
#   python make_torch_orders.py KIND P M V
#   (KIND: gpipe 1f1b interleaved loopedbfs interleavedzb zbv dualpipev)
# DualPipeV's overlapped forward+backward pairs are printed as their two
# actions, in the order torch runs them.
import sys, warnings
warnings.filterwarnings("ignore")
from torch.distributed.pipelining import schedules as S
from torch.distributed.pipelining.stage import _PipelineStageBase

class FakeStage(_PipelineStageBase):
    def __init__(self, stage_index, num_stages, group_size, group_rank):
        self.stage_index = stage_index; self.num_stages = num_stages
        self.group_size = group_size; self.group_rank = group_rank
        self.submod = None; self.stage_index_to_group_rank = {}

    @property
    def has_backward(self): return True
    def _create_grad_recv_info(self, *a, **k): pass
    def _prepare_backward_infra(self, *a, **k): pass
    def _prepare_forward_infra(self, *a, **k): pass

def pipeline_order(kind, P, M, V):
    """Every rank's order: torch builds all of them on any rank; rank 0's is used."""
    if kind == "interleaved":
        return S.ScheduleInterleaved1F1B([FakeStage(k * P, P * V, P, 0) for k in range(V)], M).pipeline_order
    if kind == "loopedbfs":
        return S.ScheduleLoopedBFS([FakeStage(k * P, P * V, P, 0) for k in range(V)], M).pipeline_order
    if kind == "interleavedzb":
        return S.ScheduleInterleavedZeroBubble([FakeStage(k * P, P * V, P, 0) for k in range(V)], M).pipeline_order
    if kind == "zbv":
        return S.ScheduleZBVZeroBubble([FakeStage(0, 2 * P, P, 0), FakeStage(2 * P - 1, 2 * P, P, 0)], M).pipeline_order
    if kind == "dualpipev":
        return S.ScheduleDualPipeV([FakeStage(0, 2 * P, P, 0), FakeStage(2 * P - 1, 2 * P, P, 0)], M).pipeline_order
    if kind == "gpipe":
        return S.ScheduleGPipe(FakeStage(0, P, P, 0), M).pipeline_order
    if kind == "1f1b":
        return S.Schedule1F1B(FakeStage(0, P, P, 0), M).pipeline_order
    raise SystemExit(f"unknown schedule {kind}")


kind, P, M, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
order = pipeline_order(kind, P, M, V)
def expand(action):
    return action.sub_actions if getattr(action, "sub_actions", None) else (action,)


for rank in sorted(order):
    print(rank, " ".join(str(a) for action in order[rank] if action is not None for a in expand(action)))
