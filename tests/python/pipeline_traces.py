#!/usr/bin/env python3
"""Makes PyTorch profiler traces of a real torch.distributed.pipelining run on
CPU (gloo), one trace per rank, for any of torch's schedules.

    python3 tests/python/pipeline_traces.py --schedule gpipe --ranks 4 --microbatches 8 \\
        --forward-ms 50 --input-ms 50 --weight-ms 50 --out DIR

(--schedule takes `freeride schedule`'s names: gpipe, 1f1b, interleaved,
loopedbfs, interleavedzb, zbv, dualpipev.)  Each stage's work is custom
operators that take a stated time (they sleep, so 4 ranks fit on 2 cores
without slowing each other): the forward takes F ms, the input gradient I ms
and the weight gradient W ms.  Schedules that split the backward
(interleavedzb, zbv, dualpipev) run I and W apart; the others run both in one
backward of I + W ms.  That is what `freeride schedule --times F,I,W` models,
so the traces' idle slots can be compared with the model's
(tests/python/profile_schedules_test.py).

With --device cuda (one GPU per rank, NCCL), the operators are GPU kernels
that spin for their time (torch.cuda._sleep, calibrated on the GPU), so the
trace has device streams and NCCL kernels; the profiler then records CUDA
activity too.

The profiler (CPU activity) runs 1 + --steps steps: its warm-up step is the
run's first step (shape inference, buffers, the first communication), traced
but not kept; the --steps after it are kept, each with its ProfilerStep#N
mark.  Writes DIR/rank<R>.json.gz and DIR/run.json (the configuration,
torch's version, the wall time and the machine's load average).
"""

import argparse
import gzip
import json
import os
import shutil
import socket
import sys
import time

# freeride schedule's names -> torch's classes, with the stages each rank runs.
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", 1),
    "1f1b": ("Schedule1F1B", 1),
    "interleaved": ("ScheduleInterleaved1F1B", 2),
    "loopedbfs": ("ScheduleLoopedBFS", 2),
    "interleavedzb": ("ScheduleInterleavedZeroBubble", 2),
    "zbv": ("ScheduleZBVZeroBubble", 2),
    "dualpipev": ("ScheduleDualPipeV", 2),
}
V_SHAPED = {"zbv", "dualpipev"}  # stage s on rank s, then back up: 2P-1-s


def stages_of_rank(schedule, ranks, rank):
    per_rank = SCHEDULES[schedule][1]
    if schedule in V_SHAPED:
        return [rank, 2 * ranks - 1 - rank]
    return [rank + k * ranks for k in range(per_rank)]


def define_operators(torch, cycles_per_ms=0.0):
    """freeride_test::spend(x, forward_ms, backward_ms) -> a copy of x that took
    forward_ms, and whose gradient takes backward_ms (freeride_test::sleep_ms).
    The stage puts one on the activations' path (its backward is the input
    gradient) and one on the weight's (its backward is the weight gradient).
    Operators, not Python code, so the profiler records each as a cpu_op.  On
    a GPU (cycles_per_ms > 0) the time is a kernel that spins on the tensor's
    stream instead of a sleep of the calling thread."""

    def take(x, ms):
        if x.is_cuda:
            torch.cuda._sleep(max(1, int(ms * cycles_per_ms)))
        else:
            time.sleep(ms / 1000)
    from torch.library import custom_op

    @custom_op("freeride_test::sleep_ms", mutates_args=())
    def sleep_ms(x: torch.Tensor, ms: float) -> torch.Tensor:
        take(x, ms)
        return x.clone()

    @sleep_ms.register_fake
    def _(x, ms):
        return torch.empty_like(x)

    def spend_setup(ctx, inputs, output):
        ctx.backward_ms = inputs[2]

    @custom_op("freeride_test::spend", mutates_args=())
    def spend(x: torch.Tensor, forward_ms: float, backward_ms: float) -> torch.Tensor:
        take(x, forward_ms)
        return x.clone()

    @spend.register_fake
    def _(x, forward_ms, backward_ms):
        return torch.empty_like(x)

    def spend_backward(ctx, grad):
        return torch.ops.freeride_test.sleep_ms(grad, ctx.backward_ms), None, None

    spend.register_autograd(spend_backward, setup_context=spend_setup)
    return spend


