"""The rows of one or more bench/gate_gpu.py result files in one table, each valued at one rate
alone per program: the highest of every reading in the files.

    python3 bench/gate_rows.py bench/results/margin_ahead_h100/call*_7037698.json

Each run of gate_gpu.py reads its programs' rates alone for a few seconds before its rows (and
after them with --alone-again), and on one H100 those readings spread by a quarter from run to
run; a harvest valued at its own run's reading credits a run that happened to read low.  So rows
of different runs (another --daemon-args, another order) are compared here at the highest
reading any of them made, as the project's figures are: a program's work is worth what it does
alone at its best.  Each row's own figure is kept beside it.  Prints a Markdown table, and with
--json the rows as JSON."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_arms import TARGETS, format_interval, harvest_at, split_side  # noqa: E402
from gate_gpu import SAME_UNIT_AS  # noqa: E402


def unit_of(side: str) -> str:
    """The program whose unit `side` counts in: a variant's is its program's, and a program that
    counts another's unit (SAME_UNIT_AS, e.g. pagerank-short) is valued with that one."""
    base = split_side(side)[0]
    return SAME_UNIT_AS.get(base, base)


def load(path: str) -> dict:
    """A gate_gpu.json, or SystemExit saying what is wrong with it."""
    try:
        results = json.loads(Path(path).read_text())
    except OSError as e:
        raise SystemExit(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise SystemExit(f"{path}: not JSON ({e})")
    if not isinstance(results, dict) or not isinstance(results.get("rows"), list):
        raise SystemExit(f"{path}: no \"rows\": not a bench/gate_gpu.py result file")
    return results


def readings(files: list[dict]) -> dict[str, list[float]]:
    """Every rate alone the files read, by the program whose unit it counts (unit_of)."""
    found: dict[str, list[float]] = {}
    for results in files:
        for key in ("alone_rates", "alone_rates_after"):
            # A variant's entry repeats its program's one reading: count each once.
            once = {(unit_of(name), float(rate)) for name, rate in (results.get(key) or {}).items()
                    if isinstance(rate, (int, float)) and rate > 0}
            for base, rate in sorted(once):
                found.setdefault(base, []).append(rate)
    return found


# gate_gpu.py's own options, which end a --daemon-args value in a command line kept without its quotes.
BENCH_OPTIONS = set(re.findall(r'add_argument\("(--[a-z-]+)"', (Path(__file__).parent / "gate_gpu.py").read_text()))


def daemon_args(results: dict) -> str:
    """The run's --daemon-args ("" for the defaults): as recorded, or, in files written before
    gate_gpu.py recorded them, from its command line up to the bench's next option."""
    if "daemon_args" in results:
        return results["daemon_args"] or ""
    words = str(results.get("command", "")).split()
    for i, word in enumerate(words):
        if word == "--daemon-args" or word.startswith("--daemon-args="):
            taken = [word.partition("=")[2]] if "=" in word else []
            for later in words[i + 1:]:
                option = later.partition("=")[0]
                if option in BENCH_OPTIONS or option.replace("--no-", "--", 1) in BENCH_OPTIONS:
                    break
                taken.append(later)
            return " ".join(w for w in taken if w)
    return ""


def valued_rows(paths: list[str]) -> tuple[list[dict], dict[str, list[float]]]:
    """Each file's rows, in order, with `file`, `daemon_args`, `alone_rate_used_per_s` and
    `harvest_at_highest` (NaN where no file read that program's rate) added."""
    files = [load(p) for p in paths]
    seen = readings(files)
    rows = []
    for path, results in zip(paths, files):
        for row in results["rows"]:
            rate = max(seen.get(unit_of(row["program"]), [0.0]))
            harvest, _ = harvest_at(rate, row["units_on_by_lane"], row["bubble_s_on_by_lane"])
            rows.append(dict(row, file=Path(path).name, daemon_args=daemon_args(results),
                             alone_rate_used_per_s=rate, harvest_at_highest=harvest))
    return rows, seen


def summary(rows: list[dict]) -> list[str]:
    """The rows' figures against the issue's targets (e2e_arms.TARGETS), as the table's footnote:
    the mean of the rows' slowdowns (marks on against no side process) and the highest; the
    highest 95% upper bound, of each row the worse of the plain and the drift-adjusted one; the
    rows that miss either; the rows whose harvest at the highest reading meets the target; and
    the side's units in marks-off iterations.  Rows without a figure are left out of it."""
    def upper(row: dict) -> float:
        bounds = [row[k]["high"] for k in ("overhead_on_vs_no_side", "overhead_on_vs_no_side_drift_adjusted")
                  if isinstance(row.get(k), dict)]
        return max(bounds) if bounds else math.nan

    def name(row: dict) -> str:
        return f"{row['file']} {row['profile']} {row['program']}"

    measured = [r for r in rows if isinstance(r.get("overhead_on_vs_no_side"), dict)]
    lines = []
    if measured:
        means = [r["overhead_on_vs_no_side"]["pct"] for r in measured]
        highest = max(measured, key=lambda r: r["overhead_on_vs_no_side"]["pct"])
        top = max(measured, key=upper)
        missing = [f"{name(r)} ({r['overhead_on_vs_no_side']['pct']:+.2f}%, upper {upper(r):+.2f}%)" for r in measured
                   if r["overhead_on_vs_no_side"]["pct"] > TARGETS["overhead_mean_max_pct"]
                   or upper(r) > TARGETS["overhead_high_max_pct"]]
        lines.append(f"On vs no side over {len(measured)} rows: mean {sum(means) / len(means):+.2f}%, highest "
                     f"{highest['overhead_on_vs_no_side']['pct']:+.2f}% ({name(highest)}); highest 95% upper bound "
                     f"{upper(top):+.2f}% ({name(top)}; of each row the worse of plain and drift-adjusted).")
        lines.append(f"Over +{TARGETS['overhead_mean_max_pct']}% mean or +{TARGETS['overhead_high_max_pct']}% "
                     f"upper bound: {'; '.join(missing) if missing else 'none'}.")
    valued = [r for r in rows if not math.isnan(r["harvest_at_highest"])]
    meeting = [r for r in valued if r["harvest_at_highest"] >= TARGETS["harvest_min"]]
    lines.append(f"Harvest at the highest reading ≥ {TARGETS['harvest_min']}: {len(meeting)} of {len(valued)} rows.")
    off = [r["units_off_after_block_start"] for r in rows if isinstance(r.get("units_off_after_block_start"), (int, float))]
    if off:
        lines.append(f"Side units in marks-off iterations: {sum(off):g} over {len(off)} rows.")
    return lines


def markdown(rows: list[dict], seen: dict[str, list[float]]) -> str:
    out = ["Rates alone read (units/s), the highest used: " + "; ".join(
               f"{name} {', '.join(f'{r:g}' for r in rates)} → **{max(rates):g}**" for name, rates in seen.items()),
           "",
           "| file | daemon args | profile | program | units on | bubble s | harvest at its own reading "
           "| harvest at the highest | on vs no side | drift-adjusted | units off |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        out.append(f"| {row['file']} | {row['daemon_args'] or 'defaults'} | {row['profile']} | {row['program']} "
                   f"| {sum(row['units_on_by_lane']):g} | {sum(row['bubble_s_on_by_lane']):.3f} "
                   f"| {row['harvest']:.2f} | **{row['harvest_at_highest']:.2f}** "
                   f"| {format_interval(row.get('overhead_on_vs_no_side'))} "
                   f"| {format_interval(row.get('overhead_on_vs_no_side_drift_adjusted'))} "
                   f"| {row.get('units_off_after_block_start', '–')} |")
    return "\n".join(out + [""] + [f"- {line}" for line in summary(rows)]) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", help="gate_gpu.json files (gate_gpu.py --out DIR writes DIR/gate_gpu.json)")
    p.add_argument("--json", action="store_true", help="the rows as JSON, not a table")
    a = p.parse_args()
    rows, seen = valued_rows(a.files)
    if not rows:
        raise SystemExit(f"{', '.join(a.files)}: no rows (did the runs end before their first row?)")
    if a.json:
        print(json.dumps([{k: v for k, v in row.items() if k != "series"} for row in rows], indent=1))
    else:
        sys.stdout.write(markdown(rows, seen))


if __name__ == "__main__":
    main()
