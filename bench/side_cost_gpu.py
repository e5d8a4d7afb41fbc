"""What side work costs a stage when it runs only inside the stage's bubbles.

The gate keeps side work out of the stage's busy time, yet the pipeline rows still show
compute-heavy side programs (ResNet-50, PageRank) costing +0.3% to +1% against the same
launch's marks-off blocks, and light ones (`generate`) almost nothing.  Two causes are left
once overruns are excluded: the GPU runs at a lower clock after a bubble filled with
power-hungry work (boost lowers the clock as power and temperature rise), and the side work
leaves the caches (L2, TLBs) cold for the stage.  Neither depends on FreeRide's mechanism;
both come with the work itself.  This benchmark measures that floor directly, with no daemon
and no gate:

- one process, one GPU; the stage's stream runs busy time (a chain of bf16 matrix products,
  as the stand-in stage's) then a bubble (a one-thread spin on the global timer, as a stage's
  receive), again and again;
- a side stream, at low priority, waits for each busy segment's end and runs side work sized
  to a share of the bubble (`--fill`) measured alone, so it ends well before the bubble does;
- arms, alternating in blocks of `--block` iterations within one launch, one block of each arm
  per round in a rotating order: `none` (no side work), `compute` (bf16 matrix products: the
  most power), `memory` (large copies: cold L2, HBM-bound), `light` (a one-thread spin: almost
  no power, caches untouched);
- per iteration, the busy segments' GPU time (CUDA events), and the slack between the side
  work's end and the next busy segment's start (events; a row whose slack is ever negative
  overlapped the busy time and is flagged, not counted as the floor);
- a 20 us probe kernel on the stage's stream reads the SM clock on the GPU (clock64 cycles over
  global-timer nanoseconds) just before and just after each busy segment: the clock the stage's
  work ran at, not nvidia-smi's sample of the whole GPU;
- `--stage-mix` puts a share of the busy time in large copies: products alone hold an H200 at its
  700 W limit, which a real trainer's mix of work does not;
- nvidia-smi samples the SM clock, power and temperature every 50 ms.

Reported per configuration and arm: the busy time against `none` in the same round, mean and
95% interval over rounds (Student t), the iteration's GPU time the same way, the mean SM clock
and power, and the smallest slack.

    python3 bench/side_cost_gpu.py --out /tmp/side_cost --configs 6:3,2:2,20:20 --stage-mix 0,0.5 --seconds 30

Each config is BUSY_MS:BUBBLE_MS.  Run on an otherwise idle GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from e2e_arms import git_commit, mean_interval  # noqa: E402
from gate_gpu import busy_bubble_ms  # noqa: E402

ARMS = ("none", "compute", "memory", "light")
# Rounds at least, however short --seconds: the first warms up, and an interval over the other
# four has 3 degrees of freedom.
MIN_ROUNDS = 5


def parse_configs(text: str) -> list[tuple[float, float]]:
    configs = []
    for item in filter(None, text.split(",")):
        configs.append(busy_bubble_ms(item, "--configs", "6:3"))
    if not configs:
        raise SystemExit("--configs: give at least one BUSY_MS:BUBBLE_MS")
    return configs


CLOCK_PROBE = """
template <typename T> T sm_mhz(T ns) {
  unsigned long long t0, t1;
  long long c0, c1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  } while (t1 - t0 < (unsigned long long)ns);
  c1 = clock64();
  return (T)((double)(c1 - c0) * 1000.0 / (double)(t1 - t0));
}"""


def clock_probe(torch, device):
    """A function that enqueues, on the current stream, a 20 us kernel reading the SM clock on the
    GPU (cycles over global-timer nanoseconds); it returns a one-element tensor, in MHz."""
    probe = torch.cuda.jiterator._create_jit_fn(CLOCK_PROBE)
    arg = torch.full((1,), 20e3, device=device, dtype=torch.float32)
    return lambda: probe(arg)


class SideWork:
    """The three kinds of side work, each sized to a length in milliseconds by timing it alone."""

    def __init__(self, torch, device, stage) -> None:
        self.torch = torch
        n = 2048
        self.a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=device, dtype=torch.bfloat16) / n ** 0.5
        self.c = torch.empty_like(self.a)
        self.src = torch.empty(256 << 20, device=device, dtype=torch.uint8)  # 256 MiB: 5x the L2
        self.dst = torch.empty_like(self.src)
        self.stage = stage
        self.unit_ms = {
            "compute": stage._time(lambda: [self._compute() for _ in range(50)]) / 50,
            "memory": stage._time(lambda: [self._memory() for _ in range(10)]) / 10,
        }

    def _compute(self) -> None:
        self.torch.matmul(self.a, self.b, out=self.c)

    def _memory(self) -> None:
        self.dst.copy_(self.src)

    def run(self, arm: str, ms: float) -> None:
        """Enqueue `ms` of `arm`'s work on the current stream (none for `none`)."""
        if arm == "light":
            self.stage.wait(ms)
        elif arm in self.unit_ms:
            for _ in range(max(1, round(ms / self.unit_ms[arm]))):
                (self._compute if arm == "compute" else self._memory)()


