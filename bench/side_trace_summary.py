#!/usr/bin/env python3
"""Where a side program's bubble time goes, from its GPU trace (bench/side_trace/sitecustomize.py).

    python3 bench/side_trace_summary.py TRACE.json [...] [--burst-gap-us 800]

The program's kernels, copies and fills, in time order, fall into bursts: runs with no idle gap
longer than --burst-gap-us, which under the gate are its bubbles (the stage's busy time is the gap
between them).  For each trace it prints the bursts' spans (first start to last end), the share of
the spans the GPU ran the program's work, and the idle time inside the spans by its cause:
- "host late": the next piece's launch call began only after the GPU had finished all it had been
  given: the GPU waited on the program's host thread;
- "queued": the next piece had been launched before, yet started later: the GPU's own time
  between pieces (the gate's waits and fences, the launch path, MPS);
- "unmatched": the next piece has no launch call in the trace to judge by.
Under the gate a hold on the host falls on either side, by where the profiler stamps the launch:
a runtime call (PyTorch's own kernels) is stamped before the interposer's hold, so the hold reads
as "queued"; a driver call (Triton's cuLaunchKernel) after it, so it reads as "host late".  Alone,
nothing is held.  It also gives the pieces' lengths and how long after its launch call each
started.  Pure reading; no GPU.
"""
import argparse
import json
import statistics
import sys

WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def pieces_of(trace: dict) -> list[tuple[float, float, float | None]]:
    """(start us, end us, launch call's start us or None) of each GPU piece, by start."""
    events = trace if isinstance(trace, list) else trace.get("traceEvents", [])
    launches = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launches[corr] = float(e["ts"])
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in WORK:
            start = float(e["ts"])
            corr = (e.get("args") or {}).get("correlation")
            out.append((start, start + float(e.get("dur", 0)), launches.get(corr)))
    return sorted(out)


def summarize(pieces: list[tuple[float, float, float | None]], burst_gap_us: float = 800.0) -> dict:
    """The bursts of `pieces` (as pieces_of gives them) and their idle time by cause."""
    bursts = []  # [first start, last end, busy us, host-late idle us, queued idle us, unmatched idle us]
    end = None
    for start, stop, launched in pieces:
        if end is None or start - end > burst_gap_us:
            bursts.append([start, stop, stop - start, 0.0, 0.0, 0.0])
            end = stop
            continue
        b = bursts[-1]
        if start > end:  # idle since the GPU finished what it had
            idle = start - end
            if launched is None:
                b[5] += idle
            elif launched > end:
                late = min(idle, launched - end)
                b[3] += late
                b[4] += idle - late
            else:
                b[4] += idle
            b[2] += stop - start
        else:  # overlapping the work before it (another stream): only what it adds
            b[2] += max(0.0, stop - end)
        end = max(end, stop)
        b[1] = end
    spans = [b[1] - b[0] for b in bursts]
    total = sum(spans)
    share = lambda i: sum(b[i] for b in bursts) / total if total else None
    lengths = sorted(stop - start for start, stop, _ in pieces)
    leads = sorted(start - launched for start, _, launched in pieces if launched is not None)
    quantile = lambda xs, q: xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None
    return {"pieces": len(pieces), "bursts": len(bursts),
            "span_us_median": statistics.median(spans) if spans else None,
            "span_us_p10_p90": [quantile(sorted(spans), 0.1), quantile(sorted(spans), 0.9)],
            "busy_share_of_spans": share(2), "host_late_share_of_spans": share(3),
            "queued_share_of_spans": share(4), "unmatched_share_of_spans": share(5),
            "piece_us_median_mean_p95": [quantile(lengths, 0.5), statistics.mean(lengths) if lengths else None,
                                         quantile(lengths, 0.95)],
            "launch_to_start_us_median": quantile(leads, 0.5)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--burst-gap-us", type=float, default=800.0)
    a = p.parse_args()
    if a.burst_gap_us <= 0:
        raise SystemExit(f"--burst-gap-us {a.burst_gap_us}: give a positive gap")
    for path in a.traces:
        try:
            with open(path) as f:
                trace = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"{path}: not a Chrome trace ({e})") from None
        print(json.dumps({"trace": path, **summarize(pieces_of(trace), a.burst_gap_us)}))


if __name__ == "__main__":
    sys.exit(main())
