"""freeride._marks.BubbleMarks.around on CUDA, with the streams and the stage
replaced by fakes (the stage's gate writes have their own test against a fake
driver: StageGate in gate_test.cc): the gate opens on the compute stream
before the begin mark and closes on it before the end mark, the end marks
follow the stream current after the wait, and a wait that raises still
closes the gate and ends the bubble."""
from __future__ import annotations

import sys
from unittest import mock

import pytest

from conftest import SOURCE_DIR, BUILD_DIR, require_torch
from pipeline_harness import RecordingStage

sys.path.insert(0, str(SOURCE_DIR / "python"))


@pytest.fixture(autouse=True)
def _torch(monkeypatch) -> None:
    require_torch()
    monkeypatch.setenv("FREERIDE_LIB", str(BUILD_DIR / "libfreeride.so"))


class FakeStream:
    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle


class StreamRecordingStage(RecordingStage):
    """The stage's calls, host and stream marks, in order; a gate and stream marks exist unless
    told otherwise."""

    def __init__(self, log: list, gate: bool = True, stream_marks: bool = True) -> None:
        super().__init__(log)
        self.gate, self.stream_marks = gate, stream_marks

    def gate_open_on_stream(self, stream):
        self.log.append(("gate_open_on_stream", stream))
        return self.gate

    def gate_close_on_stream(self, stream):
        self.log.append(("gate_close_on_stream", stream))
        return self.gate

    def begin_on_stream(self, stream, slot, predicted_ns=0, free_memory_bytes=None):
        self.log.append(("begin_on_stream", slot))
        return self.stream_marks

    def end_on_stream(self, stream):
        self.log.append("end_on_stream")
        return self.stream_marks


def cuda_marks(stage: StreamRecordingStage):
    """BubbleMarks set up as on a CUDA device, with `stage` and a fake mark stream."""
    from freeride._marks import BubbleMarks
    marks = BubbleMarks(0, "/nonexistent/freeride.sock", device=None)
    marks.stage.close()
    marks.stage = stage
    marks._cuda = True
    marks._device = "cuda:0"
    marks._mark_point = lambda: 9
    return marks


def test_the_gate_opens_before_the_begin_and_closes_on_the_stream_current_after_the_wait() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log))
    streams = iter([FakeStream(7), FakeStream(8)])

    def wait(value):
        log.append("wait")
        return value
    with mock.patch("torch.cuda.current_stream", side_effect=lambda *a: next(streams)):
        assert marks.around(wait, 42) == 42
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait", ("gate_close_on_stream", 8),
                   "end_on_stream"]
    assert marks.slot == 1


def test_a_wait_that_raises_still_closes_the_gate_and_ends_the_bubble() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log))

    def wait():
        log.append("wait")
        raise RuntimeError("NCCL error")
    with mock.patch("torch.cuda.current_stream", return_value=FakeStream(7)):
        with pytest.raises(RuntimeError, match="NCCL error"):
            marks.around(wait)
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait", ("gate_close_on_stream", 7),
                   "end_on_stream"]


def test_the_waits_own_error_is_raised_when_closing_fails_too() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log))

    def broken_close(stream):
        log.append("gate_close_on_stream")
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    marks.stage.gate_close_on_stream = broken_close

    def wait():
        raise TimeoutError("NCCL watchdog")
    with mock.patch("torch.cuda.current_stream", return_value=FakeStream(7)):
        with pytest.raises(TimeoutError, match="NCCL watchdog"):
            marks.around(wait)
    assert log[-2:] == ["gate_close_on_stream", "end"], "the bubble is still ended, from the host"


def test_without_stream_marks_the_gate_is_closed_again_and_the_bubble_marked_from_the_host() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log, stream_marks=False))
    with mock.patch("torch.cuda.current_stream", return_value=FakeStream(7)):
        marks.around(lambda: log.append("wait"))
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), ("gate_close_on_stream", 7),
                   ("begin", 0), "wait", "end"]


def test_without_a_gate_only_the_marks_are_written() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log, gate=False))
    with mock.patch("torch.cuda.current_stream", return_value=FakeStream(7)):
        marks.around(lambda: log.append("wait"))
    assert log == [("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait", "end_on_stream"]
