"""The side task that runs a Ray task's, actor's or Ray Data stage's work inside bubbles.

A Ray worker (freeride.ray's wrapper) submits this module to its node's daemon as an
iterative side task: `python -m freeride.ray._runner SOCKET`.  The daemon launches it like
any side task (stopped until it announces the SDK, its own cgroup, SCHED_IDLE on a CPU lane,
the GPU gate on a GPU lane).  It connects back to the wrapper at SOCKET, takes the work, and
runs it through freeride.run_task: each step is one piece of the work, run only while a
bubble lasts and the step fits in it.

- A function: its call is one step; a generator function is a step per `yield` (a number
  yielded is the units of work the step did), and its return value is the result.
- An actor: the instance is built in init(), before the first bubble; each method call is
  one step, or a step per yield for a generator method.  Between calls there is nothing to
  do: the step is idle, so the bubble goes back to the lane's other tasks at once.
- Ray Data batches: a batch is done `rows_per_step` rows per step, the outputs joined.

Results and exceptions go back over the socket.  When the wrapper goes away (Ray retried or
cancelled the task), the runner stops at its next step: its work is no longer wanted.  When
it cannot connect at all (a restarted daemon relaunched it after its Ray task had moved on),
it exits at once with nothing done.
"""
from __future__ import annotations

import inspect
import os
import queue
import socket
import sys
import threading
import traceback
from numbers import Real
from typing import Any, Iterator

import freeride
from freeride.ray import _wire


class _Call:
    """One call in progress: advance() does one step of it."""

    def __init__(self, call_id: int, fn: Any, args: tuple, kwargs: dict):
        self.call_id, self.fn, self.args, self.kwargs = call_id, fn, args, kwargs
        self.generator: Iterator | None = None

    def advance(self) -> tuple[float, bool, Any]:
        """(units, finished, result) after one step; raises what the user's code raises."""
        if self.generator is None:
            value = self.fn(*self.args, **self.kwargs)
            if not inspect.isgenerator(value):
                return 1.0, True, value
            self.generator = value
        try:
            step = next(self.generator)
        except StopIteration as stop:
            return 0.0, True, stop.value
        return (float(step) if isinstance(step, Real) and not isinstance(step, bool) else 1.0), False, None


def _row_count(batch: Any) -> int:
    if isinstance(batch, dict):
        return len(next(iter(batch.values()))) if batch else 0
    return len(batch)


def _rows(batch: Any, start: int, stop: int) -> Any:
    if isinstance(batch, dict):
        return {k: v[start:stop] for k, v in batch.items()}
    if hasattr(batch, "iloc"):  # pandas
        return batch.iloc[start:stop]
    if hasattr(batch, "slice") and hasattr(batch, "num_rows"):  # pyarrow
        return batch.slice(start, stop - start)
    return batch[start:stop]


def _join(parts: list) -> Any:
    first = parts[0]
    if len(parts) == 1:
        return first
    if isinstance(first, dict):
        import numpy as np
        return {k: np.concatenate([p[k] for p in parts]) for k in first}
    if hasattr(first, "iloc"):
        import pandas as pd
        return pd.concat(parts, ignore_index=True)
    if hasattr(first, "num_rows"):
        import pyarrow as pa
        return pa.concat_tables(parts)
    return [row for p in parts for row in p]


class _BatchCall(_Call):
    """A Ray Data batch, `rows` rows per step; the UDF's outputs joined."""

    def __init__(self, call_id: int, fn: Any, batch: Any, rows: int):
        super().__init__(call_id, fn, (), {})
        self.batch, self.rows, self.done_rows, self.total = batch, rows, 0, _row_count(batch)
        self.outputs: list = []

    def advance(self) -> tuple[float, bool, Any]:
        stop = self.total if self.rows <= 0 else min(self.total, self.done_rows + self.rows)
        self.outputs.append(self.fn(_rows(self.batch, self.done_rows, stop)))
        units = stop - self.done_rows
        self.done_rows = stop
        if self.done_rows < self.total:
            return float(units), False, None
        return float(units), True, _join(self.outputs)


class RayWork(freeride.IterativeTask):
    """The work a wrapper sent, as an iterative side task."""

    def __init__(self, connection: socket.socket, work: _wire.Work):
        self.connection, self.work, self.unit = connection, work, work.unit
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        self.gone = threading.Event()  # the wrapper closed the connection
        self.current: _Call | None = None
        self.answered = 0
        self.instance: Any = None

    def init(self) -> None:
        work = self.work
        try:
            if work.kind == "actor" or (work.kind == "batches" and inspect.isclass(work.target)):
                self.instance = work.target(*work.args, **work.kwargs)
            else:
                self.instance = work.target
        except BaseException as e:  # noqa: BLE001 - the Ray caller gets it
            _wire.send(self.connection, ("failed", _wire.portable_exception(e), traceback.format_exc()))
            raise SystemExit(f"freeride.ray: the constructor of {work.target!r} raised {type(e).__name__}: {e}")
        _wire.send(self.connection, ("ready", os.getpid()))
        if work.call is not None:
            self.calls.put(work.call)
        threading.Thread(target=self._read_calls, name="freeride-ray-calls", daemon=True).start()

    def _read_calls(self) -> None:
        try:
            while True:
                self.calls.put(_wire.receive(self.connection))
        except (_wire.Closed, OSError):
            self.gone.set()

    def _begin(self, message: tuple) -> _Call:
        _, call_id, method, args, kwargs = message
        if self.work.kind == "batches":
            return _BatchCall(call_id, self.instance, args[0], self.work.rows_per_step)
        fn = self.instance if method is None else getattr(self.instance, method)
        return _Call(call_id, fn, args, kwargs)

    def step(self) -> freeride.StepResult:
        if self.gone.is_set():
            print("freeride.ray: the Ray worker that sent this work has gone (Ray retried or cancelled it); "
                  "stopping", file=sys.stderr, flush=True)
            return freeride.StepResult(0, done=True, idle=True)
        if self.current is None:
            try:
                self.current = self._begin(self.calls.get_nowait())
            except queue.Empty:
                if self.work.kind == "function" and self.answered:
                    return freeride.StepResult(0, done=True, idle=True)
                return freeride.StepResult(0, idle=True)
        call = self.current
        try:
            units, finished, result = call.advance()
            reply = ("result", call.call_id, result) if finished else None
        except BaseException as e:  # noqa: BLE001 - the Ray caller gets it, as Ray gives a task's
            units, finished = 0.0, True
            reply = ("error", call.call_id, _wire.portable_exception(e), traceback.format_exc())
        if finished:
            self.current = None
            self.answered += 1
            try:
                _wire.send(self.connection, reply)
            except OSError:
                self.gone.set()
        done = finished and self.work.kind == "function"
        return freeride.StepResult(units, done=done)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m freeride.ray._runner SOCKET (started by freeride.ray, not by hand)",
              file=sys.stderr)
        return 2
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(argv[1])
        message = _wire.receive(connection)
    except (OSError, _wire.Closed) as e:
        # Relaunched by a restarted daemon after its Ray task had moved on: nothing to do.
        print(f"freeride.ray: the Ray worker that submitted this task is gone ({e}); nothing to do",
              file=sys.stderr)
        return 0
    if message[0] != "start":
        print(f"freeride.ray: expected the work, got {message[0]!r}", file=sys.stderr)
        return 2
    return freeride.run_task(RayWork(connection, message[1]), [argv[0]])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
