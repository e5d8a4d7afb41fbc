#!/usr/bin/env python3
"""How much of the trainer's slowdown with side work goes with a lower SM clock, over every row
committed under bench/results: a least-squares line through (SM clock on vs off, slowdown on vs
off) per side program, from the JSON rows of bench/gate_gpu.py and bench/e2e_gpu.py --arms.

    python3 bench/overhead_vs_clock.py [RESULTS_DIR] [--json]

A GPU at its power limit lowers its clock when side work raises its mean power; the slowdown a
lower clock explains is the line's slope times the clock change, and its intercept (the
slowdown at an unchanged clock) is what remains: late work, cache and memory traffic, the
host.  Rows differ in commit, profile and configuration: the line is a lead, not a result.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys


def clock_change_pct(samples: dict) -> float | None:
    """The SM clock in the marks-on arm against the marks-off arm, in percent, from a row's
    gpu_samples (one GPU: arm -> figures) or gpu_samples_by_gpu (GPU -> arm -> figures)."""
    try:
        if "on" in samples:
            on, off = samples["on"]["sm_mhz"], samples["off"]["sm_mhz"]
        else:
            gpus = list(samples.values()) if isinstance(samples, dict) else list(samples)
            on = sum(g["on"]["sm_mhz"] for g in gpus) / len(gpus)
            off = sum(g["off"]["sm_mhz"] for g in gpus) / len(gpus)
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    return 100 * (on / off - 1) if on and off else None


def rows(results_dir: str) -> list[dict]:
    """(file, program, clock change %, slowdown on vs off %) of every row that has both."""
    out = []
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            continue
        for row in data["rows"]:
            if not isinstance(row, dict):
                continue
            slowdown = row.get("overhead_on_vs_off")
            samples = row.get("gpu_samples") or row.get("gpu_samples_by_gpu")
            clock = clock_change_pct(samples) if samples else None
            if not isinstance(slowdown, dict) or clock is None or slowdown.get("pct") is None:
                continue
            out.append({"file": os.path.basename(path), "program": row.get("program", row.get("side", "")),
                        "clock_pct": clock, "slowdown_pct": float(slowdown["pct"])})
    return out


def fit(points: list[tuple[float, float]]) -> dict | None:
    """The least-squares line y = slope x + intercept, and Pearson's r; None under 3 points or
    with no spread in x."""
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    return {"rows": len(points), "mean_clock_pct": mx, "mean_slowdown_pct": my, "slope": slope,
            "intercept_pct": my - slope * mx, "r": sxy / (sxx * syy) ** 0.5 if syy else 0.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if not os.path.isdir(a.results):
        raise SystemExit(f"{a.results}: no such directory")
    found = rows(a.results)
    if not found:
        raise SystemExit(f"{a.results}: no row with both an on-vs-off slowdown and SM clock samples")
    by_program: dict[str, list[tuple[float, float]]] = {}
    for r in found:
        by_program.setdefault(r["program"].split("+")[0], []).append((r["clock_pct"], r["slowdown_pct"]))
    fits = {name: fit(points) for name, points in sorted(by_program.items())}
    if a.json:
        json.dump({"rows": found, "fits": fits}, sys.stdout, indent=1)
        print()
        return
    print(f"{len(found)} rows with an on-vs-off slowdown and SM clock samples, in {a.results}")
    print(f"{'program':<16} {'rows':>5} {'mean slowdown':>14} {'mean clock':>11} {'r':>6} {'slope':>7} "
          f"{'at an unchanged clock':>22}")
    for name, f in fits.items():
        if f:
            print(f"{name:<16} {f['rows']:>5} {f['mean_slowdown_pct']:>+13.2f}% {f['mean_clock_pct']:>+10.2f}% "
                  f"{f['r']:>6.2f} {f['slope']:>7.2f} {f['intercept_pct']:>+21.2f}%")


if __name__ == "__main__":
    main()
