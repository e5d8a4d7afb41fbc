#!/usr/bin/env python3
"""Faults on GPUs, measured against the 1.3B GPT pipeline of bench/e2e_gpu.py.

1. overrun: a side task with a heavy tail (1 ms steps, every 20th 40 ms) on
   every GPU, under the default overrun budget: it should be demoted, then
   killed, and the training should not slow down.  FreeRide's marks alternate
   on and off every 5 iterations, so the off iterations are the baseline.
2. unprotected: the same with the budget switched off (--overrun-budget 0
   --hang-timeout 0), to show what the budget saves.
3. memory: a task that declares 512 MiB and allocates 4 GiB: it must fail by
   itself (the SDK's allocator cap / MPS pinned limit) while training runs.
4. daemon kill: SIGKILL the daemon in the middle of a training run; the
   trainer must go on at full speed, and a restarted daemon recovers its tasks.

    python3 bench/reliability_gpu.py --bundle bundle --out $OUT/rel
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_gpu import PY, TASKS, Bench, add_bench_arguments, log  # noqa: E402

MEMHOG = [PY, "-m", "freeride.tasks.misbehave", "--device", "cuda", "--alloc-mib", "4096"]


def split(result: dict) -> tuple[float, float, int, int]:
    """Mean iteration ms with FreeRide's marks on and off, after warm-up."""
    w = result["warmup"]
    on = [t for t, f in zip(result["iter_ms"][w:], result["freeride_on"][w:]) if f]
    off = [t for t, f in zip(result["iter_ms"][w:], result["freeride_on"][w:]) if not f]
    return (statistics.mean(on) if on else float("nan"), statistics.mean(off) if off else float("nan"),
            len(on), len(off))


def task_states(bench: Bench, ids: list[int]) -> list[dict]:
    tasks = bench.status()["tasks"].get("tasks", [])
    return [{"id": int(t["id"]), "state": t["state"], "message": t.get("message", ""),
             "steps": int(t.get("steps", 0))} for t in tasks if int(t["id"]) in ids]


