"""freeride.deepspeed and freeride.megatron against the real installed
deepspeed 0.19.8 and megatron-core 0.16.1 modules, with communication
replaced, in one process:
  - the order of marks around waits, slots numbered within one iteration and
    restarting with the next, evaluation not marked;
  - megatron-core's overlapped p2p: no bubble when the requests are issued,
    one bubble per handle when the schedule waits on it, in wait order;
  - framework changes fail loudly: functions that moved warn once, naming the
    version FreeRide expected, and instrument() does nothing; a version outside
    the tested range is named in a warning; close() restores everything;
  - without a daemon, one warning however often instrument() is called.
The multi-process runs under the daemon are deepspeed_cpu_test.py and megatron_cpu_test.py.
Usage: integrations_test.py SOURCE_DIR BUILD_DIR.  Without torch, deepspeed or megatron-core it fails, unless FREERIDE_SKIP_TORCH=1 asked for the skip (exit 77).
"""
from __future__ import annotations

import os
import sys
import tempfile
import types
import unittest
import warnings

from pipeline_harness import RecordingStage, require

require("torch", "deepspeed", "megatron.core")
SOURCE, BUILD = sys.argv[1], sys.argv[2]
sys.argv[1:] = []
sys.path.insert(0, os.path.join(SOURCE, "python"))
os.environ["FREERIDE_LIB"] = os.path.join(BUILD, "libfreeride.so")
os.environ["FREERIDE_SOCKET"] = os.path.join(tempfile.mkdtemp(prefix="frint-"), "no-daemon.sock")
os.environ["DS_ACCELERATOR"] = "cpu"

import torch  # noqa: E402
import deepspeed  # noqa: E402
import megatron.core  # noqa: E402
from deepspeed.runtime.pipe import schedule as ds_schedule  # noqa: E402
from deepspeed.runtime.pipe.engine import PipelineEngine  # noqa: E402
from megatron.core.model_parallel_config import ModelParallelConfig  # noqa: E402
from megatron.core.pipeline_parallel import p2p_communication, schedules  # noqa: E402

import freeride._integration as integration  # noqa: E402
import freeride._versions as versions  # noqa: E402
import freeride.deepspeed  # noqa: E402
import freeride.megatron  # noqa: E402


class Log(list):
    """What happened, in order: marks from the recording stage and waits from the fake requests."""


def record_marks(inst, log: Log) -> None:
    inst._marks.stage.close()
    inst._marks.stage = RecordingStage(log)


