"""bench/host_call_cost_gpu.py: without a GPU it says that it needs one, and it refuses a loop too
short to time, before touching the driver; with a GPU it times every part and writes them."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import SOURCE_DIR, require_torch


def run(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "host_call_cost_gpu.py"), "--out",
                           str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=120)


def test_a_loop_too_short_to_time_is_refused(tmp_path) -> None:
    r = run(tmp_path, "--calls", "5")
    assert r.returncode != 0
    assert "--calls: at least 100" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_without_a_gpu_it_says_so_and_with_one_it_times_every_part(tmp_path) -> None:
    require_torch()
    import torch
    r = run(tmp_path, "--calls", "100")
    if torch.cuda.is_available():
        assert r.returncode == 0, r.stderr
        times = json.loads((tmp_path / "out" / "host_call_cost.json").read_text())["us_per_call"]
        assert all(us is None or us > 0 for us in times.values()), times
        assert times["cuStreamQuery (idle stream)"] > 0, times
        return
    assert r.returncode != 0
    assert "no CUDA device: this measures the driver's host calls on a GPU" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
