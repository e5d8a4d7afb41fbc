"""Per lane, from a daemon's event log: bubbles closed by a mark, their time
(all and those over 5 ms), the forecast against the actual length, the time
harvested and overrun, the unused tail after the last step, and how many
bubbles got any step.

    python3 bench/analyze_bubbles.py STATE_DIR/events.jsonl
"""
import json, sys, statistics, collections
path = sys.argv[1]
per_slot = "--slots" in sys.argv[2:]
bubbles = []; steps = collections.defaultdict(list)
for line in open(path):
    try: e = json.loads(line)
    except Exception: continue
    if e.get("type") == "bubble" and e.get("ended_by") == "mark": bubbles.append(e)
    elif e.get("type") == "step": steps[(e["lane"], e["bubble_seq"])].append(e)
by_lane = collections.defaultdict(list)
for b in bubbles: by_lane[b["lane"]].append(b)
for lane, bs in sorted(by_lane.items()):
    length = [b["end_ns"] - b["begin_ns"] for b in bs]
    ratio = [(b["predicted_end_ns"] - b["begin_ns"]) / max(1, b["end_ns"] - b["begin_ns"]) for b in bs]
    used = sum(b["harvested_ns"] for b in bs); over = sum(b["overrun_ns"] for b in bs)
    tails = []
    for b in bs:
        ss = steps.get((lane, b["seq"]))
        if ss: tails.append(b["end_ns"] - max(s["end_ns"] for s in ss))
    big = [b for b in bs if b["end_ns"] - b["begin_ns"] > 5e6]
    bigratio = [(b["predicted_end_ns"] - b["begin_ns"]) / (b["end_ns"] - b["begin_ns"]) for b in big]
    print(f"lane {lane}: {len(bs)} bubbles, {sum(length)/1e9:.2f} s, >5ms: {len(big)} ({sum(b['end_ns']-b['begin_ns'] for b in big)/1e9:.2f} s), "
          f"forecast/actual median {statistics.median(ratio):.3f} (>5ms: {statistics.median(bigratio) if bigratio else 0:.3f}), "
          f"harvested {used/1e9:.2f} s ({100*used/max(1,sum(length)):.1f}%), overrun {over/1e6:.1f} ms, "
          f"median unused tail {statistics.median(tails)/1e6 if tails else 0:.2f} ms, bubbles with steps {len(tails)}")
if per_slot:
    by_slot = collections.defaultdict(list)
    for b in bubbles: by_slot[(b["lane"], b["slot"])].append(b)
    for (lane, slot), bs in sorted(by_slot.items()):
        ms = sorted((b["end_ns"] - b["begin_ns"]) / 1e6 for b in bs)
        big = [b for b in bs if b["end_ns"] - b["begin_ns"] > 5e6]
        if not big: continue
        skipped = [b for b in big if not steps.get((lane, b["seq"]))]
        forecasts = sorted(round((b["predicted_end_ns"] - b["begin_ns"]) / 1e6, 2) for b in skipped)
        print(f"  lane {lane} slot {slot}: {len(bs)} bubbles, ms min {ms[0]:.3f} p10 {ms[len(ms)//10]:.3f} "
              f"median {ms[len(ms)//2]:.2f} max {ms[-1]:.2f}; >5ms {len(big)}, of them without a step "
              f"{len(skipped)}, their forecasts (ms) {forecasts[:10]}")
