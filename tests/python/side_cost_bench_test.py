"""bench/side_cost_gpu.py's arithmetic: each arm's busy and iteration time against the `none`
block of the same round, the warm-up round left out, GPU samples attributed by time, and a side
arm whose work reached the next busy segment flagged.  (The benchmark itself needs a GPU.)"""
from __future__ import annotations

import sys

import pytest

from conftest import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "bench"))
from side_cost_gpu import ARMS, parse_configs, summarise  # noqa: E402


def block(rnd: int, arm: str, busy: float, iteration: float, slack, start: float) -> dict:
    return {"round": rnd, "arm": arm, "busy_ms": busy, "iteration_ms": iteration, "min_slack_ms": slack,
            "start_unix": start, "wall_ms": 1000.0}


def config() -> dict:
    """Four rounds of the four arms, one second a block.  Round 0 (warm-up) is far off, so that
    counting it would move every figure.  In rounds 1-3 `compute` is 1% slower in busy time,
    `memory` 2% in round 1 and 0% in rounds 2-3, and `light` equal; `memory` once overlapped."""
    blocks, at = [], 1000.0
    for rnd in range(4):
        for arm in ARMS:
            none = 100.0 + rnd
            busy = {"none": none, "compute": none * 1.01, "memory": none * (1.02 if rnd == 1 else 1.0),
                    "light": none}[arm]
            if rnd == 0:
                busy *= 3
            slack = None if arm == "none" else (-0.1 if (arm, rnd) == ("memory", 2) else 0.5)
            blocks.append(block(rnd, arm, busy, busy * 1.5, slack, at))
            blocks[-1]["busy_sm_mhz"] = 1980.0 * (0.99 if arm == "compute" else 1.0)
            at += 1.0
    return {"blocks": blocks}


def test_each_arm_is_compared_with_the_same_rounds_none_block_after_the_warm_up_round() -> None:
    arms = summarise(config(), None)
    assert set(arms) == set(ARMS)
    compute = arms["compute"]["busy_vs_none"]
    assert compute["rounds"] == 3
    assert compute["pct"] == pytest.approx(1.0)
    assert compute["low"] == pytest.approx(1.0) and compute["high"] == pytest.approx(1.0)  # no spread
    assert arms["compute"]["iteration_vs_none"]["pct"] == pytest.approx(1.0)
    assert arms["compute"]["busy_clock_vs_none"]["pct"] == pytest.approx(-1.0)  # the probe's clock
    assert arms["light"]["busy_clock_vs_none"]["pct"] == pytest.approx(0.0)
    memory = arms["memory"]["busy_vs_none"]
    assert memory["pct"] == pytest.approx(2 / 3)
    assert memory["low"] < 0 < memory["high"]  # 2, 0, 0: an interval that holds zero
    assert arms["light"]["busy_vs_none"]["pct"] == pytest.approx(0.0)
    assert "busy_vs_none" not in arms["none"]
    assert arms["none"]["busy_ms"] == pytest.approx(102.0)  # rounds 1-3: 101, 102, 103


def test_a_side_arm_whose_work_reached_the_next_busy_time_is_flagged() -> None:
    arms = summarise(config(), None)
    assert arms["memory"]["overlapped_busy_time"] is True
    assert arms["memory"]["min_slack_ms"] == pytest.approx(-0.1)
    assert arms["compute"]["overlapped_busy_time"] is False
    assert arms["compute"]["min_slack_ms"] == pytest.approx(0.5)


def test_gpu_samples_are_attributed_to_the_block_they_fall_in() -> None:
    cfg = config()
    by_arm = {(b["round"], b["arm"]): b["start_unix"] for b in cfg["blocks"]}
    # (unix time, GPU, SM MHz, power W, temperature C): compute's blocks at 1900 MHz, the rest 1980.
    samples = [(start + 0.5, 0, 1900.0 if arm == "compute" else 1980.0, 600.0 if arm == "compute" else 400.0,
                50.0) for (rnd, arm), start in by_arm.items()]
    arms = summarise(cfg, samples)
    assert arms["compute"]["sm_mhz"] == pytest.approx(1900.0)
    assert arms["compute"]["power_w"] == pytest.approx(600.0)
    assert arms["none"]["sm_mhz"] == pytest.approx(1980.0)
    assert arms["compute"]["gpu_samples"] == 3  # the warm-up round's sample is not counted


def test_configs_are_checked() -> None:
    assert parse_configs("6:3,2:2") == [(6.0, 3.0), (2.0, 2.0)]
    for bad in ("6", "a:b", "0:2", "", "inf:2", "2:nan"):
        with pytest.raises(SystemExit):
            parse_configs(bad)
