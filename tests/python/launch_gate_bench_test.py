"""bench/launch_gate_bench.cc (Google Benchmark): the gate's own cost per piece of GPU work on a
driver table that does nothing.  Its times depend on the machine and are not asserted; the driver
calls it counts per piece do not: far inside an open bubble a piece goes without its GPU wait and
shares a fence with others, so it makes far fewer driver calls than a piece that is waited, fenced
and passed (FREERIDE_GATE_STRICT=1)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path


def test_far_inside_an_open_bubble_a_piece_makes_a_fraction_of_the_strict_gates_driver_calls(build_dir: Path) -> None:
    bench = build_dir / "bench" / "launch_gate_bench"
    assert bench.is_file(), f"no {bench}: build with FREERIDE_BUILD_BENCH=ON"
    r = subprocess.run([str(bench), "--benchmark_format=json", "--benchmark_min_time=0.01",
                        "--benchmark_filter=threads:1$"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)["benchmarks"]}
    far = rows["FarInsideOpenBubble/threads:1"]
    strict = rows["EveryPieceWaitedStrict/threads:1"]
    # Every strict piece: the capture check, its wait, the fence and the pass (each an event record
    # under a relaxed capture mode), and their queries.
    assert strict["waited_share"] == 1.0 and strict["driver_calls"] >= 8, strict
    # Far inside: the capture check, and a shared fence and a timed piece now and then.
    assert far["waited_share"] < 0.01 and far["driver_calls"] < 4, far
    assert far["driver_calls"] * 3 < strict["driver_calls"], (far, strict)
