"""FreeRide: run side tasks in the idle time of pipeline-parallel training.

Training side: ``freeride.torch.instrument(schedule)``.
Side-task side: subclass ``freeride.IterativeTask`` and call ``freeride.run_task``.
"""
from freeride._native import FreeRideUnavailable, load_library
from freeride.stage import Stage
from freeride.task import IterativeTask, StepResult, run_task

__all__ = ["FreeRideUnavailable", "IterativeTask", "Stage", "StepResult", "load_library", "run_task"]
__version__ = "0.1.0"
