"""bench/gate_gpu.py's arms: which iterations of the one stand-in launch count as no side
process, marks off and marks on, and which of the program's progress counts as harvest or as
work outside bubbles.  (The benchmark itself needs a GPU; this is its arithmetic.)"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

from conftest import SOURCE_DIR, require_torch

sys.path.insert(0, str(SOURCE_DIR / "bench"))
from gate_gpu import (bubbles_admitting_nothing, harvest_between_lines, label_arms, release_latencies,  # noqa: E402
                      units_by_arm)

# Twelve 1-second iterations from t=100, marks on and off in blocks of 2, 1 warm-up iteration.
STARTS = [100.0 + i for i in range(12)]
TIMES_MS = [1000.0] * 12
MODES = [(i // 2) % 2 == 0 for i in range(12)]


def test_harvest_between_lines_counts_from_a_units_end_to_a_units_end_against_the_bubbles_between() -> None:
    arms = label_arms(STARTS, TIMES_MS, MODES, 1, 102.5, 103.5, 108.2, 109.0)  # on 104-106, off 106-108
    # Lines at 104.5 (count 10), 105.75 (12) and 107.5 (13): 3 units from 104.5 to 107.5, against the
    # marks-on bubble time between them: half of iteration 4 and all of 5, at 0.2 s of bubble each.
    done = [(9, 103.9), (10, 104.5), (12, 105.75), (13, 107.5), (20, 111.5)]
    got = harvest_between_lines(done, STARTS, TIMES_MS, arms, bubble_ms=200.0, rate=10.0)
    assert got["units"] == 3 and math.isclose(got["bubble_s"], 0.3) and math.isclose(got["seconds"], 3.0)
    assert math.isclose(got["harvest"], 3 / 10.0 / 0.3)
    # Lines outside the arms (103.9 in the warm-up, 111.5 after the cancel) are not ends.
    assert harvest_between_lines([(9, 103.9), (20, 111.5)], STARTS, TIMES_MS, arms, 200.0, 10.0) is None
    # One line, no marks-on time between the lines, or no arms at all: nothing to say.
    assert harvest_between_lines([(10, 104.5)], STARTS, TIMES_MS, arms, 200.0, 10.0) is None
    assert harvest_between_lines([(10, 106.2), (11, 107.9)], STARTS, TIMES_MS, arms, 200.0, 10.0) is None
    assert harvest_between_lines(done, STARTS, TIMES_MS, [""] * 12, 200.0, 10.0) is None


def test_iterations_straddling_a_change_and_the_warm_up_belong_to_no_arm() -> None:
    # Submitted at 102.5, warm at 103.5, cancelled at 108.2, its process gone at 109.0.
    arms = label_arms(STARTS, TIMES_MS, MODES, 1, 102.5, 103.5, 108.2, 109.0)
    assert arms == ["",                         # warm-up
                    "noside_on",                # ends at 102, before the submit
                    "", "",                     # the submit and the warm-up cut through them
                    "on", "on", "off", "off",   # 104..108: wholly between warm and cancel
                    "",                         # 108..109: cancelled inside it
                    "noside_on", "noside_off", "noside_off"]  # after the process has gone


def test_progress_in_an_off_blocks_first_iteration_is_work_in_flight_not_work_outside() -> None:
    arms = label_arms(STARTS, TIMES_MS, MODES, 1, 102.5, 103.5, 108.2, 109.0)
    # Cumulative counts: the first line sets the base; 3 units in iteration 4 and 2 in 5 (on),
    # 1 in 6 (off, its block's first: in flight), 1 in 7 (off, not the first: outside), 4 in 11
    # (no side process: another program's, or a count that lagged; neither arm's).
    done = [(10, 103.9), (13, 104.5), (15, 105.5), (16, 106.5), (17, 107.5), (21, 111.5)]
    assert units_by_arm(done, STARTS, TIMES_MS, MODES, arms) == {"on": 5, "off": 1}


def test_a_program_that_never_warmed_leaves_only_the_no_side_arm() -> None:
    arms = label_arms(STARTS, TIMES_MS, MODES, 1, 102.5, 109.0, 108.2, 109.0)
    assert not {"on", "off"} & set(arms)
    assert arms.count("noside_on") + arms.count("noside_off") == 4


def test_a_launch_that_serves_programs_in_turn_gives_each_only_the_no_side_time_next_to_it() -> None:
    # The program before this one was gone at 101.5; the next one is submitted at 110.5.
    arms = label_arms(STARTS, TIMES_MS, MODES, 1, 102.5, 103.5, 108.2, 109.0, t_from=101.5, t_until=110.5)
    assert arms == ["", "",                     # warm-up; 101..102 began before the window
                    "", "", "on", "on", "off", "off", "",
                    "noside_on",                # 109..110
                    "", ""]                     # 110..111 ends after the next submit


def test_gpu_samples_are_averaged_per_arm_and_per_gpu(tmp_path) -> None:
    from gate_gpu import gpu_means_by_arm, read_gpu_samples
    csv = tmp_path / "samples.csv"
    # nvidia-smi's timestamp is local time; two GPUs, sampled in iterations 4 (on) and 6 (off).
    stamp = lambda t: time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(int(t))) + f".{round(t % 1 * 1000):03d}"
    csv.write_text(f"{stamp(104.25)}, 0, 1980, 500.5, 60\n{stamp(104.25)}, 1, 1900, 400.0, 55\n"
                   f"{stamp(104.75)}, 0, 1960, 510.5, 62\n{stamp(106.5)}, 0, 1990, 300.0, 58\n"
                   "2026/11/26 10:00:0\n")  # a last line cut short
    samples = read_gpu_samples(str(csv))
    assert len(samples) == 4
    arms = ["", "", "", "", "on", "", "off", "", "", "", "", ""]
    gpu0 = gpu_means_by_arm(samples, STARTS, TIMES_MS, arms, gpu=0)
    assert gpu0["on"] == {"samples": 2, "sm_mhz": 1970, "power_w": 505.5, "temp_c": 61}
    assert gpu0["off"]["samples"] == 1 and gpu0["off"]["sm_mhz"] == 1990
    assert gpu_means_by_arm(samples, STARTS, TIMES_MS, arms, gpu=1) == {
        "on": {"samples": 1, "sm_mhz": 1900, "power_w": 400.0, "temp_c": 55}}
    assert gpu_means_by_arm(samples, STARTS, TIMES_MS, arms)["on"]["samples"] == 3


def test_a_row_is_judged_over_blocks_against_the_no_side_line_by_the_worse_figure() -> None:
    from gate_gpu import diff_ci, judge_over_blocks
    # 100 ms iterations, blocks of 5: 40 no-side, 40 on/off alternating, 40 no-side.  The machine
    # drifts up 0.01 ms an iteration; marks-on iterations cost 0.5% more on top of it.
    starts, times, arms = [], [], []
    for i in range(120):
        starts.append(1000.0 + i * 0.1)
        drift = 100.0 + 0.01 * i + (0.05 if i % 3 == 0 else -0.025)  # a little noise
        if 40 <= i < 80:
            arm = "on" if (i // 5) % 2 == 0 else "off"
        else:
            arm = "noside_on" if (i // 5) % 2 == 0 else "noside_off"
        times.append(drift * (1.005 if arm == "on" else 1.0))
        arms.append(arm)
    no_side = [t for t, a in zip(times, arms) if a.startswith("noside")]
    row = {"harvest": 0.9, "units_off_after_block_start": 0,
           "overhead_on_vs_no_side": diff_ci([t for t, a in zip(times, arms) if a == "on"], no_side)}
    judge_over_blocks(row, starts, times, arms)
    adjusted = row["overhead_on_vs_no_side_drift_adjusted"]
    assert abs(adjusted["pct"] - 0.5) < 0.05  # the line takes the drift out
    assert adjusted["low"] < 0.5 < adjusted["high"]
    off = row["overhead_off_vs_no_side_drift_adjusted"]
    assert abs(off["pct"]) < 0.05
    assert len(row["series"]) == 120 and row["series"][45] == [round(starts[45], 4), round(times[45], 3), arms[45]]
    # +0.5% misses the mean target (0.3%), whichever figure is worse.
    assert any(m.startswith("overhead mean") for m in row["missed_targets"]), row["missed_targets"]
    assert not any(m.startswith("harvest") for m in row["missed_targets"])
    # Where the plain figure over iterations meets the targets, the drift-adjusted one still misses.
    row["overhead_on_vs_no_side"] = {"pct": 0.1, "low": 0.0, "high": 0.2}
    judge_over_blocks(row, starts, times, arms)
    assert any(m.startswith("overhead mean +0.5") for m in row["missed_targets"]), row["missed_targets"]
    # And where the drift-adjusted one meets them, the plain one decides.
    flat = [t / (1.005 if a == "on" else 1.0) for t, a in zip(times, arms)]
    row["overhead_on_vs_no_side"] = {"pct": 0.6, "low": 0.5, "high": 0.7}
    judge_over_blocks(row, starts, flat, arms)
    assert abs(row["overhead_on_vs_no_side_drift_adjusted"]["pct"]) < 0.05
    assert any(m.startswith("overhead mean +0.60") for m in row["missed_targets"]), row["missed_targets"]
    row["overhead_on_vs_no_side"] = {"pct": 0.1, "low": 0.0, "high": 0.2}
    judge_over_blocks(row, starts, flat, arms)
    assert row["missed_targets"] == [], row["missed_targets"]


def test_a_gap_profile_is_one_bubble_an_iteration_and_bad_names_are_refused_before_anything_starts() -> None:
    import pytest
    from gate_gpu import check_profile_name, gap_profile
    assert gap_profile("gap:1:500") == {"ranks": [{"rank": 0, "iteration_ms": 501.0,
                                                   "bubbles": [{"start_ms": 1.0, "duration_ms": 500.0}]}]}
    for good in ("gap:2:2", "h200:3", "zbv", "interleaved"):
        check_profile_name(good)
    for bad, why in (("gap:2", "gap:BUSY_MS:BUBBLE_MS"), ("gap:0:2", "finite and above 0"),
                     ("gap:2:inf", "finite and above 0"), ("h200:x", "h200:RANK"), ("pipedream", "one of")):
        with pytest.raises(SystemExit, match=why):
            check_profile_name(bad)


def test_a_rows_harvest_is_revalued_at_the_better_alone_rate_by_e2e_arms_rule() -> None:
    from e2e_arms import revalue_harvest
    # A row as Bench.measure makes it: one lane, 900 units in 25 s of "on" bubbles, alone 38.5/s.
    row = {"program": "resnet50", "alone_rate_per_s": 38.5, "units_on_by_lane": [900.0],
           "bubble_s_on_by_lane": [25.0], "harvest": 900 / 38.5 / 25, "units_off_after_block_start": 0,
           "overhead_on_vs_no_side": {"pct": 0.1, "low": -0.1, "high": 0.3}}
    revalue_harvest(row, 49.5)  # the reading after the rows is higher: a low first one must not count
    assert math.isclose(row["harvest"], 900 / 49.5 / 25) and row["alone_rate_used_per_s"] == 49.5
    assert math.isclose(row["harvest_at_first_rate"], 900 / 38.5 / 25)
    assert row["missed_targets"] == [f"harvest {900 / 49.5 / 25:.2f} < 0.8"]


def test_each_programs_progress_pattern_gives_the_daemon_one_count_and_the_bench_a_count_and_a_time() -> None:
    """The daemon refuses a --progress-regex of more than one capture group (ProgressWatch::Check),
    so each program's pattern must lose its time group in DAEMON_PROGRESS."""
    import re

    from gate_gpu import DAEMON_PROGRESS, PROGRAMS
    assert set(DAEMON_PROGRESS) == set(PROGRAMS)
    for name, (_, pattern) in PROGRAMS.items():
        assert re.compile(pattern).groups == 2, name
        assert re.compile(DAEMON_PROGRESS[name]).groups == 1, (name, DAEMON_PROGRESS[name])
    # generate_loop.py's two lines: tokens are counted, batches are not.
    token, batch = "generated 24 tokens at 1795846416.351041", "generated 2 batches (16 new tokens each) at 1795846416.5"
    for name in ("generate", "generate-xl"):
        assert re.search(PROGRAMS[name][1], token).groups() == ("24", "1795846416.351041")
        assert re.search(DAEMON_PROGRESS[name], token).group(1) == "24"
        assert re.search(PROGRAMS[name][1], batch) is None and re.search(DAEMON_PROGRESS[name], batch) is None


