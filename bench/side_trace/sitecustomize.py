"""Traces an unmodified PyTorch side program's GPU kernels, for a look at how it fills bubbles.

Put this folder first on PYTHONPATH and set FREERIDE_SIDE_TRACE=DIR: Python imports this module at
start-up, and from the program's FREERIDE_SIDE_TRACE_AFTER-th printed line (default 60) to
FREERIDE_SIDE_TRACE_LINES lines later (default 40) PyTorch's profiler records its CUDA activity
(kernels, copies and the runtime's launch calls), written as DIR/trace-PID.json (Chrome trace
format) once the last of those lines is printed.  A gate_gpu.py program variant does it with no
change to the program:

    --programs 'compiled+PYTHONPATH=bench/side_trace+FREERIDE_SIDE_TRACE=/tmp/traces'

bench/side_trace_summary.py reads the traces.  Without FREERIDE_SIDE_TRACE this module does nothing.
"""
import atexit
import builtins
import os
import sys

_DIR = os.environ.get("FREERIDE_SIDE_TRACE")
if _DIR:
    _after = max(1, int(os.environ.get("FREERIDE_SIDE_TRACE_AFTER", "60")))
    _lines = max(1, int(os.environ.get("FREERIDE_SIDE_TRACE_LINES", "40")))
    _state = {"printed": 0, "profiler": None}
    _print = builtins.print

    def _traced_print(*args, **kwargs):
        # Lines are counted on the thread that prints them: the program's own, which also launches.
        _print(*args, **kwargs)
        _state["printed"] += 1
        try:
            if _state["printed"] == _after:
                import torch
                from torch.profiler import ProfilerActivity, profile
                # CPU activity only where there is no GPU (a check of this hook itself).
                activity = ProfilerActivity.CUDA if torch.cuda.is_available() else ProfilerActivity.CPU
                _state["profiler"] = profile(activities=[activity])
                _state["profiler"].start()
            elif _state["printed"] == _after + _lines:
                _write()
        except Exception as e:  # a diagnostic: the program goes on untraced
            _state["profiler"] = None
            _print(f"side_trace: not traced ({type(e).__name__}: {e})", file=sys.stderr, flush=True)

    def _write():
        # At the last traced line, or at exit for a program that ends (or is cancelled) before it.
        profiler, _state["profiler"] = _state["profiler"], None
        if profiler is None:
            return
        profiler.stop()
        os.makedirs(_DIR, exist_ok=True)
        profiler.export_chrome_trace(os.path.join(_DIR, f"trace-{os.getpid()}.json"))
        _print(f"side_trace: wrote {_DIR}/trace-{os.getpid()}.json", file=sys.stderr, flush=True)

    atexit.register(_write)

    builtins.print = _traced_print
