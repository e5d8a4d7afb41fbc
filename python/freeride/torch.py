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
without a daemon they do nothing (with one warning).  The mechanism is
freeride._marks, shared with freeride.deepspeed and freeride.megatron.

torchtitan builds its schedules with torch's own classes
(``get_schedule_class`` / ``build_pipeline_schedule``); pass the schedule it
returns here (docs/integrations.md).
"""
from __future__ import annotations

from typing import Any

import threading
import warnings

import torch
import torch.distributed.pipelining.schedules as _schedules

from freeride._integration import Disabled, Handle, open_marks
from freeride._marks import DEFAULT_MEMORY_MARGIN

_original_wait = _schedules._wait_batch_p2p
_active: "Instrumentation | None" = None
_lock = threading.RLock()


class Instrumentation(Handle):
    """Bubble marks for one pipeline rank.  Use ``close()`` (or ``with``) to stop."""

    def __init__(self, schedule, marks):
        super().__init__(marks)
        self.schedule = schedule
        self._original_step = schedule.step
        schedule.step = self._step

    @staticmethod
    def find_device(schedule):
        stages = getattr(schedule, "_stages", None) or [getattr(schedule, "_stage", None)]
        for stage in stages:
            if stage is not None and getattr(stage, "device", None) is not None:
                return torch.device(stage.device)
        return None

    def _step(self, *args, **kwargs):
        self._marks.start_iteration()
        result = self._original_step(*args, **kwargs)
        self._marks.end_iteration()
        return result

    def wait(self, work) -> None:
        """Stands in for the schedules' wait on p2p work: begin, wait, end."""
        if not work:
            return _original_wait(work)
        return self._marks.around(_original_wait, work)

    def _restore(self) -> None:
        global _active
        with _lock:
            if _active is self:
                _schedules._wait_batch_p2p = _original_wait
                _active = None
        self.schedule.step = self._original_step


def instrument(schedule: Any, *, enabled: bool = True, lane: int | None = None,
               socket: str | None = None, memory_margin: int = DEFAULT_MEMORY_MARGIN) -> Handle | Disabled:
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
        return Disabled()
    with _lock:
        previous = _active
    # Instrumented already: its handle, not a second wrapping of its step (which the first
    # handle's close then undid, so that no iteration was counted again).
    if previous is not None and previous.schedule is schedule:
        return previous
    marks = open_marks(Instrumentation.find_device(schedule), lane, socket, memory_margin)
    if marks is None:
        return Disabled()
    if previous is not None:
        # One schedule per process marks its waits (the schedules' module-level wait is one).
        warnings.warn("freeride.torch.instrument: another schedule was instrumented; its bubbles are no "
                      "longer marked (one schedule per process)", stacklevel=2)
        previous.close()  # before the new wrapping: it restores what it wrapped
    inst = Instrumentation(schedule, marks)
    with _lock:
        _active = inst
        _schedules._wait_batch_p2p = inst.wait
    return inst