def test_an_alone_run_gives_its_rate_after_the_warm_up_and_where_its_rate_settled(tmp_path) -> None:
    """A program's progress lines carry their own times, so a stand-in prints them at once: ten
    lines at 2 units a second from t=1000, then 8 a second from t=1005.  The rate is timed from
    the first line 8 s of progress in (unit 34) to the first past 2 s later (unit 51), and the
    warm-up ends at unit 10, where the rate first keeps 0.8 of that for half a second."""
    from gate_gpu import program_alone_run
    printer = ("for n in range(400):\n"
               "    t = 1000 + n / 2 if n < 10 else 1005 + (n - 10) / 8\n"
               "    print(f'iteration {n}: at {t:.6f}', flush=True)\n")
    run = program_alone_run([sys.executable, "-c", printer], r"iteration (\d+):.* at ([\d.]+)", {},
                            str(tmp_path / "alone.err"), warmup_s=8, seconds=2)
    assert run.rate == 8.0
    assert run.warm_units == 10
    # Timed from before its rate settled: the warm-up is where the timing began.
    run = program_alone_run([sys.executable, "-c", printer], r"iteration (\d+):.* at ([\d.]+)", {},
                            str(tmp_path / "alone.err"), warmup_s=2, seconds=5)
    assert run.warm_units == 4


