"""Shared fixtures of the Python tests (run by ctest through pytest, or by hand:
FREERIDE_BUILD_DIR=build .venv/bin/python -m pytest tests/python).

A test that needs torch fails without it, unless FREERIDE_SKIP_TORCH=1 asked
for the skip."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("FREERIDE_SOURCE_DIR") or Path(__file__).resolve().parents[2])
BUILD_DIR = Path(os.environ.get("FREERIDE_BUILD_DIR") or SOURCE_DIR / "build")


def require_torch() -> None:
    """Fails the calling test without torch and numpy; skips it when the user
    set FREERIDE_SKIP_TORCH=1."""
    try:
        import numpy  # noqa: F401  (torch.distributed's object p2p needs it)
        import torch  # noqa: F401
        import torch.distributed.pipelining  # noqa: F401
    except ImportError as e:
        if os.environ.get("FREERIDE_SKIP_TORCH") == "1":
            pytest.skip(f"FREERIDE_SKIP_TORCH=1 and {e}")
        pytest.fail(f"{e} for {sys.executable}: run scripts/python-env.sh (torch==2.13.0 into .venv), "
                    "or set FREERIDE_SKIP_TORCH=1 to skip the tests that need torch", pytrace=False)


@pytest.fixture(scope="session")
def build_dir() -> Path:
    cli = BUILD_DIR / "freeride"
    if not cli.is_file():
        pytest.fail(f"no freeride binary at {cli}: build first, or set FREERIDE_BUILD_DIR", pytrace=False)
    return BUILD_DIR


@pytest.fixture(scope="session")
def source_dir() -> Path:
    return SOURCE_DIR


@pytest.fixture(scope="session")
def freeride_env(build_dir: Path) -> dict[str, str]:
    """The environment of the package from the source tree with this build's library."""
    return dict(os.environ, PYTHONPATH=str(SOURCE_DIR / "python"),
                FREERIDE_LIB=str(build_dir / "libfreeride.so"))


def make_bundle(build: Path, where: Path) -> Path:
    """The build tree laid out as a bundle (bin/, lib/, share/freeride/python), as the GPU
    benchmarks' --bundle expects."""
    build = build.resolve()
    (where / "bin").mkdir(parents=True)
    (where / "lib").mkdir()
    (where / "share" / "freeride").mkdir(parents=True)
    (where / "share" / "freeride" / "python").symlink_to(SOURCE_DIR / "python")
    for binary in [build / "freeride", build / "tasks" / "freeride-pagerank"]:
        (where / "bin" / binary.name).symlink_to(binary)
    for library in build.glob("libfreeride*.so*"):
        (where / "lib" / library.name).symlink_to(library)
    return where


# Daemon arguments for the tests that assert that a CPU lane's side task makes
# progress (finishes, takes steps, harvests).  By default a CPU lane's tasks run
# in SCHED_IDLE, which keeps them off a CPU stage's core; on a machine that other
# work keeps busy (CI, a newcomer's laptop, bench/loaded_tests.sh) such a task can
# get no core for minutes, and those tests would measure the load, not FreeRide.
# At the normal policy a task still runs only inside bubbles (the dispatcher stops
# it outside them), so what they assert (steps inside bubbles, pieces, cancel,
# resume) is unchanged.  cpu_task_priority_test.py asserts the default itself.
NORMAL_CPU_TASKS = ("--cpu-task-priority", "normal")


