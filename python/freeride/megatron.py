"""FreeRide for megatron-core's pipeline schedules: two lines in a training script.

    import freeride.megatron
    freeride.megatron.instrument()     # before get_forward_backward_func()

Tested with megatron-core 0.16.1 (the 0.16 series: PyPI's newest; there is no
0.19).  Both 1F1B schedules are marked: without interleaving
(``forward_backward_pipelining_without_interleaving``) and with it
(``forward_backward_pipelining_with_interleaving``), which
``get_forward_backward_func()`` returns for a pipeline of more than one stage.
Every p2p exchange of a stage with its neighbours goes through
``P2PCommunicator._communicate``; where it waits for its requests itself,
the whole call is one bubble.  With ``overlap_p2p_comm`` the interleaved
schedule takes the requests back as wait handles and waits on them later,
between computations; instrument() hands it handles whose ``wait()`` is the
bubble, numbered in the order the schedule waits.  Slots are numbered within
one call of the schedule (one training iteration); forward-only calls
(evaluation) are not marked.  Marks are stream-ordered on CUDA and never
block (freeride._marks).

instrument() replaces those two schedule functions in
``megatron.core.pipeline_parallel.schedules`` and ``_communicate`` on the
class, so get the schedule through ``get_forward_backward_func()`` after
instrument() (Megatron-LM's train_step does, every iteration); a p2p wait
outside a marked schedule warns once.  If this megatron-core has moved those
functions, instrument() warns once, naming the version it was tested with,
and training runs on without FreeRide.
"""
from __future__ import annotations

import enum
import threading

import torch

from freeride._integration import Disabled, Handle, framework_usable, installed_version, open_marks, warn_once
from freeride._marks import DEFAULT_MEMORY_MARGIN

TESTED_VERSION = "0.16.1"
TESTED_SERIES = (0, 16)
SCHEDULES = ("forward_backward_pipelining_without_interleaving",
             "forward_backward_pipelining_with_interleaving")

_active: "Instrumentation | None" = None
_lock = threading.RLock()


def find_functions() -> tuple[object, object, str | None]:
    """(schedules module, P2PCommunicator), or (None, None, why not)."""
    try:
        from megatron.core.pipeline_parallel import p2p_communication, schedules
    except Exception as e:
        return None, None, f"cannot import megatron.core.pipeline_parallel ({type(e).__name__}: {e})"
    for name in SCHEDULES:
        if not callable(getattr(schedules, name, None)):
            return None, None, f"megatron.core.pipeline_parallel.schedules has no {name}"
    communicator = getattr(p2p_communication, "P2PCommunicator", None)
    if not callable(getattr(communicator, "_communicate", None)):
        return None, None, "megatron.core.pipeline_parallel.p2p_communication has no P2PCommunicator._communicate"
    return schedules, communicator, None


class Phase(enum.Enum):
    """Where the training thread is with respect to the schedules instrument() wraps."""
    OUTSIDE = 0     # no wrapped schedule running: a p2p wait here escaped the wrapping
    TRAINING = 1    # a training iteration: its waits are marked
    EVALUATING = 2  # a forward-only call: its waits are not marked


class MarkedWork:
    """A p2p request of the overlapped schedule; its wait() is a bubble."""

    def __init__(self, work, inst: "Instrumentation"):
        self._work = work
        self._inst = inst

    def wait(self, *args, **kwargs):
        return self._inst.around(self._work.wait, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._work, name)


class Instrumentation(Handle):
    """Bubble marks for this rank's megatron-core schedules.  ``close()`` (or ``with``) restores them."""

    def __init__(self, schedules, communicator, marks):
        super().__init__(marks)
        self._schedules = schedules
        self._communicator = communicator
        self._phase = Phase.OUTSIDE
        self._original_schedules = {name: getattr(schedules, name) for name in SCHEDULES}
        self._original_communicate = getattr(communicator, "_communicate")
        for name, function in self._original_schedules.items():
            setattr(schedules, name, self._marked_schedule(function))
        communicator._communicate = self._marked_communicate()

    def _marked_schedule(self, schedule):
        def marked(*args, **kwargs):
            if self._phase is not Phase.OUTSIDE:  # called from inside another wrapped schedule
                return schedule(*args, **kwargs)
            training = not kwargs.get("forward_only", False)
            if training:
                self._marks.start_iteration()
            self._phase = Phase.TRAINING if training else Phase.EVALUATING
            try:
                return schedule(*args, **kwargs)
            finally:
                self._phase = Phase.OUTSIDE
                if training:
                    self._marks.end_iteration()
        marked.__name__ = schedule.__name__
        marked.__doc__ = schedule.__doc__
        marked.__wrapped__ = schedule
        return marked

    def around(self, wait, *args, **kwargs):
        """wait(...) as the next slot's bubble, inside a training iteration; else just wait."""
        if self._phase is Phase.EVALUATING:
            return wait(*args, **kwargs)
        if self._phase is Phase.OUTSIDE:
            warn_once(("megatron", "outside"),
                      "freeride.megatron: a pipeline p2p wait outside a schedule FreeRide marks (was the "
                      "schedule taken before instrument()? call get_forward_backward_func() after it); "
                      "these waits are not marked")
            return wait(*args, **kwargs)
        return self._marks.around(wait, *args, **kwargs)

    def _marked_communicate(self):
        original = self._original_communicate

        def _communicate(communicator, *args, **kwargs):
            if kwargs.get("wait_on_reqs", True):
                return self.around(original, communicator, *args, **kwargs)
            # Overlapped: the schedule waits on the requests later.
            recv_prev, recv_next, reqs = original(communicator, *args, **kwargs)
            if isinstance(reqs, dict):
                reqs = {key: MarkedWork(work, self) for key, work in reqs.items()}
            elif isinstance(reqs, list):
                reqs = [MarkedWork(work, self) for work in reqs]
            return recv_prev, recv_next, reqs
        _communicate.__doc__ = original.__doc__
        _communicate.__wrapped__ = original
        return _communicate

    def _restore(self) -> None:
        global _active
        with _lock:
            if _active is not self:
                return
            for name, function in self._original_schedules.items():
                setattr(self._schedules, name, function)
            self._communicator._communicate = self._original_communicate
            _active = None


def instrument(*, enabled: bool = True, lane: int | None = None, socket: str | None = None,
               memory_margin: int = DEFAULT_MEMORY_MARGIN, device=None):
    """Marks this rank's waits on its pipeline neighbours in megatron-core's 1F1B schedules as bubbles.

    lane, socket and memory_margin as in freeride.torch.instrument; device:
    the stage's device (default: the current CUDA device, else CPU).  With
    enabled False, without libfreeride, or with a megatron-core that lacks
    the functions above (each warned once), returns a handle that does
    nothing: training never depends on FreeRide.  A second call replaces the first.
    """
    global _active
    if not enabled:
        return Disabled()
    version = installed_version("megatron.core")
    schedules, communicator, missing = find_functions()
    if not framework_usable("freeride.megatron", "megatron-core", version, TESTED_VERSION, TESTED_SERIES, missing):
        return Disabled()
    if device is None and torch.cuda.is_available() and torch.cuda.is_initialized():
        device = torch.device("cuda", torch.cuda.current_device())
    with _lock:
        if _active is not None:
            _active.close()
        marks = open_marks(device, lane, socket, memory_margin)
        if marks is None:
            return Disabled()
        _active = Instrumentation(schedules, communicator, marks)
        return _active