def test_a_rate_settles_where_it_keeps_its_share_for_a_window_or_3_lines() -> None:
    from gate_gpu import settled_units
    steady = [(n, 100 + n / 10) for n in range(20)]
    assert settled_units(steady, 10.0) == 0
    # Too slow at first (1 a second), then steady: settled at the first steady line.
    slow_then_steady = [(n, 100 + n) for n in range(5)] + [(5 + n, 104.5 + n / 10) for n in range(20)]
    assert settled_units(slow_then_steady, 10.0) == 5
    # Sparse lines: 3 lines stand for the window.
    sparse = [(10 * n, 100 + n) for n in range(6)]
    assert settled_units(sparse, 10.0) == 0
    # A generate loop's slow first batch (16 token steps of 42 ms, 8 tokens each), then 6 ms
    # steps: the half second from its last slow steps averages 0.8 of the rate, but the lines
    # just after them do not, so the warm-up ends where the batch does.
    first_batch = [(8 * (n + 1), 1000 + 0.042 * (n + 1)) for n in range(16)]
    later = [(128 + 8 * (n + 1), first_batch[-1][1] + 0.006 * (n + 1)) for n in range(400)]
    assert settled_units(first_batch + later, 8 / 0.006) == 128
    # Never at 0.8 of the rate, or too few lines after: None.
    assert settled_units(steady, 20.0) is None
    assert settled_units(steady[:3], 10.0) is None


