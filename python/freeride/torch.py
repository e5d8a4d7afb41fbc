"""FreeRide for ``torch.distributed.pipelining``: two lines in a training script.

    import freeride.torch
    freeride.torch.instrument(schedule)           # after building the schedule

Every wait of the stage on a pipeline neighbour (the point where the stage
idles) becomes a bubble: a begin mark before the wait and an end mark after
it.  On CUDA the marks are stream-ordered: written when the GPU reaches
them, not when the CPU issues them (the CPU runs ahead of the GPU under
NCCL).  Each is a host function on a side stream that first waits on an
event of the stage's compute stream, so the compute stream itself never
waits for a host callback (with the host functions on the compute stream, a
1.3B pipeline on 4 H200s ran 3.4-4.4% slower).  On CPU (gloo) the wait
blocks the CPU, so the marks are written at once.  Slots are numbered by
their order within one ``schedule.step()``, so the daemon learns each
slot's length separately.  Marks go through shared memory and never block;
without a daemon they do nothing (with one warning).
"""
from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Protocol

import torch
import torch.distributed.pipelining.schedules as _schedules

from freeride._native import FreeRideUnavailable
from freeride.stage import Stage

_original_wait = _schedules._wait_batch_p2p
_active: "Instrumentation | None" = None
_lock = threading.RLock()

DEFAULT_MEMORY_MARGIN = 2 << 30


class Harvest(Protocol):
    """What instrument() returns: pause, resume and close the marks."""

    marks: int
    enabled: bool

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Harvest: ...

    def __exit__(self, *exc: object) -> None: ...


class Instrumentation:
    """Bubble marks for one pipeline rank.  Use ``close()`` (or ``with``) to stop."""

    def __init__(self, schedule: _schedules._PipelineSchedule, lane: int, socket: str | None,
                 memory_margin: int) -> None:
        self.schedule = schedule
        self.lane = lane
        self.stage = Stage(lane, socket)
        self.slot = 0
        self.marks = 0
        self.iterations = 0
        self.enabled = True
        self._memory_margin = memory_margin
        self._free_bytes = None
        self._device = self._find_device(schedule)
        self._cuda = self._device is not None and self._device.type == "cuda"
        self._total_bytes = torch.cuda.get_device_properties(self._device).total_memory if self._cuda else None
        if self._cuda:
            self._mark_stream = torch.cuda.Stream(self._device)
            self._events = [torch.cuda.Event() for _ in range(64)]
            self._next_event = 0
        self._original_step = schedule.step
        schedule.step = self._step
        if not self.stage.attached:
            where = socket or os.environ.get("FREERIDE_SOCKET", "the default socket")
            warnings.warn(f"freeride: no daemon at {where} (lane {lane}); training runs as usual "
                          "and marks are dropped until a daemon appears", stacklevel=3)

    @staticmethod
    def _find_device(schedule: Any) -> torch.device | None:
        stages = getattr(schedule, "_stages", None) or [getattr(schedule, "_stage", None)]
        for stage in stages:
            if stage is not None and getattr(stage, "device", None) is not None:
                return torch.device(stage.device)
        return None

    def _step(self, *args: Any, **kwargs: Any) -> Any:
        self.slot = 0
        if self._cuda:
            # The memory side tasks may use: what the trainer has not needed at
            # its peak so far, less a margin.  Read once per iteration because
            # the allocator statistics are too slow for every mark.
            peak = torch.cuda.max_memory_reserved(self._device)
            self._free_bytes = max(0, self._total_bytes - peak - self._memory_margin)
        result = self._original_step(*args, **kwargs)
        self.iterations += 1
        return result

    def pause(self) -> None:
        """Stops marking bubbles (side tasks get none) until resume()."""
        self.enabled = False

    def resume(self) -> None:
        self.enabled = True

    def wait(self, work: Any) -> None:
        """Stands in for the schedules' wait on p2p work: begin, wait, end."""
        if not work or not self.enabled:
            return _original_wait(work)
        slot = self.slot
        self.slot += 1
        self.marks += 1
        if self._cuda:
            if self.stage.begin_on_stream(self._mark_point(), slot, 0, self._free_bytes):
                _original_wait(work)
                self.stage.end_on_stream(self._mark_point())
                return None
        self.stage.begin(slot, 0, self._free_bytes)
        try:
            return _original_wait(work)
        finally:
            self.stage.end()

    def _mark_point(self) -> int:
        """The side stream, made to wait until the compute stream reaches this point."""
        event = self._events[self._next_event % len(self._events)]
        self._next_event += 1
        event.record(torch.cuda.current_stream(self._device))
        self._mark_stream.wait_event(event)  # re-recording the event later does not affect this wait
        return self._mark_stream.cuda_stream

    def close(self) -> None:
        """Stops marking; ends an open bubble; restores the schedule."""
        global _active
        with _lock:
            if _active is self:
                _schedules._wait_batch_p2p = _original_wait
                _active = None
        self.schedule.step = self._original_step
        if self._cuda:
            torch.cuda.synchronize(self._device)  # pending stream marks refer to the handle
        self.stage.close()

    def __enter__(self) -> Instrumentation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Disabled:
    """What instrument() returns when FreeRide is off: a handle that does nothing."""

    marks = iterations = 0
    enabled = False

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _Disabled:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _default_lane() -> int:
    for name in ("FREERIDE_LANE", "LOCAL_RANK"):
        if os.environ.get(name):
            return int(os.environ[name])
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return 0


def instrument(schedule: _schedules._PipelineSchedule, *, enabled: bool = True, lane: int | None = None,
               socket: str | None = None, memory_margin: int = DEFAULT_MEMORY_MARGIN) -> Harvest:
    """Marks `schedule`'s idle periods as bubbles for the node's FreeRide daemon.

    lane: the daemon lane of this rank's GPU (default: FREERIDE_LANE, else
    LOCAL_RANK, else the current CUDA device).  socket: the daemon's socket
    (default: FREERIDE_SOCKET, else the daemon's default).  memory_margin:
    bytes kept free for the trainer above its peak so far.  With enabled
    False, or when libfreeride cannot be loaded (warned once), returns a
    handle that does nothing: training never depends on FreeRide.
    """
    global _active
    if not enabled:
        return _Disabled()
    try:
        inst = Instrumentation(schedule, _default_lane() if lane is None else lane,
                               socket or os.environ.get("FREERIDE_SOCKET"), memory_margin)
    except FreeRideUnavailable as e:
        warnings.warn(f"freeride: {e}; training runs without FreeRide", stacklevel=2)
        return _Disabled()
    with _lock:
        if _active is not None:
            _active.close()
        _active = inst
        _schedules._wait_batch_p2p = inst.wait
    return inst
