"""What the daemon writes outside its journal and event log: its own stdout and stderr, and
its tasks' output logs.  None of them may end the daemon or fill its disk."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path


def lane_segment(pid: int) -> str:
    """The shared-memory file of the daemon's lane 0, from its mappings."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    found = re.search(r"(/dev/shm/\S*lane0)\b", maps)
    assert found, maps[-2000:]
    return found.group(1)


def test_a_daemon_whose_stdout_and_stderr_cannot_be_written_serves_and_stops_cleanly(build_dir):
    """fmt::print throws when a write fails: a message on a full disk's log (here /dev/full),
    or on a pipe whose reader has gone (SIGPIPE is ignored: EPIPE), ended the daemon in
    whatever thread printed it."""
    work = Path(tempfile.mkdtemp(prefix="frout-"))
    socket, state = str(work / "d.sock"), str(work / "state")
    as_root = ["--allow-root"] if os.geteuid() == 0 else []
    with open("/dev/full", "w") as full:
        daemon = subprocess.Popen([str(build_dir / "freeride"), "daemon", "--socket", socket, "--state-dir",
                                   state, "--cpu-lanes", "1", *as_root], stdout=subprocess.PIPE, stderr=full)
    try:
        first = daemon.stdout.readline()
        assert b"listening on" in first, first
        daemon.stdout.close()  # its reader goes away: later lines meet EPIPE
        # Deleting the lane's segment makes the daemon say so on stderr, then log a lane_segment event.
        os.unlink(lane_segment(daemon.pid))
        events = Path(state, "events.jsonl")
        deadline = time.monotonic() + 120  # a hang guard: the daemon looks once a second
        while time.monotonic() < deadline and daemon.poll() is None and not (
                events.exists() and '"lane_segment"' in events.read_text()):
            time.sleep(0.1)
        assert daemon.poll() is None, f"the daemon ended (status {daemon.returncode}) writing a message"
        assert '"lane_segment"' in events.read_text(), "the segment's loss was not noticed"
        status = subprocess.run([str(build_dir / "freeride"), "status", "--socket", socket, "--json"],
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["stats"], status.stdout
        daemon.send_signal(signal.SIGTERM)  # its "stopping" line goes to the gone reader
        assert daemon.wait(timeout=120) == 0, f"status {daemon.returncode} stopping"
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def test_a_task_that_prints_without_end_keeps_its_log_within_the_size(build_dir, freeride_env):
    """A task's stdout.log had no bound and shares the disk with the journal: `yes` filled a
    30 MB state directory in seconds, and every submission after it failed."""
    from conftest import NORMAL_CPU_TASKS, Daemon
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS, "--task-log-max-size", "1MiB")
    stage = None
    try:
        daemon.cli_run("submit", "--name", "chatty", "--kind", "imperative", "--", "/usr/bin/yes", "freeride")
        stage = daemon.stage("2", "40")
        task_dir = Path(daemon.state, "tasks", "1")
        kept = task_dir / "stdout.log.1"
        deadline = time.monotonic() + 300  # a hang guard only
        while time.monotonic() < deadline and not kept.exists():
            time.sleep(0.1)
        assert kept.exists(), f"never trimmed: {daemon.show('chatty')}"
        tail = kept.read_bytes()
        assert len(tail) == 512 * 1024, "the last half of the size is kept"
        assert set(tail.split(b"\n")[1:-1]) == {b"freeride"}, "the task's own lines (the first may be cut)"
        assert daemon.show("chatty")["state"] in ("RUNNING", "PAUSED"), "the task goes on"
        daemon.cli_run("submit", "--name", "after", "--kind", "imperative", "--", "/bin/true")
    finally:
        if stage:
            stage.kill()
        daemon.stop()


def test_metrics_are_served_while_many_connections_sit_idle(build_dir, freeride_env):
    """Each idle connection held one of the /metrics server's 8 workers for 5 s: with 40 a
    scrape took 18 s, past Prometheus' 10 s timeout, and with 200 it did not come in 20 s.
    Idle connections are now let go after a second, among 32 workers: the scrape is answered
    while 200 sit idle.  The 60 s is a hang guard; the defect took over 120 s."""
    import socket
    import urllib.request
    from conftest import Daemon
    with socket.socket() as probe:  # a free port (the daemon's stdout, which names its own, is not kept)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    daemon = Daemon(build_dir, freeride_env, "--metrics", f"127.0.0.1:{port}")
    idle = []
    try:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as reply:
            assert reply.status == 200
            assert b"freeride_" in reply.read()
    finally:
        for connection in idle:
            connection.close()
        daemon.stop()
