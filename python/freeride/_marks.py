"""Bubble marks of one pipeline rank, shared by every framework integration.

A framework integration finds where its stage waits on a neighbour and calls
``BubbleMarks.around(wait, ...)`` there, and ``start_iteration()`` /
``end_iteration()`` around one training iteration.  This class does the rest
the same way for all of them:

- slots are numbered by their order within one iteration, so the daemon
  learns each slot's length separately;
- on CUDA the compute stream opens the lane's GPU gate where the bubble
  begins and closes it where it ends (one stream memory write each, or a host
  store where the stream has no work left), so side
  tasks' GPU work, which waits on the gate on the GPU, starts within
  microseconds and never runs past the end; the marks themselves are read
  from the gate word by a thread of libfreeride, so they are written when
  the GPU gets there (the CPU runs ahead under NCCL) and the stream gets no
  host function, which a trainer that synchronises its device after each
  exchange would wait for;
- on CUDA without a gate (no daemon gate, no stream memory operations) the
  marks are host functions on a side stream that first waits on an event of
  the compute stream, so the compute stream itself still never waits;
- on CPU (gloo) the wait blocks the CPU, so the marks are written at once;
- the free memory offered to side tasks comes from the allocator: the device's
  total less the trainer's peak reserved so far, less a margin;
- marks go through shared memory and never block; without a daemon they do
  nothing.

Every method is called from the training thread only.
"""
from __future__ import annotations

import torch

from freeride.stage import Stage

DEFAULT_MEMORY_MARGIN = 2 << 30


# torch._C._cuda_getCurrentRawStream, where this torch has it (CUDA builds); looked up once.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream_handle(device, index: int) -> int:
    """The handle of the current CUDA stream on `device` (numbered `index`).  A trainer that
    synchronises its device after every exchange (megatron-core, DeepSpeed) waits for whatever the
    host does between the wait's return and its next launch, and torch.cuda.current_stream() builds
    a Stream object each call: about 7 us on an H200 node, against 0.6 us for the rest of the
    marks' Python there (bench/results/gate_tuning_h200.md).  So the raw handle is asked for where
    this torch has the call for it (torch._C._cuda_getCurrentRawStream, what torch.compile's
    generated code uses), and the Stream object only otherwise."""
    if _raw_stream is not None:
        return _raw_stream(index)
    return torch.cuda.current_stream(device).cuda_stream


class BubbleMarks:
    """The marks of one rank on its lane.  Raises FreeRideUnavailable without libfreeride."""

    def __init__(self, lane: int, socket: str | None, device, memory_margin: int = DEFAULT_MEMORY_MARGIN):
        self.lane = lane
        self.stage = Stage(lane, socket)
        self.slot = 0
        self.marks = 0
        self.iterations = 0
        self.enabled = True
        self._memory_margin = memory_margin
        self._free_bytes = None
        self._gated = False  # a gated mark was made: make no other kind on this stage
        self._device = torch.device(device) if device is not None else None
        self._cuda = self._device is not None and self._device.type == "cuda"
        if self._cuda and self._device.index is None:
            self._device = torch.device("cuda", torch.cuda.current_device())
        self._device_index = self._device.index if self._cuda else None
        self._total_bytes = torch.cuda.get_device_properties(self._device).total_memory if self._cuda else None
        if self._cuda:
            self._mark_stream = torch.cuda.Stream(self._device)
            self._events = [torch.cuda.Event() for _ in range(64)]
            self._next_event = 0

    @property
    def attached(self) -> bool:
        """True when a daemon's lane is mapped."""
        return self.stage.attached

    def start_iteration(self) -> None:
        """Called as an iteration starts: slots count from 0 again."""
        self.slot = 0
        if self._cuda:
            # Read once per iteration: the allocator statistics are too slow for every mark.
            peak = torch.cuda.max_memory_reserved(self._device)
            self._free_bytes = max(0, self._total_bytes - peak - self._memory_margin)

    def end_iteration(self) -> None:
        self.iterations += 1

    def pause(self) -> None:
        """Stops marking bubbles (side tasks get none) until resume()."""
        self.enabled = False

    def resume(self) -> None:
        self.enabled = True

    def around(self, wait, *args, **kwargs):
        """Runs wait(*args, **kwargs), the stage's wait on a neighbour, as the next slot's bubble."""
        if not self.enabled:
            return wait(*args, **kwargs)
        slot = self.slot
        self.slot += 1
        self.marks += 1
        if self._cuda:
            compute = current_stream_handle(self._device, self._device_index)
            if self.stage.begin_gated(compute, slot, 0, self._free_bytes):
                self._gated = True
                try:
                    result = wait(*args, **kwargs)
                except BaseException:
                    self._end_gated()  # the gate must not stay open; the wait's error is raised
                    raise
                self._end_gated()
                return result
            if self._gated:
                # The gate is gone for now (a daemon restarting): this bubble goes unmarked,
                # as marks of another kind could overtake the gated ones still pending.
                return wait(*args, **kwargs)
            gated = self.stage.gate_open_on_stream(compute)
            if self.stage.begin_on_stream(self._mark_point(), slot, 0, self._free_bytes):
                try:
                    result = wait(*args, **kwargs)
                except BaseException:
                    # The gate must not stay open; but the wait's own error is the one to
                    # raise, not one of closing on a context it broke (then the daemon
                    # closes the gate of a stage gone silent, within --stage-timeout).
                    try:
                        self._end_on_stream(gated)
                    except Exception:
                        self.stage.end()  # the mark at least, from the host
                    raise
                self._end_on_stream(gated)
                return result
            if gated:
                self.stage.gate_close_on_stream(compute)
        self.stage.begin(slot, 0, self._free_bytes)
        try:
            return wait(*args, **kwargs)
        finally:
            self.stage.end()

    def _end_gated(self) -> None:
        """Closes the gate on the stream current after the wait; on a context too broken to name
        it, the bubble is ended from the host (and the daemon closes the gate of a silent stage)."""
        try:
            stream = current_stream_handle(self._device, self._device_index)
        except Exception:
            stream = None
        self.stage.end_gated(stream)

    def _end_on_stream(self, gated: bool) -> None:
        if gated:
            self.stage.gate_close_on_stream(current_stream_handle(self._device, self._device_index))
        self.stage.end_on_stream(self._mark_point())

    def _mark_point(self) -> int:
        """The side stream, made to wait until the compute stream reaches this point."""
        event = self._events[self._next_event % len(self._events)]
        self._next_event += 1
        event.record(torch.cuda.current_stream(self._device))
        self._mark_stream.wait_event(event)  # re-recording the event later does not affect this wait
        return self._mark_stream.cuda_stream

    def close(self) -> None:
        """Ends an open bubble and releases the lane handle."""
        if self._cuda:
            torch.cuda.synchronize(self._device)  # pending stream marks refer to the handle
        self.stage.close()