def test_a_program_is_warm_after_3_lines_and_the_work_it_had_done_alone_when_its_rate_settled() -> None:
    """A generate loop's first batch took one token step a bubble where later ones took three:
    begun after 3 lines, its arms charged that to the gate."""
    from gate_gpu import is_warm
    assert not is_warm([8, 16], 0)
    assert is_warm([8, 16, 24], 0)
    assert not is_warm([8, 16, 24], 128)
    assert not is_warm(list(range(8, 128, 8)), 128)
    assert is_warm(list(range(8, 136, 8)), 128)


def test_progress_lines_fall_into_the_bubble_they_were_printed_in(tmp_path) -> None:
    """Two 26 ms bubbles from the daemon's gate_bubble events (begin on its monotonic clock, the
    event's Unix time at the end): one token line in the first, three in the second after the
    batch line; a line before any bubble or past the slack belongs to none."""
    import json as _json

    from progress_per_bubble import bubbles_from_events, per_bubble, progress_lines
    events = tmp_path / "events.jsonl"
    with open(events, "w") as f:
        for begin_s in (10.0, 10.3):  # monotonic; Unix = monotonic + 1000
            end_ns = int((begin_s + 0.026) * 1e9)
            f.write(_json.dumps({"type": "gate_bubble", "begin_ns": int(begin_s * 1e9), "ts_ns": end_ns,
                                 "unix_ns": end_ns + 1000 * 10**9}) + "\n")
        f.write(_json.dumps({"type": "bubble", "ts_ns": 1}) + "\n")
    out = tmp_path / "stdout.log"
    out.write_text("generated 8 tokens at 1009.990000\n"
                   "generated 16 tokens at 1010.012000\n"
                   "generated 1 batches (16 new tokens each) at 1010.100000\n"
                   "generated 24 tokens at 1010.302000\n"
                   "generated 32 tokens at 1010.309000\n"
                   "generated 40 tokens at 1010.327000\n"
                   "generated 48 tokens at 1010.400000\n")
    bubbles = bubbles_from_events(str(events))
    assert [round(b - 1000, 3) for b, _ in bubbles] == [10.0, 10.3]
    progress, marks = progress_lines(str(out), r"generated (\d+) tokens.* at ([\d.]+)", "batches")
    assert len(progress) == 6 and marks == [1010.1]
    rows = per_bubble(bubbles, progress, marks, slack_s=0.002)
    assert [r["offsets_ms"] for r in rows] == [[12.0], [2.0, 9.0, 27.0]]
    assert [r["after"] for r in rows] == [0, 1]


