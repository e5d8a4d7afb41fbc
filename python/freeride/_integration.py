"""What every framework integration's instrument() shares: the lane, the
handle that does nothing, opening the marks, and warnings given once.

Training never depends on FreeRide: each failure here (no libfreeride, no
daemon, a framework whose functions moved) is one warning and a handle that
does nothing, never an exception into the training script.  Called from the
training thread.
"""
from __future__ import annotations

import os

import torch

from freeride._marks import DEFAULT_MEMORY_MARGIN, BubbleMarks
from freeride._native import FreeRideUnavailable
from freeride._versions import tested, warn_once

__all__ = ["Disabled", "Handle", "framework_usable", "installed_version", "open_marks", "warn_once"]


class Disabled:
    """What instrument() returns when FreeRide is off: a handle that does nothing."""

    marks = iterations = 0
    enabled = False

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class Handle:
    """What each integration's instrument() returns while it marks: counters,
    pause/resume, and close() (or ``with``), which undoes the wrapping
    (``_restore``, per integration) and then ends an open bubble."""

    def __init__(self, marks: BubbleMarks):
        self._marks = marks
        self._closed = False
        self.lane = marks.lane
        self.stage = marks.stage

    @property
    def marks(self) -> int:
        """Bubbles marked so far."""
        return self._marks.marks

    @property
    def iterations(self) -> int:
        return self._marks.iterations

    @property
    def enabled(self) -> bool:
        return self._marks.enabled

    @property
    def slot(self) -> int:
        """The slot the next bubble of this iteration gets."""
        return self._marks.slot

    def pause(self) -> None:
        """Stops marking bubbles (side tasks get none) until resume().  Call it between
        iterations: on a GPU lane, side work queued ahead for the iteration's next bubble
        waits on the GPU until that bubble comes (docs/gate.md)."""
        self._marks.pause()

    def resume(self) -> None:
        self._marks.resume()

    def _restore(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stops marking; restores what instrument() wrapped; ends an open bubble.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._restore()
        self._marks.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def default_lane() -> int:
    """FREERIDE_LANE, else LOCAL_RANK, else the current CUDA device, else 0."""
    for name in ("FREERIDE_LANE", "LOCAL_RANK"):
        if os.environ.get(name):
            return int(os.environ[name])
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return 0


def open_marks(device, lane: int | None, socket: str | None, memory_margin: int = DEFAULT_MEMORY_MARGIN,
               stacklevel: int = 4) -> BubbleMarks | None:
    """The rank's marks, or None (warned once) when libfreeride cannot be loaded.

    Without a daemon the marks are returned all the same (they do nothing
    until one appears) and this warns once.
    """
    lane = default_lane() if lane is None else lane
    socket = socket or os.environ.get("FREERIDE_SOCKET")
    try:
        marks = BubbleMarks(lane, socket, device, memory_margin)
    except FreeRideUnavailable as e:
        warn_once("unavailable", f"freeride: {e}; training runs without FreeRide", stacklevel)
        return None
    if not marks.attached:
        where = socket or "the default socket"
        warn_once(("no daemon", where, lane),
                  f"freeride: no daemon at {where} (lane {lane}); training runs as usual "
                  "and marks are dropped until a daemon appears", stacklevel)
    return marks


def installed_version(module: str) -> str:
    """module.__version__, or "unknown (why)": a broken install must not stop training either."""
    try:
        import importlib
        return str(getattr(importlib.import_module(module), "__version__", "unknown"))
    except Exception as e:
        return f"unknown ({type(e).__name__}: {e})"


def framework_usable(module: str, package: str, version: str, tested_version: str, tested_series: tuple,
                     missing: str | None) -> bool:
    """Warns once (naming the version FreeRide expected) and returns False when the functions to
    wrap are `missing`; warns once, naming `version`, when it is outside the tested series."""
    series = ".".join(map(str, tested_series)) + ".x"
    if missing:
        warn_once((module, "missing"),
                  f"{module}: {missing}; FreeRide expected {package} {tested_version} ({series}) and found "
                  f"{package} {version}; training runs without FreeRide", stacklevel=4)
        return False
    if not tested(version, tested_series):
        warn_once((module, "version"),
                  f"{module}: {package} {version} is outside the tested range ({tested_version}, the "
                  f"{series} series); the functions FreeRide wraps are where it expects them, so it marks them",
                  stacklevel=4)
    return True
