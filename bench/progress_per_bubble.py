#!/usr/bin/env python3
"""How a side program's progress fell into the bubbles that its gate opened: per bubble, its
progress lines and when in the bubble each came.

    python3 bench/progress_per_bubble.py EVENTS.jsonl PROGRAM.stdout.log \\
        [--pattern 'generated (\\d+) tokens.* at ([\\d.]+)'] [--after LINE_REGEX] [--json]

EVENTS is the daemon's events.jsonl (its gate_bubble events: each bubble's begin on the
daemon's monotonic clock, with the Unix time of the event), PROGRAM.stdout.log the program's
output, whose progress lines carry their own Unix time (`--pattern`: the count, then the time;
bench/gate_gpu.py --keep-logs keeps both).  A line belongs to the bubble it was printed in or
within --slack-ms after it (a line is printed once the host has read the work back).

It found why an unmodified generate loop harvested 0.26-0.47 of long bubbles: its first batch
made one token step a bubble, 7-12 ms in, where later batches made three or four, 7 ms apart;
alone, that batch's steps took 42 ms each against 6 ms later (the program's own warm-up, which
bench/gate_gpu.py now leaves out of the arms: gate_gpu.is_warm).

--after LINE_REGEX marks each bubble with how many of the program's lines that match it were
printed before the bubble began (for generate_loop.py, 'batches': the batch the bubble served).
--lane K takes the bubbles of lane K; it is needed when the events hold more than one lane's.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys


def bubbles_from_events(path: str, lane: int | None = None) -> list[tuple[float, float]]:
    """Each gate_bubble event's (begin, end) in Unix seconds, in order, of lane `lane` (None: the
    events must hold one lane's only).  The event is written at the bubble's end (its ts_ns,
    which its unix_ns stamps), so its begin is that less begin_ns' distance from ts_ns."""
    out, lanes = [], set()
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not a JSON event ({e.msg})")
            if not isinstance(event, dict) or event.get("type") != "gate_bubble":
                continue
            try:
                end = int(event["unix_ns"]) / 1e9
                begin = end - (int(event["ts_ns"]) - int(event["begin_ns"])) / 1e9
                event_lane = int(event.get("lane", 0))
            except (KeyError, TypeError, ValueError, OverflowError):
                raise SystemExit(f"{path}:{n}: a gate_bubble event without whole unix_ns, ts_ns and begin_ns")
            lanes.add(event_lane)
            if lane is None or event_lane == lane:
                out.append((begin, end))
    if lane is None and len(lanes) > 1:
        raise SystemExit(f"{path}: bubbles of lanes {', '.join(map(str, sorted(lanes)))}: give --lane")
    return sorted(out)


def open_text(path: str):
    """`path` opened as text (bytes that are not UTF-8 replaced), or a clear exit."""
    try:
        return open(path, errors="replace")
    except OSError as e:
        raise SystemExit(f"{path}: {e.strerror}")


def progress_lines(path: str, pattern: str, after: str | None) -> tuple[list[tuple[float, float]], list[float]]:
    """The program's progress lines as (count, unix time), and the times of the lines that match
    `after` (their time is the last number on the line).  A line whose groups are not numbers
    is not a progress line."""
    progress, marks = [], []
    regex, after_regex = compile_regex(pattern, "--pattern"), compile_regex(after, "--after") if after else None
    number = re.compile(r"(\d+(?:\.\d+)?)\s*$")
    with open_text(path) as f:
        for line in f:
            m = regex.search(line)
            if m:
                try:
                    progress.append((float(m.group(1)), float(m.group(2))))
                except (TypeError, ValueError):
                    continue
            elif after_regex and after_regex.search(line) and number.search(line):
                marks.append(float(number.search(line).group(1)))
    return progress, marks


def compile_regex(pattern: str, option: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise SystemExit(f"{option} {pattern!r}: {e}")


def per_bubble(bubbles: list[tuple[float, float]], progress: list[tuple[int, float]], marks: list[float],
               slack_s: float) -> list[dict]:
    """Per bubble that saw progress: its begin, the offsets (ms) of the lines in it, and how many
    `marks` came before it.  Each line counts once, in the first bubble that holds it."""
    rows, i = [], 0
    times = sorted(t for _, t in progress)
    for begin, end in bubbles:
        while i < len(times) and times[i] < begin:
            i += 1
        offsets = []
        while i < len(times) and times[i] <= end + slack_s:
            offsets.append(round((times[i] - begin) * 1e3, 1))
            i += 1
        if offsets:
            rows.append({"begin": begin, "length_ms": round((end - begin) * 1e3, 1), "offsets_ms": offsets,
                         "after": sum(1 for t in marks if t < begin)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("events")
    p.add_argument("stdout")
    p.add_argument("--pattern", default=r"generated (\d+) tokens.* at ([\d.]+)",
                   help="a progress line: the count, then its Unix time")
    p.add_argument("--after", default=None, help="count the lines matching this before each bubble")
    p.add_argument("--slack-ms", type=float, default=2.0, help="a line this long after a bubble's end is its")
    p.add_argument("--lane", type=int, default=None, help="the lane whose bubbles to take")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if compile_regex(a.pattern, "--pattern").groups < 2:
        raise SystemExit(f"--pattern {a.pattern!r}: give two groups, the count and the Unix time")
    if not 0 <= a.slack_ms < 1e6:
        raise SystemExit(f"--slack-ms {a.slack_ms}: give milliseconds from 0")
    bubbles = bubbles_from_events(a.events, a.lane)
    if not bubbles:
        raise SystemExit(f"{a.events}: no gate_bubble events{'' if a.lane is None else f' of lane {a.lane}'} "
                         "(a daemon whose lane has a GPU gate writes them)")
    progress, marks = progress_lines(a.stdout, a.pattern, a.after)
    if not progress:
        raise SystemExit(f"{a.stdout}: no line matches --pattern {a.pattern!r}")
    rows = per_bubble(bubbles, progress, marks, a.slack_ms / 1e3)
    if not rows:
        raise SystemExit(f"none of {a.stdout}'s {len(progress)} progress lines falls in one of the "
                         f"{len(bubbles)} bubbles: are they of the same run (and lane)?")
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    for row in rows:
        after = f" after {row['after']} marks" if a.after else ""
        print(f"bubble of {row['length_ms']:.1f} ms{after}: {len(row['offsets_ms'])} lines at "
              f"{', '.join(f'{o:.1f}' for o in row['offsets_ms'])} ms")
    counts = [len(r["offsets_ms"]) for r in rows]
    print(f"{len(rows)} bubbles with progress of {len(bubbles)}; lines a bubble: median "
          f"{statistics.median(counts):g}, max {max(counts, default=0)}")


if __name__ == "__main__":
    main()
