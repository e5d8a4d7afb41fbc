"""bench/side_stacks.py: where a side program's samples went, from py-spy's raw output; and
bench/gate_gpu.py's --py-spy plumbing, against a stand-in for py-spy (the real one needs a
process to attach to and is not installed here)."""
from __future__ import annotations

import json
import stat
import sys
import types

from conftest import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "bench"))
from side_stacks import category, parse_raw, summarize  # noqa: E402

# Stacks as py-spy 0.4 writes them with --native --idle (the first from a real recording of a
# stripped library that sleeps; the others in the same form).
HELD = ("0x7fb5d1c4524a (libc.so.6);<module> (<string>:2);ffi_call (libffi.so.8.1.2);"
        "0x7fb5d17f1135 (libfreeride_gate.so);nanosleep (libc.so.6);clock_nanosleep (libc.so.6)")
SYNC = ("<module> (generate_loop.py:63);generate (transformers/generation/utils.py:2510);"
        "_local_scalar_dense (libtorch_cuda.so);0x7f00000010 (libcuda.so.1);ioctl (libc.so.6)")
LAUNCH = "<module> (train.py:9);forward (torch/nn/modules/linear.py:125);cuLaunchKernel (libcuda.so.1)"
PYTHON = "<module> (train.py:9);prepare_inputs (transformers/generation/utils.py:400)"


def test_each_stack_goes_to_the_first_category_it_matches() -> None:
    assert category(HELD.split(";")) == "gate hold"
    assert category(SYNC.split(";")) == "gpu wait"
    assert category(LAUNCH.split(";")) == "driver"
    assert category(PYTHON.split(";")) == "python"
    # A synchronize inside the gate's hold is a hold; the driver's own sleep is a GPU wait.
    assert category((HELD + ";cuStreamSynchronize (libcuda.so.1)").split(";")) == "gate hold"
    assert category("x (a.py:1);0x1 (libcuda.so.1);sched_yield (libc.so.6)".split(";")) == "gpu wait"


def test_shares_add_up_and_the_top_stacks_come_first_with_their_innermost_frames() -> None:
    lines = [f"{HELD} 60\n", f"{SYNC} 25\n", f"{LAUNCH} 10\n", f"{PYTHON} 5\n",
             "py-spy> a message, not a stack\n", "\n", "no count here\n"]
    s = summarize(lines, top=2, leaf_frames=2)
    assert s["samples"] == 100
    assert s["share"] == {"gate hold": 0.60, "gpu wait": 0.25, "driver": 0.10, "python": 0.05}
    assert s["top"] == [
        {"frames": "nanosleep (libc.so.6);clock_nanosleep (libc.so.6)", "category": "gate hold", "samples": 60},
        {"frames": "0x7f00000010 (libcuda.so.1);ioctl (libc.so.6)", "category": "gpu wait", "samples": 25}]


def test_no_samples_give_zero_shares_not_a_division_by_zero() -> None:
    assert parse_raw([]) == []
    s = summarize([])
    assert s["samples"] == 0 and set(s["share"].values()) == {0.0} and s["top"] == []


FAKE_PY_SPY = """#!/usr/bin/env python3
import sys
args = sys.argv[1:]
out = args[args.index("--output") + 1]
with open(out + ".args", "w") as f:
    f.write(" ".join(args))
with open(out, "w") as f:
    f.write(%r + " 3\\n" + %r + " 1\\n")
"""


def make_bench(tmp_path, py_spy: str):
    import gate_gpu
    a = types.SimpleNamespace(bundle=str(tmp_path), work=str(tmp_path / "work"), out=str(tmp_path),
                              py_spy=py_spy, py_spy_rate=123, measure_seconds=2.5)
    bench = gate_gpu.Bench(a)
    bench.cli = lambda *args: json.dumps({"pid": 4242}) if args[0] == "show" else ""
    return bench


def test_the_bench_records_the_tasks_process_over_the_arms_and_sums_the_stacks_up(tmp_path) -> None:
    fake = tmp_path / "py-spy"
    fake.write_text(FAKE_PY_SPY % (HELD, PYTHON))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    bench = make_bench(tmp_path, str(fake))
    summary = bench.stacks_summary(bench.sample_stacks("generate-0", "gap-generate"))
    args = (tmp_path / "gap-generate.stacks.txt.args").read_text().split()
    assert args[:5] == ["record", "--pid", "4242", "--rate", "123"]
    assert {"--idle", "--native"} <= set(args)
    assert args[args.index("--duration") + 1] == "3"  # the arms' length, rounded up
    assert args[args.index("--format") + 1] == "raw"
    assert summary["file"] == "gap-generate.stacks.txt"
    assert summary["samples"] == 4 and summary["share"]["gate hold"] == 0.75


def test_without_py_spy_nothing_is_recorded_and_a_failed_one_says_so(tmp_path) -> None:
    assert make_bench(tmp_path, "").sample_stacks("t", "tag") is None
    fails = tmp_path / "fails"
    fails.write_text("#!/bin/sh\necho 'Permission denied' >&2\nexit 1\n")
    fails.chmod(fails.stat().st_mode | stat.S_IEXEC)
    bench = make_bench(tmp_path, str(fails))
    summary = bench.stacks_summary(bench.sample_stacks("t", "tag"))
    assert summary == {"error": "py-spy exited 1 without samples; see tag.stacks.err"}
    assert "Permission denied" in (tmp_path / "tag.stacks.err").read_text()


def test_a_py_spy_that_is_not_there_is_refused_before_anything_starts(tmp_path) -> None:
    import subprocess
    r = subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "gate_gpu.py"), "--out", str(tmp_path),
                        "--py-spy", str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode != 0 and "no such executable" in r.stderr
    assert not (tmp_path / "gate_gpu.json").exists()