def run_config(torch, device, stage, probe, side, busy_ms: float, bubble_ms: float, fill: float,
               block: int, seconds: float, segments: int) -> dict:
    """Alternate the arms in blocks for `seconds`; per round, each arm's busy and iteration GPU time."""
    stage_stream = torch.cuda.Stream(device, priority=-1)
    side_stream = torch.cuda.Stream(device, priority=0)
    side_ms = fill * bubble_ms
    records = []
    started = time.monotonic()
    rnd = 0
    while time.monotonic() - started < seconds or rnd < MIN_ROUNDS:
        order = ARMS[rnd % len(ARMS):] + ARMS[:rnd % len(ARMS)]
        for arm in order:
            block_start, block_t0 = time.time(), time.perf_counter()
            busy_total, iter_total, slack_min, clocks = 0.0, 0.0, float("inf"), []
            for _ in range(block):
                ev = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in range(segments + 1)]
                side_end = []
                with torch.cuda.stream(stage_stream):
                    for k in range(segments):
                        clocks.append(probe())
                        ev[k][0].record()
                        stage.busy(busy_ms)
                        ev[k][1].record()
                        clocks.append(probe())
                        if arm != "none":
                            # After the probe: one read beside the side work's start would read
                            # the clock the side work runs at (it drops within microseconds).
                            probed = torch.cuda.Event()
                            probed.record()
                            side_stream.wait_event(probed)
                            with torch.cuda.stream(side_stream):
                                side.run(arm, side_ms)
                                done = torch.cuda.Event(enable_timing=True)
                                done.record()
                                side_end.append(done)
                        stage.wait(bubble_ms)
                    ev[segments][0].record()  # where the next busy time would start
                stage_stream.synchronize()
                side_stream.synchronize()
                busy_total += sum(ev[k][0].elapsed_time(ev[k][1]) for k in range(segments))
                iter_total += ev[0][0].elapsed_time(ev[segments][0])
                for k, done in enumerate(side_end):
                    slack_min = min(slack_min, done.elapsed_time(ev[k + 1][0]))
            records.append({"round": rnd, "arm": arm, "busy_ms": busy_total / block,
                            "iteration_ms": iter_total / block,
                            "min_slack_ms": None if slack_min == float("inf") else slack_min,
                            "busy_sm_mhz": torch.cat(clocks).mean().item(),
                            "start_unix": block_start, "wall_ms": (time.perf_counter() - block_t0) * 1e3})
        rnd += 1
    return {"busy_ms": busy_ms, "bubble_ms": bubble_ms, "fill": fill, "stage_mix": stage.copy_share, "side_ms": side_ms,
            "segments": segments, "block": block, "rounds": rnd, "blocks": records}


