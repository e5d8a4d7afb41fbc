"""The Python side-task SDK: iterative tasks that run inside bubbles.

    class Resize(freeride.IterativeTask):
        unit = "images"
        def init(self): ...
        def step(self): ...; return 32          # units of work done
    if __name__ == "__main__":
        raise SystemExit(freeride.run_task(Resize()))

Under a FreeRide daemon, run_task calls step() only while a bubble lasts and
the next step fits in it; alone (or with --standalone [--seconds T]) it
steps back to back and prints the alone rate as one JSON line, the same line
the C++ SDK prints, which `freeride task-profile` reads.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import time
from dataclasses import dataclass

from freeride._native import load_library


@dataclass
class StepResult:
    units: float = 0.0
    done: bool = False


class IterativeTask:
    """Override step(); the other hooks are optional."""

    unit = "steps"

    def init(self) -> None:
        """Allocates and loads; runs once before the first bubble."""

    def step(self) -> StepResult | float | int | None:
        """One chunk of work short enough for a bubble: units done, or a StepResult."""
        raise NotImplementedError

    def pause(self) -> None:
        """The task loses its bubble."""

    def resume(self) -> None:
        """The task gets the next bubble."""

    def finish(self) -> None:
        """After the last step."""

    def save(self, path: str) -> bool:
        """Writes a checkpoint to `path`; returns True when it did."""
        return False

    def restore(self, path: str) -> bool:
        """Loads a checkpoint (called after init when one exists)."""
        return False

    def peak_memory_bytes(self) -> int:
        """Peak accelerator memory used, if known (0: unknown)."""
        return 0


def _as_result(value) -> StepResult:
    if isinstance(value, StepResult):
        return value
    return StepResult(units=float(value or 0))


def parse_run_options(argv: list[str]) -> tuple[bool, float, list[str]]:
    """Removes --standalone and --seconds T from argv: (standalone, seconds, rest)."""
    standalone, seconds, rest = False, 0.0, []
    i = 0
    while i < len(argv):
        if argv[i] == "--standalone":
            standalone = True
        elif argv[i] == "--seconds" and i + 1 < len(argv):
            seconds = float(argv[i + 1])
            i += 1
        else:
            rest.append(argv[i])
        i += 1
    return standalone, seconds, rest


def _checkpoint_interval_s() -> float:
    return float(os.environ.get("FREERIDE_CHECKPOINT_INTERVAL_MS", "5000")) / 1000.0


def _save(task: IterativeTask, directory: str) -> bool:
    if not directory:
        return False
    path = os.path.join(directory, "checkpoint")
    if not task.save(path + ".tmp"):
        return False
    os.replace(path + ".tmp", path)  # never a torn checkpoint
    return True


def _run_alone(task: IterativeTask, seconds: float) -> int:
    task.init()
    start = time.monotonic()
    steps, units, done, step_ns = 0, 0.0, False, []
    while not done and (seconds <= 0 or time.monotonic() - start < seconds):
        t0 = time.monotonic_ns()
        r = _as_result(task.step())
        step_ns.append(time.monotonic_ns() - t0)
        units += r.units
        steps += 1
        done = r.done
    task.finish()
    elapsed = time.monotonic() - start
    step_ns.sort()

    def quantile_ms(q: float) -> float:
        if not step_ns:
            return 0.0
        return step_ns[min(len(step_ns) - 1, int(q * len(step_ns)))] / 1e6

    print(json.dumps({
        "mode": "standalone", "unit": task.unit, "steps": steps, "units": units,
        "seconds": elapsed, "rate_per_s": units / elapsed if elapsed > 0 else 0.0,
        "finished": done, "step_ms_p50": quantile_ms(0.5), "step_ms_p90": quantile_ms(0.9),
        "step_ms_p99": quantile_ms(0.99), "step_ms_max": quantile_ms(1.0),
        "peak_memory_bytes": int(task.peak_memory_bytes())}), flush=True)
    return 0


def _run_under_daemon(task: IterativeTask, lib, handle) -> int:
    lib.freeride_task_set_unit(handle, task.unit.encode()[:31])
    task.init()
    directory = (lib.freeride_task_checkpoint_dir(handle) or b"").decode()
    checkpoint = os.path.join(directory, "checkpoint") if directory else ""
    if checkpoint and os.path.exists(checkpoint) and task.restore(checkpoint):
        print(f"freeride: resumed from checkpoint {checkpoint}", file=sys.stderr, flush=True)
    lib.freeride_task_ready(handle)
    interval, last_save, done = _checkpoint_interval_s(), time.monotonic(), False
    while not done:
        wake = lib.freeride_task_wait_grant(handle, 1_000_000_000)
        if wake == -1:  # stop
            _save(task, directory)
            return 0
        if wake == 2:  # checkpoint
            _save(task, directory)
            continue
        if wake != 1:
            continue
        task.resume()
        while lib.freeride_task_next_step_fits(handle):
            start = lib.freeride_now_ns()
            r = _as_result(task.step())
            lib.freeride_task_record_step(handle, start, lib.freeride_now_ns(), r.units)
            if r.done:
                done = True
                break
        task.pause()
        if done:
            break
        lib.freeride_task_yield(handle)
        # Saved after handing the bubble back, never inside it.
        if time.monotonic() - last_save >= interval and _save(task, directory):
            last_save = time.monotonic()
    task.finish()
    if checkpoint and os.path.exists(checkpoint):
        os.remove(checkpoint)
    lib.freeride_task_finished(handle, 1)
    return 0


def run_task(task: IterativeTask, argv: list[str] | None = None) -> int:
    """Runs `task` under the daemon that launched this process, else alone.

    Removes --standalone and --seconds T from `argv` (default sys.argv) in
    place.  Returns the process exit status.
    """
    args = sys.argv if argv is None else argv
    standalone, seconds, rest = parse_run_options(args[1:])
    args[1:] = rest
    try:
        if standalone:
            return _run_alone(task, seconds)
        lib = load_library()
        error = ctypes.create_string_buffer(256)
        handle = lib.freeride_task_attach(error, len(error))
        if not handle:
            print(f"freeride: {error.value.decode()}; running alone", file=sys.stderr)
            return _run_alone(task, seconds)
        try:
            return _run_under_daemon(task, lib, handle)
        except BaseException:
            lib.freeride_task_finished(handle, 0)
            raise
        finally:
            lib.freeride_task_detach(handle)
    except Exception as e:  # a failed task reports and exits non-zero, like the C++ SDK
        print(f"freeride: task failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
