"""freeride._marks.BubbleMarks.around on CUDA, with the streams and the stage
replaced by fakes (the stage's gate writes have their own test against a fake
driver: StageGate in gate_test.cc):
  - where the GPU is drained (megatron-core's batched p2p synchronises the
    device after every exchange), a bubble begins or ends from the host: the
    gate opened or closed by a store and the mark written at once, with no
    stream write, event or host function for the trainer's next kernel or
    synchronisation to wait behind;
  - where work is queued (the usual case: the CPU runs ahead), on the
    stream; also while a mark enqueued before (a host function on the mark
    stream) has not run yet, so that marks are never written out of order."""
from __future__ import annotations

import sys
from unittest import mock

import pytest

from conftest import SOURCE_DIR, BUILD_DIR, require_torch

sys.path.insert(0, str(SOURCE_DIR / "python"))


@pytest.fixture(autouse=True)
def _torch(monkeypatch) -> None:
    require_torch()
    monkeypatch.setenv("FREERIDE_LIB", str(BUILD_DIR / "libfreeride.so"))


class FakeStream:
    def __init__(self, handle: int, drained: bool) -> None:
        self.cuda_stream = handle
        self.drained = drained

    def query(self) -> bool:
        return self.drained


class RecordingStage:
    """The stage's calls, in order; every gate and stream mark succeeds."""

    def __init__(self, log: list) -> None:
        self.log = log

    def gate_open_on_stream(self, stream):
        self.log.append(("gate_open_on_stream", stream))
        return True

    def gate_close_on_stream(self, stream):
        self.log.append(("gate_close_on_stream", stream))
        return True

    def gate_open_now(self):
        self.log.append("gate_open_now")
        return True

    def gate_close_now(self):
        self.log.append("gate_close_now")
        return True

    def begin_on_stream(self, stream, slot, predicted_ns=0, free_memory_bytes=None):
        self.log.append(("begin_on_stream", slot))
        return True

    def end_on_stream(self, stream):
        self.log.append("end_on_stream")
        return True

    def begin(self, slot, predicted_ns=0, free_memory_bytes=None):
        self.log.append(("begin", slot))

    def end(self):
        self.log.append("end")

    def close(self):
        pass


def cuda_marks(log: list, compute: FakeStream, mark: FakeStream):
    """BubbleMarks set up as on a CUDA device, its streams and stage the fakes above."""
    from freeride._marks import BubbleMarks
    marks = BubbleMarks(0, "/nonexistent/freeride.sock", device=None)
    marks.stage.close()
    marks.stage = RecordingStage(log)
    marks._cuda = True
    marks._device = "cuda:0"
    marks._mark_stream = mark
    marks._mark_point = lambda: mark.cuda_stream
    return marks


def run_wait(marks, compute: FakeStream, log: list, drains: bool):
    """One marked wait on `compute`; the wait leaves it drained when `drains`."""
    def wait(value):
        log.append("wait")
        compute.drained = drains
        return value
    with mock.patch("torch.cuda.current_stream", return_value=compute):
        return marks.around(wait, 42)


def test_a_wait_that_drains_the_gpu_is_ended_from_the_host() -> None:
    log: list = []
    compute, mark = FakeStream(7, drained=False), FakeStream(9, drained=True)
    marks = cuda_marks(log, compute, mark)
    assert run_wait(marks, compute, log, drains=True) == 42
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait", "gate_close_now", "end"]
    assert marks.slot == 1


def test_a_wait_that_leaves_work_queued_is_ended_on_the_stream() -> None:
    log: list = []
    compute, mark = FakeStream(7, drained=False), FakeStream(9, drained=True)
    marks = cuda_marks(log, compute, mark)
    run_wait(marks, compute, log, drains=False)
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait",
                   ("gate_close_on_stream", 7), "end_on_stream"]


def test_the_end_never_precedes_a_begin_mark_still_queued() -> None:
    log: list = []
    compute, mark = FakeStream(7, drained=False), FakeStream(9, drained=False)
    marks = cuda_marks(log, compute, mark)
    run_wait(marks, compute, log, drains=True)
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait",
                   ("gate_close_on_stream", 7), "end_on_stream"]


def test_a_wait_that_starts_and_ends_drained_is_marked_from_the_host_only() -> None:
    log: list = []
    compute, mark = FakeStream(7, drained=True), FakeStream(9, drained=True)
    marks = cuda_marks(log, compute, mark)
    run_wait(marks, compute, log, drains=True)
    run_wait(marks, compute, log, drains=True)
    assert log == ["gate_open_now", ("begin", 0), "wait", "gate_close_now", "end",
                   "gate_open_now", ("begin", 1), "wait", "gate_close_now", "end"]


def test_a_drained_begin_with_work_queued_after_the_wait_ends_on_the_stream() -> None:
    log: list = []
    compute, mark = FakeStream(7, drained=True), FakeStream(9, drained=True)
    marks = cuda_marks(log, compute, mark)
    run_wait(marks, compute, log, drains=False)
    assert log == ["gate_open_now", ("begin", 0), "wait", ("gate_close_on_stream", 7), "end_on_stream"]


def test_a_begin_waits_for_the_marks_still_queued_before_it() -> None:
    log: list = []
    compute, mark = FakeStream(7, drained=True), FakeStream(9, drained=False)
    marks = cuda_marks(log, compute, mark)
    run_wait(marks, compute, log, drains=False)
    assert log[:2] == [("gate_open_on_stream", 7), ("begin_on_stream", 0)]


def test_host_marks_can_be_turned_off() -> None:
    log: list = []
    compute, mark = FakeStream(7, drained=True), FakeStream(9, drained=True)
    marks = cuda_marks(log, compute, mark)
    marks.host_marks_when_drained = False
    run_wait(marks, compute, log, drains=True)
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait",
                   ("gate_close_on_stream", 7), "end_on_stream"]