def budget_events(bench: Bench) -> list[dict]:
    out = []
    with open(os.path.join(bench.state, "events.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "overrun_budget":
                out.append({k: e[k] for k in ("task_id", "lane", "verdict", "reason")})
    return out


def overrun_ms(bench: Bench) -> float:
    total = 0
    with open(os.path.join(bench.state, "events.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "bubble":
                total += e["overrun_ns"]
    return total / 1e6


def bad_task_row(bench: Bench, name: str, daemon_args: list[str]) -> dict:
    bench.start_daemon(daemon_args)
    ids = bench.submit(["misbehave"] * bench.gpus)
    result = bench.train("1f1b", 4, "on", name)
    on, off, n_on, n_off = split(result)
    # The budget acts after some bubbles: the last third of the marks-on
    # iterations shows the training once it has.
    w = result["warmup"]
    on_list = [t for t, f in zip(result["iter_ms"][w:], result["freeride_on"][w:]) if f]
    late = on_list[2 * len(on_list) // 3:]
    late_on = statistics.mean(late) if late else float("nan")
    row = {"case": name, "daemon_args": daemon_args, "iter_ms_freeride": on, "iter_ms_baseline": off,
           "overhead_pct": 100 * (on / off - 1), "overhead_last_third_pct": 100 * (late_on / off - 1),
           "iterations": [n_off, n_on], "overrun_ms": overrun_ms(bench),
           "tasks": task_states(bench, ids), "budget_events": budget_events(bench)}
    log(f"ROW {name}: baseline {off:.1f} ms, with the bad task {on:.1f} ms ({row['overhead_pct']:+.2f}%; "
        f"last third {row['overhead_last_third_pct']:+.2f}%), "
        f"overrun {row['overrun_ms']:.0f} ms, tasks {[t['state'] for t in row['tasks']]}")
    bench.close()
    return row


def memory_row(bench: Bench) -> dict:
    bench.start_daemon()
    reply = json.loads(bench.cli("submit", "--json", "--lane", "0", "--name", "memhog", "--memory", "512MiB",
                                 "--", *MEMHOG))
    tid = int(reply["id"])
    result = bench.train("1f1b", 4, "on", "memory")
    on, off, n_on, n_off = split(result)
    state = task_states(bench, [tid])
    stderr = ""
    path = os.path.join(bench.state, "tasks", str(tid), "stderr.log")
    if os.path.exists(path):
        text = open(path).read()
        # The first error line says what happened; the tail is CUDA's advice.
        lines = [x for x in text.splitlines() if "Error" in x or "error" in x]
        stderr = (lines[0] if lines else "")[:400] + " ... " + text[-200:]
    row = {"case": "memory", "iter_ms_freeride": on, "iter_ms_baseline": off,
           "overhead_pct": 100 * (on / off - 1), "task": state, "stderr_tail": stderr,
           "training_finished": True}
    log(f"ROW memory: task {state}, training {on:.1f} vs {off:.1f} ms")
    bench.close()
    return row


def daemon_kill_row(bench: Bench) -> dict:
    bench.start_daemon()
    ids = bench.submit(["pagerank"] * bench.gpus)
    killed_at = {}

    def kill_later():
        # Into the timed iterations: after the lanes have served ~25 iterations' bubbles.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                lanes = bench.status()["stats"]["lanes"]
                if sum(int(l.get("bubbles", 0)) for l in lanes) >= 25 * 18:
                    break
            except Exception:
                pass
            time.sleep(0.2)
        killed_at["t"] = time.monotonic()
        bench.daemon.send_signal(signal.SIGKILL)
        bench.daemon.wait()

    started = time.monotonic()
    killer = threading.Thread(target=kill_later)
    killer.start()
    result = bench.train("1f1b", 4, "on", "daemon-kill")
    killer.join()
    # Iteration end times from the start of training: the per-iteration ms
    # are cumulative; the launch's own start-up is before the first.
    w = result["warmup"]
    times = result["iter_ms"]
    ends, t = [], 0.0
    for ms in times:
        t += ms / 1e3
        ends.append(t)
    kill_offset = killed_at["t"] - started - (result["wall_s"] - ends[-1]) if killed_at else None
    before = [ms for ms, e, f in zip(times[w:], ends[w:], result["freeride_on"][w:])
              if kill_offset is not None and e < kill_offset and f]
    after = [ms for ms, e, f in zip(times[w:], ends[w:], result["freeride_on"][w:])
             if kill_offset is not None and e > kill_offset + 1 and f]
    off = [ms for ms, f in zip(times[w:], result["freeride_on"][w:]) if not f]
    # Restart: the journal brings the tasks back, relaunched from checkpoints.
    bench.start_daemon(fresh=False)
    time.sleep(8)
    recovered = task_states(bench, ids)
    row = {"case": "daemon-kill", "iter_ms_marks_on_before_kill": statistics.mean(before) if before else None,
           "iter_ms_marks_on_after_kill": statistics.mean(after) if after else None,
           "iter_ms_marks_off": statistics.mean(off) if off else None,
           "iterations": [len(before), len(after), len(off)], "recovered_tasks": recovered}
    log(f"ROW daemon-kill: before {row['iter_ms_marks_on_before_kill']}, after "
        f"{row['iter_ms_marks_on_after_kill']}, marks off {row['iter_ms_marks_off']}, "
        f"recovered {[t['state'] for t in recovered]}")
    bench.close()
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bench_arguments(p, work="/tmp/freeride-rel", gpus=4, preset="1.3b")
    p.set_defaults(steps=124, alone_seconds=3)
    p.add_argument("--cases", default="overrun,unprotected,memory,daemon-kill")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    bench = Bench(a)
    rows = []
    cases = a.cases.split(",")
    if {"overrun", "unprotected"} & set(cases):
        bench.profile_alone(["misbehave"])
    if "daemon-kill" in cases:
        bench.profile_alone(["pagerank"])
    for case in cases:
        log(f"== {case}")
        try:
            if case == "overrun":
                rows.append(bad_task_row(bench, "overrun", []))
            elif case == "unprotected":
                rows.append(bad_task_row(bench, "unprotected", ["--overrun-budget", "0", "--hang-timeout", "0"]))
            elif case == "memory":
                rows.append(memory_row(bench))
            elif case == "daemon-kill":
                rows.append(daemon_kill_row(bench))
        except (SystemExit, Exception) as e:  # one failed case must not lose the others
            log(f"case {case} failed: {e}")
            rows.append({"case": case, "error": str(e)})
            try:
                bench.close()
            except Exception:
                pass
        with open(os.path.join(a.out, "reliability_gpu.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