def summarise(config: dict, samples: list | None) -> dict:
    """Each arm against `none` in the same round: busy and iteration time, % (mean, 95%)."""
    by = {(r["round"], r["arm"]): r for r in config["blocks"]}
    rounds = sorted({r["round"] for r in config["blocks"]})[1:]  # the first round warms up
    arms = {}
    for arm in ARMS:
        rows = [by[(k, arm)] for k in rounds if (k, arm) in by]
        entry = {"busy_ms": statistics.fmean(r["busy_ms"] for r in rows),
                 "iteration_ms": statistics.fmean(r["iteration_ms"] for r in rows)}
        if all("busy_sm_mhz" in r for r in rows):
            entry["busy_sm_mhz"] = statistics.fmean(r["busy_sm_mhz"] for r in rows)
        if arm != "none":
            entry["busy_vs_none"] = mean_interval(
                [(by[(k, arm)]["busy_ms"] / by[(k, "none")]["busy_ms"] - 1) * 100 for k in rounds])
            if "busy_sm_mhz" in entry:  # the clock the stage's busy time ran at, on the GPU
                entry["busy_clock_vs_none"] = mean_interval(
                    [(by[(k, arm)]["busy_sm_mhz"] / by[(k, "none")]["busy_sm_mhz"] - 1) * 100 for k in rounds])
            entry["iteration_vs_none"] = mean_interval(
                [(by[(k, arm)]["iteration_ms"] / by[(k, "none")]["iteration_ms"] - 1) * 100 for k in rounds])
            slacks = [r["min_slack_ms"] for r in rows if r["min_slack_ms"] is not None]
            entry["min_slack_ms"] = min(slacks) if slacks else None
            entry["overlapped_busy_time"] = bool(slacks) and min(slacks) < 0
        if samples:
            inside = [s for r in rows for s in samples
                      if r["start_unix"] <= s[0] <= r["start_unix"] + r["wall_ms"] / 1e3]
            if inside:
                entry["sm_mhz"] = statistics.fmean(s[2] for s in inside)
                entry["power_w"] = statistics.fmean(s[3] for s in inside)
                entry["temp_c"] = statistics.fmean(s[4] for s in inside)
                entry["gpu_samples"] = len(inside)
        arms[arm] = entry
    return arms


