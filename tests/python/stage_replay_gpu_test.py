"""examples/stage_replay_gpu.py, the one-GPU stand-in stage that bench/e2e_gpu.py
replays with --configs replay:RANK: its profile checks, and its run (on a GPU) or
its clear refusal (without one)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, require_torch

sys.path.insert(0, str(SOURCE_DIR / "examples"))
PROFILE = SOURCE_DIR / "examples" / "data" / "h200_1f1b_bubbles.json"
SCRIPT = SOURCE_DIR / "examples" / "stage_replay_gpu.py"


def test_a_profiled_rank_is_read_with_its_bubbles_in_order() -> None:
    from stage_replay_gpu import load_rank
    iteration, slots = load_rank(str(PROFILE), 0)
    assert iteration == pytest.approx(123.245)
    assert [round(d, 3) for _, d in slots] == [5.67, 5.91, 33.357, 7.381]
    assert [s for s, _ in slots] == sorted(s for s, _ in slots)


@pytest.mark.parametrize("ranks, rank, reason", [
    (None, 0, "not a `freeride profile --json` file"),
    ([{"rank": 0, "iteration_ms": 10, "bubbles": []}], 1, "has ranks [0]"),
    ([{"rank": 0, "iteration_ms": 10, "bubbles": []}], 0, "has no bubbles"),
    ([{"rank": 0, "iteration_ms": 10, "bubbles": [{"start_ms": 8, "duration_ms": 5}]}], 0,
     "pass its iteration"),
    ([{"rank": 0, "iteration_ms": 10, "bubbles": [{"start_ms": 1, "duration_ms": 3},
                                                  {"start_ms": 2, "duration_ms": 1}]}], 0, "overlap"),
    ([{"rank": 0, "bubbles": [{"start_ms": 1, "duration_ms": 3}]}], 0, "lacks iteration_ms"),
    ([{"rank": 0, "iteration_ms": 10, "bubbles": [{"start_ms": 1, "duration_ms": float("nan")}]}], 0,
     "not a number"),
    ([], 0, "it has no ranks"),
    ([{"rank": 1e400, "iteration_ms": 10, "bubbles": []}], 0, "not a `freeride profile --json` file"),
    ([{"rank": 0, "iteration_ms": 10, "bubbles": []}, {"rank": 0, "iteration_ms": 20, "bubbles": []}], 0,
     "rank 0 is given twice"),
    ([{"rank": 0, "iteration_ms": 10, "bubbles": [{"start_ms": -5, "duration_ms": 3}]}], 0,
     "begins before its iteration"),
])
def test_a_profile_that_cannot_be_replayed_is_refused_with_the_reason(tmp_path, ranks, rank, reason) -> None:
    from stage_replay_gpu import load_rank
    path = tmp_path / "profile.json"
    path.write_text("{not json" if ranks is None else json.dumps({"ranks": ranks}))
    with pytest.raises(SystemExit, match=reason.replace("[", r"\[").replace("]", r"\]")):
        load_rank(str(path), rank)


def test_the_replay_runs_on_a_gpu_or_says_it_needs_one(tmp_path, freeride_env) -> None:
    require_torch()
    import torch
    out = tmp_path / "replay.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--profile", str(PROFILE), "--rank", "3", "--steps", "6",
                        "--warmup", "2", "--freeride-alternate", "2", "--out", str(out)],
                       env=freeride_env, capture_output=True, text=True, timeout=300)
    if not torch.cuda.is_available():
        assert p.returncode != 0 and "no CUDA GPU" in p.stderr, p.stderr
        return
    assert p.returncode == 0, p.stderr
    result = json.loads(out.read_text())
    assert result["freeride_on"] == [True, True, False, False, True, True]
    # Rank 3's iteration is 123 ms; the replay keeps it within a tenth.
    assert all(abs(t - 123.2) < 12.3 for t in result["iter_ms"][2:]), result["iter_ms"]


def test_the_benchmark_replays_one_stage_on_one_gpu_only(tmp_path) -> None:
    bench = [sys.executable, str(SOURCE_DIR / "bench" / "e2e_gpu.py"), "--out", str(tmp_path), "--tasks", "pagerank"]
    p = subprocess.run(bench + ["--configs", "replay:0", "--gpus", "2"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "give --gpus 1" in p.stderr, p.stderr
    # A rank the profile lacks stops the benchmark before it starts a daemon.
    p = subprocess.run(bench + ["--configs", "replay:9", "--gpus", "1", "--bundle", str(tmp_path / "none")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "--rank 9" in p.stderr and "has ranks [0, 1, 2, 3]" in p.stderr, p.stderr


def test_the_replay_refuses_negative_counts() -> None:
    p = subprocess.run([sys.executable, str(SCRIPT), "--profile", str(PROFILE), "--warmup", "-1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "give 0 or more" in p.stderr, p.stderr


def test_busy_time_with_a_copy_share_spreads_the_copies_among_the_products() -> None:
    from stage_replay_gpu import GpuStage
    stage = object.__new__(GpuStage)  # the arithmetic of busy(), without a GPU
    order: list[str] = []
    stage._product, stage._copy = (lambda: order.append("p")), (lambda: order.append("c"))
    stage.product_ms, stage.copy_ms = 0.2, 0.1
    stage.copy_share = 0.5
    stage.busy(2.0)  # 1 ms of products (5), 1 ms of copies (10): two after each product
    assert "".join(order) == "pcc" * 5
    order.clear()
    stage.copy_share = 0.25
    stage.busy(2.4)  # 1.8 ms of products (9), 0.6 ms of copies (6): none left to the end
    assert order.count("p") == 9 and order.count("c") == 6
    assert "cc" not in "".join(order) and not "".join(order).startswith("c")
    order.clear()
    stage.copy_share = 0.0
    stage.busy(1.0)  # products alone, as before copies existed
    assert order == ["p"] * 5


def test_the_replay_refuses_a_copy_share_of_all_the_busy_time() -> None:
    p = subprocess.run([sys.executable, str(SCRIPT), "--profile", str(PROFILE), "--copy-share", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "--copy-share 1.0: give a share from 0" in p.stderr, p.stderr
