"""Three arms per row in one launch of a real pipeline (issue 34), for bench/e2e_gpu.py --arms and
bench/e2e_frameworks_gpu.py --arms.

One torchrun launch of a GPT pipeline (examples/train_gpt_pipeline.py, or the DeepSpeed and
megatron-core examples) per configuration; its marks alternate on and off every --alternate
iterations from start to end.  While it trains, the sides are served one after another, each on
every GPU lane at once:

    warm-up | no side | side A: starts, warms up, on/off blocks | A exits | no side | side B ... | no side

- "no side": no side process on any lane; before the first side is submitted, between one side's
  exit and the next one's submission, and after the last one's exit.  Its marks-on and marks-off
  iterations compared are the cost of the marks alone.
- "off" and "on": the side resident on every lane once it has warmed up (its GPU start-up runs in
  bubbles too, and is left out): in "off" blocks the gate stays shut, in "on" blocks the stage
  opens it in each bubble.

A row is one (configuration, side): its on and off iterations and the no-side iterations next to
it (bench/gate_gpu.py's label_arms, limited to the window from the previous side's exit to the
next side's submission).  Each wait lasts its seconds and at least --alternate iterations of each
mode, so every arm has iterations however slow the machine.

Sides are of two kinds:
- an unmodified program (bench/gate_gpu.py's PROGRAMS: resnet50, generate, ...), submitted as an
  imperative task with --progress-regex; its work is its own progress lines (each stamped with the
  time), valued at its rate alone (measured first, alone on one GPU, without the daemon);
- a built-in task (bench/e2e_gpu.py's TASKS: pagerank, sgd, ...), submitted with its
  `freeride task-profile`; its work is its steps in the daemon's event log, valued at the
  profile's rate.
Harvest is that work in "on" iterations, in seconds alone, over the lanes' bubble time (the
daemon's bubble events) in those iterations, summed over the lanes; each lane's work and bubbles
are placed by its own rank's iterations (lane_windows: the ranks do not start an iteration
together), and the gate's misses (gate_misses) are counted over the arms, the side's warm-up
apart; the alone rates are measured
again after the launches, and the work valued at the higher reading.  Overheads are Welch 95%
intervals of mean iteration times between arms of the same launch, and, against the no-side
arm, also drift-adjusted over blocks (drift_adjusted); the targets are judged by the worse.

    python3 bench/e2e_arms.py --table OUT/e2e_gpu_2gpu.json [more.json ...]   # the markdown table
"""
from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from gate_gpu import (DAEMON_PROGRESS, PROGRAMS, GpuSampler, diff_ci, label_arms, mean_ci,  # noqa: E402
                      is_warm, program_alone_run, units_by_arm)

# For --device cpu (a dry run of the logic): an unmodified CPU-bound loop that prints stamped
# progress lines, and starts at once (on a CPU lane a side runs only inside bubbles, start-up too).
# It says first which of the interposer's FREERIDE_GATE_ settings it was given (a +VAR=VALUE side's
# environment shows; the daemon's own gate page variable is left out).
CPU_LOOP = ("import os, time\nprint('gate settings:', ' '.join(sorted(f'{k}={v}' for k, v in os.environ.items() "
            "if k.startswith('FREERIDE_GATE_') and k != 'FREERIDE_GATE_PAGE')), flush=True)\ni = 0\nwhile True:\n    x = 0\n    for _ in range(20000):\n        x += 1\n"
            "    i += 1\n    print(f'iteration {i}: at {time.time():.6f}', flush=True)\n")
CPU_PROGRAMS = {"loop": (["python3", "-c", CPU_LOOP], r"iteration (\d+):.* at ([\d.]+)")}
CPU_DAEMON_PROGRESS = {"loop": r"iteration (\d+):"}
# Issues 30 and 34: harvest at least 0.8; the training's slowdown with side work (marks on against
# no side process) at most +0.3% on average and its 95% interval's upper bound at most +0.5%.
TARGETS = {"harvest_min": 0.8, "overhead_mean_max_pct": 0.3, "overhead_high_max_pct": 0.5}
# What train_loop prints with --log-every 1 (examples/train_gpt_pipeline.py).
ITERATION_LINE = re.compile(r"iteration (\d+): ([\d.]+) ms, FreeRide (on|off), at ([\d.]+)")
ARMS = ("noside_on", "noside_off", "off", "on")


def log(*args) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


# -- the arithmetic (tests/python/e2e_arms_test.py) ---------------------------------------------
def iteration_windows(run: dict) -> tuple[list[float], list[float]]:
    """(unix start, length in ms) of each iteration of a trainer's JSON: from the first rank's
    start to the last rank's end where the trainer gives both (iter_end_unix), else iter_ms."""
    starts = run["iter_unix"]
    if run.get("iter_end_unix"):
        return starts, [(end - begin) * 1e3 for begin, end in zip(starts, run["iter_end_unix"])]
    return starts, run["iter_ms"]


def lane_windows(run: dict, lane: int) -> tuple[list[float], list[float]]:
    """(unix start, length in ms) of each iteration of the rank whose lane is `lane` (on one node
    the lane is the rank), where the trainer gives each rank's own (rank_iter_unix, rank_iter_ms),
    else iteration_windows(run).  The ranks of a pipeline do not start an iteration together: the
    last stage starts its next one while the first still ends this one, so work on a lane is
    placed in its own rank's iterations, whose modes are the same step's."""
    starts, times = run.get("rank_iter_unix"), run.get("rank_iter_ms")
    if not starts or not times:
        return iteration_windows(run)
    if lane >= len(starts):  # SystemExit: the launch fails, the bench goes on (Arms.run)
        raise SystemExit(f"lane {lane}: the trainer gave the iterations of {len(starts)} ranks")
    count = len(run["iter_unix"])
    return starts[lane][:count], times[lane][:count]


def bubble_seconds_by_arm(bubbles: list[tuple[float, float]], starts: list[float], spans_ms: list[float],
                          arms: list[str]) -> dict[str, float]:
    """Seconds of `bubbles` ((unix begin, unix end)) in each arm's iterations: each bubble belongs to
    the iteration it began in, and is cut at that iteration's end."""
    out: dict[str, float] = {}
    for begin, end in bubbles:
        i = bisect.bisect_right(starts, begin) - 1
        if i < 0 or not arms[i]:
            continue
        inside = min(end, starts[i] + spans_ms[i] / 1e3) - begin
        if inside > 0:
            out[arms[i]] = out.get(arms[i], 0.0) + inside
    return out


