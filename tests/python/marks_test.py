"""freeride._marks.BubbleMarks.around on CUDA, with the streams and the stage
replaced by fakes (the stage's gate writes and gated marks have their own
tests against a fake driver: StageGate in gate_test.cc): with a gate, the
bubble is opened and closed on the compute stream alone (the marks are read
from the gate word), the close on the stream current after the wait, and a
wait that raises still closes it; without a gate, host-function marks on a
side stream, or marks from the host."""
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
    # The streams below come from a mocked torch.cuda.current_stream, the path a torch without the
    # raw-handle call takes; a CUDA build of torch has that call, so it is taken away here (the
    # test of the raw path gives its own).
    import freeride._marks
    monkeypatch.setattr(freeride._marks, "_raw_stream", None)


class FakeStream:
    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle


class StreamRecordingStage(RecordingStage):
    """The stage's calls, host and stream marks, in order; gated marks, a gate and stream marks
    exist unless told otherwise."""

    def __init__(self, log: list, gate: bool = True, stream_marks: bool = True, gated: bool = True) -> None:
        super().__init__(log)
        self.gate, self.stream_marks, self.gated = gate, stream_marks, gated and gate

    def begin_gated(self, stream, slot, predicted_ns=0, free_memory_bytes=None):
        self.log.append(("begin_gated", stream, slot))
        return self.gated

    def end_gated(self, stream):
        self.log.append(("end_gated", stream))
        return stream is not None

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
    marks._device_index = 0
    marks._mark_point = lambda: 9
    return marks


def test_where_torch_has_the_raw_stream_call_the_marks_ask_it_for_the_handle_not_for_a_stream_object() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log))
    marks._device_index = 3
    asked = []

    def raw(index):
        asked.append(index)
        return 70 + len(asked)

    def wait():
        log.append("wait")
    import freeride._marks
    with mock.patch.object(freeride._marks, "_raw_stream", raw), \
            mock.patch("torch.cuda.current_stream", side_effect=AssertionError("a Stream object was built")):
        marks.around(wait)
    assert asked == [3, 3], "the stage's own device, before the wait and after it"
    assert log == [("begin_gated", 71, 0), "wait", ("end_gated", 72)]


def test_a_gated_bubble_is_ended_from_the_host_when_the_context_cannot_name_a_stream() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log))
    calls = iter([FakeStream(7)])

    def current_stream(*args):
        for stream in calls:
            return stream
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def wait():
        raise TimeoutError("NCCL watchdog")
    with mock.patch("torch.cuda.current_stream", side_effect=current_stream):
        with pytest.raises(TimeoutError, match="NCCL watchdog"):
            marks.around(wait)
    assert log == [("begin_gated", 7, 0), ("end_gated", None)], "the wait's own error is raised"


@pytest.mark.parametrize("gated, expected", [
    # Gated: the bubble is opened and closed on the compute stream alone (no host function, no host mark).
    (True, [("begin_gated", 7, 0), "wait", ("end_gated", 8)]),
    # Without gated marks: the gate opens before the begin and closes before the end.
    (False, [("begin_gated", 7, 0), ("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait",
             ("gate_close_on_stream", 8), "end_on_stream"]),
])
def test_the_bubble_closes_on_the_stream_current_after_the_wait(gated, expected) -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log, gated=gated))
    streams = iter([FakeStream(7), FakeStream(8)])

    def wait(value):
        log.append("wait")
        return value
    with mock.patch("torch.cuda.current_stream", side_effect=lambda *a: next(streams)):
        assert marks.around(wait, 42) == 42
    assert log == expected
    assert marks.slot == 1


@pytest.mark.parametrize("gated, expected", [
    (True, [("begin_gated", 7, 0), "wait", ("end_gated", 7)]),
    (False, [("begin_gated", 7, 0), ("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait",
             ("gate_close_on_stream", 7), "end_on_stream"]),
])
def test_a_wait_that_raises_still_closes_the_gate_and_ends_the_bubble(gated, expected) -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log, gated=gated))

    def wait():
        log.append("wait")
        raise RuntimeError("NCCL error")
    with mock.patch("torch.cuda.current_stream", return_value=FakeStream(7)):
        with pytest.raises(RuntimeError, match="NCCL error"):
            marks.around(wait)
    assert log == expected


def test_without_gated_marks_the_waits_own_error_is_raised_when_closing_fails_too() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log, gated=False))

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
    marks = cuda_marks(StreamRecordingStage(log, stream_marks=False, gated=False))
    with mock.patch("torch.cuda.current_stream", return_value=FakeStream(7)):
        marks.around(lambda: log.append("wait"))
    assert log == [("begin_gated", 7, 0), ("gate_open_on_stream", 7), ("begin_on_stream", 0), ("gate_close_on_stream", 7),
                   ("begin", 0), "wait", "end"]


def test_without_a_gate_only_the_marks_are_written() -> None:
    log: list = []
    marks = cuda_marks(StreamRecordingStage(log, gate=False))
    with mock.patch("torch.cuda.current_stream", return_value=FakeStream(7)):
        marks.around(lambda: log.append("wait"))
    assert log == [("begin_gated", 7, 0), ("gate_open_on_stream", 7), ("begin_on_stream", 0), "wait",
                   "end_on_stream"]