def run_rank(rank: int, args, port: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed import pipelining
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    gpu = args.device == "cuda"
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    cycles_per_ms = 0.0
    if gpu:
        torch.cuda.set_device(device)
        cycles_per_ms = gpu_cycles_per_ms(torch)
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=args.ranks)
    spend = define_operators(torch, cycles_per_ms)

    class Stage(torch.nn.Module):
        """A small linear layer; the custom operators stand for the stage's real work."""

        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.eye(args.width))

        def forward(self, x):
            # The weight's gradient passes through a W ms operator, the activations' through I ms.
            w = spend(self.weight, 0.0, args.weight_ms)
            return spend(x @ w, args.forward_ms, args.input_ms)

    torch.manual_seed(0)
    num_stages = args.ranks * SCHEDULES[args.schedule][1]
    stage_ids = stages_of_rank(args.schedule, args.ranks, rank)
    stages = [pipelining.PipelineStage(Stage().to(device), s, num_stages, device) for s in stage_ids]
    cls = getattr(pipelining, SCHEDULES[args.schedule][0])
    loss_fn = lambda out, target: ((out - target) ** 2).mean()  # noqa: E731
    schedule = cls(stages[0], args.microbatches, loss_fn=loss_fn) if len(stages) == 1 else \
        cls(stages, args.microbatches, loss_fn=loss_fn)
    has_first = 0 in stage_ids
    has_last = num_stages - 1 in stage_ids
    batch = torch.randn(args.microbatches * 2, args.width, device=device)
    target = torch.randn(args.microbatches * 2, args.width, device=device)

    def step() -> None:
        kwargs = {"target": target} if has_last else {}
        if has_first:
            schedule.step(batch, **kwargs)
        else:
            schedule.step(**kwargs)

    # The profiler's own warm-up step is the run's warm-up (shape inference, buffers, the first
    # communication): traced but not kept.  Each kept step gets its ProfilerStep#N mark.
    dist.barrier()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities,
                 schedule=torch.profiler.schedule(wait=0, warmup=1, active=args.steps, repeat=1)) as prof:
        for _ in range(1 + args.steps):
            step()
            prof.step()
    path = os.path.join(out_dir, f"rank{rank}.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    dist.barrier()
    dist.destroy_process_group()


def gpu_cycles_per_ms(torch) -> float:
    """Clock cycles torch.cuda._sleep spins per millisecond on this GPU: the best of a few tries."""
    cycles = 10_000_000
    best = float("inf")
    for _ in range(4):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return cycles / best


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedule", required=True, choices=sorted(SCHEDULES))
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--forward-ms", type=float, default=20)
    p.add_argument("--input-ms", type=float, default=20, help="input-gradient part of the backward")
    p.add_argument("--weight-ms", type=float, default=20, help="weight-gradient part of the backward")
    p.add_argument("--steps", type=int, default=3, help="profiled steps, after one warm-up step")
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: one GPU per rank, NCCL, spinning kernels (a trace with device streams)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import torch.multiprocessing as mp

    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    mp.start_processes(run_rank, args=(args, free_port(), args.out), nprocs=args.ranks, start_method="spawn")
    import torch

    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump({"schedule": args.schedule, "device": args.device, "torch_class": SCHEDULES[args.schedule][0],
                   "ranks": args.ranks, "virtual_stages": SCHEDULES[args.schedule][1],
                   "microbatches": args.microbatches, "forward_ms": args.forward_ms,
                   "input_ms": args.input_ms, "weight_ms": args.weight_ms, "steps": args.steps,
                   "torch": torch.__version__, "wall_s": round(time.monotonic() - started, 1),
                   "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
