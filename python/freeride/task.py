"""The Python side-task SDK: iterative tasks that run inside bubbles.

    class Resize(freeride.IterativeTask):
        unit = "images"
        def init(self): ...
        def step(self): ...; return 32          # units of work done
    if __name__ == "__main__":
        raise SystemExit(freeride.run_task(Resize()))

run_task hands the task to libfreeride's runner, the one the C++ SDK uses:
under a FreeRide daemon it calls step() only while a bubble lasts and the
next step fits in it; alone (or with --standalone [--seconds T]) it steps
back to back and prints the alone rate as one JSON line, which
`freeride task-profile` reads.
"""
from __future__ import annotations

import ctypes
import math
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from freeride._native import load_library, loaded_library


def _utf8_prefix(text: str, max_bytes: int) -> bytes:
    """`text` as UTF-8, cut to at most `max_bytes` on a character's boundary (the daemon shows
    the unit as text, and a character cut in two is not text)."""
    return text.encode()[:max_bytes].decode("utf-8", "ignore").encode()


@dataclass
class StepResult:
    units: float = 0.0
    done: bool = False
    # Parts of the task's grain the step did, when it planned them to step_budget_ns(): the
    # daemon learns the length of one part, which is what must fit for a bubble to be granted.
    parts: int = 1
    # True when the task found nothing to do now (a server whose next request has not come):
    # the runner records no step and hands the bubble back; the task is granted again later.
    idle: bool = False


def report_parts(parts: int) -> None:
    """Inside a step hook: tells the runner the step did `parts` parts (StepResult.parts)."""
    if parts != 1:
        # The library takes any count below 1 as 1; ctypes would wrap one past 31 bits.
        load_library().freeride_step_parts(min(parts, 2**31 - 1))


def step_budget_ns() -> int:
    """Inside step() under a daemon: the longest the step may take and still fit the rest of
    its grant (the bubble's forecast end, with the safety margin and the overhead guard's
    factor); 0 once the grant is over.  A task whose work divides into short parts can plan
    as many as fit and wait for the device once, returning StepResult(units, parts=n).
    Running alone: unbounded (2**63 - 1); outside step(), on another thread than step()'s,
    or before run_task loaded the library: 0."""
    lib = loaded_library()
    return 0 if lib is None else int(lib.freeride_step_budget_ns())


class IterativeTask:
    """Override step(); the other hooks are optional."""

    unit: str = "steps"

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


def _as_result(value: StepResult | float | int | None) -> StepResult:
    if isinstance(value, StepResult):
        return value
    if isinstance(value, (str, bytes, bytearray)):  # float() would read "3" as 3 units: a slip, said as one
        raise TypeError(f"step() returned {type(value).__name__} {value!r}: return a StepResult or a "
                        "number of units")
    return StepResult(units=float(value or 0))


def parse_seconds(value: list[str]) -> float:
    """The T of `--seconds T` (given as [T], or [] when it is missing); a clear
    exit when it is not a positive number."""
    try:
        seconds = float(value[0])
    except (IndexError, ValueError):
        raise SystemExit(f"freeride: --seconds {' '.join(value)!r}: give a number of seconds") from None
    if not seconds > 0:
        raise SystemExit(f"freeride: --seconds {value[0]}: give a positive number")
    return seconds


STANDALONE_SECONDS = "FREERIDE_STANDALONE_SECONDS"


def standalone_seconds_from_environment() -> float | None:
    """The seconds `freeride task-profile` asks a task to run alone for, through
    FREERIDE_STANDALONE_SECONDS (not appended arguments, which the task's own
    parser may refuse); None when it is not set, or a daemon launched the task
    (which drops it: the task would run outside the bubbles).  Read as the C++
    runner reads it (ParseStandaloneSeconds: decimal digits with an optional
    point and exponent, finite and above 0); any other value exits 2 with the
    reason, as there."""
    value = os.environ.get(STANDALONE_SECONDS, "")
    if not value or os.environ.get("FREERIDE_TASK_SEGMENT"):
        return None
    seconds = math.nan
    if re.fullmatch(r"[0-9.eE+-]+", value) and value[0] not in "+-":
        try:
            seconds = float(value)
        except ValueError:
            pass
    if not (math.isfinite(seconds) and seconds > 0):
        print(f"freeride: {STANDALONE_SECONDS}={value} is not a number of seconds above 0", file=sys.stderr)
        raise SystemExit(2)
    return seconds


