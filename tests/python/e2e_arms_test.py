"""bench/e2e_arms.py: the three arms (no side process, marks off, marks on) of one launch of a real
pipeline, its arithmetic (harvest from the lanes' bubble events and the sides' own progress,
overheads, the targets), and the whole path run on CPU lanes: torchrun over gloo, an unmodified
program and a built-in task served in turn.  The GPU figures need a GPU; the logic does not."""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import tarfile

import pytest

from conftest import NORMAL_CPU_TASKS, SOURCE_DIR, make_bundle, require_torch

sys.path.insert(0, str(SOURCE_DIR / "bench"))
from e2e_arms import (ITERATION_LINE, Arms, arms_summary, bubble_seconds_by_arm, gate_misses,  # noqa: E402
                      iteration_windows, lane_windows, slot_breakdown,
                      lane_bubbles, markdown, missed_targets, revalue_harvest,
                      split_side, step_progress, t_quantile_975, task_name, task_steps)
from gate_gpu import label_arms, units_by_arm  # noqa: E402

# Ten 1-second iterations from t=100, marks on and off in blocks of 2.
STARTS = [100.0 + i for i in range(10)]
TIMES_MS = [1000.0] * 10
MODES = [(i // 2) % 2 == 0 for i in range(10)]


def test_an_iteration_spans_from_the_first_ranks_start_to_the_last_ranks_end() -> None:
    run = {"iter_unix": [10.0, 11.0], "iter_end_unix": [10.9, 12.2], "iter_ms": [800.0, 1100.0]}
    starts, spans = iteration_windows(run)
    assert starts == [10.0, 11.0] and [round(s) for s in spans] == [900, 1200]
    # The stand-in stage (one process) gives only its own times.
    assert iteration_windows({"iter_unix": [10.0], "iter_ms": [800.0]}) == ([10.0], [800.0])


def test_a_lanes_work_is_placed_in_its_own_ranks_iterations() -> None:
    """The last stage (rank 1) starts each iteration 0.4 s before the first stage (rank 0) ends the
    one before.  Marks go on at iteration 2: lane 1's work at 101.8 s, in its iteration 2, is "on",
    though it falls inside iteration 1 from rank 0's start to rank 1's end, which is "off"."""
    run = {"iter_unix": [99.6, 100.6, 101.6, 102.6], "iter_end_unix": [101.0, 102.0, 103.0, 104.0],
           "iter_ms": [1000.0] * 4,
           "rank_iter_unix": [[100.0, 101.0, 102.0, 103.0], [99.6, 100.6, 101.6, 102.6]],
           "rank_iter_ms": [[1000.0] * 4, [1000.0] * 4]}
    modes, arms = [False, False, True, True], ["off", "off", "on", "on"]
    done = [(0, 100.1), (1, 101.8)]  # cumulative units: one unit done at 101.8
    starts, spans = lane_windows(run, 1)
    assert starts == run["rank_iter_unix"][1] and spans == run["rank_iter_ms"][1]
    assert units_by_arm(done, starts, spans, modes, arms) == {"on": 1, "off": 0}
    # By the ranks' joint windows it would be counted in iteration 1, the off block's second.
    assert units_by_arm(done, *iteration_windows(run), modes, arms) == {"on": 0, "off": 1}
    # A trainer that gives no rank's own times (the stand-in stage), or a lane past its ranks.
    joint = {k: run[k] for k in ("iter_unix", "iter_end_unix", "iter_ms")}
    assert lane_windows(joint, 1) == iteration_windows(run)
    with pytest.raises(SystemExit, match="lane 2: the trainer gave the iterations of 2 ranks"):
        lane_windows(run, 2)


def test_bubble_time_counts_in_the_iteration_it_began_in_cut_at_its_end() -> None:
    arms = ["", "noside_on", "on", "on", "off", "off", "on", "", "", ""]
    bubbles = [(99.0, 99.5),     # before the first iteration
               (101.2, 101.5),   # noside_on
               (102.1, 102.4), (102.6, 102.8), (103.9, 104.3),  # on; the last one cut at 104
               (104.5, 104.6),   # off (counted under its iteration's arm, whatever that is)
               (107.5, 107.7)]   # an iteration of no arm
    got = bubble_seconds_by_arm(bubbles, STARTS, TIMES_MS, arms)
    assert set(got) == {"noside_on", "on", "off"}
    assert math.isclose(got["on"], 0.3 + 0.2 + 0.1) and math.isclose(got["noside_on"], 0.3)


def test_the_slot_breakdown_says_where_each_slots_on_bubbles_went() -> None:
    ns = 1_000_000

    def bubble(lane, seq, slot, begin_ms, end_ms, predicted_ms, grant_ms, used_ms, verdict="ran"):
        return {"type": "bubble", "lane": lane, "seq": seq, "slot": slot, "begin_ns": begin_ms * ns,
                "end_ns": end_ms * ns, "predicted_end_ns": predicted_ms * ns if predicted_ms else 0,
                "first_grant_ns": grant_ms * ns if grant_ms is not None else 0,
                "harvested_ns": used_ms * ns, "allowed_ns": 0, "verdict": verdict}
    # Iterations of 100 ms at 0 (on), 100 (off) and 200 (on, 50 ms long), on a clock 1000 s behind.
    starts, spans, arms = [1000.0, 1000.1, 1000.2], [100.0, 100.0, 50.0], ["on", "off", "on"]
    events = [bubble(0, 1, 0, 10, 30, 25, 11, 16), bubble(0, 3, 1, 50, 54, None, None, 0, "nothing fits"),
              bubble(0, 5, 0, 110, 130, 125, 111, 16),  # an off iteration: left out
              bubble(0, 7, 0, 210, 240, 235, 212, 20), bubble(1, 1, 0, 10, 20, 20, 11, 9),  # another lane
              bubble(0, 9, 0, 260, 270, 265, 261, 5),  # begins after its iteration's end: left out
              {"type": "gate_bubble", "lane": 0, "seq": 3, "admitted_ns": 1 * ns, "second_look": True},
              {"type": "gate_bubble", "lane": 1, "seq": 3, "admitted_ns": 9 * ns, "second_look": False},
              {"type": "step", "lane": 0, "begin_ns": 0, "end_ns": 1}]
    slots = slot_breakdown(events, 0, 1000.0, starts, spans, arms)
    assert [x["slot"] for x in slots] == [0, 1]
    first, second = slots
    assert first["bubbles"] == 2
    assert math.isclose(first["mean_ms"], 25.0)
    assert first["forecast"] == 2 and math.isclose(first["mean_predicted_ms"], 20.0)  # (15 + 25) / 2
    assert math.isclose(first["mean_first_grant_ms"], 1.5)
    assert math.isclose(first["used_share"], 36 / 50)
    assert first["gated"] == 0 and first["admitted_share"] is None
    assert first["verdicts"] == {"ran": 2}
    assert second["forecast"] == 0 and second["mean_predicted_ms"] is None
    assert second["mean_first_grant_ms"] is None and second["used_share"] == 0.0
    assert second["gated"] == 1 and math.isclose(second["admitted_share"], 0.25) and second["second_looks"] == 1
    assert second["verdicts"] == {"nothing fits": 1}


def test_a_built_in_tasks_steps_are_its_progress_at_each_steps_end_from_the_first_step_on() -> None:
    mono_to_unix = 1000.0  # unix = monotonic + 1000
    events = [
        {"type": "step", "task_id": 7, "lane": 0, "start_ns": int(-895.4e9), "end_ns": int(-895.3e9), "units": 5},
        {"type": "step", "task_id": 7, "lane": 0, "start_ns": int(-897.2e9), "end_ns": int(-897.1e9), "units": 2},
        {"type": "step", "task_id": 8, "lane": 1, "start_ns": int(-897.2e9), "end_ns": int(-897.1e9), "units": 9},
        {"type": "step", "task_id": 7, "lane": 0, "start_ns": int(-893.6e9), "end_ns": int(-893.5e9), "units": 4},
        {"type": "step", "task_id": 7, "lane": 0, "start_ns": int(-892.6e9), "end_ns": int(-892.5e9), "units": 1},
        {"type": "bubble", "lane": 0, "begin_ns": int(-897.3e9), "end_ns": int(-897.0e9)},
        {"type": "bubble", "lane": 1, "begin_ns": int(-895.5e9), "end_ns": int(-895.0e9)},
    ]
    done = step_progress(task_steps(events, 7, mono_to_unix))
    assert [round(at, 1) for _, at in done[1:]] == [102.9, 104.7, 106.5, 107.5]
    arms = ["", "", "off", "off", "on", "on", "off", "off", "", ""]
    # 2 units in 102 and 4 in 106 (each an off block's first iteration: work in flight), 5 in 104
    # (on), 1 in 107 (off, past its block's first: work outside bubbles).
    assert units_by_arm(done, STARTS, TIMES_MS, MODES, arms) == {"on": 5, "off": 1}
    assert [(round(b, 1), round(e, 1)) for b, e in lane_bubbles(events, 1, mono_to_unix)] == [(104.5, 105.0)]


def test_harvest_is_the_lanes_work_alone_over_their_bubble_time_and_overheads_are_between_arms() -> None:
    arms = ["noside_on", "noside_off", "on", "off", "on", "off", "noside_on", "noside_off", "", ""]
    iter_ms = [100.0, 100.0, 101.0, 100.5, 101.0, 100.5, 100.2, 99.8, 500.0, 500.0]
    # Two lanes at 10 units a second alone: 4 and 2 units in "on" iterations, over 0.5 s and 0.25 s of bubbles.
    row = arms_summary(iter_ms, arms, [{"on": 4, "off": 0}, {"on": 2, "off": 1}], [0.5, 0.25], 10.0)
    assert math.isclose(row["harvest"], 0.6 / 0.75)
    assert [round(h, 2) for h in row["harvest_by_lane"]] == [0.8, 0.8]
    assert row["units_off_after_block_start"] == 1
    assert row["iterations"] == {"noside_on": 2, "noside_off": 2, "off": 2, "on": 2}
    assert math.isclose(row["overhead_on_vs_no_side"]["pct"], 1.0)
    assert math.isclose(row["overhead_on_vs_off"]["pct"], 100 * (101 / 100.5 - 1))
    assert math.isclose(row["marks_alone_on_vs_off"]["pct"], 100 * (100.1 / 99.9 - 1))
    # One "on" iteration is too few for an interval: no figure, rather than a made-up one.
    row = arms_summary(iter_ms, ["noside_on"] * 2 + ["on"] + [""] * 7, [{"on": 1, "off": 0}], [0.1], 10.0)
    assert row["overhead_on_vs_no_side"] is None and row["overhead_on_vs_off"] is None


def _blocks(*runs: tuple[str, int], size: int = 2) -> list[str]:
    """Arm labels in blocks of `size`: ("noside", 8) is 8 blocks alternating noside_on/noside_off,
    ("side", 14) 14 blocks alternating off/on."""
    labels = []
    for kind, count in runs:
        pair = ("noside_on", "noside_off") if kind == "noside" else ("off", "on")
        for k in range(count):
            labels += [pair[k % 2]] * size
    return labels


def test_the_drift_adjusted_overhead_takes_a_steady_drift_out_and_keeps_a_real_cost() -> None:
    # A machine that slows by 1 ms a minute; no side process before and after the side's
    # minutes; the launch's blocks of 2 iterations; a little noise, the same every run.
    rng = random.Random(7)
    arms = _blocks(("noside", 8), ("side", 14), ("noside", 8))
    starts = [6.0 * i for i in range(len(arms))]  # one iteration every 6 s
    free = [100.0 + t / 60 + rng.gauss(0, 0.05) for t in starts]  # the side costs nothing
    row = arms_summary(free, arms, [{"on": 1, "off": 0}], [1.0], 1.0, starts)
    adjusted = row["overhead_on_vs_no_side_drift_adjusted"]
    assert adjusted["blocks"] == 7 and adjusted["no_side_blocks"] == 16, adjusted
    assert adjusted["low"] <= 0 <= adjusted["high"] and abs(adjusted["pct"]) < 0.1, adjusted
    assert math.isclose(adjusted["drift_ms_per_min"], 1.0, rel_tol=0.05)
    # A real +1% in "on" is found.
    costly = [y * (1.01 if a == "on" else 1.0) for y, a in zip(free, arms)]
    row = arms_summary(costly, arms, [{"on": 1, "off": 0}], [1.0], 1.0, starts)
    adjusted = row["overhead_on_vs_no_side_drift_adjusted"]
    assert adjusted["low"] > 0.8 and adjusted["high"] < 1.2, adjusted
    assert abs(row["overhead_off_vs_no_side_drift_adjusted"]["pct"]) < 0.1
    # Uneven windows (most no-side iterations early): the drift reads as a cost in the plain
    # figure, not in the adjusted one.
    arms = _blocks(("noside", 13), ("side", 14), ("noside", 3))
    row = arms_summary(free, arms, [{"on": 1, "off": 0}], [1.0], 1.0, starts)
    assert row["overhead_on_vs_no_side"]["low"] > 0.3, row["overhead_on_vs_no_side"]
    adjusted = row["overhead_on_vs_no_side_drift_adjusted"]
    assert adjusted["low"] <= 0 <= adjusted["high"], adjusted
    # Student's t, not the normal's 1.96: a line through few blocks is less sure.
    for df, table in ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (10, 2.228), (30, 2.042),
                      (1000, 1.962)):
        assert math.isclose(t_quantile_975(df), table, rel_tol=0.008), df
    # Fewer than 3 no-side blocks after the arm: the line would be extrapolated; no figure.
    arms = _blocks(("noside", 14), ("side", 14), ("noside", 2))
    assert arms_summary(free, arms, [{"on": 1, "off": 0}], [1.0], 1.0, starts)[
        "overhead_on_vs_no_side_drift_adjusted"] is None


def test_harvest_is_valued_at_the_higher_of_the_alone_rates_before_and_after() -> None:
    row = {"side": "resnet50", "alone_rate_per_s": 40.0, "harvest": 0.85, "harvest_by_lane": [0.85, 0.85],
           "units_on_by_lane": [34.0, 17.0], "bubble_s_on_by_lane": [1.0, 0.5], "units_off_after_block_start": 0,
           "overhead_on_vs_no_side": {"pct": 0.1, "low": -0.1, "high": 0.3}}
    revalue_harvest(row, 50.0)  # alone it ran faster afterwards: each unit is worth less time
    assert math.isclose(row["harvest"], 51 / 50 / 1.5) and row["harvest_at_first_rate"] == 0.85
    assert [round(h, 2) for h in row["harvest_by_lane"]] == [0.68, 0.68]
    assert row["alone_rate_used_per_s"] == 50.0
    assert row["missed_targets"] == ["harvest 0.68 < 0.8"]
    slower = dict(row, harvest=0.85, alone_rate_per_s=40.0)
    revalue_harvest(slower, 30.0)  # a slower second reading does not raise the harvest
    assert math.isclose(slower["harvest"], 51 / 40 / 1.5) and slower["alone_rate_used_per_s"] == 40.0
    untouched = dict(row, harvest=0.85, alone_rate_per_s=40.0)
    revalue_harvest(untouched, None)  # not measured again: the first figure stands
    assert untouched["harvest"] == 0.85 and untouched["alone_rate_after_per_s"] is None


def test_each_missed_target_is_named() -> None:
    row = {"harvest": 0.85, "units_off_after_block_start": 0,
           "overhead_on_vs_no_side": {"pct": 0.2, "low": -0.1, "high": 0.45}}
    assert missed_targets(row) == []
    row.update(harvest=0.7, units_off_after_block_start=3,
               overhead_on_vs_no_side={"pct": 0.35, "low": 0.1, "high": 0.6})
    assert missed_targets(row) == ["harvest 0.70 < 0.8", "overhead mean +0.35% > +0.3%",
                                   "overhead upper bound +0.60% > +0.5%", "3 units in marks-off iterations"]
    # The drift-adjusted figure over blocks, where there is one, judges too: the worse of the two.
    met = {"harvest": 0.85, "units_off_after_block_start": 0,
           "overhead_on_vs_no_side": {"pct": 0.2, "low": -0.1, "high": 0.45},
           "overhead_on_vs_no_side_drift_adjusted": {"pct": 0.19, "low": -0.21, "high": 0.59}}
    assert missed_targets(met) == ["overhead upper bound +0.59% > +0.5%"]
    row["harvest"] = float("nan")  # no bubble time: not a pass
    assert missed_targets(row)[0] == "harvest nan < 0.8"
    assert missed_targets({"warm": False, "why_not_warm": "task 3 FAILED: oom"}) == [
        "the side never warmed up (task 3 FAILED: oom)"]


def test_the_table_gives_each_row_its_figures_per_gpu_and_its_verdict() -> None:
    interval = {"pct": 0.21, "low": -0.05, "high": 0.47}
    met = {"gpus": 2, "framework": "torch", "schedule": "interleaved", "virtual_stages": 2, "microbatches": 8,
           "side": "resnet50", "harvest": 0.83, "overhead_on_vs_no_side": interval,
           "overhead_off_vs_no_side": interval, "overhead_on_vs_off": None, "marks_alone_on_vs_off": interval,
           "units_off_after_block_start": 0, "iterations": {"noside_on": 20, "noside_off": 21, "off": 30, "on": 31},
           "gpu_samples": {"1": {"noside": {"sm_mhz": 1980.4, "power_w": 400.2},
                                 "on": {"sm_mhz": 1950, "power_w": 450}},
                           "0": {"noside": {"sm_mhz": 1970, "power_w": 390}, "off": {"sm_mhz": 1975, "power_w": 395},
                                 "on": {"sm_mhz": 1940, "power_w": 440}}},
           "gate_misses_by_lane": [{"lane": 0, "late_ms": 1.44, "late_stretches": 8, "pending_ms": 1137.0,
                                    "held_unpublished_ms": 12.4, "held_drain_ms": 310.0, "held_fit_ms": 2.6},
                                   {"lane": 1, "late_ms": 0.0, "late_stretches": 0, "pending_ms": 61.8,
                                    "held_unpublished_ms": 0.0, "held_drain_ms": 0.0, "held_fit_ms": 40.0}]}
    missed = dict(met, schedule="1f1b", virtual_stages=1, side="pagerank", harvest=0.5, gpu_samples=None,
                  gate_misses_by_lane=None)
    table = markdown([{"command": "python3 bench/e2e_gpu.py --arms", "commit": "abc", "rows": [met, missed],
                       "skipped": ["torch-1f1b-m8 generate"]}])
    assert ("| torch | interleaved V=2 | 8 | resnet50 | 0.83 | +0.21% [-0.05, +0.47] | – / – | +0.21% [-0.05, +0.47] | – "
            "| +0.21% [-0.05, +0.47] | 0 | 1.4 / 1137; 0.0 / 62 | 12.4 / 310.0 / 2.6; 0.0 / 0.0 / 40.0 | 41/30/31 | 1970/1975/1940; 1980/–/1950 "
            "| 390/395/440; 400/–/450 | met |") in table
    assert "| torch | 1f1b | 8 | pagerank | 0.50 |" in table and "| missed: harvest 0.50 < 0.8 |" in table
    # A row kept before held time was (late and pending only) shows "–" for it, not zeros.
    old = dict(met, gate_misses_by_lane=[{"lane": 0, "late_ms": 1.44, "late_stretches": 8, "pending_ms": 1137.0}])
    assert "| 1.4 / 1137 | – | 41/30/31 |" in markdown([{"command": "c", "commit": "abc", "rows": [old]}])
    assert "`python3 bench/e2e_gpu.py --arms`" in table and "commit `abc`" in table
    assert "Not run (out of the time budget): torch-1f1b-m8 generate" in table


def test_a_rows_gate_misses_are_each_lanes_growth_over_it_late_apart_from_pending() -> None:
    # As `freeride status --json` gives them: 64-bit counters as strings, zero ones left out.
    before = [{"lane": 0, "gate_late_ns": "2000000", "gate_late_bubbles": "3", "gate_pending_ns": "5000000"},
              {"lane": 1}]
    after = [{"lane": 0, "gate_late_ns": "3500000", "gate_late_bubbles": "5", "gate_pending_ns": "9000000",
              "gate_held_drain_ns": "7000000"},
             {"lane": 1, "gate_pending_ns": "250000", "gate_held_unpublished_ns": "1000000",
              "gate_held_fit_ns": "3000000"}]
    before[0]["gate_held_drain_ns"] = "1000000"
    assert gate_misses(before, after) == [
        {"lane": 0, "late_ms": 1.5, "late_stretches": 2, "pending_ms": 4.0,
         "held_unpublished_ms": 0.0, "held_drain_ms": 6.0, "held_fit_ms": 0.0},
        {"lane": 1, "late_ms": 0.0, "late_stretches": 0, "pending_ms": 0.25,
         "held_unpublished_ms": 1.0, "held_drain_ms": 0.0, "held_fit_ms": 3.0}]
    # The status of a daemon that began during the row counts from zero.
    assert gate_misses([], after)[1]["pending_ms"] == 0.25


def test_the_trainers_iteration_line_is_what_the_benchmark_follows() -> None:
    m = ITERATION_LINE.search("iteration 12: 171.3 ms, FreeRide off, at 1795689633.128901")
    assert m and m.groups() == ("12", "171.3", "off", "1795689633.128901")


def test_the_three_arms_run_end_to_end_on_cpu_lanes(build_dir, tmp_path) -> None:
    """Two gloo ranks of the GPT pipeline, an unmodified program and then PageRank on both lanes:
    every row has all three arms, and nothing was done in marks-off iterations past each block's
    first (the daemon stops a CPU lane's side at the bubble's end)."""
    require_torch()
    out = tmp_path / "out"
    alternate = 3
    cmd = [sys.executable, str(SOURCE_DIR / "bench" / "e2e_gpu.py"), "--arms", "--device", "cpu", "--gpus", "2",
           "--bundle", str(make_bundle(build_dir, tmp_path / "bundle")), "--out", str(out),
           "--work", str(tmp_path / "work"), "--configs", "1f1b:4",
           "--sides", "loop,loop+FREERIDE_GATE_QUEUE_ESTIMATE=mean,pagerank",
           "--noside-seconds", "2", "--measure-seconds", "3", "--warm-seconds", "240", "--alone-seconds", "2",
           "--alone-warmup", "0.5", "--alternate", str(alternate), "--side-memory", "256MiB",
           # Every row must warm up: its side at the normal policy, not SCHED_IDLE (conftest.NORMAL_CPU_TASKS).
           "--daemon-args", " ".join(NORMAL_CPU_TASKS)]
    # The runs' gate settings are the sides' alone (the loop prints those it was given).
    env = {k: v for k, v in os.environ.items() if not k.startswith("FREERIDE_GATE_")}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=800,
                       env=dict(env, PYTHONPATH=str(SOURCE_DIR / "python")))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = json.loads((out / "e2e_gpu_2gpu.json").read_text())
    assert results["gpus"] == 2 and results["command"].startswith(str(SOURCE_DIR / "bench" / "e2e_gpu.py"))
    rows = {row["side"]: row for row in results["rows"]}
    variant = "loop+FREERIDE_GATE_QUEUE_ESTIMATE=mean"
    assert set(rows) == {"loop", variant, "pagerank"}
    # A +VAR=VALUE side: the plain program's alone rate (measured once), its own row.
    assert set(results["alone_rates"]) == {"loop", "pagerank"}
    assert rows[variant]["alone_rate_per_s"] == rows["loop"]["alone_rate_per_s"]
    assert rows[variant]["side_kind"] == "program"
    for side, row in rows.items():
        assert row["warm"], row
        it = row["iterations"]
        # Each wait lasts at least `alternate` iterations of each mode, whatever the machine's speed.
        assert it["on"] >= alternate and it["off"] >= alternate, (side, it)
        assert it["noside_on"] >= alternate and it["noside_off"] >= alternate, (side, it)
        assert row["units_off_after_block_start"] == 0, (side, row)
        # Every marks-on iteration of a pipeline has bubbles, on each lane.
        assert all(b > 0 for b in row["bubble_s_on_by_lane"]), (side, row["bubble_s_on_by_lane"])
        assert row["harvest"] >= 0 and all(o is not None for o in (
            row["overhead_on_vs_no_side"], row["overhead_off_vs_no_side"], row["overhead_on_vs_off"])), row
        # The side's rate alone was measured again after the launch (no budget here), and the
        # harvest valued at the higher of the two; every measured iteration is kept.
        assert row["alone_rate_after_per_s"] == results["alone_rates_after"][split_side(side)[0]] > 0, (side, row)
        assert row["alone_rate_used_per_s"] == max(row["alone_rate_per_s"], row["alone_rate_after_per_s"])
        assert len(row["series"]) == sum(it.values())
        # CPU lanes have no gate: nothing late, nothing pending, one entry a lane.
        none = [{"lane": lane, "late_ms": 0.0, "late_stretches": 0, "pending_ms": 0.0,
                 "held_unpublished_ms": 0.0, "held_drain_ms": 0.0, "held_fit_ms": 0.0} for lane in range(2)]
        assert row["gate_misses_by_lane"] == none, row["gate_misses_by_lane"]
        assert row["gate_misses_warm_up_by_lane"] == none, row["gate_misses_warm_up_by_lane"]
        # The benchmark counts no more than the daemon saw the task do.
        for units, task in zip(row["units_on_by_lane"], row["tasks"]):
            assert units <= float(task["daemon_progress"]), (side, units, task)
    table = (out / "e2e_gpu_2gpu.md").read_text()
    assert "| torch | 1f1b | 4 | loop |" in table and "| torch | 1f1b | 4 | pagerank |" in table
    assert f"| torch | 1f1b | 4 | {variant} |" in table
    # The rest is packed: among it the trainer's JSON, with each iteration's start and end, which
    # ended at a block boundary (the one after the stop file appeared: StopCheck learns of it a block late).
    assert sorted(os.listdir(out)) == ["e2e_gpu_2gpu.json", "e2e_gpu_2gpu.md", "logs.tar.gz"]
    with tarfile.open(out / "logs.tar.gz") as tar:
        run = json.load(tar.extractfile("train-torch-1f1b-m4.json"))
        # The variant's runs (one a lane) got its environment; the plain program's did not.
        firsts = [tar.extractfile(m).readline().decode().strip() for m in tar.getmembers()
                  if m.name.startswith("state/tasks/") and m.name.endswith("/stdout.log")]
    assert sorted(f for f in firsts if f.startswith("gate settings:")) == \
        ["gate settings:"] * 2 + ["gate settings: FREERIDE_GATE_QUEUE_ESTIMATE=mean"] * 2, firsts
    count = len(run["iter_ms"])
    assert len(run["iter_unix"]) == len(run["iter_end_unix"]) == len(run["freeride_on"]) == count
    assert count % alternate == 0 and count > run["warmup"], count
    assert all(end > start for start, end in zip(run["iter_unix"], run["iter_end_unix"]))
    # Each rank's own iterations, by which its lane's work is placed, one per iteration.
    assert len(run["rank_iter_unix"]) == len(run["rank_iter_ms"]) == 2
    for starts, times in zip(run["rank_iter_unix"], run["rank_iter_ms"]):
        assert len(starts) == len(times) == count