def test_progress_per_bubble_refuses_a_file_that_is_not_events(tmp_path) -> None:
    import pytest

    from progress_per_bubble import bubbles_from_events
    bad = tmp_path / "stdout.log"
    bad.write_text("generated 8 tokens at 1.0\n")
    with pytest.raises(SystemExit, match="not a JSON event"):
        bubbles_from_events(str(bad))
    bad.write_text('{"type": "gate_bubble", "ts_ns": 5}\n')
    with pytest.raises(SystemExit, match="without whole unix_ns"):
        bubbles_from_events(str(bad))
    bad.write_text('{"type": "gate_bubble", "ts_ns": 5, "begin_ns": 1, "unix_ns": Infinity}\n')
    with pytest.raises(SystemExit, match="without whole unix_ns"):
        bubbles_from_events(str(bad))
    with pytest.raises(SystemExit, match="No such file"):
        bubbles_from_events(str(tmp_path / "none.jsonl"))
    # Two lanes' bubbles are not mixed: one is chosen, or the reader is told to choose.
    two = tmp_path / "two.jsonl"
    two.write_text("".join('{"type": "gate_bubble", "lane": %d, "begin_ns": %d, "ts_ns": %d, "unix_ns": %d}\n'
                           % (lane, begin, begin + 10, begin + 10) for lane, begin in ((0, 100), (1, 200))))
    with pytest.raises(SystemExit, match="bubbles of lanes 0, 1: give --lane"):
        bubbles_from_events(str(two))
    assert [round(b * 1e9) for b, _ in bubbles_from_events(str(two), lane=1)] == [200]


