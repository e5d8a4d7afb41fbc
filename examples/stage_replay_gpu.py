"""A stand-in pipeline stage on one GPU: it replays a profiled rank's
iteration with real CUDA work, and marks its bubbles as an instrumented
stage does (freeride.torch's BubbleMarks: stream-ordered, never blocking).

    python3 examples/stage_replay_gpu.py --profile examples/data/h200_1f1b_bubbles.json \\
        --rank 0 --steps 60 --freeride on --freeride-alternate 5 --out replay.json

Each iteration follows the rank's profile (`freeride profile --json`):
busy time is a chain of bf16 matrix products sized to the profiled
length, and each bubble is a kernel that spins on one SM for the bubble's
length (by the GPU's global timer), standing for the NCCL receive a real
stage waits in (resident, so it keeps taking time slices when the GPU is
time-sliced).  The host
enqueues the whole iteration and synchronises at its end, as a trainer does
at its loss.  A side task that overruns a bubble therefore delays the busy
time after it, and the iteration, as it would a real stage's.

What it does not reproduce: a real pipeline's bubble ends when the
neighbour's data arrives, so a stage slowed by a side task can shorten its
next bubble instead of lengthening the iteration; here every bubble keeps
its length, which counts any slowdown in full.  Use it to try FreeRide, and
to measure side tasks, on one GPU; the pipeline benchmarks
(bench/e2e_gpu.py with a schedule in --configs, not replay:RANK) measure
the real thing.

The results file has the pipeline example's fields (iter_ms, freeride_on,
warmup, marks), so bench/e2e_gpu.py reads both alike.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any


def from_schedule(schedule: dict) -> dict:
    """`freeride schedule --json` output as a profile, one unit of time taken as 1 ms."""
    return {"ranks": [{"rank": r["rank"], "iteration_ms": float(schedule["iteration"]),
                       "bubbles": [{"start_ms": float(b["start"]), "duration_ms": float(b["duration"])}
                                   for b in r["idle"]]}
                      for r in schedule["ranks"]]}


def load_rank(path: str, rank: int) -> tuple[float, list[tuple[float, float]]]:
    """(iteration ms, [(start ms, duration ms)] sorted) of `rank` in a profile file; SystemExit
    with the reason when the file or the rank does not hold a usable iteration."""
    try:
        with open(path) as f:
            profile = json.load(f)
        if "iteration" in profile and "iteration_ms" not in profile["ranks"][0]:
            profile = from_schedule(profile)
        if not profile["ranks"]:
            raise ValueError("it has no ranks")
        ranks = {}
        for r in profile["ranks"]:
            if int(r["rank"]) in ranks:
                raise ValueError(f"rank {int(r['rank'])} is given twice")
            ranks[int(r["rank"])] = r
    except (OSError, ValueError, KeyError, TypeError, IndexError, OverflowError, AttributeError) as e:
        raise SystemExit(f"--profile {path}: not a `freeride profile --json` file ({e})") from None
    if rank not in ranks:
        raise SystemExit(f"--rank {rank}: {path} has ranks {sorted(ranks)}")
    try:
        iteration = float(ranks[rank]["iteration_ms"])
        slots = sorted((float(b["start_ms"]), float(b["duration_ms"])) for b in ranks[rank]["bubbles"])
    except (KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"--profile {path}: rank {rank} lacks iteration_ms or bubbles ({e})") from None
    if not math.isfinite(iteration) or not all(map(math.isfinite, (x for slot in slots for x in slot))):
        raise SystemExit(f"--profile {path}: rank {rank} has a length that is not a number")
    end = 0.0
    for start, duration in slots:
        if start < 0:
            raise SystemExit(f"--profile {path}: rank {rank}'s bubble at {start} ms begins before its iteration")
        if start < end or duration <= 0:
            raise SystemExit(f"--profile {path}: rank {rank}'s bubbles overlap or are empty at {start} ms")
        end = start + duration
    if not slots or end > iteration:
        raise SystemExit(f"--profile {path}: rank {rank} has no bubbles, or they pass its iteration")
    return iteration, slots


class GpuStage:
    """Busy time and bubble waits on the current CUDA stream, calibrated on this GPU alone."""

    def __init__(self, torch, device, copy_share: float = 0.0) -> None:
        if not 0 <= copy_share < 1:
            raise ValueError(f"copy share {copy_share}: give a share from 0 up to (not including) 1")
        self.torch = torch
        n = 4096
        self.a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=device, dtype=torch.bfloat16) / n ** 0.5
        self.c = torch.empty_like(self.a)
        self.product_ms = self._time(lambda: [self._product() for _ in range(50)]) / 50
        # Products alone hold an H200 at its 700 W limit; a trainer's mix of work draws less
        # (a 1.3B GPT stage: 470-550 W).  At the limit, any side work in the bubbles lowers the
        # clock the busy time runs at (bench/results/side_cost_h200.md).
        self.copy_share = copy_share
        if copy_share:
            self.src = torch.empty(256 << 20, device=device, dtype=torch.uint8)  # 5x an H200's L2
            self.dst = torch.empty_like(self.src)
            self.copy_ms = self._time(lambda: [self._copy() for _ in range(10)]) / 10
        self.spin = self._timer_spin(device)
        if self.spin is None:  # a spin counted in clock cycles, which vary with the GPU's clock
            cycles = 20_000_000
            self.spin_cycles_per_ms = cycles / self._time(lambda: torch.cuda._sleep(cycles))

    def _timer_spin(self, device):
        """A one-thread kernel that spins until the GPU's global timer has moved on by its
        argument (nanoseconds, in a one-element float tensor), compiled at run time by
        PyTorch's jiterator; None, with the reason printed, where that cannot be had."""
        torch = self.torch
        code = """
        template <typename T> T spin_ns(T ns) {
          unsigned long long start, now;
          asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
          do {
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
          } while (now - start < (unsigned long long)ns);
          return ns;
        }"""
        try:
            spin = torch.cuda.jiterator._create_jit_fn(code)
            arg = torch.full((1,), 5e6, device=device, dtype=torch.float32)
            took = self._time(lambda: spin(arg))
        except Exception as e:  # noqa: BLE001 - any failure means the fallback
            print(f"stage_replay_gpu: no timer spin ({e}); bubbles spin for clock cycles", file=sys.stderr)
            return None
        if not 4.5 < took < 6.5:
            print(f"stage_replay_gpu: a 5 ms timer spin took {took:.2f} ms; bubbles spin for clock cycles",
                  file=sys.stderr)
            return None
        # One argument tensor per bubble length, made once: no fill kernel inside a bubble.
        arguments: dict[float, Any] = {}

        def spin_for(ms: float) -> None:
            if ms not in arguments:
                arguments[ms] = torch.full((1,), ms * 1e6, device=device, dtype=torch.float32)
            spin(arguments[ms])
        return spin_for

    def _product(self) -> None:
        self.torch.matmul(self.a, self.b, out=self.c)

    def _copy(self) -> None:
        self.dst.copy_(self.src)

    def _time(self, work) -> float:
        """Milliseconds `work` takes on the GPU: the fastest of four tries (the first also warms up)."""
        best = float("inf")
        for _ in range(4):
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
            work()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end))
        return best

    def busy(self, ms: float) -> None:
        """`ms` of products, or with a copy share, of products and large copies spread among them."""
        products = round((1 - self.copy_share) * ms / self.product_ms)
        copies = round(self.copy_share * ms / self.copy_ms) if self.copy_share else 0
        done = 0
        for k in range(products):
            self._product()
            while done < copies and (k + 1) * copies >= (done + 1) * products:
                self._copy()
                done += 1
        for _ in range(copies - done):
            self._copy()

    def wait(self, ms: float) -> None:
        if self.spin is not None:
            self.spin(ms)
        else:
            self.torch.cuda._sleep(int(ms * self.spin_cycles_per_ms))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", required=True, help="bubbles per rank: `freeride profile --json` output")
    p.add_argument("--rank", type=int, default=0, help="the profiled rank to replay")
    p.add_argument("--lane", type=int, default=0, help="the daemon's lane, that of --gpu")
    p.add_argument("--gpu", type=int, default=None, help="the CUDA device (default: the current one)")
    p.add_argument("--socket", default=None, help="the daemon's socket (default: FREERIDE_SOCKET or the usual)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3, help="iterations left out of the timing")
    p.add_argument("--freeride", choices=["on", "off"], default="on")
    p.add_argument("--freeride-alternate", type=int, default=0, metavar="K",
                   help="marks on and off every K iterations (0: always as --freeride says)")
    p.add_argument("--stop-file", default=None, metavar="PATH",
                   help="end at the first block boundary (or iteration, without --freeride-alternate) "
                        "once PATH exists, or at --steps, whichever comes first")
    p.add_argument("--copy-share", type=float, default=0.0, metavar="SHARE",
                   help="share of the busy time spent in large memory copies instead of matrix "
                        "products (0: products alone, which hold an H200 at its power limit)")
    p.add_argument("--out", default=None, help="JSON results")
    args = p.parse_args()
    if not 0 <= args.copy_share < 1:
        raise SystemExit(f"--copy-share {args.copy_share}: give a share from 0 up to (not including) 1")
    if args.warmup < 0 or args.freeride_alternate < 0:
        raise SystemExit("--warmup and --freeride-alternate: give 0 or more")
    if args.steps <= args.warmup:
        raise SystemExit(f"--steps {args.steps}: give more than --warmup ({args.warmup})")
    iteration_ms, slots = load_rank(args.profile, args.rank)
    try:
        import torch
    except ImportError as e:
        raise SystemExit(f"stage_replay_gpu: needs PyTorch with CUDA ({e})") from None
    if not torch.cuda.is_available():
        raise SystemExit("stage_replay_gpu: no CUDA GPU is visible to PyTorch")
    if args.gpu is not None and not 0 <= args.gpu < torch.cuda.device_count():
        raise SystemExit(f"--gpu {args.gpu}: PyTorch sees {torch.cuda.device_count()} CUDA device(s)")
    device = torch.device("cuda", torch.cuda.current_device() if args.gpu is None else args.gpu)
    torch.cuda.set_device(device)
    stage = GpuStage(torch, device, args.copy_share)
    shortest_busy = min(b - a for a, b in zip([0.0] + [s + d for s, d in slots],
                                              [s for s, _ in slots] + [iteration_ms]))
    if stage.product_ms > shortest_busy / 4:
        print(f"stage_replay_gpu: one product takes {stage.product_ms:.2f} ms, so busy times as short "
              f"as {shortest_busy:.2f} ms are replayed only to the nearest product", file=sys.stderr)
    marks = None
    if args.freeride == "on":
        from freeride._marks import BubbleMarks
        marks = BubbleMarks(args.lane, args.socket, device)
    print(f"replaying rank {args.rank}: {iteration_ms:.1f} ms iterations, bubbles "
          f"{', '.join(f'{d:.1f}' for _, d in slots)} ms; one product {stage.product_ms:.3f} ms"
          f"{f' ({args.copy_share:g} of the busy time in copies of {stage.copy_ms:.3f} ms)' if args.copy_share else ''}; "
          f"bubbles spin by {'the global timer' if stage.spin else 'clock cycles'}",
          flush=True)

    times, modes, starts = [], [], []
    for step in range(args.steps):
        block_start = not args.freeride_alternate or step % args.freeride_alternate == 0
        if args.stop_file and step > args.warmup and block_start and os.path.exists(args.stop_file):
            break
        on = marks is not None and (not args.freeride_alternate or (step // args.freeride_alternate) % 2 == 0)
        if marks is not None:
            (marks.resume if on else marks.pause)()
            marks.start_iteration()
        started = time.perf_counter()
        starts.append(time.time())
        at = 0.0
        for start, duration in slots:
            stage.busy(start - at)
            if marks is not None:
                marks.around(stage.wait, duration)
            else:
                stage.wait(duration)
            at = start + duration
        stage.busy(iteration_ms - at)
        torch.cuda.synchronize(device)
        times.append((time.perf_counter() - started) * 1e3)
        modes.append(on)
        if marks is not None:
            marks.end_iteration()
    attached = marks is not None and marks.attached
    if marks is not None:
        marks.close()
    timed = times[args.warmup:]
    print(f"iteration {sum(timed) / len(timed):.1f} ms (mean of {len(timed)} after {args.warmup} warm-up), "
          f"FreeRide marks {[marks.marks if marks else 0]}"
          f"{'' if attached or marks is None else ' (no daemon attached: the marks did nothing)'}",
          flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"trainer": "stage_replay_gpu", "profile": args.profile, "rank": args.rank,
                       "ranks": 1, "freeride": args.freeride, "warmup": args.warmup, "iter_ms": times,
                       "iter_unix": starts, "freeride_on": modes, "marks": [marks.marks if marks else 0],
                       "product_ms": stage.product_ms, "copy_share": args.copy_share,
                       "bubble_spin": "timer" if stage.spin else "cycles"}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