def test_a_result_names_its_tree_tracked_changes_and_untracked_files_included(tmp_path) -> None:
    """git_commit: HEAD alone for a clean tree; -dirty- and a hash that follows the tracked diff and
    the untracked files' names and contents (a device's .git may lag the tree it was given, under
    which files added since are untracked)."""
    import subprocess
    from e2e_arms import git_commit
    git = lambda *args: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                                       check=True, capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    (tmp_path / "a.py").write_text("one\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")
    assert git_commit(str(tmp_path)) == head
    (tmp_path / "a.py").write_text("two\n")
    tracked = git_commit(str(tmp_path))
    assert tracked.startswith(head + "-dirty-")
    (tmp_path / "a.py").write_text("one\n")
    (tmp_path / "new.py").write_text("x\n")
    untracked = git_commit(str(tmp_path))
    assert untracked.startswith(head + "-dirty-") and untracked != tracked
    (tmp_path / "new.py").write_text("y\n")
    assert git_commit(str(tmp_path)) not in (untracked, head)


def test_a_side_with_var_value_pieces_runs_its_program_through_env_and_shares_its_alone_rate() -> None:
    assert split_side("resnet50") == ("resnet50", {})
    assert split_side("resnet50+FREERIDE_GATE_QUEUE_ESTIMATE=mean+X=1") == (
        "resnet50", {"FREERIDE_GATE_QUEUE_ESTIMATE": "mean", "X": "1"})
    for bad in ("resnet50+mean", "resnet50+=1", "resnet50+A B=1"):
        with pytest.raises(SystemExit, match="is not VAR=VALUE"):
            split_side(bad)
    arms = Arms.__new__(Arms)  # only what program() and rate() read
    arms.programs = {"resnet50": (["python3", "examples/side_programs/train_resnet.py"], r"step (\d+)")}
    arms.rates = {"resnet50": 40.0}
    plain, pattern = arms.program("resnet50")
    varied, _ = arms.program("resnet50+FREERIDE_GATE_QUEUE_ESTIMATE=mean")
    assert varied == ["env", "FREERIDE_GATE_QUEUE_ESTIMATE=mean", *plain] and pattern == r"step (\d+)"
    assert arms.is_program("resnet50+FREERIDE_GATE_QUEUE_ESTIMATE=mean")
    assert arms.rate("resnet50+FREERIDE_GATE_QUEUE_ESTIMATE=mean") == 40.0
    assert arms.rate("resnet50", {"resnet50": 44.0}) == 44.0


