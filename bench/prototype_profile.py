#!/usr/bin/env python3
"""The FreeRide prototype's way of finding bubbles, for comparison with
`freeride profile`: json.load the whole trace, keep the compute stream's GPU
events, merge their intervals, and take the gaps inside each ProfilerStep.

Usage: prototype_profile.py TRACE [--repeat N]   (prints seconds per run)
"""
import gzip
import json
import sys
import time


def analyse(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    gpu = [e for e in events
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and e.get("args", {}).get("stream") == 7
           and not e.get("name", "").startswith("nccl")]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in gpu)
    merged = []
    for s, t in spans:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], t)
        else:
            merged.append([s, t])
    steps = [e for e in events
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep")]
    result = []
    for step in steps:
        a, b = step["ts"], step["ts"] + step["dur"]
        busy, gaps, prev = 0.0, [], a
        for s, t in merged:
            s, t = max(s, a), min(t, b)
            if t <= s:
                continue
            busy += t - s
            if s - prev >= 1000:
                gaps.append((prev - a, s - prev))
            prev = t
        if b - prev >= 1000:
            gaps.append((prev - a, b - prev))
        result.append((step["name"], 1 - busy / (b - a), gaps))
    peak = max((e["args"].get("Total Reserved", 0) for e in events
                if e.get("name") == "[memory]"), default=0)
    return result, peak


def main():
    path = sys.argv[1]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result, _ = analyse(path)
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"{times[len(times) // 2]:.6f}")
    if "--show" in sys.argv:
        for name, idle, gaps in result:
            print(name, f"idle {idle:.3f}", [(round(o / 1000, 1), round(g / 1000, 1)) for o, g in gaps])


if __name__ == "__main__":
    main()
