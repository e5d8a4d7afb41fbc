"""Steps made of short GPU operations: the built-in PyTorch tasks' way of
fitting work longer than a bubble into bubbles.

A built-in task describes one unit of its work (a training iteration, a
batch of generated text) as a fixed sequence of operations: the forward of
one chunk of layers, the backward of one chunk, the optimizer step, a
decode step.  On a GPU each operation is a CUDA graph where the task can
capture one, so that replaying it costs one launch and the GPU runs at its
alone speed.  `OperationRunner.piece()` runs operations in order until the
GPU time planned for the piece reaches a target, waits for the GPU, and
returns: that is one SDK step, which the lane fits into the rest of a
bubble.  Under a daemon the target is the rest of the grant
(`freeride.step_budget_ns()`), up to four default-length pieces, when that
is longer than one, so that a long bubble is filled by few pieces with few
waits for the GPU, not by many with the GPU idle between them; the step
reports how many default-length parts it planned, and the daemon learns
the length of one.  The work's state (activations, gradients, the KV cache) stays on
the GPU between pieces.

Each operation's GPU time is learned from CUDA events (the wall clock on a
CPU) as it runs, leaning to the slower of old and new, so that a piece
seldom runs past the length the runner learned for it.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

import freeride
from freeride.pace import (_UNTIMED_SHARE, _Clock, learn_duration, parts_planned, piece_plan_ns,
                           piece_target_ns, runs_alone)
from freeride.task import parse_run_options


@dataclass
class Operation:
    """One short piece of GPU work.  `run()` enqueues it and returns the units of work it
    completes (0 for most: a training iteration's images count at its optimizer step)."""
    name: str
    run: Callable[[], float]


class OperationRunner:
    """Runs a cyclic sequence of operations in pieces.  Not thread-safe: one thread
    (the task's step) calls it."""

    def __init__(self, device: torch.device, sequence: Callable[[], list[Operation]],
                 target_ns: int | None = None, now: Callable[[], int] = time.monotonic_ns) -> None:
        """`sequence()` returns the operations of the next unit of work, or none when the
        work has ended; it is called again each time the previous sequence has run to its
        end.  Operations are timed by CUDA events on a GPU, by `now` on a CPU."""
        self.device = device
        self.sequence = sequence
        self.target_ns = piece_target_ns() if target_ns is None else target_ns
        self.estimates: dict[str, int] = {}
        self._pending: list[Operation] = []
        self._clock = _Clock(torch, device.type, now)

    def pending(self) -> bool:
        """Whether the current unit of work has operations left to run."""
        return bool(self._pending)

    def step(self, whole: bool, budget_ns: int | None = None) -> "freeride.StepResult":
        """One SDK step: to the end of the current unit of work (`whole`, one part), else a
        piece planned to `budget_ns` (default: the rest of the grant, freeride.step_budget_ns()),
        with the parts it planned (parts_planned)."""
        if whole:
            return freeride.StepResult(self.piece(whole=True))
        budget = freeride.step_budget_ns() if budget_ns is None else budget_ns
        units, planned, longest = self._run(False, budget)
        return freeride.StepResult(units, parts=parts_planned(planned, self.target_ns, longest))

    def piece(self, whole: bool = False, budget_ns: int = 0) -> float:
        """Runs operations until the planned GPU time reaches the target, or `budget_ns` where
        that is longer (at least one operation, unless the work has ended; `whole`: to the end
        of the current unit of work), waits for the device, and returns the units of work
        completed."""
        return self._run(whole, budget_ns)[0]

    def _run(self, whole: bool, budget_ns: int) -> tuple[float, int, int]:
        """piece()'s work: (units completed, GPU time planned, the longest operation planned)."""
        target = piece_plan_ns(self.target_ns, budget_ns)
        ran: list[tuple[str, Any]] = []
        planned = 0
        longest = 0  # the longest operation planned: no step of the task can be shorter
        units = 0.0
        previous = self._clock.mark()
        while True:
            if not self._pending:
                if ran and whole:
                    break
                self._pending = list(self.sequence())
                if not self._pending:
                    break  # the work has ended
            op = self._pending[0]
            upcoming = self.estimates.get(op.name, int(self.target_ns * _UNTIMED_SHARE))
            if ran and not whole and planned + upcoming > target:
                break
            self._pending.pop(0)
            units += op.run()
            planned += upcoming
            longest = max(longest, upcoming)
            ran.append((op.name, self._clock.mark()))
        self._clock.drain()
        for name, mark in ran:
            learn_duration(self.estimates, name, self._clock.between_ns(previous, mark))
            previous = mark
        self._clock.reuse()
        return units, planned, longest


def run_in_pieces(task: Any, run_argv: list[str]) -> int:
    """Runs a built-in task whose steps are pieces: run_task, with the runner's first
    estimate set to a piece (the daemon otherwise judges the task by the profile's step,
    measured alone on whole units of work, until its first piece has run).  Sets
    `task.whole_steps`: alone, a step is a whole unit of work, so that the alone rate that
    harvest is valued at is the task's full speed."""
    standalone, _, _ = parse_run_options(run_argv[1:])
    task.whole_steps = runs_alone(standalone)
    os.environ["FREERIDE_STEP_HINT_NS"] = str(piece_target_ns())
    return freeride.run_task(task, run_argv)


def can_capture_graphs(device: torch.device, default: bool = True) -> bool:
    """CUDA graphs on this device: FREERIDE_CUDA_GRAPHS=1 asks for them, 0 refuses them,
    unset leaves the task's `default`."""
    if device.type != "cuda":
        return False
    setting = os.environ.get("FREERIDE_CUDA_GRAPHS", "")
    return default if setting == "" else setting != "0"


def capture_graph(device: torch.device, body: Callable[[], None], what: str,
                  reset: Callable[[], None] = lambda: None) -> Callable[[], None]:
    """`body` as a CUDA graph's replay, where graphs can be had; else `body` itself (a CPU,
    FREERIDE_CUDA_GRAPHS=0, or a capture that failed, which is said once on stderr).  `body`
    must read and write only tensors that outlive the graph; it is run twice to warm up,
    each time after `reset()`, which puts its state where one run of it is valid."""
    if not can_capture_graphs(device):
        return body
    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                reset()
                body()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        return graph.replay
    except Exception as e:  # noqa: BLE001 - any capture failure leaves the eager path
        print(f"freeride: {what} runs without CUDA graphs ({type(e).__name__}: {e})",
              file=sys.stderr, flush=True)
        return body
