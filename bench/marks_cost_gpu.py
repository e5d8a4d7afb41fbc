"""What the stream-ordered bubble marks cost a trainer, part by part, on one GPU with no side
process: the question megatron-core's +1% "marks alone" left open (bench/results/
megatron_marks_4gpu.md).

A stand-in stage runs iterations of --exchanges exchanges: --compute-ms of matrix products, then
a wait marked by freeride._marks.BubbleMarks.around(), the way every framework integration marks
one.  The wait is either megatron-core's (--pattern sync: torch.cuda.synchronize(), as its
batched p2p does after every exchange) or torch's (--pattern stream: the compute stream waits on
an event of a second stream, with no host synchronisation).  One launch alternates blocks of
--block iterations over these variants, in an order rotated each round, so that drift
cancels:

  off        marks paused (the baseline)
  on         the marks as shipped: the gate opened and closed on the compute stream, the begin
             and end marks read from the gate word by libfreeride's thread (gated marks); a gate
             write for a compute stream with no work left is stored from the host at once (every
             other variant but on-memset makes each gate write a stream write)
  on-stream-writes  as on, with every gate write a stream memory write (FREERIDE_GATE_WRITES=stream,
             as before the host writes)
  on-memset  as on, with a 4-byte memset (a kernel, no memory barrier) where on makes a stream
             memory write (FREERIDE_GATE_WRITES=memset, an experiment)
  hostfn     as shipped before the gated marks (and still where there is no gate): the gate's
             stream writes, and the begin and end marks as host functions on the mark stream
  no-hostfn  as hostfn, but the begin and end marks written from the host at once (no host
             function for a synchronisation to wait for; the event and the mark stream's wait
             on it remain; the times are wrong, which costs nothing here: no side task runs,
             though with --pattern stream the daemon may count forced closes)
  no-gate    as hostfn, without the gate's stream writes
  host-only  only host marks: no stream work at all, the Python and shared-memory cost alone
  writes-only  the gate's stream writes alone: no marks reach the daemon (no event, no mark
             stream, no host marks)
  close-only   as writes-only with the close alone (no open write): writes-only less this is
             what the open's write costs, the one a synchronising wait waits for
  open-only    as writes-only with the open alone (no close write)
  python-only  BubbleMarks.around's Python alone: every call into libfreeride is a no-op
             (so host-only less this is the library's calls and what the daemon does with
             the marks)

Each variant's iteration time against off: mean, Welch 95% interval; and the host's time in
BubbleMarks.around before the wait and after it, per marked wait (after a synchronising wait, the
host's time is on the critical path: the GPU has nothing queued until the next launch).  A daemon (GPU lane 0, gate
on, MPS) serves the marks, as bench/gate_gpu.py starts it; the stage joins MPS at priority 0.

    python3 bench/marks_cost_gpu.py --bundle bundle --out $OUT               # about 60 s
    python3 bench/marks_cost_gpu.py --bundle bundle --out $OUT --pattern stream

--device cpu runs the same loop on CPU lanes' host marks (a dry run of the harness; CPU has no
stream marks, so the variants differ in name only).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_arms import git_commit  # noqa: E402
from gate_gpu import Bench, diff_ci, log, mean_ci  # noqa: E402

VARIANTS = ["off", "on", "on-stream-writes", "on-memset", "hostfn", "no-hostfn", "no-gate", "host-only", "writes-only", "close-only", "open-only", "python-only"]


def stage(a) -> None:
    """The stand-in stage: runs the variants in alternating blocks and writes their times."""
    import torch
    from freeride._marks import BubbleMarks

    cuda = a.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    marks = BubbleMarks(0, os.environ.get("FREERIDE_SOCKET"), device if cuda else None)
    deadline = time.monotonic() + 60  # a hang guard: the lane is looked for at most once a second
    while not marks.attached and time.monotonic() < deadline:
        time.sleep(0.05)
    stage_api = marks.stage
    shipped = (stage_api.begin_on_stream, stage_api.end_on_stream, stage_api.gate_open_on_stream,
               stage_api.gate_close_on_stream, stage_api.begin_gated)
    shipped_host = (stage_api.begin, stage_api.end)
    shipped_mark_point = marks._mark_point

    # The marks each variant actually handed to libfreeride, by kind (gated, stream, host), so
    # that a variant that marks nothing, or marks another way than it says, is seen: BubbleMarks'
    # gated-only rule once silenced three variants, and a gated mark the driver refuses falls
    # back to host functions.
    made = {v: {kind: 0 for kind in MARK_KINDS} for v in VARIANTS}
    current = [VARIANTS[0]]

    def counted(fn, kind, succeeded=lambda result: True):
        def call(*args, **kwargs):
            result = fn(*args, **kwargs)
            if succeeded(result):
                made[current[0]][kind] += 1
            return result
        return call

    shipped = (counted(shipped[0], "stream"), shipped[1], shipped[2], shipped[3], counted(shipped[4], "gated", bool))
    shipped_host = (counted(shipped_host[0], "host"), shipped_host[1])
    variants = a.variants.split(",")

    def set_variant(name: str) -> None:
        current[0] = name
        begin_on, end_on, gate_open, gate_close, begin_gated = shipped
        if name not in ("on", "on-stream-writes", "on-memset"):
            begin_gated = lambda stream, slot, predicted_ns=0, free=None: False  # noqa: E731
        stage_api.begin_gated = begin_gated
        # Only on writes from the host where it can; the variants that stand for the marks as
        # they were (and writes-only, the gate's stream writes alone) keep every write a stream write.
        stage_api.set_gate_writes({"on": "auto", "on-memset": "memset"}.get(name, "stream"))
        # BubbleMarks makes no other kind once it made a gated mark (a stage must not mix them:
        # the kinds could overtake each other); here the variants take turns on purpose, after
        # each block's marks are done (the iteration synchronises the device).
        marks._gated = False
        marks.resume()
        if name == "off":
            marks.pause()
        if name in ("no-hostfn", "host-only"):
            begin_on = lambda stream, slot, predicted_ns=0, free=None: (stage_api.begin(slot, predicted_ns, free), True)[1]  # noqa: E731
            end_on = lambda stream: (stage_api.end(), True)[1]  # noqa: E731
        if name in ("no-gate", "host-only", "python-only"):
            gate_open = gate_close = lambda stream: False  # noqa: E731
        if name in ("writes-only", "close-only", "open-only", "python-only"):
            begin_on = lambda stream, slot, predicted_ns=0, free=None: True  # noqa: E731
            end_on = lambda stream: True  # noqa: E731
        if name == "close-only":
            gate_open = lambda stream: True  # noqa: E731  (reads as opened, so the close follows)
        if name == "open-only":
            gate_close = lambda stream: True  # noqa: E731
        marks._mark_point = (lambda: 0) if name in ("writes-only", "close-only", "open-only") else shipped_mark_point
        stage_api.begin, stage_api.end = ((lambda slot, predicted_ns=0, free=None: None, lambda: None)
                                          if name == "python-only" else shipped_host)
        if name in ("host-only", "python-only"):
            marks._cuda = False
        elif cuda:
            marks._cuda = True
        stage_api.begin_on_stream, stage_api.end_on_stream = begin_on, end_on
        stage_api.gate_open_on_stream, stage_api.gate_close_on_stream = gate_open, gate_close

    n = 4096 if cuda else 256  # on a GPU, long enough that the launches run ahead
    x = torch.randn(n, n, device=device, dtype=torch.bfloat16 if cuda else torch.float32)
    other = torch.cuda.Stream(device) if cuda else None

    def products(count: int) -> None:
        y = x
        for _ in range(count):
            y = x @ y
            y = y / y.norm()

    # The host's time in around() before the wait begins and after it returns, per variant.
    wait_span = [0, 0]

    def wait() -> None:
        wait_span[0] = time.perf_counter_ns()
        try:
            timed_wait()
        finally:
            wait_span[1] = time.perf_counter_ns()

    def timed_wait() -> None:
        if not cuda:
            return
        if a.pattern == "sync":
            torch.cuda.synchronize(device)
        else:
            event = torch.cuda.Event()
            with torch.cuda.stream(other):
                products(1)
                event.record(other)
            torch.cuda.current_stream(device).wait_event(event)

    # How many products make --compute-ms, timed once before the blocks.
    products(10)
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    products(50)
    if cuda:
        torch.cuda.synchronize(device)
    per_product_ms = (time.perf_counter() - start) * 1e3 / 50
    count = max(1, round(a.compute_ms / per_product_ms))

    times: dict[str, list[float]] = {v: [] for v in variants}
    cpu_ns = {v: 0 for v in variants}   # the marks thread's CPU time in each variant's blocks
    wall_ns = {v: 0 for v in variants}  # and those blocks' wall time
    # The gate's writes in each variant's blocks: [on a stream, from the host].
    gate_writes = {v: [0, 0] for v in variants}
    host_ns = {v: [0, 0, 0] for v in variants}  # before the wait, after it, marked waits (kept rounds)
    for round_index in range(a.rounds + 1):  # the first round warms up and is not kept
        for k in range(len(variants)):
            variant = variants[(k + round_index) % len(variants)]
            set_variant(variant)
            block_start, block_cpu = time.monotonic_ns(), marks_thread_cpu_ns()
            writes_before = stage_api.gate_writes()
            for _ in range(a.block):
                marks.start_iteration()
                if cuda:
                    torch.cuda.synchronize(device)
                t0 = time.perf_counter()
                for _ in range(a.exchanges):
                    products(count)
                    entered = time.perf_counter_ns()
                    marks.around(wait)
                    left = time.perf_counter_ns()
                    if round_index:
                        spent = host_ns[variant]
                        spent[0] += wait_span[0] - entered
                        spent[1] += left - wait_span[1]
                        spent[2] += 1
                if cuda:
                    torch.cuda.synchronize(device)
                marks.end_iteration()
                if round_index:
                    times[variant].append((time.perf_counter() - t0) * 1e3)
            cpu_ns[variant] += marks_thread_cpu_ns() - block_cpu
            writes_after = stage_api.gate_writes()
            for i in range(2):
                gate_writes[variant][i] += writes_after[i] - writes_before[i]
            wall_ns[variant] += time.monotonic_ns() - block_start
    made_per_variant = {v: dict(made[v]) for v in variants}
    set_variant("on")
    attached = marks.attached
    marks.close()
    with open(a.stage_out, "w") as f:
        json.dump({"times_ms": times, "products_per_exchange": count, "per_product_ms": per_product_ms,
                   "attached": attached, "marks_made": made_per_variant, "variants": variants,
                   "gate_writes": gate_writes,
                   "host_us_before_wait": {v: host_ns[v][0] / host_ns[v][2] / 1e3 if host_ns[v][2] else 0.0
                                           for v in variants},
                   "host_us_after_wait": {v: host_ns[v][1] / host_ns[v][2] / 1e3 if host_ns[v][2] else 0.0
                                          for v in variants},
                   "marks_thread_core_share": {v: cpu_ns[v] / wall_ns[v] if wall_ns[v] else 0.0 for v in variants}},
                  f)


def marks_thread_cpu_ns() -> int:
    """The CPU time, in nanoseconds, of libfreeride's gate-marks thread in this process (found by
    its name in /proc; its schedstat counts nanoseconds, where stat counts clock ticks); 0 before
    it starts."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "freeride-marks":
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


