"""Pieces: long PyTorch steps, or a whole unmodified training script, run
inside bubbles that are shorter than a step.

A training iteration of ResNet-50 or a prefill of a language model takes
longer than most pipeline bubbles, so a task whose step must fit one bubble
seldom runs.  The pacer cuts the work into pieces at points where PyTorch
hands control back to Python anyway: before each leaf module's forward,
before its backward (a hook on its output's gradient), and before each
optimizer step.  A piece ends at such a point once the GPU time planned for
it reaches its plan (the rest of the grant, up to four targets, where that
is longer than the target, FREERIDE_PIECE_MS); the pacer then synchronises
the device, so the piece has really ended, and hands the bubble back,
reporting the parts (whole targets) it planned.  The work's state (activations,
gradients, the optimizer's) stays where it is until the next bubble.

Each piece is one step of libfreeride's runner, the same runner every SDK
task uses: it waits for grants, runs a piece only when the learned piece
length fits what is left of the bubble, records it, takes second looks,
yields and checkpoints.  The user's code runs on the main thread; the runner
runs on its own thread and asks the main thread for each piece.

    python -m freeride.pace train.py --epochs 3     # an unmodified script
    freeride submit --name r18 -- python -m freeride.pace train.py

A script's progress is counted in optimizer steps ("iterations"), credited
when the piece holding the step has ended.  Under --standalone (or
FREERIDE_STANDALONE_SECONDS=T, how `freeride task-profile` asks) the script runs alone, unpaced, and the last
line it prints is the standalone JSON with its alone rate, timed from its
first optimizer step, so that start-up is not counted.

Limits, stated rather than hidden: GPU work launched outside any module or
optimizer (raw tensor code) joins the next piece, so a script made only of
such code has one long piece per iteration, which the daemon's overrun
budget demotes and then stops; and a script is not checkpointed (a relaunch
starts it again).
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import runpy
import sys
import threading
import time
from typing import Any, Callable

from freeride._native import load_library
from freeride.task import (_ERROR, _HOOK, _PATH, _PEAK, _STEP, IterativeTask, _as_result,
                           _checkpoint_failed, _Hooks, _record_failure, _utf8_prefix, parse_run_options,
                           parse_seconds, report_parts, standalone_seconds_from_environment,
                           step_budget_ns)

DEFAULT_PIECE_MS = 2.0
# A piece's first pass over work it has not timed yet assumes each segment
# (the work between two points) takes this share of the target, so that
# even the first iteration is cut into several pieces.
_UNTIMED_SHARE = 0.25
# A timed segment shorter than this share of the target gets no mark.
_TINY_SHARE = 1 / 32
# A piece planned to the rest of a grant holds at most this many pieces of the default
# length.  Once launched it cannot stop, so a bubble that ends before its forecast is overrun
# by up to the rest of the piece: the cap bounds that, while keeping most of what longer
# pieces gain (bench/pieces_efficiency_gpu.py measures the gain by piece length).
MOST_PARTS = 4


def piece_plan_ns(target_ns: int, budget_ns: int) -> int:
    """The GPU time to plan a piece for: the rest of the grant (`budget_ns`, from
    freeride.step_budget_ns()) where that is longer than the default target, up to
    MOST_PARTS targets."""
    return max(target_ns, min(budget_ns, MOST_PARTS * target_ns))


def parts_planned(planned_ns: int, target_ns: int, longest_ns: int) -> int:
    """The parts a piece reports (StepResult.parts) for `planned_ns` of planned GPU time.  A
    part is never shorter than the target nor than the piece's longest operation (the
    shortest step the task can take), so the parts are counted down: what the daemon learns
    as one part must fit whenever it grants."""
    return max(1, planned_ns // max(target_ns, longest_ns, 1))


def _env_ns(name: str, default: float, low: float, high: float, unit: str, ns_per_unit: float) -> int:
    """The environment variable `name`, a number of `unit`s in [low, high], in nanoseconds."""
    text = os.environ.get(name, "")
    try:
        value = float(text) if text else default
    except ValueError:
        raise SystemExit(f"{name}={text!r}: give a number of {unit}") from None
    if not low <= value <= high:
        raise SystemExit(f"{name}={text!r}: give {low:g} to {high:g} {unit}")
    return int(value * ns_per_unit)


def piece_target_ns() -> int:
    """The GPU time a piece plans for: FREERIDE_PIECE_MS, default 2 ms."""
    return _env_ns("FREERIDE_PIECE_MS", DEFAULT_PIECE_MS, 0.05, 1000, "milliseconds", 1e6)


def warm_up_limit_ns() -> int:
    """How long a script's work may run as its init when it has no optimizer
    step to end the warm-up: FREERIDE_PACE_WARMUP_S, default 10 s (the
    first CUDA iteration's lazy initialisation can take seconds)."""
    return _env_ns("FREERIDE_PACE_WARMUP_S", 10.0, 0, 600, "seconds", 1e9)


class _Stopped(BaseException):
    """Raised in the user's code when the runner has ended (cancel, or a failure)."""


class _Baton:
    """Passes control between the runner thread and the main thread.

    The runner sends a request and waits for its reply; the main thread,
    parked at a point between pieces, serves requests until one lets it
    run.  Exactly one of the two threads runs task code at a time."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._request: tuple | None = None
        self._reply: Any = None
        self._replied = False
        self.runner_status: int | None = None  # set when the runner thread has ended

    # Runner thread.
    def ask(self, *request: Any) -> Any:
        with self._cv:
            self._request, self._replied = request, False
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._replied)
            return self._reply

    def runner_ended(self, status: int) -> None:
        with self._cv:
            self.runner_status = status
            self._cv.notify_all()

    # Main thread.
    def next_request(self) -> tuple:
        """The next request; ('exit', status) once the runner has ended."""
        with self._cv:
            self._cv.wait_for(lambda: self._request is not None or self.runner_status is not None)
            if self._request is None:
                return ("exit", self.runner_status)
            request, self._request = self._request, None
            return request

    def answer(self, reply: Any) -> None:
        with self._cv:
            self._reply, self._replied = reply, True
            self._cv.notify_all()


def learn_duration(estimates: dict, key: Any, took_ns: int) -> None:
    """Updates the estimate of `key` with a new duration, leaning to the slower of old and
    new, so that a piece seldom runs past the length the runner learned for it."""
    old = estimates.get(key)
    estimates[key] = took_ns if old is None else max(took_ns, (3 * old + took_ns) // 4)


class _Clock:
    """Times the segments of a piece: CUDA events on a GPU, `now` (the wall clock) on a CPU."""

    def __init__(self, torch_module: Any, device_type: str,
                 now: Callable[[], int] = time.monotonic_ns) -> None:
        self.torch = torch_module
        self.cuda = device_type == "cuda"
        self.now = now
        self._events: list[Any] = []  # reused from piece to piece: creating one costs more than recording it
        self._used = 0

    def mark(self) -> Any:
        if self.cuda:
            if self._used == len(self._events):
                self._events.append(self.torch.cuda.Event(enable_timing=True))
            event = self._events[self._used]
            self._used += 1
            event.record()
            return event
        return self.now()

    def drain(self) -> None:
        """Waits for the device; the piece's marks stay readable until the next mark."""
        if self.cuda:
            self.torch.cuda.synchronize()

    def capturing(self) -> bool:
        return self.cuda and self.torch.cuda.is_current_stream_capturing()

    def reuse(self) -> None:
        """The marks taken so far are read: they may be recorded again."""
        self._used = 0

    def between_ns(self, a: Any, b: Any) -> int:
        if self.cuda:
            return int(a.elapsed_time(b) * 1e6)
        return b - a


class Pacer:
    """Cuts the work done on the main thread into pieces at PyTorch's hook points.

    `on_piece_end(parts)` is called on the main thread when a piece has
    ended and the device is drained, with the parts it planned
    (parts_planned); it returns when the next piece may start (or raises to
    unwind the user's code).  Each piece is planned to piece_plan_ns(target,
    budget_ns()), `budget_ns` giving the rest of the grant of the piece
    running (default: none, every piece planned to the target)."""

    def __init__(self, torch_module: Any, device_type: str, target_ns: int,
                 on_piece_end: Callable[[int], None],
                 on_warm: Callable[[], None] | None = None, warm_up_ns: int = 0,
                 budget_ns: Callable[[], int] = lambda: 0) -> None:
        self.torch = torch_module
        # Until warm, points do nothing: the work runs as the task's init.
        self.on_warm = on_warm
        self.warm_up_ns = warm_up_ns
        self._warm_from = 0
        self.clock = _Clock(torch_module, device_type)
        self.target_ns = target_ns
        self.on_piece_end = on_piece_end
        self.estimates: dict[Any, int] = {}  # segment key -> its GPU time, smoothed
        self._marks: list[tuple[Any, Any]] = []  # (key, mark) of this piece's segments
        self._planned = 0
        self._longest = 0  # the longest segment planned in this piece
        self.budget_ns = budget_ns
        self._leaf: dict[int, bool] = {}
        self._handles: list[Any] = []
        self._pid = os.getpid()
        self._owner = threading.get_ident()
        self._lock = threading.Lock()
        # Set once the run has ended (cancel, failure): every later point
        # raises again, so a script that swallows the first cannot go on.
        self.stopped = False
        self.iterations = 0  # optimizer steps seen

    def install(self) -> None:
        """Hooks every module and optimizer of the process; call on the thread that runs the work."""
        import torch.nn.modules.module as module_hooks
        self._pid, self._owner = os.getpid(), threading.get_ident()
        import torch.optim.optimizer as optimizer_hooks
        self._handles = [
            module_hooks.register_module_forward_pre_hook(self._before_forward),
            module_hooks.register_module_forward_hook(self._after_forward),
            optimizer_hooks.register_optimizer_step_pre_hook(self._before_optimizer_step),
            optimizer_hooks.register_optimizer_step_post_hook(self._after_optimizer_step),
        ]

    def uninstall(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _is_leaf(self, module: Any) -> bool:
        leaf = self._leaf.get(id(module))
        if leaf is None:
            leaf = next(module.children(), None) is None
            self._leaf[id(module)] = leaf
        return leaf

    def _before_forward(self, module: Any, _args: Any) -> None:
        if self._is_leaf(module):
            self.point(("forward", id(module)))

    def _after_forward(self, module: Any, _args: Any, output: Any) -> None:
        if not self._is_leaf(module) or not self.torch.is_grad_enabled():
            return
        tensor = output if isinstance(output, self.torch.Tensor) else next(
            (o for o in output if isinstance(o, self.torch.Tensor)), None) if isinstance(
            output, (tuple, list)) else None
        # A leaf tensor (a parameter passed through) would keep every hook
        # registered on it for good.
        if tensor is not None and tensor.requires_grad and tensor.grad_fn is not None:
            key = ("backward", id(module))
            tensor.register_hook(lambda _grad: self.point(key))

    def _before_optimizer_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self.point(("optimizer", id(optimizer)))

    def _after_optimizer_step(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self.iterations += 1

    def point(self, key: Any) -> None:
        """A place where the work may be cut: ends the piece here when the
        next segment would take it past the target."""
        if self.stopped:
            raise _Stopped()
        if not self._mine() or not self._lock.acquire(blocking=False):
            return
        try:
            if self.clock.capturing():
                return  # a CUDA graph being captured may not be synchronised
            if self.on_warm is not None:
                now = time.monotonic_ns()
                self._warm_from = self._warm_from or now
                if self.iterations == 0 and now - self._warm_from < self.warm_up_ns:
                    # Warming up: timed, not cut, so the first pieces are planned.
                    self._marks.append((key, self.clock.mark()))
                    return
                warm, self.on_warm = self.on_warm, None
                self._drain_and_learn()
                warm()
                return
            upcoming = self.estimates.get(key, int(self.target_ns * _UNTIMED_SHARE))
            if self._marks:
                if upcoming < self.target_ns * _TINY_SHARE:
                    # Not worth a mark of its own (a decode step has ~100
                    # such points): its time joins the segment before it,
                    # which is then planned a little long.
                    self._planned += upcoming
                    return
                previous = self._marks[-1][0]
                took = self.estimates.get(previous, int(self.target_ns * _UNTIMED_SHARE))
                self._planned += took
                self._longest = max(self._longest, took)
                if self._planned + upcoming > piece_plan_ns(self.target_ns, self.budget_ns()):
                    self.end_piece()
            self._marks.append((key, self.clock.mark()))
        finally:
            self._lock.release()

    def _mine(self) -> bool:
        """Points count in the process and thread that installed the pacer,
        and on autograd's threads (which are not Python's).  A forked
        DataLoader worker has no runner to hand pieces to, and a Python
        thread of the user's own runs unpaced: FreeRide gives a task one
        device, so the work of several threads is not split."""
        if os.getpid() != self._pid:
            return False
        current = threading.current_thread()
        return threading.get_ident() == self._owner or isinstance(current, threading._DummyThread)

    def end_piece(self) -> None:
        """Drains the device, learns the segments' times and hands over."""
        parts = parts_planned(self._planned, self.target_ns, self._longest)
        self._drain_and_learn()
        self.on_piece_end(parts)

    def _drain_and_learn(self) -> None:
        end = self.clock.mark()
        self.clock.drain()
        marks = self._marks
        for (key, a), (_next, b) in zip(marks, marks[1:] + [(None, end)]):
            learn_duration(self.estimates, key, self.clock.between_ns(a, b))
        self.clock.reuse()
        self._marks, self._planned, self._longest = [], 0, 0


class _PacedRun:
    """The main thread's side of a paced run: serves the runner's requests."""

    def __init__(self, task: IterativeTask | None, script: list[str] | None) -> None:
        self.task, self.script = task, script
        self.baton = _Baton()
        self.units_pending = 0.0
        self.error_text = ctypes.create_string_buffer(1024)
        self.pacer: Pacer | None = None
        self._init_answered = False  # a script's init ends at its warm-up's end
        self._counted = 0  # optimizer steps credited (or, the warm-up's, left out)
        self.budget_ns = 0  # the rest of the grant of the piece asked for last

    # ---- runner thread: the hooks libfreeride calls --------------------
    def _hooks(self) -> tuple[_Hooks, list]:
        def hook(name: str) -> Any:
            def call(_user: Any) -> int:
                return self.baton.ask(name)
            return _HOOK(call)

        def step(_user: Any, units: Any, done: Any) -> int:
            # The budget and the parts are the runner thread's (the grant is this step's).
            status, got, finished, parts = self.baton.ask("piece", step_budget_ns())
            units[0], done[0] = got, int(finished)
            report_parts(parts)
            return status

        def path_hook(name: str) -> Any:
            def call(_user: Any, path: bytes) -> int:
                return self.baton.ask(name, path.decode())
            return _PATH(call)

        unit = _utf8_prefix(self.task.unit if self.task else "iterations", 31)
        callbacks = [hook("init"), _STEP(step), hook("pause"), hook("resume"), hook("finish"),
                     path_hook("save"), path_hook("restore"),
                     _PEAK(lambda _user: self.baton.ask("peak")),
                     _ERROR(lambda _user: ctypes.addressof(self.error_text))]
        return _Hooks(None, unit, *callbacks), callbacks

    # ---- main thread ---------------------------------------------------
    def _serve(self, until_piece: bool) -> None:
        """Serves requests until a piece may run (returns) or the run ends (raises _Stopped)."""
        while True:
            request = self.baton.next_request()
            kind = request[0]
            if kind == "exit":
                if self.pacer is not None:
                    self.pacer.stopped = True
                raise _Stopped()
            if kind == "piece" and until_piece:
                self.budget_ns = request[1]
                return
            if kind == "piece":  # the work has ended: nothing more to run
                self.baton.answer((0, self.units_pending, True, 1))
                self.units_pending = 0.0
                continue
            self.baton.answer(self._call(kind, request[1:]))

    def _call(self, kind: str, args: tuple) -> Any:
        task = self.task
        try:
            if kind == "peak":
                import torch
                return int(task.peak_memory_bytes()) if task else (
                    torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0)
            if kind in ("save", "restore"):
                return 1 if task and getattr(task, kind)(args[0]) else 0
            if task:
                getattr(task, kind)()
            return 0
        except (_Stopped, KeyboardInterrupt):
            raise
        except BaseException as e:  # noqa: BLE001 - the runner takes a status
            if kind in ("save", "restore"):
                return _checkpoint_failed(args[0], e)
            return _record_failure(e, self.error_text)

    def _piece_ended(self, parts: int) -> None:
        """Called by the pacer, the device drained: reports the piece, waits for the next."""
        self.baton.answer((0, self.units_pending, False, parts))
        self.units_pending = 0.0
        self._serve(until_piece=True)

    def run(self) -> int:
        import torch
        lib = load_library()
        # Bad settings stop the run here, before the runner starts.
        self.target_ns, self.warm_up_ns = piece_target_ns(), warm_up_limit_ns()
        # The runner's first estimate, before any piece: a piece, not the
        # whole step that a profile (`submit --profile`) measured alone.
        os.environ["FREERIDE_STEP_HINT_NS"] = str(self.target_ns)
        hooks, keep = self._hooks()

        def runner() -> None:
            status = 1
            try:
                status = lib.freeride_run_iterative_task(ctypes.byref(hooks), 0, 0.0)
            finally:
                self.baton.runner_ended(status)

        thread = threading.Thread(target=runner, name="freeride-runner", daemon=True)
        thread.start()
        try:
            self._serve_init_then_work(torch)
        except _Stopped:
            pass
        finally:
            if self.pacer:
                self.pacer.uninstall()
        thread.join()
        del keep
        return self.baton.runner_status if self.baton.runner_status is not None else 1

    def _device_type(self, torch: Any) -> str:
        if self.task is not None and getattr(self.task, "device", None) is not None:
            return torch.device(self.task.device).type
        return "cuda" if torch.cuda.is_available() else "cpu"

    def _serve_init_then_work(self, torch: Any) -> None:
        if self.task is not None:
            self._run_task_steps(torch)
        else:
            self._run_script(torch)

    def _run_task_steps(self, torch: Any) -> None:
        """An IterativeTask: its init and restore are served first; the first
        piece request starts the steps."""
        self._serve(until_piece=True)
        self._start_pacer(torch)
        while True:
            try:
                result = _as_result(self.task.step())
            except (_Stopped, KeyboardInterrupt):
                raise
            except BaseException as e:  # noqa: BLE001
                self.baton.answer((_record_failure(e, self.error_text), self.units_pending, False, 1))
                self._serve(until_piece=False)
                return
            self.units_pending += result.units
            if result.done:
                break
            self.pacer.point(("step",))
        self._finish_work()

    def _run_script(self, torch: Any) -> None:
        """A script: its start-up and warm-up are the task's init."""
        request = self.baton.next_request()
        if request[0] == "exit":
            raise _Stopped()
        assert request[0] == "init", request
        self._start_pacer(torch, first_point_ends_init=True)
        script = self.script
        sys.argv = list(script)
        try:
            runpy.run_path(script[0], run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                self._script_failed(e)
                return
        except (_Stopped, KeyboardInterrupt):
            raise
        except BaseException as e:  # noqa: BLE001
            self._script_failed(e)
            return
        if not self._init_answered:
            self._init_answered = True
            self.baton.answer(0)
            self._serve(until_piece=True)
        self._finish_work()

    def _start_pacer(self, torch: Any, first_point_ends_init: bool = False) -> None:
        def piece_end(parts: int) -> None:
            if self.task is None:
                self._credit_iterations()
            self._piece_ended(parts)

        def init_done() -> None:
            # The script's start-up (imports, model, data) and its first
            # iteration, which pays for lazy initialisation (cuDNN, cuBLAS,
            # the optimizer's state), were the task's init; pieces start
            # here.  That iteration ran outside bubbles and is not credited.
            self._counted = self.pacer.iterations
            self._init_answered = True
            self.baton.answer(0)
            self._serve(until_piece=True)

        self.pacer = Pacer(torch, self._device_type(torch), self.target_ns, piece_end,
                           init_done if first_point_ends_init else None, self.warm_up_ns,
                           budget_ns=lambda: self.budget_ns)
        self.pacer.install()

    def _credit_iterations(self) -> None:
        self.units_pending += self.pacer.iterations - self._counted
        self._counted = self.pacer.iterations

    def _script_failed(self, e: BaseException) -> None:
        status = _record_failure(e, self.error_text)
        if not self._init_answered:
            self._init_answered = True
            self.baton.answer(status)
            return
        self.baton.answer((status, self.units_pending, False, 1))

    def _finish_work(self) -> None:
        """The work has ended: drains and answers the pending piece as done, then serves to the end."""
        if self.pacer is not None:
            self.pacer.clock.drain()
            if self.task is None:
                self._credit_iterations()
            self.pacer.uninstall()
        self.baton.answer((0, self.units_pending, True, 1))
        self.units_pending = 0.0
        try:
            self._serve(until_piece=False)
        except _Stopped:
            pass


def runs_alone(standalone: bool) -> bool:
    """Whether a task runs alone: asked to (--standalone, or FREERIDE_STANDALONE_SECONDS from
    `freeride task-profile`), or not launched by a daemon."""
    return (standalone or standalone_seconds_from_environment() is not None
            or not os.environ.get("FREERIDE_TASK_SEGMENT"))


def run_paced(task: IterativeTask, argv: list[str] | None = None) -> int:
    """Runs an IterativeTask whose steps may be longer than a bubble, in pieces.

    Alone (no daemon, or --standalone), or with FREERIDE_PACE=0 in the
    environment (whole steps, each of which must fit a bubble), it runs
    exactly as run_task does."""
    from freeride.task import run_task
    args = sys.argv if argv is None else argv
    standalone, _, rest = parse_run_options(args[1:])
    if runs_alone(standalone) or os.environ.get("FREERIDE_PACE") == "0":
        return run_task(task, args)
    args[1:] = rest
    return _PacedRun(task, None).run()


def _run_script_alone(script: list[str], seconds: float) -> int:
    """Runs the script unpaced and prints the standalone JSON line (its alone rate)."""
    import torch
    import torch.optim.optimizer as optimizer_hooks
    times: list[int] = []

    class _Enough(BaseException):
        pass

    def after_step(*_: Any) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.monotonic_ns())
        if seconds > 0 and times[-1] - times[0] >= seconds * 1e9:
            raise _Enough()

    handle = optimizer_hooks.register_optimizer_step_post_hook(after_step)
    sys.argv = list(script)
    finished = True
    try:
        runpy.run_path(script[0], run_name="__main__")
    except _Enough:
        finished = False
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        handle.remove()
    # The rate runs from the first optimizer step to the last: start-up and
    # the first iteration's lazy initialisation are not the task's rate.
    steps = len(times) - 1
    span = (times[-1] - times[0]) / 1e9 if steps > 0 else 0.0
    gaps = sorted((b - a) / 1e6 for a, b in zip(times, times[1:])) or [0.0]
    # Nearest rank, as the C++ runner's standalone line (policy/quantile.h).
    pick = lambda q: gaps[max(math.ceil(q * len(gaps)), 1) - 1]  # noqa: E731
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
    print(json.dumps({"mode": "standalone", "unit": "iterations", "steps": max(steps, 0),
                      "units": max(steps, 0), "seconds": span,
                      "rate_per_s": steps / span if span > 0 else 0.0, "finished": finished,
                      "step_ms_p50": pick(0.5), "step_ms_p90": pick(0.9), "step_ms_p99": pick(0.99),
                      "step_ms_max": gaps[-1], "peak_memory_bytes": peak}), flush=True)
    return 0


def split_run_options(args: list[str]) -> tuple[bool, float, list[str]]:
    """(standalone, seconds, the script and its arguments): only options
    before the script, or a trailing `--standalone [--seconds T]` (what
    `freeride task-profile` appended before it set FREERIDE_STANDALONE_SECONDS), are the pacer's; the script's own
    arguments are left alone, whatever they are called."""
    standalone, seconds = False, 0.0
    args = list(args)
    while args and args[0] in ("--standalone", "--seconds"):
        if args[0] == "--standalone":
            standalone, args = True, args[1:]
        else:
            seconds, args = parse_seconds(args[1:2]), args[2:]
    if len(args) >= 3 and args[-3] == "--standalone" and args[-2] == "--seconds":
        return True, parse_seconds([args[-1]]), args[:-3]
    if args and args[-1] == "--standalone":
        return True, seconds, args[:-1]
    return standalone, seconds, args


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    standalone, seconds, rest = split_run_options(args)
    if not rest or rest[0] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[0] + "\n\nusage: python -m freeride.pace SCRIPT.py [ARGS...]"
              " [--standalone [--seconds T]]", file=sys.stderr if not rest else sys.stdout)
        return 2 if not rest else 0
    from_environment = standalone_seconds_from_environment()
    if from_environment is not None:
        standalone, seconds = True, seconds or from_environment
    if not os.path.isfile(rest[0]):
        print(f"freeride.pace: {rest[0]}: no such script", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(rest[0])))
    if standalone or not os.environ.get("FREERIDE_TASK_SEGMENT"):
        if not standalone:
            print("freeride.pace: not launched by a FreeRide daemon; running the script alone",
                  file=sys.stderr)
        return _run_script_alone(rest, seconds)
    return _PacedRun(None, rest).run()


if __name__ == "__main__":
    raise SystemExit(main())
