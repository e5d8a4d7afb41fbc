"""FreeRide for DeepSpeed's pipeline engine: two lines in a training script.

    import freeride.deepspeed
    freeride.deepspeed.instrument(engine)    # engine from deepspeed.initialize(model=PipelineModule(...))

Tested with deepspeed 0.19.8 (the 0.19 series).  Every wait of the stage on a
neighbour becomes a bubble: the engine's four pipeline instructions that
communicate, RecvActivation, RecvGrad, SendActivation and SendGrad.  The
sends count too: a blocking send (gloo, or NCCL past its eager size) stalls
the stage until the neighbour receives.  The engine runs each instruction
through its class table ``PipelineEngine._INSTRUCTION_MAP``; instrument()
gives this engine its own copy of that table with the four entries wrapped,
so nothing global changes and other engines are untouched.  Slots are
numbered within one ``train_batch()``; ``eval_batch()`` is not marked.  Marks
are stream-ordered on CUDA and never block (freeride._marks).

If this DeepSpeed has moved those functions, instrument() warns once, naming
the version it was tested with, and training runs on without FreeRide.
"""
from __future__ import annotations

from freeride._integration import Disabled, Handle, framework_usable, installed_version, open_marks
from freeride._marks import DEFAULT_MEMORY_MARGIN

TESTED_VERSION = "0.19.8"
TESTED_SERIES = (0, 19)
# The engine's instruction -> the method it runs, as in deepspeed/runtime/pipe/engine.py.
WAITS = {
    "RecvActivation": "_exec_recv_activations",
    "RecvGrad": "_exec_recv_grads",
    "SendActivation": "_exec_send_activations",
    "SendGrad": "_exec_send_grads",
}


def find_waits(engine) -> tuple[dict, str | None]:
    """{instruction class: the engine's function} for the four waits, or ({}, why not)."""
    try:
        from deepspeed.runtime.pipe import schedule as ds_schedule
    except Exception as e:
        return {}, f"cannot import deepspeed.runtime.pipe.schedule ({type(e).__name__}: {e})"
    table = getattr(type(engine), "_INSTRUCTION_MAP", None)
    if not isinstance(table, dict):
        return {}, f"{type(engine).__name__} has no _INSTRUCTION_MAP (is it a PipelineEngine?)"
    found = {}
    for instruction, method in WAITS.items():
        cls = getattr(ds_schedule, instruction, None)
        function = table.get(cls) if cls is not None else None
        if function is None or getattr(function, "__name__", None) != method:
            return {}, f"_INSTRUCTION_MAP[{instruction}] is not {method}"
        found[cls] = function
    return found, None


class Instrumentation(Handle):
    """Bubble marks for one PipelineEngine.  ``close()`` (or ``with``) restores it."""

    def __init__(self, engine, waits: dict, marks):
        super().__init__(marks)
        self.engine = engine
        self._in_batch = False
        table = dict(type(engine)._INSTRUCTION_MAP)
        for cls, function in waits.items():
            table[cls] = self._marked(function)
        engine._INSTRUCTION_MAP = table  # shadows the class table for this engine only
        self._original_train_batch = engine.train_batch
        engine.train_batch = self._train_batch

    def _marked(self, function):
        def wait(engine, *args, **kwargs):
            if not self._in_batch:
                return function(engine, *args, **kwargs)
            return self._marks.around(function, engine, *args, **kwargs)
        wait.__name__ = function.__name__
        return wait

    def _train_batch(self, *args, **kwargs):
        self._marks.start_iteration()
        self._in_batch = True
        try:
            return self._original_train_batch(*args, **kwargs)
        finally:
            self._in_batch = False
            self._marks.end_iteration()

    def _restore(self) -> None:
        self.engine.__dict__.pop("_INSTRUCTION_MAP", None)
        self.engine.__dict__.pop("train_batch", None)


def instrument(engine, *, enabled: bool = True, lane: int | None = None, socket: str | None = None,
               memory_margin: int = DEFAULT_MEMORY_MARGIN):
    """Marks `engine`'s (a deepspeed PipelineEngine) waits on its neighbours as bubbles.

    lane, socket and memory_margin as in freeride.torch.instrument.  With
    enabled False, without libfreeride, or with a DeepSpeed whose pipeline
    engine lacks the functions above (each warned once), returns a handle
    that does nothing: training never depends on FreeRide.
    """
    if not enabled:
        return Disabled()
    version = installed_version("deepspeed")
    waits, missing = find_waits(engine)
    if not framework_usable("freeride.deepspeed", "deepspeed", version, TESTED_VERSION, TESTED_SERIES, missing):
        return Disabled()
    marks = open_marks(getattr(engine, "device", None), lane, socket, memory_margin)
    if marks is None:
        return Disabled()
    return Instrumentation(engine, waits, marks)
