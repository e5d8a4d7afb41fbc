"""FreeRide: run side tasks in the idle time of pipeline-parallel training.

Training side: ``freeride.torch.instrument(schedule)``.
Side-task side: subclass ``freeride.IterativeTask`` and call ``freeride.run_task``
(or ``freeride.run_paced`` for PyTorch steps longer than a bubble); run an
unmodified PyTorch script with ``python -m freeride.pace script.py``.
"""
from freeride._native import FreeRideUnavailable, load_library
from freeride.stage import Stage
from freeride.task import IterativeTask, StepResult, run_task, step_budget_ns

__all__ = ["FreeRideUnavailable", "IterativeTask", "Stage", "StepResult", "load_library", "run_paced",
           "run_task", "step_budget_ns"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # freeride.pace is imported when first asked for: imported here eagerly, it was in
    # sys.modules before `python -m freeride.pace` ran it, and runpy warned of it every time.
    if name == "run_paced":
        from freeride.pace import run_paced
        return run_paced
    raise AttributeError(f"module 'freeride' has no attribute {name!r}")


def _announce_to_daemon() -> None:
    """A side task launched by a daemon says at once that it uses the SDK: the daemon holds a
    program that has not said so to bubbles, and a Python task's imports (torch) come before
    run_task."""
    import os
    if not os.environ.get("FREERIDE_TASK_SEGMENT"):
        return
    try:
        load_library().freeride_task_announce()
    except (FreeRideUnavailable, OSError, AttributeError):
        pass  # run_task reports what is wrong


_announce_to_daemon()
