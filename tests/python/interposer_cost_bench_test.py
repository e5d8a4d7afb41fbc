"""bench/interposer_cost_gpu.py without a GPU: the gate page it writes is one the real interposer
(libfreeride_gate.so, preloaded into a client of the fake driver) accepts as open, so its arms
measure an armed gate and not a refused one; a page of another layout is refused; and bad
arguments get a sentence before anything runs.  (The benchmark itself needs a GPU.)"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "bench"))
import interposer_cost_gpu as bench  # noqa: E402


@pytest.fixture
def open_page(request) -> Path:
    """A gate page the benchmark writes, open, in shared memory (as the daemon's are); removed after."""
    page = Path(f"/dev/shm/freeride-interposer-cost-test-{request.node.name}-{os.getpid()}.page")
    bench.write_open_page(str(page))
    yield page
    page.unlink(missing_ok=True)


def run_client(build: Path, page: Path, scenario: str = "direct") -> subprocess.CompletedProcess:
    """tests/gate/gate_client's `scenario` under the real interposer, on the fake driver, gated by `page`."""
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "tests" / "fake_driver"),
               LD_PRELOAD=str(build / "libfreeride_gate.so"), FREERIDE_GATE_PAGE=str(page))
    return subprocess.run([str(build / "tests" / "gate_client"), scenario], env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_page_it_writes_is_an_open_gate_to_the_real_interposer(build_dir: Path, open_page: Path) -> None:
    r = run_client(build_dir, open_page)
    assert r.returncode == 0, r.stderr
    # Registered, waited on the open gate and launched, with no refusal.
    assert "register 4096 flags 3\nwait 0x1000 value 1 flags 2 addr-set\nlaunch 0x1000\n" in r.stdout, r.stdout
    assert "wait 0x2 value 1 flags 2 addr-set\nlaunch_ptsz (nil)\n" in r.stdout, r.stdout
    assert "cannot be gated" not in r.stderr
    assert "result 801" not in r.stdout
    # The client claimed a slot in the page.
    with open(open_page, "rb") as f:
        raw = f.read(bench.PAGE_BYTES)
    pid = int.from_bytes(raw[bench.OFF_TASKS:bench.OFF_TASKS + 8], "little", signed=True)
    assert pid > 0


def test_its_gated_check_reads_the_timed_pieces_the_interposer_publishes(build_dir: Path, open_page: Path) -> None:
    assert bench.page_samples(str(open_page)) == 0
    r = run_client(build_dir, open_page, "many")
    assert r.returncode == 0, r.stderr
    # 64 launches, one in 16 timed, read back as they go (the fake driver's events end at once).
    assert bench.page_samples(str(open_page)) >= 2


def test_a_page_of_another_version_is_refused_so_a_stale_layout_here_would_show(build_dir: Path,
                                                                               open_page: Path) -> None:
    with open(open_page, "r+b") as f:
        f.seek(bench.OFF_VERSION)
        f.write((bench.PAGE_VERSION - 1).to_bytes(4, "little"))
    r = run_client(build_dir, open_page)
    assert "not a FreeRide gate page of this version" in r.stderr, r.stderr
    assert "launch 0x1000" not in r.stdout


@pytest.mark.parametrize("args, says", [
    (["--programs", "nope"], "--programs nope: give some of"),
    (["--rounds", "1"], "--rounds: at least 2"),
    (["--variant", "plain=/x.so"], "with a new NAME"),
    (["--variant", "other"], "give NAME=PATH.so"),
    (["--variant", "other=/no/such.so"], "/no/such.so does not exist"),
    (["--arm", "gate=FREERIDE_GATE_RUN=32"], "with a new NAME"),
    (["--arm", "run32"], "give NAME=VAR=VALUE"),
    (["--arm", "run32=FREERIDE_GATE_RUN"], "give NAME=VAR=VALUE"),
    (["--arm", "run32=FREERIDE_GATE_RUN=32,=4"], "give NAME=VAR=VALUE"),
])
def test_bad_arguments_get_a_sentence_before_anything_runs(tmp_path: Path, args: list, says: str) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "lib").mkdir(parents=True)
    (bundle / "lib" / "libfreeride_gate.so").write_bytes(b"")
    r = subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "interposer_cost_gpu.py"), "--bundle",
                        str(bundle), "--out", str(tmp_path / "out"), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0
    assert says in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