def step_progress(steps: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A task's steps ((unix end, units)) as units_by_arm's cumulative counts, each at its step's end;
    a zero count first, at no iteration, so that the first step counts too."""
    done, total = [(0.0, -math.inf)], 0.0
    for end, units in sorted(steps):
        total += units
        done.append((total, end))
    return done


def read_events(path: str) -> list[dict]:
    """The daemon's event log (docs/event-log.md), less a last line cut short.  One run of this
    benchmark writes far less than the 256 MiB at which the log rotates."""
    with open(path) as f:
        return [json.loads(line) for line in f.read().splitlines() if line.endswith("}")]


def lane_bubbles(events: list[dict], lane: int, mono_to_unix: float) -> list[tuple[float, float]]:
    """Lane `lane`'s bubbles as (unix begin, unix end), sorted; `mono_to_unix` is added to the
    events' CLOCK_MONOTONIC seconds."""
    return sorted((int(e["begin_ns"]) / 1e9 + mono_to_unix, int(e["end_ns"]) / 1e9 + mono_to_unix)
                  for e in events if e.get("type") == "bubble" and int(e.get("lane", -1)) == lane)


def slot_breakdown(events: list[dict], lane: int, mono_to_unix: float, starts: list[float],
                   spans_ms: list[float], arms: list[str], arm: str = "on") -> list[dict]:
    """Where lane `lane`'s bubbles in `arm` iterations went, slot by slot: how many, their mean
    length, the mean length the daemon predicted at their begin (over those it had a forecast
    for), the mean wait from begin to a built-in task's first step, the share of their time
    side work was let run (built-in tasks' steps, imperative tasks' allowed time) and, for gated
    programs, the share the gate admitted work (the daemon's gate_bubble events) and how many
    bubbles a second look extended; and the verdicts.  Says whether harvest was lost to short
    predictions, late starts or the side program itself.  Bubbles count in the iteration they
    began in, up to its end."""
    gate = {int(e["seq"]): e for e in events
            if e.get("type") == "gate_bubble" and int(e.get("lane", -1)) == lane}
    slots: dict[int, dict] = {}
    for e in events:
        if e.get("type") != "bubble" or int(e.get("lane", -1)) != lane:
            continue
        begin_ns, end_ns = int(e["begin_ns"]), int(e["end_ns"])
        begin = begin_ns / 1e9 + mono_to_unix
        i = bisect.bisect_right(starts, begin) - 1
        if i < 0 or arms[i] != arm or end_ns <= begin_ns or begin >= starts[i] + spans_ms[i] / 1e3:
            continue
        s = slots.setdefault(int(e.get("slot", 0)), {"n": 0, "ms": 0.0, "forecast": 0, "predicted_ms": 0.0,
                                                     "granted": 0, "first_grant_ms": 0.0, "used_ms": 0.0,
                                                     "gated": 0, "admitted_ms": 0.0, "second_looks": 0,
                                                     "verdicts": {}})
        s["n"] += 1
        s["ms"] += (end_ns - begin_ns) / 1e6
        predicted = int(e.get("predicted_end_ns", 0) or 0)
        if predicted > begin_ns:
            s["forecast"] += 1
            s["predicted_ms"] += (predicted - begin_ns) / 1e6
        first = int(e.get("first_grant_ns", 0) or 0)
        if first >= begin_ns:
            s["granted"] += 1
            s["first_grant_ms"] += (first - begin_ns) / 1e6
        s["used_ms"] += (int(e.get("harvested_ns", 0) or 0) + int(e.get("allowed_ns", 0) or 0)) / 1e6
        g = gate.get(int(e.get("seq", -1)))
        if g is not None:
            s["gated"] += 1
            s["admitted_ms"] += int(g.get("admitted_ns", 0)) / 1e6
            s["second_looks"] += 1 if g.get("second_look") else 0
        verdict = str(e.get("verdict", "unknown"))
        s["verdicts"][verdict] = s["verdicts"].get(verdict, 0) + 1
    out = []
    for slot, s in sorted(slots.items()):
        out.append({"slot": slot, "bubbles": s["n"], "mean_ms": s["ms"] / s["n"],
                    "forecast": s["forecast"],
                    "mean_predicted_ms": s["predicted_ms"] / s["forecast"] if s["forecast"] else None,
                    "mean_first_grant_ms": s["first_grant_ms"] / s["granted"] if s["granted"] else None,
                    "used_share": s["used_ms"] / s["ms"] if s["ms"] else 0.0,
                    "gated": s["gated"], "admitted_share": s["admitted_ms"] / s["ms"] if s["gated"] else None,
                    "second_looks": s["second_looks"], "verdicts": s["verdicts"]})
    return out


def task_steps(events: list[dict], task_id: int, mono_to_unix: float) -> list[tuple[float, float]]:
    """Task `task_id`'s steps as (unix end, units)."""
    return [(int(e["end_ns"]) / 1e9 + mono_to_unix, float(e.get("units", 0)))
            for e in events if e.get("type") == "step" and int(e.get("task_id", -1)) == task_id]


def program_progress(path: str, pattern: str) -> list[tuple[int, float]]:
    """A program's progress lines (`pattern`: the count, then the unix time) as (count, time)."""
    if not os.path.exists(path):
        return []
    return [(int(m.group(1)), float(m.group(2))) for m in (re.search(pattern, line) for line in open(path)) if m]


def t_quantile_975(df: int) -> float:
    """Student's t 97.5% quantile for `df` degrees of freedom: the table's value for 1 to 4
    (where the expansion below is 24%, 3.1%, 0.7% and 0.25% short), Cornish-Fisher's expansion
    about the normal's 1.96 from 5 up (within 0.1% of the table there, exact in the limit)."""
    if df < 1:
        raise ValueError(f"t quantile: {df} degrees of freedom")
    if df <= 4:
        return (12.706204736, 4.302652730, 3.182446305, 2.776445105)[df - 1]
    z = 1.959963984540054
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def mean_interval(values: list[float]) -> dict:
    """Mean and 95% interval of `values` (Student t over them, e.g. each a round's difference or
    ratio); the interval is NaN with fewer than 2."""
    m = statistics.fmean(values)
    if len(values) < 2:
        return {"pct": m, "low": float("nan"), "high": float("nan"), "rounds": len(values)}
    half = t_quantile_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return {"pct": m, "low": m - half, "high": m + half, "rounds": len(values)}


def block_means(starts: list[float], iter_ms: list[float], arms: list[str], keep) -> list[tuple[float, float]]:
    """(mean start, mean ms) of each block: a maximal run of consecutive iterations with the same
    arm, among the arms `keep` accepts.  The launch alternates marks on and off in blocks, so
    these are its own blocks."""
    out, run, label = [], [], None
    for t, ms, a in zip(starts, iter_ms, arms):
        if run and a != label:
            out.append((statistics.fmean(x for x, _ in run), statistics.fmean(y for _, y in run)))
            run = []
        label = a
        if keep(a):
            run.append((t, ms))
    if run:
        out.append((statistics.fmean(x for x, _ in run), statistics.fmean(y for _, y in run)))
    return out


def drift_adjusted(starts: list[float], iter_ms: list[float], arms: list[str], arm: str) -> dict | None:
    """`arm`'s mean iteration time against the no-side baseline at the same time, in %, with a 95%
    half-width.  The no-side iterations come from other minutes of the launch (before the side was
    submitted and after it exited), and a machine drifts across minutes by more than the plain
    interval shows; so the baseline is a straight line through the no-side iterations' times,
    fitted by least squares, read at the arm's mean time, and its own uncertainty (the line's at
    that point) is added to the arm's.

    Neighbouring iterations are correlated (lag-1 0.05-0.4 in
    bench/results/e2e_gpu_4gpu_drift_*.json), which makes an interval over iterations too narrow;
    so both the line and the arm are taken over block means (block_means), which are close to
    independent, with Student's t for the fewer degrees of freedom of the two parts (the line's
    blocks - 2, the arm's blocks - 1).  None unless at least 3 no-side blocks lie before the arm's
    first and 3 after its last (a line is only interpolated, never extrapolated), and unless the
    arm has at least 4 blocks.  The line mixes marks-on and marks-off no-side blocks, as the plain
    baseline does; the launch alternates them, so the mix is the same before and after the
    side."""
    xs = block_means(starts, iter_ms, arms, lambda a: a == arm)
    ns = block_means(starts, iter_ms, arms, lambda a: a.startswith("noside"))
    if len(xs) < 4:  # an interval needs 3 degrees of freedom here
        return None
    first, last = min(t for t, _ in xs), max(t for t, _ in xs)
    if sum(t < first for t, _ in ns) < 3 or sum(t > last for t, _ in ns) < 3:
        return None
    n = len(ns)
    t_mean = statistics.fmean(t for t, _ in ns)
    y_mean = statistics.fmean(ms for _, ms in ns)
    sxx = sum((t - t_mean) ** 2 for t, _ in ns)
    slope = sum((t - t_mean) * (ms - y_mean) for t, ms in ns) / sxx
    residual_var = sum((ms - y_mean - slope * (t - t_mean)) ** 2 for t, ms in ns) / (n - 2)
    t_arm = statistics.fmean(t for t, _ in xs)
    base = y_mean + slope * (t_arm - t_mean)
    base_var = residual_var * (1 / n + (t_arm - t_mean) ** 2 / sxx)
    arm_mean = statistics.fmean(ms for _, ms in xs)
    # The arm's spread about the same slope: its minutes' drift is not its noise.
    arm_var = statistics.variance([ms - slope * (t - t_arm) for t, ms in xs]) / len(xs)
    if not base > 0:
        return None
    pct = (arm_mean / base - 1) * 100
    half = 100 * t_quantile_975(min(n - 2, len(xs) - 1)) * math.sqrt(arm_var / base**2 +
                                                                     arm_mean**2 * base_var / base**4)
    return {"pct": pct, "low": pct - half, "high": pct + half, "baseline_ms": base,
            "drift_ms_per_min": slope * 60, "blocks": len(xs), "no_side_blocks": n}


def split_side(side: str) -> tuple[str, dict[str, str]]:
    """A side as --sides names it: a program or built-in task, then optionally `+VAR=VALUE` pieces,
    the environment that one program's run gets (e.g. `resnet50+FREERIDE_GATE_QUEUE_ESTIMATE=mean`,
    to set an interposer experiment beside the plain program in one launch).  Its rate alone is the
    plain program's."""
    base, *assignments = side.split("+")
    env = {}
    for a in assignments:
        var, eq, value = a.partition("=")
        if not eq or not var or not var.replace("_", "").isalnum():
            raise SystemExit(f"--sides: {side!r}: {a!r} is not VAR=VALUE")
        env[var] = value
    return base, env


# The longest task name the daemon takes (NameProblem in src/daemon/task_spec.h), in bytes.
TASK_NAME_BYTES = 128


def task_name(side: str, suffix: str) -> str:
    """`side`-`suffix` as a task name the daemon takes: `side` (a program with a long +VAR=VALUE
    environment, say) cut so that the whole fits TASK_NAME_BYTES; `suffix` is kept whole, so that
    it keeps the name unique."""
    tail = f"-{suffix}"
    room = TASK_NAME_BYTES - len(tail.encode())
    return side.encode()[:room].decode(errors="ignore") + tail


def under_env(cmd: list[str], env: dict[str, str]) -> list[str]:
    """`cmd` run with the variables `env` (a side's +VAR=VALUE pieces, split_side) through `env`;
    `cmd` itself without any."""
    return ["env", *(f"{var}={value}" for var, value in env.items()), *cmd] if env else cmd


def harvest_at(rate: float, units_on_by_lane: list[float], bubble_on_s_by_lane: list[float]) -> tuple:
    """(harvest, harvest by lane): the lanes' "on" work in seconds alone, at `rate` units a second,
    over their bubble seconds in "on" iterations; NaN where there is no bubble time or no rate."""
    if not rate > 0:
        return float("nan"), [float("nan")] * len(units_on_by_lane)
    bubble_s = sum(bubble_on_s_by_lane)
    return (sum(units_on_by_lane) / rate / bubble_s if bubble_s > 0 else float("nan"),
            [u / rate / b if b > 0 else float("nan") for u, b in zip(units_on_by_lane, bubble_on_s_by_lane)])


def arms_summary(iter_ms: list[float], arms: list[str], units_by_lane: list[dict], bubble_on_s_by_lane: list[float],
                 rate: float, starts: list[float] | None = None) -> dict:
    """One row's figures: the iterations of each arm, their mean times, the overheads between
    arms (also against a drift-adjusted baseline, given the iterations' `starts`), and harvest
    (the lanes' "on" work in seconds alone, at `rate` units a second, over their bubble seconds
    in "on" iterations)."""
    iters = {arm: [t for t, a in zip(iter_ms, arms) if a == arm] for arm in ARMS}
    no_side = iters["noside_on"] + iters["noside_off"]
    enough = lambda *xs: all(len(x) >= 2 for x in xs)  # noqa: E731
    harvest, harvest_by_lane = harvest_at(rate, [u["on"] for u in units_by_lane], bubble_on_s_by_lane)
    return {
        "harvest": harvest,
        "harvest_by_lane": harvest_by_lane,
        "units_on_by_lane": [u["on"] for u in units_by_lane],
        "units_off_after_block_start": sum(u["off"] for u in units_by_lane),
        "units_off_after_block_start_by_lane": [u["off"] for u in units_by_lane],
        "bubble_s_on_by_lane": bubble_on_s_by_lane,
        "iterations": {arm: len(xs) for arm, xs in iters.items()},
        "no_side_ms": mean_ci(no_side), "off_ms": mean_ci(iters["off"]), "on_ms": mean_ci(iters["on"]),
        "overhead_on_vs_no_side": diff_ci(iters["on"], no_side) if enough(iters["on"], no_side) else None,
        "overhead_off_vs_no_side": diff_ci(iters["off"], no_side) if enough(iters["off"], no_side) else None,
        "overhead_on_vs_off": diff_ci(iters["on"], iters["off"]) if enough(iters["on"], iters["off"]) else None,
        "marks_alone_on_vs_off": (diff_ci(iters["noside_on"], iters["noside_off"])
                                  if enough(iters["noside_on"], iters["noside_off"]) else None),
        "overhead_on_vs_no_side_drift_adjusted": drift_adjusted(starts, iter_ms, arms, "on") if starts else None,
        "overhead_off_vs_no_side_drift_adjusted": drift_adjusted(starts, iter_ms, arms, "off") if starts else None,
    }


def iteration_series(starts: list[float], iter_ms: list[float], arms: list[str]) -> list[list]:
    """Every measured iteration as [unix start, ms, arm] (rounded to 0.1 ms and 1 us), for reading
    drift and blocks from a result file; iterations of no arm (warm-up, straddling a switch) are
    left out."""
    return [[round(t, 4), round(ms, 3), a] for t, ms, a in zip(starts, iter_ms, arms) if a]


def revalue_harvest(row: dict, rate_after: float | None) -> None:
    """Values `row`'s harvest at the higher of its side's alone rates, the one measured before the
    launches (alone_rate_per_s) and `rate_after`, measured after them: a program's work is worth
    what it does alone at its best, and a low measurement must not pass for harvest.  The first
    figure stays as harvest_at_first_rate; the verdict is judged again."""
    row["alone_rate_after_per_s"] = rate_after
    if not rate_after or not rate_after > 0:
        return
    rate = max(row["alone_rate_per_s"], rate_after)
    row["harvest_at_first_rate"] = row["harvest"]
    row["alone_rate_used_per_s"] = rate
    row["harvest"], row["harvest_by_lane"] = harvest_at(rate, row["units_on_by_lane"], row["bubble_s_on_by_lane"])
    row["missed_targets"] = missed_targets(row)


def missed_targets(row: dict) -> list[str]:
    """What a row misses of TARGETS and of "no work outside bubbles", in words; [] when it meets
    them all."""
    if not row.get("warm", True):
        return [f"the side never warmed up ({row.get('why_not_warm', 'no progress')})"]
    missed = []
    if not row["harvest"] >= TARGETS["harvest_min"]:
        missed.append(f"harvest {row['harvest']:.2f} < {TARGETS['harvest_min']}")
    o = row["overhead_on_vs_no_side"]
    if o is None:
        missed.append("too few iterations to measure the overhead")
    else:
        # Judged by the worse of the plain figure and the drift-adjusted one over blocks (whose
        # interval is the honest one where iterations are correlated), where there is one.
        adjusted = row.get("overhead_on_vs_no_side_drift_adjusted") or o
        mean, high = max(o["pct"], adjusted["pct"]), max(o["high"], adjusted["high"])
        if not mean <= TARGETS["overhead_mean_max_pct"]:
            missed.append(f"overhead mean {mean:+.2f}% > +{TARGETS['overhead_mean_max_pct']}%")
        if not high <= TARGETS["overhead_high_max_pct"]:
            missed.append(f"overhead upper bound {high:+.2f}% > +{TARGETS['overhead_high_max_pct']}%")
    if row["units_off_after_block_start"]:
        missed.append(f"{row['units_off_after_block_start']:g} units in marks-off iterations")
    return missed


def format_interval(d: dict | None) -> str:
    return "–" if d is None else f"{d['pct']:+.2f}% [{d['low']:+.2f}, {d['high']:+.2f}]"


def verdict(row: dict) -> str:
    """"targets met", or "missed: " and what the row misses (its missed_targets)."""
    return "targets met" if not row["missed_targets"] else "missed: " + "; ".join(row["missed_targets"])


# The lane status counters a row keeps (gate_misses), and their names in the row (ns become ms).
GATE_MISS_KEYS = {"gate_late_ns": "late_ms", "gate_late_bubbles": "late_stretches", "gate_pending_ns": "pending_ms",
                  "gate_held_unpublished_ns": "held_unpublished_ms", "gate_held_drain_ns": "held_drain_ms",
                  "gate_held_fit_ns": "held_fit_ms"}


def gate_misses(before: list[dict], after: list[dict]) -> list[dict]:
    """Per lane, the gate's misses between two `freeride status` readings of the lanes: late work
    (gated work running after its bubble closed: judged by the overrun budget), its stretches, and
    pending time (gated work waiting on its GPU wait after its bubble closed: shown, not judged),
    and the time gated programs' threads were held on the host while the gate was open, by why:
    the bubble's deadline not yet published, queued work draining, the next piece predicted not to
    end by the deadline (where an open gate's time went unused).
    The status omits zero counters and gives 64-bit ones as strings."""
    def counter(lanes: list[dict], lane: int, key: str) -> int:
        for entry in lanes:
            if int(entry.get("lane", 0)) == lane:
                return int(entry.get(key, 0))
        return 0
    def lane_misses(lane: int) -> dict:
        misses = {"lane": lane}
        for key, name in GATE_MISS_KEYS.items():
            delta = counter(after, lane, key) - counter(before, lane, key)
            misses[name] = delta / 1e6 if key.endswith("_ns") else delta  # ns to ms; counts as they are
        return misses
    return [lane_misses(int(entry.get("lane", 0))) for entry in after]


def _misses(row: dict) -> str:
    """The gate's late / pending milliseconds in the row, lanes apart by "; " ("–" before they were kept)."""
    misses = row.get("gate_misses_by_lane")
    if not misses:
        return "–"
    return "; ".join(f"{m['late_ms']:.1f} / {m['pending_ms']:.0f}" for m in misses)


def _held_open(row: dict) -> str:
    """Held while open, ms: deadline / drain / fit, lanes apart by "; " ("–" in rows from before it was kept)."""
    misses = row.get("gate_misses_by_lane")
    if not misses or "held_drain_ms" not in misses[0]:
        return "–"
    return "; ".join(f"{m['held_unpublished_ms']:.1f} / {m['held_drain_ms']:.1f} / {m['held_fit_ms']:.1f}"
                     for m in misses)


def _per_gpu(row: dict, key: str, digits: int) -> str:
    """Per GPU, the mean of `key` in the no-side, off and on iterations ("a/b/c"), GPUs apart by "; "."""
    samples = row.get("gpu_samples") or {}
    parts = []
    for gpu in sorted(samples, key=int):
        by_arm = samples[gpu]
        parts.append("/".join(f"{by_arm[arm][key]:.{digits}f}" if arm in by_arm else "–"
                              for arm in ("noside", "off", "on")))
    return "; ".join(parts) or "–"


def markdown(results: list[dict]) -> str:
    """The table of one or more result files (their rows, each with its command and commit)."""
    rows = [row for r in results for row in r["rows"]]
    gpus = sorted({row["gpus"] for row in rows})
    out = [f"# Three arms per row on {'/'.join(map(str, gpus))} GPUs: real pipelines with side work in "
           "their bubbles", ""]
    for r in results:
        out += [f"- `{r['command']}`", f"  - commit `{r['commit']}`; device: {r.get('device', '?')}; "
                f"{r.get('started', '')}"]
    out += ["",
            f"Targets (issues 30 and 34): harvest ≥ {TARGETS['harvest_min']}; overhead (marks on against no "
            f"side process, the same launch) mean ≤ +{TARGETS['overhead_mean_max_pct']}% and 95% upper bound "
            f"≤ +{TARGETS['overhead_high_max_pct']}%; no side work in marks-off iterations past each block's "
            "first.  Intervals are Welch 95%.  \"Drift-adjusted\": against a straight line through the no-side "
            "iterations' times (before the side and after it), read at the arm's time, its uncertainty added "
            "(bench/e2e_arms.py drift_adjusted), over the launch's blocks of iterations, which are closer to "
            "independent than iterations; the targets are judged by the worse of the two figures.  SM MHz and "
            "power W per GPU: no side / off / on.  Late / pending ms per lane, over the row's arms (from the "
            "side's warm-up to its cancel; the warm-up's own are in the JSON, gate_misses_warm_up_by_lane): "
            "gated work running after its bubble closed (judged by the overrun budget) / waiting on its GPU "
            "wait then (shown, not judged).  Held open ms per lane, over the same: gated programs' threads held on the "
            "host while the gate was open, summed over threads, waiting for the bubble's deadline / for queued "
            "work to drain / because the next piece was predicted not to end by the deadline (the early close).",
            "",
            "| framework | schedule | M | side | harvest | on vs no side | drift-adjusted on / off vs no side "
            "| off vs no side | on vs off | marks alone | units off | late / pending ms | held open ms "
            "| iterations no side/off/on | SM MHz | power W | targets |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        it = row.get("iterations", {})
        missed = row.get("missed_targets", missed_targets(row))
        v = f" V={row['virtual_stages']}" if row.get("virtual_stages", 1) > 1 else ""
        out.append(
            f"| {row['framework']} | {row['schedule']}{v} | {row['microbatches']} | {row['side']} "
            f"| {row['harvest']:.2f} | {format_interval(row['overhead_on_vs_no_side'])} "
            f"| {format_interval(row.get('overhead_on_vs_no_side_drift_adjusted'))} / "
            f"{format_interval(row.get('overhead_off_vs_no_side_drift_adjusted'))} "
            f"| {format_interval(row['overhead_off_vs_no_side'])} | {format_interval(row['overhead_on_vs_off'])} "
            f"| {format_interval(row['marks_alone_on_vs_off'])} | {row['units_off_after_block_start']:g} "
            f"| {_misses(row)} | {_held_open(row)} | {it.get('noside_on', 0) + it.get('noside_off', 0)}/{it.get('off', 0)}/{it.get('on', 0)} "
            f"| {_per_gpu(row, 'sm_mhz', 0)} | {_per_gpu(row, 'power_w', 0)} "
            f"| {'met' if not missed else 'missed: ' + '; '.join(missed)} |")
    for r in results:
        if "alone_rates_after" not in r:
            continue
        after = r["alone_rates_after"] or {}
        out += ["", "Alone rates (units a second), before the launches / after them; harvest is valued at the "
                "higher: " + ", ".join(f"{side} {rate:.4g} / " + (f"{after[side]:.4g}" if side in after else "–")
                                       for side, rate in r.get("alone_rates", {}).items())]
    skipped = [s for r in results for s in r.get("skipped", [])]
    if skipped:
        out += ["", "Not run (out of the time budget): " + ", ".join(skipped)]
    return "\n".join(out) + "\n"


# -- the runs --------------------------------------------------------------------------------------
class Trainer:
    """One launch of a trainer with --log-every 1, its output in a file that is followed."""

    def __init__(self, cmd: list[str], env: dict, log_path: str):
        self.log_path = log_path
        self.proc = subprocess.Popen(cmd, env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.offset = 0
        self.iterations: list[tuple[int, bool, float]] = []  # (index, marks on?, unix start)

    def poll(self) -> None:
        """Reads the iteration lines printed since the last call; stops the benchmark if the
        trainer has ended."""
        with open(self.log_path) as f:
            f.seek(self.offset)
            text = f.read()
        complete = text[:text.rfind("\n") + 1]
        self.offset += len(complete.encode())
        for m in ITERATION_LINE.finditer(complete):
            self.iterations.append((int(m.group(1)), m.group(3) == "on", float(m.group(4))))
        if self.proc.poll() is not None:
            tail = open(self.log_path).read()[-3000:]
            raise SystemExit(f"the trainer ended (exit status {self.proc.returncode}):\n{tail}")

    def wait(self, since: float, seconds: float, per_mode: int, limit: float = 600) -> None:
        """Until `seconds` have passed since `since` and at least `per_mode` iterations of each mode
        (marks on, off) have begun after it and ended."""
        deadline = time.time() + limit
        while True:
            self.poll()
            done = [on for _, on, at in self.iterations if at >= since]
            if time.time() >= since + seconds and min(done.count(True), done.count(False)) >= per_mode:
                return
            if time.time() > deadline:
                raise SystemExit(f"the trainer did not get {per_mode} iterations of each mode in {limit:.0f} s; "
                                 f"see {self.log_path}")
            time.sleep(0.2)

    def wait_warm(self, first_index: int, limit: float = 600) -> None:
        """Until iteration `first_index` (the first one past the trainer's warm-up) has ended."""
        deadline = time.time() + limit
        while not any(index >= first_index for index, _, _ in self.iterations):
            if time.time() > deadline:
                raise SystemExit(f"the trainer did not reach iteration {first_index} in {limit:.0f} s; "
                                 f"see {self.log_path}")
            time.sleep(0.2)
            self.poll()

    def finish(self, stop_file: str, graceful: bool) -> None:
        """Asks the trainer to end at a block boundary, the one after its next (it learns of the stop
        file one block late: examples/train_gpt_pipeline.py StopCheck), or kills it at once; waits."""
        open(stop_file, "w").close()
        if graceful:
            try:
                self.proc.wait(timeout=180)
                return
            except subprocess.TimeoutExpired:
                log("the trainer did not stop within 180 s of its stop file; killed")
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()


class Arms:
    """The three-arm launches against the daemon of `bench` (bench/e2e_gpu.py's Bench: its CLI,
    built-in tasks and their profiles, trainer command and logs).  Rows go to bench.results in
    bench.out, with the markdown table beside it."""

    def __init__(self, bench, sides: list[str], cpu: bool):
        self.b, self.a = bench, bench.a
        self.cpu = cpu
        self.programs = CPU_PROGRAMS if cpu else PROGRAMS
        self.progress_regex = CPU_DAEMON_PROGRESS if cpu else DAEMON_PROGRESS
        for side in sides:
            base, env = split_side(side)
            if base not in self.programs and base not in bench.tasks:
                raise SystemExit(f"--sides: unknown side {base!r}; programs: {', '.join(sorted(self.programs))}; "
                                 f"built-in tasks: {', '.join(sorted(bench.tasks))}")
            if env and base not in self.programs:
                raise SystemExit(f"--sides: {side!r}: only a program's run takes +VAR=VALUE")
        self.sides = sides
        self.resident: list[int] = []  # the side tasks submitted and not yet gone
        self.rates: dict[str, float] = {}
        self.warm_units: dict[str, int] = {}  # each program's warm-up in units (gate_gpu.AloneRun)
        self.alone_seconds_taken = 0.0  # how long the alone rates took, kept for measuring them again
        self.sampler: GpuSampler | None = None
        self.started = time.monotonic()
        self.side_seconds: list[float] = []  # how long each side took, for the budget
        self.launch_seconds: list[float] = []  # a launch's start-up to its first no-side arm
        self.mono_to_unix = time.time() - time.monotonic()
        bundle = getattr(getattr(bench, "a", None), "bundle", None)
        self.results = {"command": " ".join(sys.argv), "commit": git_commit(),
                        "bundle_commit": bundle_commit(bundle) if bundle else None, "gpus": bench.gpus,
                        "device": describe_device(cpu), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                        "targets": TARGETS, "alone_rates": self.rates, "warm_units": self.warm_units, "rows": bench.rows, "skipped": []}
        self.markdown_name = os.path.splitext(bench.results)[0] + ".md"
        bench.keep.append(self.markdown_name)

    # -- alone rates ---------------------------------------------------------------------------
    def program(self, name: str) -> tuple[list[str], str]:
        """Program `name`'s command (this Python, the script's full path; run through `env` with
        the side's +VAR=VALUE pieces) and progress pattern."""
        base, env = split_side(name)
        cmd, pattern = self.programs[base]
        cmd = [sys.executable if cmd[0] == "python3" else cmd[0],
               *[os.path.join(ROOT, x) if x.startswith("examples/") else x for x in cmd[1:]]]
        return under_env(cmd, env), pattern

    def is_program(self, side: str) -> bool:
        return split_side(side)[0] in self.programs

    def rate(self, side: str, rates: dict[str, float] | None = None) -> float | None:
        """Side `side`'s rate alone (its plain program's) in `rates` (default: self.rates)."""
        return (self.rates if rates is None else rates).get(split_side(side)[0])

    def measure_alone(self, rates: dict[str, float] | None = None, sides: list[str] | None = None,
                      tag: str = "", limit_s: float = 180) -> None:
        """Each side's rate alone (of `sides`, default all) into `rates` (default: self.rates), the
        sides spread over the GPUs (one at a time on each); each measurement's files named with
        `tag`, and stopped after `limit_s` seconds."""
        rates = self.rates if rates is None else rates
        # One measurement per plain program or task: a side's +VAR=VALUE runs share it.
        wanted = self.sides if sides is None else sides
        pending = list(dict.fromkeys(split_side(side)[0] for side in wanted))
        errors, lock = [], threading.Lock()

        def worker(gpu: int) -> None:
            while True:
                with lock:
                    if not pending or errors:
                        return
                    name = pending.pop(0)
                try:
                    if name in self.programs:
                        cmd, pattern = self.program(name)
                        env = dict(self.b.env, CUDA_VISIBLE_DEVICES=str(gpu), CUDA_MPS_PIPE_DIRECTORY="/nonexistent")
                        run = program_alone_run(cmd, pattern, env, os.path.join(self.b.out, f"alone-{name}{tag}.err"),
                                                self.a.alone_warmup, self.a.alone_seconds, limit_s,
                                                self.a.warm_share)
                        rates[name] = run.rate
                        if rates is self.rates:  # the first measurement: the warm-up of the rows
                            self.warm_units[name] = run.warm_units
                        log(f"alone {name}{tag}: {run.rate:.3f} units/s; warm after {run.warm_units} units")
                    else:
                        self.b.finish_profile(name, self.b.start_profile(name, gpu, tag), tag, limit_s)
                        rates[name] = self.b.alone[name + tag]["rate_per_s"]
                except BaseException as e:  # noqa: BLE001  (a SystemExit of the worker's, told below)
                    with lock:
                        errors.append(f"{name}: {e}")

        threads = [threading.Thread(target=worker, args=(gpu,), daemon=True) for gpu in range(self.b.gpus)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit("alone rates failed: " + "; ".join(errors))

    # -- one side, on every lane -----------------------------------------------------------------
    def submit(self, side: str, lane: int, tag: str) -> int:
        name = task_name(side, f"{lane}-{tag}")
        if self.is_program(side):
            cmd, _ = self.program(side)
            args = ["--kind", "imperative", "--memory", self.a.side_memory,
                    "--progress-regex", self.progress_regex[split_side(side)[0]], "--", *cmd]
        else:
            args = ["--profile", os.path.join(self.b.out, f"profile-{side}.json")]
            if self.cpu:
                # A loaded CPU's 99th-percentile step (the profile's hint) is its preemptions: it
                # would fit none of a small CPU pipeline's bubbles, and the task would never step.
                args += ["--step-time", f"{int(self.b.alone[side]['step_ms']['p50'] * 1000) + 1}us"]
        return int(json.loads(self.b.cli("submit", "--json", "--lane", str(lane), "--name", name, *args))["id"])

    def show(self, task_id: int) -> dict:
        return json.loads(self.b.cli("show", str(task_id), "--json"))

    def task_log(self, task_id: int) -> str:
        return os.path.join(self.b.state, "tasks", str(task_id), "stdout.log")

    def warm(self, side: str, task_id: int, info: dict) -> bool:
        """Whether the side on one lane is past its warm-up: a program by gate_gpu.is_warm, a
        built-in task after 3 steps."""
        if self.is_program(side):
            counts = [count for count, _ in program_progress(self.task_log(task_id), self.program(side)[1])]
            return is_warm(counts, self.warm_units.get(split_side(side)[0], 0))
        return int(info.get("steps", 0)) >= 3

    def wait_warm(self, side: str, ids: list[int], trainer: Trainer) -> str:
        """Until each lane's side is warm (warm()): "" then, else why not."""
        deadline = time.time() + self.a.warm_seconds
        while time.time() < deadline:
            trainer.poll()
            infos = [self.show(i) for i in ids]
            ended = [f"task {i} {info.get('state')}: {info.get('message', '')}" for i, info in zip(ids, infos)
                     if info.get("state") in ("FAILED", "CANCELLED", "FINISHED")]
            if ended:
                return "; ".join(ended)
            if all(self.warm(side, i, info) for i, info in zip(ids, infos)):
                return ""
            time.sleep(0.3)
        want = (f"3 progress lines and {self.warm_units.get(split_side(side)[0], 0)} units"
                if self.is_program(side) else "3 steps")
        return f"not warm ({want}) on some lane in {self.a.warm_seconds:.0f} s"

    def gone(self, task_id: int) -> bool:
        info = self.show(task_id)
        pid = int(info.get("pid", 0) or 0)
        return info.get("state") in ("CANCELLED", "FINISHED", "FAILED") and not (pid and os.path.exists(f"/proc/{pid}"))

    def serve(self, side: str, trainer: Trainer, tag: str) -> dict:
        """Side `side` on every lane: submitted, warmed up, measured (marks on and off blocks),
        cancelled, its processes gone; then the no-side arm after it."""
        began = time.monotonic()
        seg: dict = {"side": side, "t_submit": time.time(),
                     "lanes_before": self.b.status()["stats"].get("lanes", [])}
        seg["ids"] = self.resident = []
        for lane in range(self.b.gpus):
            seg["ids"].append(self.submit(side, lane, tag))
        seg["why_not_warm"] = self.wait_warm(side, seg["ids"], trainer)
        seg["t_warm"] = time.time()
        seg["lanes_warm"] = self.b.status()["stats"].get("lanes", [])
        if not seg["why_not_warm"]:
            trainer.wait(seg["t_warm"], self.a.measure_seconds, self.a.alternate)
        else:
            log(f"{tag} {side}: not warm ({seg['why_not_warm']}); no on/off arms")
        seg["t_cancel"] = time.time()
        seg["tasks"] = []
        for lane, i in enumerate(seg["ids"]):
            info = self.show(i)
            seg["tasks"].append({"lane": lane, "id": i, "state": info.get("state"), "message": info.get("message"),
                                 "daemon_progress": info.get("progress"), "steps": info.get("steps"),
                                 "allowed_ns": info.get("allowed_ns")})
        status = self.b.status()
        seg["gate_margin_ns"] = [int(l.get("gate_margin_ns", 0)) for l in status["stats"].get("lanes", [])]
        seg["lanes"] = status["stats"].get("lanes", [])  # each lane's counters, gate_open_ns among them
        seg["live_overhead"] = self.b.live_overhead()
        for i in seg["ids"]:
            try:
                self.b.cli("cancel", str(i))
            except subprocess.CalledProcessError:
                pass  # it has ended already
        deadline = time.time() + 60
        while not all(self.gone(i) for i in seg["ids"]):
            if time.time() > deadline:
                raise SystemExit(f"{side}: its processes still run 60 s after the cancel")
            trainer.poll()
            time.sleep(0.1)
        seg["t_gone"] = time.time()
        self.resident = []
        trainer.wait(seg["t_gone"], self.a.noside_seconds, self.a.alternate)
        self.side_seconds.append(time.monotonic() - began)
        return seg

    # -- one launch ------------------------------------------------------------------------------
    def time_left(self) -> float:
        return math.inf if not self.a.budget_seconds else self.a.budget_seconds - (time.monotonic() - self.started)

    def side_estimate(self) -> float:
        return max(self.side_seconds, default=self.a.measure_seconds + self.a.noside_seconds + 30)

    def launch(self, schedule: str, m: int, framework: str = "torch", script: str = "train_gpt_pipeline.py",
               extra: tuple = ()) -> None:
        """One launch of `script` with `schedule` and `m` micro-batches serving every side in turn;
        a row per side."""
        tag = f"{framework}-{schedule}-m{m}"
        if self.time_left() < max(self.launch_seconds, default=60) + self.side_estimate() + self.alone_reserve():
            self.results["skipped"].append(f"{tag} (all sides)")
            log(f"{tag}: skipped, {self.time_left():.0f} s left of the budget")
            return
        out = os.path.join(self.b.out, f"train-{tag}.json")
        stop = os.path.join(self.a.work, f"{tag}.stop")
        cmd = self.b.trainer_command(schedule, m, "on", out, script,
                                     (*extra, "--stop-file", stop, "--log-every", "1"), 10_000_000, self.a.alternate)
        log(f"== {tag}: {' '.join(cmd)}")
        began = time.monotonic()
        trainer = Trainer(cmd, self.b.env, os.path.join(self.b.out, f"train-{tag}.log"))
        segments: list[dict] = []
        graceful = False
        try:
            trainer.wait_warm(self.b.trainer_warmup)
            trainer.wait(time.time(), self.a.noside_seconds, self.a.alternate)
            self.launch_seconds.append(time.monotonic() - began)
            for side in self.sides:
                if self.time_left() < self.side_estimate() + 15 + self.alone_reserve():
                    self.results["skipped"].append(f"{tag} {side}")
                    log(f"{tag} {side}: skipped, {self.time_left():.0f} s left of the budget")
                    continue
                segments.append(self.serve(side, trainer, tag))
            graceful = True
        finally:
            trainer.finish(stop, graceful)
            self.cancel_resident()
        if trainer.proc.returncode != 0:
            raise SystemExit(f"{tag}: the trainer failed ({trainer.proc.returncode}); see train-{tag}.log")
        self.b.settle()
        self.mono_to_unix = time.time() - time.monotonic()
        run = json.load(open(out))
        events = read_events(os.path.join(self.b.state, "events.jsonl"))
        for k, seg in enumerate(segments):
            t_from = segments[k - 1]["t_gone"] if k else -math.inf
            t_until = segments[k + 1]["t_submit"] if k + 1 < len(segments) else math.inf
            self.add_row(run, seg, t_from, t_until, events,
                         {"gpus": self.b.gpus, "framework": framework, "schedule": schedule, "microbatches": m,
                          "preset": self.a.preset, "trainer": " ".join(cmd), "trainer_out": os.path.basename(out)})
        self.save()

    def cancel_resident(self) -> None:
        """Cancels the side tasks still resident (a launch that failed while serving them), so
        that none is left for the next launch's no-side arm."""
        for i in self.resident:
            try:
                self.b.cli("cancel", str(i))
            except subprocess.SubprocessError:
                pass  # ended already, or the daemon is gone
        self.resident = []

    def add_row(self, run: dict, seg: dict, t_from: float, t_until: float, events: list[dict], config: dict) -> None:
        side = seg["side"]
        starts, spans = iteration_windows(run)
        modes = run["freeride_on"][:len(starts)]
        arms = label_arms(starts, spans, modes, run["warmup"], seg["t_submit"], seg["t_warm"], seg["t_cancel"],
                          seg["t_gone"], t_from, t_until)
        units, bubble_on, slots = [], [], []
        for lane, task_id in enumerate(seg["ids"]):
            lane_starts, lane_spans = lane_windows(run, lane)
            slots.append(slot_breakdown(events, lane, self.mono_to_unix, lane_starts, lane_spans, arms))
            if self.is_program(side):
                done = program_progress(self.task_log(task_id), self.program(side)[1])
            else:
                done = step_progress(task_steps(events, task_id, self.mono_to_unix))
            units.append(units_by_arm(done, lane_starts, lane_spans, modes, arms))
            bubble_on.append(bubble_seconds_by_arm(lane_bubbles(events, lane, self.mono_to_unix), lane_starts,
                                                   lane_spans, arms).get("on", 0.0))
        row = dict(config, virtual_stages=run.get("virtual_stages", 1), side=side,
                   side_kind="program" if self.is_program(side) else "built-in task",
                   alone_rate_per_s=self.rate(side), warm=not seg["why_not_warm"],
                   **arms_summary(run["iter_ms"], arms, units, bubble_on, self.rate(side), starts))
        # Every measured iteration (unix start, ms, arm), to read drift and blocks from the file.
        row["series"] = iteration_series(starts, run["iter_ms"], arms)
        if seg["why_not_warm"]:
            row["why_not_warm"] = seg["why_not_warm"]
        if self.sampler:
            pooled = ["noside" if a.startswith("noside") else a for a in arms]
            # GPU g runs rank g (one node): its samples by that rank's iterations, which do not overlap.
            row["gpu_samples"] = {str(g): self.sampler.by_arm(*lane_windows(run, g), pooled, gpu=g)
                                  for g in range(self.b.gpus)}
        row.update(seconds={"warm": seg["t_warm"] - seg["t_submit"], "measured": seg["t_cancel"] - seg["t_warm"],
                            "exit": seg["t_gone"] - seg["t_cancel"]},
                   tasks=seg["tasks"], gate_margin_ns=seg["gate_margin_ns"], live_overhead=seg["live_overhead"],
                   slots_on_by_lane=slots, lanes=seg["lanes"],
                   # The gate's misses in the arms (warm to cancel), and in the warm-up apart.
                   gate_misses_by_lane=gate_misses(seg.get("lanes_warm", []), seg["lanes"]),
                   gate_misses_warm_up_by_lane=gate_misses(seg.get("lanes_before", []), seg.get("lanes_warm", [])),
                   command=self.results["command"], commit=self.results["commit"])
        row["missed_targets"] = missed_targets(row)
        self.b.rows.append(row)
        o = row["overhead_on_vs_no_side"]
        log(f"ROW {config['framework']} {config['schedule']} m{config['microbatches']} {side}: harvest "
            f"{row['harvest']:.2f}; on vs no side {format_interval(o)}, off vs no side "
            f"{format_interval(row['overhead_off_vs_no_side'])}, on vs off {format_interval(row['overhead_on_vs_off'])}; "
            f"drift-adjusted on vs no side {format_interval(row['overhead_on_vs_no_side_drift_adjusted'])}, off vs no "
            f"side {format_interval(row['overhead_off_vs_no_side_drift_adjusted'])}; "
            f"units off {row['units_off_after_block_start']:g}; iterations {row['iterations']}; "
            f"{verdict(row)}")
        for lane, lane_slots in enumerate(slots):
            def ms(v):
                return "-" if v is None else format(v, ".2f")
            log(f"  lane {lane} on: " + "; ".join(
                f"slot {x['slot']} {x['bubbles']}x {x['mean_ms']:.2f} ms (predicted {ms(x['mean_predicted_ms'])}, "
                f"first grant {ms(x['mean_first_grant_ms'])}, used {x['used_share']:.2f}, "
                f"admitted {ms(x['admitted_share'])}, second looks {x['second_looks']})" for x in lane_slots))

    def alone_reserve(self) -> float:
        """The seconds kept back in the budget for measuring the alone rates again."""
        return self.alone_seconds_taken if self.a.alone_again else 0.0

    def measure_alone_again(self) -> None:
        """The alone rates once more, after the launches (the GPUs free again), and each row's
        harvest valued at the higher of its side's two: one measurement of a few seconds has read
        13% low on an H200 (bench/results/e2e_drift_4xh200.md), which would count as harvest."""
        if not self.a.alone_again:
            return
        if self.time_left() < self.alone_seconds_taken + 10:
            log(f"the alone rates were not measured again: {self.time_left():.0f} s left of the budget")
            self.results["alone_rates_after"] = None
            return
        after: dict[str, float] = {}
        sides = sorted({row["side"] for row in self.b.rows})
        try:
            self.measure_alone(after, sides, tag="-after", limit_s=min(180.0, self.time_left() - 5))
        except SystemExit as e:
            if e.code == 143:  # the time limit's SIGTERM: stop, as the launches do
                raise
            log(f"the alone rates could not be measured again: {e}")
            self.results["alone_rates_after"] = None
            return
        self.results["alone_rates_after"] = after
        for row in self.b.rows:
            revalue_harvest(row, self.rate(row["side"], after))
        self.save()

    def save(self) -> None:
        with open(os.path.join(self.b.out, self.b.results), "w") as f:
            json.dump(self.results, f, indent=1, default=lambda o: None)
        with open(os.path.join(self.b.out, self.markdown_name), "w") as f:
            f.write(markdown([self.results]))

    def run(self, launches: list[tuple]) -> None:
        """The alone rates, then the bench's daemon and every launch ((schedule, micro-batches,
        framework, script, extra trainer options)), a row per launch and side; one launch's failure
        is recorded and the next one runs.  The daemon is stopped and the logs packed at the end,
        also on SIGTERM (a time limit's)."""
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            t0 = time.monotonic()
            self.measure_alone()
            self.alone_seconds_taken = time.monotonic() - t0
            self.b.start_daemon()
            if not self.cpu and shutil.which("nvidia-smi"):
                self.sampler = GpuSampler(os.path.join(self.b.out, "gpu_samples.csv"), list(range(self.b.gpus)))
            for launch in launches:
                try:
                    self.launch(*launch)
                except SystemExit as e:
                    if e.code == 143:
                        raise
                    log(f"{launch[:3]} failed: {e}")
                    self.results.setdefault("failed", []).append(f"{' '.join(map(str, launch[:3]))}: {e}"[:2000])
            self.measure_alone_again()
        finally:
            self.save()
            if self.sampler:
                self.sampler.close()
            if getattr(self.b, "daemon", None):
                self.b.close()
            sys.stdout.write(markdown([self.results]))
        if self.results.get("failed"):
            raise SystemExit(f"{len(self.results['failed'])} launch(es) failed")


def bundle_commit(bundle: str) -> str | None:
    """The commit `bundle` was built from (its COMMIT, written by scripts/bundle.sh), or None."""
    try:
        with open(os.path.join(bundle, "COMMIT")) as f:
            return f.read().strip() or None
    except OSError:
        return None


def git_commit(root: str = ROOT) -> str:
    """The commit the benchmark runs from, with "-dirty-" and the first 12 hex digits of the
    SHA-1 of `git diff HEAD` and of the untracked files (names and contents) when the tree differs
    from it: a device's copy of the tree may carry changes not committed yet (or a stale .git,
    under which files added since are untracked), and a result must say which code made it."""
    run = lambda *args: subprocess.run(["git", *args], cwd=root, capture_output=True).stdout
    commit = run("rev-parse", "HEAD").decode().strip()
    diff = run("diff", "HEAD")
    digest = hashlib.sha1(diff)
    untracked = [n for n in run("ls-files", "--others", "--exclude-standard", "-z").split(b"\0") if n]
    for name in sorted(untracked):
        digest.update(name + b"\0")
        path = os.path.join(root, name.decode(errors="replace"))
        if os.path.isfile(path):
            with open(path, "rb") as f:
                digest.update(f.read())
    dirty = bool(diff) or bool(untracked)
    return f"{commit}-dirty-{digest.hexdigest()[:12]}" if dirty else commit


def describe_device(cpu: bool) -> str:
    if cpu:
        return f"CPU dry run ({os.cpu_count()} cores)"
    try:
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        gpus = []
    return f"{len(gpus)} x {gpus[0]}" if gpus else "unknown GPUs (no nvidia-smi)"


def add_arms_arguments(p) -> None:
    """The options Arms reads."""
    p.add_argument("--arms", action="store_true",
                   help="three arms per row in one launch per configuration (bench/e2e_arms.py): no side "
                        "process, marks off, marks on; sides served one after another")
    p.add_argument("--noside-seconds", type=float, default=5,
                   help="--arms: the no-side arm before the first side and after each side's exit")
    p.add_argument("--measure-seconds", type=float, default=12,
                   help="--arms: the on and off arms, once the side has warmed up")
    p.add_argument("--warm-seconds", type=float, default=60,
                   help="--arms: at most this long for a side to warm up on every lane (a built-in task: 3 "
                        "steps; a program: 3 progress lines and the units it had done alone when its rate "
                        "settled: --warm-share)")
    p.add_argument("--warm-share", type=float, default=0.8,
                   help="--arms: a program's rate alone has settled once it keeps this share of its timed rate "
                        "for half a second; in bubbles it is warm once it has done the work it had done then")
    p.add_argument("--alone-warmup", type=float, default=4,
                   help="--arms: a program's first seconds of progress alone, left out of its rate")
    p.add_argument("--side-memory", default="16GiB", help="--arms: a program's --memory")
    p.add_argument("--alone-again", action=argparse.BooleanOptionalAction, default=True,
                   help="--arms: measure the alone rates again after the launches and value harvest at the "
                        "higher reading (the time is kept back from --budget-seconds)")
    p.add_argument("--budget-seconds", type=float, default=0,
                   help="--arms: skip the sides and launches that would not end within this many seconds of "
                        "the start (0: no budget), so that the rows done are written before a time limit")


def main() -> None:
    import argparse
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", nargs="+", required=True, metavar="JSON", help="result files to tabulate")
    a = p.parse_args()
    sys.stdout.write(markdown([json.load(open(path)) for path in a.table]))


if __name__ == "__main__":
    main()