def test_the_slowdown_is_fitted_against_the_clock_per_program(tmp_path) -> None:
    """bench/overhead_vs_clock.py: one GPU's rows and several GPUs' rows both give a clock
    change; on an exact line the fit returns its slope and intercept."""
    import json as _json

    from overhead_vs_clock import fit, rows
    one_gpu = {"rows": [{"program": "resnet50", "overhead_on_vs_off": {"pct": 0.2 + 0.5 * c},
                         "gpu_samples": {"on": {"sm_mhz": 1000 * (1 + c / 100)}, "off": {"sm_mhz": 1000}}}
                        for c in (0.0, -1.0, -2.0)]}
    two_gpus = {"rows": [{"side": "pagerank", "overhead_on_vs_off": {"pct": 0.4},
                          "gpu_samples_by_gpu": {"0": {"on": {"sm_mhz": 990}, "off": {"sm_mhz": 1000}},
                                                 "1": {"on": {"sm_mhz": 1010}, "off": {"sm_mhz": 1000}}}},
                         {"side": "pagerank", "overhead_on_vs_off": None, "gpu_samples": {}}]}
    (tmp_path / "a.json").write_text(_json.dumps(one_gpu))
    (tmp_path / "b.json").write_text(_json.dumps(two_gpus))
    (tmp_path / "c.json").write_text("not json")
    found = rows(str(tmp_path))
    assert [(r["program"], round(r["clock_pct"], 6)) for r in found] == [
        ("resnet50", 0.0), ("resnet50", -1.0), ("resnet50", -2.0), ("pagerank", 0.0)]
    line = fit([(r["clock_pct"], r["slowdown_pct"]) for r in found if r["program"] == "resnet50"])
    assert math.isclose(line["slope"], 0.5) and math.isclose(line["intercept_pct"], 0.2)
    assert math.isclose(line["r"], 1.0)
    assert fit([(0.0, 1.0), (0.0, 2.0), (0.0, 3.0)]) is None, "no spread in the clock: no line"


def test_a_program_variant_is_submitted_with_its_environment_and_its_plain_programs_pattern() -> None:
    """`resnet50+FREERIDE_GATE_LENGTHS=kind` runs the plain program's command under `env` with that
    variable, counted by the plain program's pattern (split_side's refusals: e2e_arms_test)."""
    from gate_gpu import DAEMON_PROGRESS, PROGRAMS, Bench
    bench = object.__new__(Bench)
    bench.rows = []
    calls = []
    bench.cli = lambda *args: calls.append(args) or ""
    task = bench.submit("resnet50+FREERIDE_GATE_LENGTHS=kind+FREERIDE_GATE_RUN=16")
    (args,) = calls
    command = list(args[args.index("--") + 1:])
    assert command == ["env", "FREERIDE_GATE_LENGTHS=kind", "FREERIDE_GATE_RUN=16", *PROGRAMS["resnet50"][0]]
    assert args[args.index("--progress-regex") + 1] == DAEMON_PROGRESS["resnet50"]
    assert task == "resnet50_FREERIDE_GATE_LENGTHS_kind_FREERIDE_GATE_RUN_16-0"
    calls.clear()
    assert bench.submit("generate") == "generate-0"
    assert list(calls[0][calls[0].index("--") + 1:]) == PROGRAMS["generate"][0]