class Daemon:
    """A freeride daemon on a private socket and state directory."""

    def __init__(self, build: Path, env: dict[str, str], *args: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="frpy-"))
        self.socket = str(self.dir / "d.sock")
        self.state = str(self.dir / "state")
        self.build = build
        self.cli = str(build / "freeride")
        self.env = dict(env, FREERIDE_SOCKET=self.socket)
        as_root = ["--allow-root"] if os.geteuid() == 0 else []
        self.log = open(self.dir / "daemon.log", "w")
        self.process = subprocess.Popen([self.cli, "daemon", "--socket", self.socket, "--state-dir",
                                         self.state, *as_root, *args], env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60  # a hang guard: the socket appears in milliseconds
        while time.monotonic() < deadline and not os.path.exists(self.socket):
            time.sleep(0.05)
        assert os.path.exists(self.socket), f"the daemon did not start: {self.tail()}"

    def tail(self) -> str:
        return (self.dir / "daemon.log").read_text()[-2000:]

    def cli_run(self, command: str, *args: str, env: dict[str, str] | None = None) -> str:
        return subprocess.run([self.cli, command, "--socket", self.socket, *args], env=env or self.env,
                              check=True, capture_output=True, text=True, timeout=60).stdout

    def show(self, name: str) -> dict:
        return json.loads(self.cli_run("show", name, "--json"))

    def wait_for_state(self, name: str, states: tuple[str, ...], seconds: float) -> dict:
        """The task once it is in one of `states`, or as it is after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            info = self.show(name)
            if info["state"] in states or time.monotonic() > deadline:
                return info
            time.sleep(0.2)

    def wait_while_progressing(self, name: str, states: tuple[str, ...], stall_seconds: float) -> dict:
        """The task once it is in one of `states`, or as it is once its progress has not moved
        for `stall_seconds`: a hang guard that a slow, loaded machine does not trip while the
        task still works, however long the whole takes."""
        last, since = None, time.monotonic()
        while True:
            info = self.show(name)
            if info["state"] in states:
                return info
            if info["progress"] != last:
                last, since = info["progress"], time.monotonic()
            elif time.monotonic() - since > stall_seconds:
                return info
            time.sleep(0.2)

    def events(self) -> list[dict]:
        """The event log's whole lines: read while the daemon writes, the last may be partial."""
        with open(os.path.join(self.state, "events.jsonl")) as f:
            return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]

    def stage(self, busy_ms: str, bubbles_ms: str) -> subprocess.Popen:
        """A replayed training stage whose busy phases sleep, as a GPU stage's host thread
        does, so that it leaves the cores to the tests running beside this one."""
        return subprocess.Popen([str(self.build / "example_stage_replay"), "--socket", self.socket,
                                 "--iterations", "100000000", "--busy", "sleep", "--busy-ms", busy_ms,
                                 "--bubbles-ms", bubbles_ms],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


NO_TIME_FIT = "no task's step fits the rest of the bubble"  # VerdictName(DispatchVerdict::kNoTimeFit)


def assert_harvested_or_said_why(out_dir: str | Path, report: dict) -> None:
    """The CPU demo's side work, asserted by the mechanism rather than by the
    machine's speed.  Its tasks' steps are profiled on the machine as it is: on a
    loaded one they take longer, and may fit none of the CPU pipeline's bubbles
    (a millisecond or less), so harvest > 0 cannot be asserted there.  What holds
    on any machine: the dispatcher judged the bubbles, so that if nothing was
    harvested some bubble says no task's step fitted (the dispatcher's verdict,
    policy/dispatch_policy.cc); and every side step that was not marked late began inside
    a bubble of its own lane."""
    trace = json.load(open(Path(out_dir) / "timeline.perfetto.json"))["traceEvents"]
    bubbles = [e for e in trace if e.get("cat") == "bubble"]
    assert bubbles, "the trace has no bubbles"
    verdicts = {e["args"]["verdict"] for e in bubbles}
    if report["total"]["harvested_ns"] == 0:
        assert NO_TIME_FIT in verdicts, f"nothing was harvested and no bubble says why: {verdicts}"
    spans: dict[int, list[tuple[float, float]]] = {}
    for b in bubbles:
        spans.setdefault(b["pid"], []).append((b["ts"], b["ts"] + b["dur"]))
    for step in (e for e in trace if e.get("cat") == "side_task" and not e["args"].get("late")):
        assert any(begin <= step["ts"] <= end for begin, end in spans.get(step["pid"], [])), \
            f"a side step began outside every bubble of lane {step['pid']}: {step}"
