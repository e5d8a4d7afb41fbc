"""bench/marks_cost_gpu.py end to end on a CPU lane: a daemon, the stand-in stage attached to its
lane, every variant timed in alternating blocks after a warm-up round, and each compared with
marks off.  (On CPU the variants differ in name only; the figures need a GPU.)"""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import SOURCE_DIR, make_bundle, require_torch


def test_every_variant_is_timed_in_blocks_and_compared_with_marks_off(build_dir, tmp_path) -> None:
    require_torch()
    out = tmp_path / "out"
    rounds, block = 2, 3
    subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "marks_cost_gpu.py"), "--device", "cpu",
                    "--bundle", str(make_bundle(build_dir, tmp_path / "bundle")), "--out", str(out),
                    "--work", str(tmp_path / "work"), "--rounds", str(rounds), "--block", str(block),
                    "--exchanges", "3", "--compute-ms", "0.5"], check=True, timeout=600)
    result = json.loads((out / "marks_cost_sync.json").read_text())
    assert result["attached"] is True, "the stage found the daemon's lane"
    assert result["products_per_exchange"] >= 1
    assert [row["variant"] for row in result["rows"]] == ["off", "on", "on-stream-writes", "on-memset", "hostfn", "no-hostfn",
                                                      "no-gate", "host-only", "writes-only", "close-only",
                                                      "open-only", "python-only"]
    for row in result["rows"]:
        assert row["iterations"] == rounds * block, row
        # On CPU lanes every variant but off and the Python alone hands each wait to libfreeride,
        # from the host.
        marked = row["variant"] not in ("off", "python-only")
        assert row["marks_made"] == row["marks_expected"] == {
            "gated": 0, "stream": 0, "host": (rounds + 1) * block * 3 if marked else 0}, row
        assert "invalid" not in row, row
        # A CPU lane has no gate: no gate writes either way.
        assert (row["gate_writes_on_stream"], row["gate_writes_from_host"]) == (0, 0), row
        assert row["mean_ms"] > 0
        # The host's time around each marked wait, before it and after it, is kept.
        assert row["host_us_before_wait"] > 0 and row["host_us_after_wait"] > 0, row
        if row["variant"] == "off":
            assert "vs_off" not in row
        else:  # the ratio of this variant's mean to off's
            off = result["rows"][0]["mean_ms"]
            assert abs(row["vs_off"]["pct"] - (row["mean_ms"] / off - 1) * 100) < 1e-9


def test_each_variant_s_gate_writes_are_known_and_checked() -> None:
    sys.path.insert(0, str(SOURCE_DIR / "bench"))
    from marks_cost_gpu import VARIANTS, expected_gate_writes
    waits = 80
    assert {v: expected_gate_writes(v, "cpu", waits) for v in VARIANTS} == {v: (0, 0) for v in VARIANTS}
    on_gpu = {v: expected_gate_writes(v, "cuda", waits) for v in VARIANTS}
    assert on_gpu == {"off": (0, 0), "on": (None, None), "on-stream-writes": (160, 0), "on-memset": (None, None),
                      "hostfn": (160, 0), "no-hostfn": (160, 0), "no-gate": (0, 0), "host-only": (0, 0),
                      "writes-only": (160, 0), "close-only": (80, 0), "open-only": (80, 0),
                      "python-only": (0, 0)}


def test_an_unknown_variant_is_refused_with_the_known_ones(tmp_path) -> None:
    r = subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "marks_cost_gpu.py"), "--device", "cpu",
                        "--out", str(tmp_path / "out"), "--variants", "on,fast"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert "unknown variants ['fast']; known: off, on, on-stream-writes, on-memset" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists(), "nothing was started"


def test_variants_are_taken_once_each_with_marks_off_added(build_dir, tmp_path) -> None:
    require_torch()
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "marks_cost_gpu.py"), "--device", "cpu",
                    "--bundle", str(make_bundle(build_dir, tmp_path / "bundle")), "--out", str(out),
                    "--work", str(tmp_path / "work"), "--rounds", "1", "--block", "1", "--exchanges", "1",
                    "--compute-ms", "0.5", "--variants", "on,on"], check=True, timeout=600)
    result = json.loads((out / "marks_cost_sync.json").read_text())
    assert [row["variant"] for row in result["rows"]] == ["off", "on"]
    assert [row["iterations"] for row in result["rows"]] == [1, 1]