def test_release_latency_counts_each_bubbles_first_side_kernel_and_every_bubble_it_missed() -> None:
    # Iterations of 2 slots; bubbles of 1000 ns every 2000 ns, on the GPU's clock.
    bubbles = [(i * 2000, i * 2000 + 1000) for i in range(6)]
    starts = sorted([10, 20,          # bubble 0 (slot 0): 10 ns after its open
                     2005,            # bubble 1 (slot 1): 5 ns
                     # bubble 2 (slot 0): none, while the side program ran: missed
                     6400,            # bubble 3 (slot 1): 400 ns
                     7500,            # between bubbles 3 and 4: outside, 500 ns past the close
                     8003])           # bubble 4 (slot 0): 3 ns; bubble 5 after the run: not missed
    r = release_latencies(bubbles, starts, slots=2, piece_us=0.1)
    assert r["bubbles_with_side_kernel"] == 4
    assert r["latency_first_in_iteration_us_count"] == 2 and r["latency_rest_us_count"] == 2
    assert r["latency_first_in_iteration_us_max"] == 0.010
    assert r["latency_rest_us_max"] == 0.4
    assert r["bubbles_missed_first_in_iteration"] == 1 and r["bubbles_missed_rest"] == 0
    assert r["missed_bubble_slot"] == [(2, 0)]
    assert r["side_kernels_outside_bubbles"] == 1
    assert r["outside_us_past_close_and_to_next_open"] == [[0.5, 0.5]]
    assert r["worst_us_bubble_slot"][0] == (0.4, 3, 1)
    # 5 kernels of 0.1 us started inside the 4 served bubbles' 4000 ns (the one outside not).
    assert r["fill_of_served_bubbles"] == 5 * 100 / 4000
    # Past the first 3 iterations (bubble 7 on, of 2 slots) there is none.
    assert r["latency_forecast_learned_us_count"] == 0
    # Bubbles 7 and 8 served: only they count once the forecast is learned.
    more = release_latencies([(i * 2000, i * 2000 + 1000) for i in range(9)],
                             sorted(starts + [12010, 14020, 16030]), slots=2, piece_us=0.1)
    assert more["latency_forecast_learned_us_count"] == 2 and more["latency_forecast_learned_us_max"] == 0.03


def test_release_latency_of_a_side_program_that_ran_no_kernel_is_empty_not_an_error() -> None:
    r = release_latencies([(0, 1000), (2000, 3000)], [])
    assert r["bubbles_with_side_kernel"] == 0
    assert r["bubbles_missed_first_in_iteration"] == 0 and r["bubbles_missed_rest"] == 0
    assert math.isnan(r["latency_us_p50"])


def test_bubbles_the_daemon_admitted_nothing_in_are_counted_from_the_runs_start(tmp_path) -> None:
    events = tmp_path / "events.jsonl"
    before = '{"type": "gate_bubble", "slot": 0, "deadline_ns": 0}\n'  # an earlier run's
    events.write_text(before
                      + '{"type": "gate_bubble", "slot": 0, "deadline_ns": 0}\n'
                      + '{"type": "probe_schedule"}\n'
                      + '{"type": "gate_bubble", "slot": 1, "deadline_ns": 1800000}\n'
                      + '{"type": "gate_bubble", "slot": 1, "deadline_ns": 0}\n'
                      + '{"type": "gate_bub')  # a line still being written
    r = bubbles_admitting_nothing(str(events), len(before))
    assert r["daemon_gate_bubbles"] == 3
    assert r["daemon_gate_bubbles_admitting_nothing"] == 2
    assert r["daemon_admitting_nothing_by_slot"] == {0: 1, 1: 1}
    assert bubbles_admitting_nothing(str(tmp_path / "none.jsonl"), 0)["daemon_gate_bubbles"] is None