MARK_KINDS = ("gated", "stream", "host")


def expected_kind(variant: str, device: str) -> str | None:
    """How `variant` hands each marked wait to libfreeride (None: it hands none).  On CPU lanes
    every marking variant marks from the host."""
    if variant in ("off", "python-only"):
        return None
    if device != "cuda":
        return "host"
    return {"on": "gated", "on-stream-writes": "gated", "on-memset": "gated", "hostfn": "stream",
            "no-gate": "stream", "no-hostfn": "host", "host-only": "host", "writes-only": None,
            "close-only": None, "open-only": None}[variant]


def expected_gate_writes(variant: str, device: str, waits: int) -> tuple[int | None, int | None]:
    """The gate writes `variant` makes over `waits` marked waits: (on a stream, from the host), None
    where the split is the stream's to decide (on and on-memset store from the host where the stream is
    done; their total is still two a wait).  A CPU lane has no gate."""
    if device != "cuda" or variant in ("off", "no-gate", "host-only", "python-only"):
        return 0, 0
    if variant in ("on", "on-memset"):
        return None, None
    return (waits if variant in ("close-only", "open-only") else 2 * waits), 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", default="bundle")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/marks_cost")
    p.add_argument("--pattern", choices=["sync", "stream"], default="sync")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--exchanges", type=int, default=16, help="marked waits per iteration")
    p.add_argument("--compute-ms", type=float, default=3.0, help="GPU work before each wait")
    p.add_argument("--block", type=int, default=5, help="iterations of one variant in a row")
    p.add_argument("--rounds", type=int, default=12, help="blocks of each variant, after a warm-up round")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="which variants to alternate, comma-separated (off is always among them)")
    p.add_argument("--mps", default="auto")
    p.add_argument("--daemon-args", default="")
    p.add_argument("--commit", default=None,
                   help="the tree's commit, for the results (default: HEAD, with -dirty- and a hash of "
                        "what differs from it: on a machine that got a copy of the tree, .git may lag)")
    p.add_argument("--stage", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stage-out", help=argparse.SUPPRESS)
    a = p.parse_args()
    unknown = [v for v in a.variants.split(",") if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    chosen = list(dict.fromkeys(a.variants.split(",")))  # each once, in the order given
    a.variants = ",".join(chosen if "off" in chosen else ["off"] + chosen)
    if a.stage:
        stage(a)
        return
    os.makedirs(a.out, exist_ok=True)
    b = Bench(a)
    b.start_daemon(("--cpu-lanes", "1") if a.device == "cpu" else None)
    stage_out = os.path.join(b.work, "stage.json")
    try:
        cmd = [sys.executable, os.path.abspath(__file__), "--stage", "--stage-out", stage_out,
               "--pattern", a.pattern, "--device", a.device, "--exchanges", str(a.exchanges),
               "--compute-ms", str(a.compute_ms), "--block", str(a.block), "--rounds", str(a.rounds),
               "--variants", a.variants,
               "--out", a.out]
        subprocess.run(cmd, env=b.env, check=True)
    finally:
        b.close()
    stage_result = json.load(open(stage_out))
    if not stage_result["attached"]:
        raise SystemExit("the stage never found the daemon's lane: no marks were written, nothing was measured "
                         f"(see {os.path.join(a.out, 'daemon.log')})")
    times = stage_result["times_ms"]
    rows = []
    waits = (a.rounds + 1) * a.block * a.exchanges
    for variant in stage_result["variants"]:
        mean, half = mean_ci(times[variant])
        made = stage_result["marks_made"][variant]
        kind = expected_kind(variant, a.device)
        expected = {k: waits if k == kind else 0 for k in MARK_KINDS}
        row = {"variant": variant, "iterations": len(times[variant]), "mean_ms": mean, "ci_ms": half,
               "marks_made": made, "marks_expected": expected,
               "marks_thread_core_share": stage_result["marks_thread_core_share"][variant],
               "gate_writes_on_stream": stage_result["gate_writes"][variant][0],
               "gate_writes_from_host": stage_result["gate_writes"][variant][1],
               "host_us_before_wait": stage_result["host_us_before_wait"][variant],
               "host_us_after_wait": stage_result["host_us_after_wait"][variant]}
        writes = (row["gate_writes_on_stream"], row["gate_writes_from_host"])
        expected_writes = expected_gate_writes(variant, a.device, waits)
        if made != expected:
            row["invalid"] = f"made marks {made}, expected {expected}"
        elif None in expected_writes and sum(writes) != 2 * waits:
            row["invalid"] = f"made {sum(writes)} gate writes, expected {2 * waits}"
        elif None not in expected_writes and writes != expected_writes:
            row["invalid"] = f"made gate writes {writes} (on a stream, from the host), expected {expected_writes}"
        if variant != "off":
            row["vs_off"] = diff_ci(times[variant], times["off"])
        rows.append(row)
    commit = a.commit or git_commit()
    result = {"command": " ".join(sys.argv), "commit": commit,
              "pattern": a.pattern, "device": a.device, "exchanges": a.exchanges, "compute_ms": a.compute_ms,
              "products_per_exchange": stage_result["products_per_exchange"],
              "attached": stage_result["attached"], "rows": rows}
    with open(os.path.join(a.out, f"marks_cost_{a.pattern}.json"), "w") as f:
        json.dump(result, f, indent=1)
    log(f"marks cost, {a.pattern} waits, {a.exchanges} a iteration of ~{a.compute_ms} ms compute each "
        f"(stage attached: {stage_result['attached']}):")
    for row in rows:
        vs = row.get("vs_off")
        log(f"  {row['variant']:10s} {row['mean_ms']:8.3f} ms ±{row['ci_ms']:.3f} over {row['iterations']}"
            + (f"; vs off {vs['pct']:+.2f}% [{vs['low']:+.2f}, {vs['high']:+.2f}]" if vs else "")
            + f"; host {row['host_us_before_wait']:.1f} us before the wait, {row['host_us_after_wait']:.1f} after"
            + f"; marks thread {100 * row['marks_thread_core_share']:.1f}% of a core"
            + f"; gate writes {row['gate_writes_on_stream']} on a stream, {row['gate_writes_from_host']} from the host"
            + (f"; INVALID: {row['invalid']}" if "invalid" in row else ""))
    invalid = [row["variant"] for row in rows if "invalid" in row]
    if invalid:
        raise SystemExit(f"variants that did not mark as they should (their figures mean nothing): {invalid}")


if __name__ == "__main__":
    main()
