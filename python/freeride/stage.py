"""The training-stage side of the bubble channel."""
from __future__ import annotations

import ctypes

from freeride._native import load_library

UNKNOWN_MEMORY = 2**64 - 1


class Stage:
    """One training process's handle on its lane's bubble channel.

    Never blocks and never fails for lack of a daemon: marks do nothing until
    a daemon's lane appears (looked for at most once a second).
    """

    def __init__(self, lane: int, socket: str | None = None) -> None:
        self._lib = load_library()
        self._handle = self._lib.freeride_stage_open(lane, socket.encode() if socket else None)
        if not self._handle:
            raise MemoryError("freeride_stage_open failed")
        self.lane = lane

    @property
    def attached(self) -> bool:
        """True when a daemon's lane is mapped."""
        return bool(self._handle) and self._lib.freeride_stage_attached(self._handle) == 1

    def begin(self, slot: int, predicted_ns: int = 0, free_memory_bytes: int | None = None) -> None:
        """Marks the start of an idle period of schedule slot `slot`, now."""
        self._lib.freeride_bubble_begin(self._handle, slot, predicted_ns,
                                        UNKNOWN_MEMORY if free_memory_bytes is None else free_memory_bytes)

    def end(self) -> None:
        """Marks the end of the open idle period, now."""
        self._lib.freeride_bubble_end(self._handle)

    def begin_on_stream(self, stream: int, slot: int, predicted_ns: int = 0,
                        free_memory_bytes: int | None = None) -> bool:
        """Marks the start when the CUDA stream reaches this point; False if no CUDA driver."""
        return self._lib.freeride_bubble_begin_on_stream(
            self._handle, ctypes.c_void_p(stream), slot, predicted_ns,
            UNKNOWN_MEMORY if free_memory_bytes is None else free_memory_bytes) == 0

    def end_on_stream(self, stream: int) -> bool:
        """Marks the end when the CUDA stream reaches this point; False if no CUDA driver."""
        return self._lib.freeride_bubble_end_on_stream(self._handle, ctypes.c_void_p(stream)) == 0

    def begin_gated(self, stream: int, slot: int, predicted_ns: int = 0,
                    free_memory_bytes: int | None = None) -> bool:
        """Opens the lane's GPU gate where the compute stream reaches this point, and marks the
        bubble's start from the gate word (a thread of libfreeride reads it): the stream gets no
        host function.  False when the lane has no gate: mark with begin_on_stream instead."""
        return self._lib.freeride_bubble_begin_gated(
            self._handle, ctypes.c_void_p(stream), slot, predicted_ns,
            UNKNOWN_MEMORY if free_memory_bytes is None else free_memory_bytes) == 0

    def end_gated(self, stream: int | None) -> bool:
        """Closes the gate, and so ends the bubble, where the compute stream reaches this point
        (0 is the default stream).  With stream None (a context too broken to name one), or when
        the close cannot be enqueued, the bubble is ended from the host at once and False
        returned."""
        if stream is None:
            self._lib.freeride_bubble_end_gated_on_host(self._handle)
            return False
        return self._lib.freeride_bubble_end_gated(self._handle, ctypes.c_void_p(stream)) == 0

    def gate_open_on_stream(self, stream: int) -> bool:
        """Opens the lane's GPU gate when the compute stream reaches this point (a stream
        memory write: no host callback, no wait).  False when the lane has no gate."""
        return self._lib.freeride_gate_open_on_stream(self._handle, ctypes.c_void_p(stream)) == 0

    def gate_close_on_stream(self, stream: int) -> bool:
        """Closes the lane's GPU gate when the compute stream reaches this point."""
        return self._lib.freeride_gate_close_on_stream(self._handle, ctypes.c_void_p(stream)) == 0

    GATE_WRITE_MODES = {"auto": 0, "stream": 1, "memset": 2}

    def set_gate_writes(self, mode: str) -> None:
        """How the gate word is written: "auto" (the default: from the host at once when the
        compute stream has no work left, else a stream memory write), "stream" (always a stream
        memory write) or "memset" (as auto, with a 4-byte memset kernel for a stream write: an
        experiment).  FREERIDE_GATE_WRITES sets it when the stage is opened."""
        if mode not in self.GATE_WRITE_MODES:
            raise ValueError(f"gate write mode {mode!r} is not one of {', '.join(self.GATE_WRITE_MODES)}")
        self._lib.freeride_stage_set_gate_writes(self._handle, self.GATE_WRITE_MODES[mode])

    def gate_writes(self) -> tuple[int, int]:
        """(gate writes made on a stream, gate writes stored from the host) so far."""
        on_stream, from_host = ctypes.c_uint64(0), ctypes.c_uint64(0)
        self._lib.freeride_stage_gate_writes(self._handle, ctypes.byref(on_stream), ctypes.byref(from_host))
        return on_stream.value, from_host.value

    def close(self) -> None:
        """Ends any open bubble and releases the handle (synchronise streams first)."""
        if self._handle:
            self._lib.freeride_stage_close(self._handle)
            self._handle = None

    def __enter__(self) -> "Stage":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