def parse_run_options(argv: list[str]) -> tuple[bool, float, list[str]]:
    """Removes --standalone and --seconds T from argv: (standalone, seconds, rest)."""
    standalone, seconds, rest = False, 0.0, []
    i = 0
    while i < len(argv):
        if argv[i] == "--standalone":
            standalone = True
        elif argv[i] == "--seconds" and i + 1 < len(argv):
            seconds = parse_seconds(argv[i + 1:i + 2])
            i += 1
        else:
            rest.append(argv[i])
        i += 1
    return standalone, seconds, rest


_HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_STEP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double),
                         ctypes.POINTER(ctypes.c_int))
_PATH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_PEAK = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)
_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)  # a char* into _Hooks.error_text


class _Hooks(ctypes.Structure):
    """freeride_iterative_task (include/freeride/freeride.h)."""
    _fields_ = [("user", ctypes.c_void_p), ("unit", ctypes.c_char_p), ("init", _HOOK),
                ("step", _STEP), ("pause", _HOOK), ("resume", _HOOK), ("finish", _HOOK),
                ("save", _PATH), ("restore", _PATH), ("peak_memory_bytes", _PEAK),
                ("error", _ERROR)]


def _record_failure(e: BaseException, error_text: Any) -> int:
    """Puts why a hook failed in `error_text` (what the runner's error hook
    returns) and returns the failure status.  SystemExit carries a message
    meant for the user; anything else is a bug in the task, whose traceback
    helps."""
    if isinstance(e, SystemExit):
        error_text.value = _utf8_prefix(str(e), 1023)
    else:
        traceback.print_exc()
        error_text.value = _utf8_prefix(f"{type(e).__name__}: {e}", 1023)
    return 1


def _checkpoint_failed(path: str, e: BaseException) -> int:
    """Says why a checkpoint was not saved or restored; the hook's status for it (a
    failed checkpoint is not a failed task)."""
    print(f"freeride: checkpoint {path}: {type(e).__name__}: {e}", file=sys.stderr)
    return 0


def _bind(task: IterativeTask) -> tuple[_Hooks, list]:
    """The task's methods as C hooks.  An exception is printed with its
    traceback and turned into a failure status that stops the run; the
    returned list keeps the callbacks alive."""
    error_text = ctypes.create_string_buffer(1024)

    def failed(e: BaseException) -> int:
        return _record_failure(e, error_text)

    def guarded(method: Callable[[], None]) -> Any:
        def hook(_user: Any) -> int:
            try:
                method()
                return 0
            except BaseException as e:  # noqa: BLE001 - C cannot take Python exceptions
                return failed(e)
        return _HOOK(hook)

    def step(_user: Any, units: Any, done: Any) -> int:
        try:
            r = _as_result(task.step())
            report_parts(int(r.parts))
            if r.idle:
                load_library().freeride_step_idle()
        except BaseException as e:  # noqa: BLE001
            return failed(e)
        units[0], done[0] = r.units, int(r.done)
        return 0

    def checkpoint(method: Callable[[str], bool]) -> Any:
        def hook(_user: Any, path: bytes) -> int:
            try:
                return 1 if method(path.decode()) else 0
            except Exception as e:  # noqa: BLE001 - a failed checkpoint is not a failed task
                return _checkpoint_failed(path.decode(), e)
        return _PATH(hook)

    def peak(_user: Any) -> int:
        # An exception escaping a ctypes callback leaves its return value undefined (a peak of
        # 18 bytes was recorded so, and would become the task's memory); say it, and report
        # the peak unknown (0), as the default does.
        try:
            value = int(task.peak_memory_bytes())
            return value if 0 <= value < 1 << 64 else 0
        except Exception as e:  # noqa: BLE001 - an unknown peak is not a failed task
            print(f"freeride: peak_memory_bytes() raised {type(e).__name__}: {e}; the peak counts as unknown",
                  file=sys.stderr)
            return 0

    callbacks = [guarded(task.init), _STEP(step), guarded(task.pause), guarded(task.resume),
                 guarded(task.finish), checkpoint(task.save), checkpoint(task.restore), _PEAK(peak),
                 _ERROR(lambda _user: ctypes.addressof(error_text))]
    hooks = _Hooks(None, _utf8_prefix(task.unit, 31), *callbacks)
    return hooks, callbacks + [error_text]


def run_task(task: IterativeTask, argv: list[str] | None = None) -> int:
    """Runs `task` under the daemon that launched this process, else alone.

    Removes --standalone and --seconds T from `argv` (default sys.argv) in
    place.  Returns the process exit status.
    """
    args = sys.argv if argv is None else argv
    standalone, seconds, rest = parse_run_options(args[1:])
    args[1:] = rest
    hooks, _callbacks = _bind(task)  # the callbacks must outlive the run
    return load_library().freeride_run_iterative_task(ctypes.byref(hooks), int(standalone), seconds)