def test_a_bundles_commit_is_read_from_the_file_bundle_sh_writes_and_is_none_without_it(tmp_path):
    """Results made on a node whose copy of the tree keeps an older .git name the bundle's commit
    too: scripts/bundle.sh writes it in COMMIT."""
    from e2e_arms import bundle_commit
    assert bundle_commit(str(tmp_path)) is None
    (tmp_path / "COMMIT").write_text("2299449abc (with uncommitted changes)\n")
    assert bundle_commit(str(tmp_path)) == "2299449abc (with uncommitted changes)"
    assert bundle_commit(str(tmp_path / "no-such-bundle")) is None


def test_a_task_name_fits_the_daemons_128_bytes_and_keeps_its_suffix() -> None:
    assert task_name("resnet50", "0-on") == "resnet50-0-on", "a short name is left whole"
    long_side = "compiled+PYTHONPATH=/work/main/bench/side_trace+FREERIDE_SIDE_TRACE=/tmp/tr/rows" * 2
    name = task_name(long_side, "12")
    assert len(name.encode()) == 128 and name.endswith("-12") and long_side.startswith(name[:-3])
    # Cut by bytes, never inside a character.
    wide = task_name("é" * 100, "3")
    assert len(wide.encode()) <= 128 and wide.endswith("-3") and set(wide[:-2]) == {"é"}
