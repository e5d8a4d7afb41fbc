"""A side task that misbehaves on purpose, for reliability measurements.

Each step multiplies matrices on the GPU for about --step-ms.  Every
--slow-every-th step runs --slow-ms instead: a heavy tail the step estimate
(a p90) does not expect, so those steps overrun their bubbles.  With
--alloc-mib the task first allocates that much device memory, more than
it declared, and must fail by itself (the SDK caps its allocator at the
daemon's grant) without touching the trainer's memory.

    python -m freeride.tasks.misbehave --device cuda --step-ms 1 --slow-every 20 --slow-ms 40
"""
from __future__ import annotations

import argparse
import time

import torch

import freeride
from freeride.tasks.common import (add_device_options, check_memory, choose_device, parse_task_arguments,
                                   peak_bytes, sync)


class Misbehaving(freeride.IterativeTask):
    unit = "steps"

    def __init__(self, args):
        self.args = args
        self.steps = 0

    def init(self) -> None:
        a = self.args
        self.device = choose_device(a.device)
        check_memory(self.device, 64 << 20, "misbehave")
        if a.alloc_mib:
            # More than declared: the allocator cap makes this raise, and the
            # task exits with the error instead of taking the trainer's memory.
            self.hog = torch.empty(a.alloc_mib << 20, dtype=torch.uint8, device=self.device)
        self.a = torch.randn(1024, 1024, device=self.device)
        self.b = torch.randn(1024, 1024, device=self.device)
        self.per_ms = self._calibrate()

    def _calibrate(self) -> int:
        """Matrix products per millisecond on this device."""
        for _ in range(3):
            self.a @ self.b
        sync(self.device)
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < 0.05:
            self.a @ self.b
            n += 1
        sync(self.device)
        return max(1, int(n / ((time.perf_counter() - start) * 1000)))

    def step(self):
        a = self.args
        self.steps += 1
        ms = a.slow_ms if a.slow_every and self.steps % a.slow_every == 0 else a.step_ms
        for _ in range(max(1, int(ms * self.per_ms))):
            self.a @ self.b
        sync(self.device)
        return 1

    def peak_memory_bytes(self) -> int:
        return peak_bytes(self.device)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m freeride.tasks.misbehave", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--step-ms", type=float, default=1.0)
    p.add_argument("--slow-every", type=int, default=0, help="every Nth step is slow (0: none)")
    p.add_argument("--slow-ms", type=float, default=40.0)
    p.add_argument("--alloc-mib", type=int, default=0, help="allocate this much device memory first")
    add_device_options(p)
    args, run_argv = parse_task_arguments(p, argv)
    return freeride.run_task(Misbehaving(args), run_argv)


if __name__ == "__main__":
    raise SystemExit(main())