def table(results: list[dict]) -> str:
    lines = ["| busy:bubble ms | stage's copy share | side arm | side ms per bubble | busy time vs none "
             "| busy time's SM clock vs none (on the GPU) | iteration vs none | least slack ms "
             "| busy time's SM MHz | SM MHz (nvidia-smi) | power W |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for arm, e in res["arms"].items():
            def fmt(key):
                v = e.get(key)
                return "" if v is None else f"{v['pct']:+.2f}% [{v['low']:+.2f}, {v['high']:+.2f}]"
            slack = e.get("min_slack_ms")
            flag = " (overlapped)" if e.get("overlapped_busy_time") else ""
            lines.append(f"| {res['busy_ms']:g}:{res['bubble_ms']:g} | {res.get('stage_mix', 0):g} | {arm} | "
                         f"{0 if arm == 'none' else res['side_ms']:.2f} | {fmt('busy_vs_none')} | "
                         f"{fmt('busy_clock_vs_none')} | "
                         f"{fmt('iteration_vs_none')} | {'' if slack is None else f'{slack:.2f}'}{flag} | "
                         f"{e.get('busy_sm_mhz', float('nan')):.0f} | "
                         f"{e.get('sm_mhz', float('nan')):.0f} | {e.get('power_w', float('nan')):.0f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for side_cost.json and side_cost.md")
    p.add_argument("--configs", default="6:3,2:2,20:20", help="BUSY_MS:BUBBLE_MS, comma-separated")
    p.add_argument("--fill", type=float, default=0.6,
                   help="side work per bubble, as a share of the bubble (measured alone); below 1 so "
                        "it ends before the bubble does (default 0.6)")
    p.add_argument("--stage-mix", default="0",
                   help="shares of the stage's busy time spent in large copies rather than matrix "
                        "products, comma-separated; each config runs once per share (default 0: "
                        "products alone, which hold an H200 at its power limit)")
    p.add_argument("--segments", type=int, default=4, help="busy+bubble pairs per iteration")
    p.add_argument("--block", type=int, default=10, help="iterations per block")
    p.add_argument("--seconds", type=float, default=40, help="per configuration")
    args = p.parse_args()
    if not 0 < args.fill < 1:
        raise SystemExit("--fill: give a share between 0 and 1 (side work must end inside the bubble)")
    if args.segments < 1 or args.block < 1 or args.seconds <= 0:
        raise SystemExit("--segments, --block and --seconds: give positive values")
    configs = parse_configs(args.configs)
    try:
        mixes = [float(x) for x in args.stage_mix.split(",") if x]
    except ValueError:
        raise SystemExit(f"--stage-mix {args.stage_mix!r}: give shares such as 0,0.5") from None
    if not mixes or not all(0 <= m < 1 for m in mixes):
        raise SystemExit(f"--stage-mix {args.stage_mix!r}: each share from 0 up to (not including) 1")
    try:
        import torch
    except ImportError:
        raise SystemExit("side_cost_gpu: needs PyTorch with CUDA, which this Python lacks") from None
    if not torch.cuda.is_available():
        raise SystemExit("side_cost_gpu: no CUDA GPU is visible to PyTorch")
    from stage_replay_gpu import GpuStage
    from gate_gpu import GpuSampler, read_gpu_samples
    device = torch.device("cuda", torch.cuda.current_device())
    stage = GpuStage(torch, device)
    if stage.spin is None:
        raise SystemExit("side_cost_gpu: the bubble needs the global-timer spin (a clock-cycle spin "
                         "would itself change with the clock this measures)")
    side = SideWork(torch, device, stage)
    probe = clock_probe(torch, device)
    os.makedirs(args.out, exist_ok=True)
    smi_path = os.path.join(args.out, "nvidia_smi.csv")
    sampler = GpuSampler(smi_path, [device.index])
    print(f"one stage product {stage.product_ms:.3f} ms; side units: compute {side.unit_ms['compute']:.3f} ms, "
          f"memory {side.unit_ms['memory']:.3f} ms", flush=True)
    results = []
    try:
        for mix in mixes:
            busy_stage = stage if mix == 0 else GpuStage(torch, device, mix)
            for busy_ms, bubble_ms in configs:
                print(f"config busy {busy_ms} ms ({mix:g} of it copies), bubble {bubble_ms} ms ...", flush=True)
                results.append(run_config(torch, device, busy_stage, probe, side, busy_ms, bubble_ms, args.fill,
                                          args.block, args.seconds, args.segments))
    finally:
        sampler.close()
    samples = read_gpu_samples(smi_path)
    for res in results:
        res["arms"] = summarise(res, samples)
    command = "python3 bench/side_cost_gpu.py " + " ".join(sys.argv[1:])
    gpu = subprocess.run(["nvidia-smi", "-i", str(device.index), "--query-gpu=name,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    with open(os.path.join(args.out, "side_cost.json"), "w") as f:
        json.dump({"command": command, "commit": git_commit(), "gpu": gpu, "power_field": sampler.power_field,
                   "stage_product_ms": stage.product_ms,
                   "side_unit_ms": side.unit_ms, "results": results}, f, indent=1)
    text = f"{command}\n\nGPU: {gpu}\n\n{table(results)}\n"
    with open(os.path.join(args.out, "side_cost.md"), "w") as f:
        f.write(text)
    print(text, flush=True)


if __name__ == "__main__":
    sys.exit(main())
