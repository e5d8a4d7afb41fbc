"""freeride.torch.instrument() called again: on the same schedule it hands back its handle (a
second wrapping of the step, undone by the first handle's close, left no iteration counted),
and on another schedule it says that the first one is no longer marked."""
from __future__ import annotations

import sys
import warnings

import pytest

from conftest import SOURCE_DIR, require_torch

sys.path.insert(0, str(SOURCE_DIR / "python"))


@pytest.fixture(autouse=True)
def _torch() -> None:
    require_torch()


class FakeMarks:
    """BubbleMarks' surface that Instrumentation uses, counting iterations."""

    def __init__(self) -> None:
        self.lane, self.stage, self.marks, self.iterations, self.closed = 0, 0, 0, 0, False
        self.slot, self.enabled = 0, True

    def start_iteration(self) -> None:
        pass

    def end_iteration(self) -> None:
        self.iterations += 1

    def close(self) -> None:
        self.closed = True


class Schedule:
    def __init__(self) -> None:
        self.steps = 0

    def step(self) -> None:
        self.steps += 1


@pytest.fixture
def instrument(monkeypatch):
    import freeride.torch as fr_torch
    monkeypatch.setattr(fr_torch, "open_marks", lambda *args, **kwargs: FakeMarks())
    yield fr_torch.instrument
    if fr_torch._active is not None:
        fr_torch._active.close()


def test_instrumenting_a_schedule_again_hands_back_its_handle_and_counts_each_iteration_once(instrument):
    schedule = Schedule()
    first = instrument(schedule)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: it is the same schedule
        again = instrument(schedule)
    assert again is first
    for _ in range(3):
        schedule.step()
    assert schedule.steps == 3 and first.iterations == 3


def test_a_second_schedule_is_marked_and_the_first_restored_with_a_warning(instrument):
    one, two = Schedule(), Schedule()
    original = one.step
    first = instrument(one)
    with pytest.warns(UserWarning, match="no longer marked"):
        second = instrument(two)
    assert first._marks.closed and not second._marks.closed
    assert one.step == original  # unwrapped
    one.step()
    two.step()
    two.step()
    assert first.iterations == 0 and second.iterations == 2