def caught(function, *args, **kwargs):
    """(function's result, the messages of the warnings it gave), with every warning shown."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = function(*args, **kwargs)
    return result, [str(w.message) for w in seen]


class FakeWork:
    def __init__(self, name: str, log: Log):
        self.name, self.log = name, log

    def wait(self):
        self.log.append(f"wait {self.name}")
        return True

    def is_completed(self):
        return False


def fake_engine_class(log: Log, rename: str | None = None):
    """A PipelineEngine whose four waits log instead of communicating, dispatched through
    _INSTRUCTION_MAP as PipelineEngine._exec_schedule does; `rename` moves one of them."""
    def waiter(name):
        def wait(self, buffer_id):
            log.append(f"{name} {buffer_id}")
        wait.__name__ = "_moved" if name == rename else name
        return wait

    table = dict(PipelineEngine._INSTRUCTION_MAP)
    for instruction, method in freeride.deepspeed.WAITS.items():
        table[getattr(ds_schedule, instruction)] = waiter(method)

    class Engine(PipelineEngine):
        _INSTRUCTION_MAP = table
        device = torch.device("cpu")

        def __init__(self):  # no distributed setup: only the dispatch is exercised
            pass

        def run(self, commands):
            for cmd in commands:
                types.MethodType(self._INSTRUCTION_MAP[type(cmd)], self)(**cmd.kwargs)

        def train_batch(self, commands):
            self.run(commands)

        def eval_batch(self, commands):
            self.run(commands)
    return Engine


class DeepSpeedTest(unittest.TestCase):
    def setUp(self):
        versions._warned.clear()

    def test_waits_are_bubbles_numbered_within_train_batch(self):
        log = Log()
        engine = fake_engine_class(log)()
        inst, _ = caught(freeride.deepspeed.instrument, engine)
        self.assertIsInstance(inst, freeride.deepspeed.Instrumentation)
        record_marks(inst, log)
        batch = [ds_schedule.RecvActivation(0), ds_schedule.SendActivation(0), ds_schedule.RecvGrad(0),
                 ds_schedule.SendGrad(0)]
        for _ in range(2):
            engine.train_batch(batch)
        expected = [("begin", 0), "_exec_recv_activations 0", "end", ("begin", 1), "_exec_send_activations 0", "end",
                    ("begin", 2), "_exec_recv_grads 0", "end", ("begin", 3), "_exec_send_grads 0", "end"]
        self.assertEqual(log, expected * 2)
        self.assertEqual((inst.marks, inst.iterations), (8, 2))
        del log[:]
        engine.eval_batch([ds_schedule.RecvActivation(1)])
        self.assertEqual(log, ["_exec_recv_activations 1"])
        # The class table is untouched; close() gives the engine the class's table back.
        self.assertIsNot(engine._INSTRUCTION_MAP, type(engine)._INSTRUCTION_MAP)
        inst.close()
        self.assertIs(engine._INSTRUCTION_MAP, type(engine)._INSTRUCTION_MAP)
        self.assertNotIn("train_batch", engine.__dict__)

    def test_moved_function_warns_once_and_does_nothing(self):
        engine = fake_engine_class(Log(), rename="_exec_recv_grads")()
        inst, messages = caught(freeride.deepspeed.instrument, engine)
        self.assertIsInstance(inst, integration.Disabled)
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("_exec_recv_grads", messages[0])
        self.assertIn("deepspeed 0.19.8", messages[0])
        self.assertIn(f"found deepspeed {deepspeed.__version__}", messages[0])
        self.assertNotIn("_INSTRUCTION_MAP", engine.__dict__)
        _, again = caught(freeride.deepspeed.instrument, engine)
        self.assertEqual(again, [])

    def test_not_a_pipeline_engine_warns(self):
        inst, messages = caught(freeride.deepspeed.instrument, object())
        self.assertIsInstance(inst, integration.Disabled)
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("no _INSTRUCTION_MAP", messages[0])

    def test_version_outside_tested_range_is_named(self):
        saved = deepspeed.__version__
        deepspeed.__version__ = "0.20.1"
        try:
            inst, messages = caught(freeride.deepspeed.instrument, fake_engine_class(Log())())
        finally:
            deepspeed.__version__ = saved
        self.assertIsInstance(inst, freeride.deepspeed.Instrumentation)
        inst.close()
        version_warnings = [m for m in messages if "outside the tested range" in m]
        self.assertEqual(len(version_warnings), 1, messages)
        self.assertIn("deepspeed 0.20.1", version_warnings[0])
        self.assertIn("0.19.8", version_warnings[0])

    def test_no_daemon_warns_once(self):
        _, first = caught(freeride.deepspeed.instrument, fake_engine_class(Log())())
        _, second = caught(freeride.deepspeed.instrument, fake_engine_class(Log())())
        self.assertEqual(len([m for m in first if "no daemon at" in m]), 1, first)
        self.assertEqual([m for m in second if "no daemon at" in m], [])

    def test_disabled_does_nothing_and_warns_nothing(self):
        engine = fake_engine_class(Log())()
        inst, messages = caught(freeride.deepspeed.instrument, engine, enabled=False)
        self.assertIsInstance(inst, integration.Disabled)
        self.assertEqual(messages, [])
        self.assertNotIn("_INSTRUCTION_MAP", engine.__dict__)


class MegatronTest(unittest.TestCase):
    def setUp(self):
        versions._warned.clear()
        self.log = Log()
        self.saved = (p2p_communication._p2p_ops, torch.cuda.current_device)
        # Communication replaced: the requests log their waits; receive buffers on the CPU.
        p2p_communication._p2p_ops = self.fake_p2p_ops
        torch.cuda.current_device = lambda: "cpu"
        self.communicator = object.__new__(p2p_communication.P2PCommunicator)
        self.communicator.config = ModelParallelConfig(pipeline_dtype=torch.float32, batch_p2p_comm=False)
        self.communicator.pp_group, self.communicator.next_rank, self.communicator.prev_rank = None, 1, 0

    def tearDown(self):
        p2p_communication._p2p_ops, torch.cuda.current_device = self.saved
        if freeride.megatron._active is not None:
            freeride.megatron._active.close()

    def fake_p2p_ops(self, *, tensor_send_prev, tensor_recv_prev, tensor_send_next, tensor_recv_next, **_):
        names = [name for name, t in (("send_prev", tensor_send_prev), ("recv_prev", tensor_recv_prev),
                                      ("send_next", tensor_send_next), ("recv_next", tensor_recv_next))
                 if t is not None]
        self.log.append("issue " + ",".join(names))
        return {name: FakeWork(name, self.log) for name in names}

    def communicate(self, wait: bool):
        return self.communicator._communicate(tensor_send_next=torch.ones(2, 1, 4), tensor_send_prev=None,
                                              recv_prev=True, recv_next=False, tensor_shape=(2, 1, 4),
                                              wait_on_reqs=wait)

    def instrument(self):
        inst, messages = caught(freeride.megatron.instrument)
        self.assertIsInstance(inst, freeride.megatron.Instrumentation, messages)
        record_marks(inst, self.log)
        return inst

    def test_overlapped_handles_are_bubbles_in_wait_order(self):
        self.instrument()

        def iteration(**_):  # a schedule's body, run through the real wrapper
            _, _, handles = self.communicate(wait=False)
            self.log.append("compute")
            handles["recv_prev"].wait()
            handles["send_next"].wait()
            self.communicate(wait=True)

        marked = freeride.megatron._active._marked_schedule(iteration)
        for _ in range(2):
            marked(forward_only=False)
        one = ["issue recv_prev,send_next", "compute", ("begin", 0), "wait recv_prev", "end",
               ("begin", 1), "wait send_next", "end",
               ("begin", 2), "issue recv_prev,send_next", "wait recv_prev", "wait send_next", "end"]
        self.assertEqual(self.log, one * 2)
        self.assertEqual(freeride.megatron._active.iterations, 2)
        del self.log[:]
        _, messages = caught(marked, forward_only=True)  # evaluation: its waits are not marked, nor warned of
        self.assertNotIn(("begin", 0), self.log)
        self.assertEqual(messages, [])

    def test_schedules_wrapped_and_restored(self):
        originals = {name: getattr(schedules, name) for name in freeride.megatron.SCHEDULES}
        communicate = p2p_communication.P2PCommunicator._communicate
        inst = self.instrument()
        for name, function in originals.items():
            self.assertIs(getattr(schedules, name).__wrapped__, function)
        # get_forward_backward_func hands out the marked schedule.
        self.assertIs(schedules.get_forward_backward_func(pp_size=2, vp_size=None).__wrapped__,
                      originals["forward_backward_pipelining_without_interleaving"])
        inst.close()
        for name, function in originals.items():
            self.assertIs(getattr(schedules, name), function)
        self.assertIs(p2p_communication.P2PCommunicator._communicate, communicate)

    def test_wait_outside_a_marked_schedule_warns_once(self):
        self.instrument()
        _, messages = caught(self.communicate, True)
        _, again = caught(self.communicate, True)
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("get_forward_backward_func", messages[0])
        self.assertEqual(again, [])
        self.assertNotIn(("begin", 0), self.log)

    def test_moved_function_warns_once_and_does_nothing(self):
        saved = schedules.forward_backward_pipelining_with_interleaving
        del schedules.forward_backward_pipelining_with_interleaving
        try:
            inst, messages = caught(freeride.megatron.instrument)
            _, again = caught(freeride.megatron.instrument)
        finally:
            schedules.forward_backward_pipelining_with_interleaving = saved
        self.assertIsInstance(inst, integration.Disabled)
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("forward_backward_pipelining_with_interleaving", messages[0])
        self.assertIn("megatron-core 0.16.1", messages[0])
        self.assertIn(f"found megatron-core {megatron.core.__version__}", messages[0])
        self.assertEqual(again, [])
        self.assertFalse(hasattr(schedules.forward_backward_pipelining_without_interleaving, "__wrapped__"))

    def test_version_outside_tested_range_is_named(self):
        saved = megatron.core.__version__
        megatron.core.__version__ = "0.19.0"
        try:
            inst, messages = caught(freeride.megatron.instrument)
        finally:
            megatron.core.__version__ = saved
        self.assertIsInstance(inst, freeride.megatron.Instrumentation)
        version_warnings = [m for m in messages if "outside the tested range" in m]
        self.assertEqual(len(version_warnings), 1, messages)
        self.assertIn("megatron-core 0.19.0", version_warnings[0])
        self.assertIn("0.16.1", version_warnings[0])

    def test_second_instrument_replaces_the_first(self):
        original = schedules.forward_backward_pipelining_without_interleaving
        first = self.instrument()
        second = self.instrument()
        self.assertIs(freeride.megatron._active, second)
        self.assertIs(schedules.forward_backward_pipelining_without_interleaving.__wrapped__, original)
        first.close()  # already closed by the second: restores nothing of the second's
        self.assertIs(freeride.megatron._active, second)


if __name__ == "__main__":
    unittest.main(verbosity=2)