def test_bad_latency_shapes_and_marks_are_refused_before_anything_starts(tmp_path) -> None:
    import subprocess
    bench = str(SOURCE_DIR / "bench" / "gate_gpu.py")
    for args, why in ((["--latency-shapes", "2000:0"], "positive whole"), (["--latency-shapes", "2000"], "BUSY_US:BUBBLE_US"),
                      (["--latency-shapes", "a:b"], "BUSY_US:BUBBLE_US"), (["--latency-marks", "host"], "gated, stream"),
                      (["--latency-side-env", "plain,WATCH"], "plain or VAR=VALUE"),
                      (["--latency-side-env", ","], "plain or VAR=VALUE"),
                      (["--latency-side-env", "plain,A=1,plain"], "each entry once")):
        r = subprocess.run([sys.executable, bench, "--out", str(tmp_path / "out"), "--bundle", str(tmp_path / "none"),
                            *args], capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and why in r.stderr, (args, r.stderr)
        assert not (tmp_path / "out").exists(), "refused before anything was made"


def test_a_side_trace_is_read_as_bursts_with_their_idle_time_by_cause() -> None:
    from side_trace_summary import pieces_of, summarize
    launch = lambda corr, ts: {"ph": "X", "cat": "cuda_runtime", "ts": ts, "dur": 2, "args": {"correlation": corr}}
    kernel = lambda corr, ts, dur: {"ph": "X", "cat": "kernel", "ts": ts, "dur": dur, "args": {"correlation": corr}}
    trace = {"traceEvents": [
        # Burst 1: 0-10, then a piece launched at 5 that starts at 12 (2 us queued), then one
        # launched at 30, after the GPU went idle at 22 (8 us host late), starting at 31 (1 queued).
        launch(1, -5), kernel(1, 0, 10), launch(2, 5), kernel(2, 12, 10), launch(3, 30), kernel(3, 31, 9),
        # 5 ms later (the stage's busy time): burst 2, one piece.
        launch(4, 5000), kernel(4, 5040, 20),
        # ... a piece on another stream inside it (only its 5 us past 5060 are new busy time), and
        # one whose launch is not in the trace, 5 us after.
        launch(5, 5045), kernel(5, 5050, 15), kernel(6, 5070, 10), {"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1}]}
    pieces = pieces_of(trace)
    assert [p[0] for p in pieces] == [0, 12, 31, 5040, 5050, 5070]
    s = summarize(pieces, burst_gap_us=800)
    assert s["bursts"] == 2 and s["pieces"] == 6
    spans = 40 + 40
    assert abs(s["busy_share_of_spans"] - (29 + 25 + 10) / spans) < 1e-9
    assert abs(s["host_late_share_of_spans"] - 8 / spans) < 1e-9
    assert abs(s["queued_share_of_spans"] - 3 / spans) < 1e-9
    assert abs(s["unmatched_share_of_spans"] - 5 / spans) < 1e-9
    assert s["piece_us_median_mean_p95"][0] == 10 and s["launch_to_start_us_median"] == 5
    assert pieces_of(trace["traceEvents"]) == pieces, "a trace that is a bare list of events"



def test_the_side_trace_hook_traces_an_unmodified_program_by_environment_alone(tmp_path) -> None:
    # On CPU the hook records CPU activity: the check is of the hook (the lines it counts, its
    # file, its write at exit), not of CUDA's profiler.
    require_torch()
    program = "import torch\nfor i in range(N):\n    print('line', i)\n    torch.ones(3).sum()\n"
    for lines, n, how in ((2, 6, "at its last traced line"), (100, 4, "at exit, the program ending first")):
        out = tmp_path / f"traces-{lines}"
        env = dict(os.environ, PYTHONPATH=str(SOURCE_DIR / "bench" / "side_trace"), FREERIDE_SIDE_TRACE=str(out),
                   FREERIDE_SIDE_TRACE_AFTER="2", FREERIDE_SIDE_TRACE_LINES=str(lines))
        r = subprocess.run([sys.executable, "-c", program.replace("N", str(n))], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == [f"line {i}" for i in range(n)], "the program's own output is unchanged"
        traces = list(out.glob("trace-*.json"))
        assert len(traces) == 1 and "side_trace: wrote" in r.stderr, (how, r.stderr)
        assert "traceEvents" in json.loads(traces[0].read_text()), how
    r = subprocess.run([sys.executable, "-c", "print('x')"], env=dict(os.environ, PYTHONPATH=str(
        SOURCE_DIR / "bench" / "side_trace")), capture_output=True, text=True, timeout=60)
    assert r.stdout == "x\n" and "side_trace" not in r.stderr, "without FREERIDE_SIDE_TRACE it does nothing"
