"""Where a side program's threads spent their time, from py-spy's raw samples.

    py-spy record --pid PID --idle --native --format raw --rate 250 --duration 9 --output stacks.txt

Each line of the raw format is one stack, its frames joined by ";" from the outermost in, then a
space and how many samples it had.  With --native the driver's and the gate's frames appear
among the Python ones ("clock_nanosleep (libc.so.6)", "0x7f.. (libfreeride_gate.so)"), and
with --idle a thread blocked in a call counts too.  Samples are put in the first category whose
pattern a stack matches:

- "gate hold": asleep inside the gate's interposer (held on the host: the gate shut, the
  deadline not yet out, the piece predicted past it, or queued work draining);
- "gpu wait": blocked in the driver or the runtime waiting for the GPU (a synchronize, a
  synchronous copy, a scalar read back);
- "driver": any other time inside the CUDA driver (launches, event calls);
- "python": the rest (the program's own host work, the interpreter, the allocator).

This says where the time went, not when: bench/gate_gpu.py takes the samples over the
measured arms, so the gate's hold through the busy time is most of "gate hold", and what
matters is how the rest divides between "gpu wait" and "python".
"""
from __future__ import annotations

import re
from typing import Iterable

CATEGORIES = [
    ("gate hold", re.compile(r"libfreeride_gate[^;]*;.*nanosleep|HoldUntilAdmitted")),
    ("gpu wait", re.compile(r"Synchroni[sz]e|memcpy_and_sync|_local_scalar_dense|cuMemcpyDtoH(?!Async)|"
                            r"cudaMemcpy(?!Async)\b|libcuda[^;]*;[^;]*(sched_yield|ioctl|poll|futex|pthread_cond)")),
    ("driver", re.compile(r"libcuda")),
]
OTHER = "python"


def parse_raw(lines: Iterable[str]) -> list[tuple[list[str], int]]:
    """(frames, samples) per line of py-spy's raw output; lines that are not "STACK COUNT" are
    skipped (an empty file gives [])."""
    out = []
    for line in lines:
        line = line.rstrip("\n")
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        out.append((stack.split(";"), int(count)))
    return out


def category(frames: list[str]) -> str:
    joined = ";".join(frames)
    for name, pattern in CATEGORIES:
        if pattern.search(joined):
            return name
    return OTHER


def summarize(lines: Iterable[str], top: int = 12, leaf_frames: int = 3) -> dict:
    """Samples in all, the share of each category (CATEGORIES, then "python"), and the `top`
    stacks by samples, each as its innermost `leaf_frames` frames with its category."""
    stacks = parse_raw(lines)
    total = sum(n for _, n in stacks)
    by_category = {name: 0 for name, _ in CATEGORIES}
    by_category[OTHER] = 0
    leaves: dict[tuple[str, str], int] = {}
    for frames, n in stacks:
        c = category(frames)
        by_category[c] += n
        key = (";".join(frames[-leaf_frames:]), c)
        leaves[key] = leaves.get(key, 0) + n
    ranked = sorted(leaves.items(), key=lambda kv: -kv[1])[:top]
    return {"samples": total,
            "share": {c: (n / total if total else 0.0) for c, n in by_category.items()},
            "top": [{"frames": f, "category": c, "samples": n} for (f, c), n in ranked]}
