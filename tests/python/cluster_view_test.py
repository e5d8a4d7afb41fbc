"""The cluster view over two real daemons on two TCP ports of this machine:
`freeride status --servers` and `freeride report --servers` show each node
and the total, a node whose daemon is gone is named and not counted, and a
read-only token reads but never submits."""
from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import NORMAL_CPU_TASKS

FULL_TOKEN = "full-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"


def token_file(path: Path, token: str) -> str:
    path.write_text(token + "\n")
    path.chmod(0o600)
    return str(path)


class TcpDaemon:
    """A daemon with one CPU lane, listening on a port of 127.0.0.1 it picks.  Its side tasks at
    the normal policy: the fixture waits for node a's task to harvest (conftest.NORMAL_CPU_TASKS)."""

    def __init__(self, build: Path, dir: Path, full: str, read: str) -> None:
        dir.mkdir()
        self.build, self.dir = build, dir
        self.socket = str(dir / "d.sock")
        self.stdout = dir / "daemon.out"
        as_root = ["--allow-root"] if os.geteuid() == 0 else []
        with open(self.stdout, "w") as out:
            self.process = subprocess.Popen(
                [str(build / "freeride"), "daemon", "--cpu-lanes", "1", "--socket", self.socket,
                 "--state-dir", str(dir / "state"), "--listen", "127.0.0.1:0", "--token-file", full,
                 "--read-token-file", read, *NORMAL_CPU_TASKS, *as_root], stdout=out, stderr=subprocess.STDOUT)
        self.port = self._port()
        self.stage: subprocess.Popen | None = None

    def _port(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"tcp: 127\.0\.0\.1:(\d+)", self.stdout.read_text())
            if found:
                return int(found.group(1))
            assert self.process.poll() is None, f"the daemon exited: {self.stdout.read_text()}"
            time.sleep(0.1)
        raise AssertionError(f"the daemon printed no TCP port: {self.stdout.read_text()}")

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.build / "freeride"), *args], capture_output=True, text=True,
                              timeout=120, check=check)

    def local(self, command: str, *args: str) -> str:
        return self.cli(command, "--socket", self.socket, *args).stdout

    def attach_stage(self) -> None:
        """A replayed training stage that sleeps through its busy phases, leaving the cores."""
        self.stage = subprocess.Popen([str(self.build / "example_stage_replay"), "--socket", self.socket,
                                       "--iterations", "100000000", "--busy", "sleep", "--busy-ms", "4",
                                       "--bubbles-ms", "6"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def lane(self, key: str) -> int:
        """A figure of the daemon's lane 0 (protobuf's JSON writes 64-bit numbers as strings)."""
        return int(json.loads(self.local("status", "--json"))["stats"]["lanes"][0][key])

    def stop(self) -> None:
        for p in (self.stage, self.process):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def wait_until(what: str, condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(build_dir, tmp_path_factory):
    dir = tmp_path_factory.mktemp("cluster")
    full = token_file(dir / "full.token", FULL_TOKEN)
    read = token_file(dir / "read.token", READ_TOKEN)
    a = TcpDaemon(build_dir, dir / "a", full, read)
    b = TcpDaemon(build_dir, dir / "b", full, read)
    try:
        a.attach_stage()
        b.attach_stage()
        a.local("submit", "--name", "counter", "--", str(build_dir / "example_count_task"), "--total",
                "100000000", "--step-us", "300")
        # A task that fails on node b: the view must show it, with its node.
        b.local("submit", "--name", "breaks", "--kind", "imperative", "--", "/bin/sh", "-c", "exit 3")
        wait_until("node a's side task harvests in its bubbles", lambda: a.lane("harvested_ns") > 0)
        wait_until("node b's task fails",
                   lambda: json.loads(b.local("show", "breaks", "--json"))["state"] == "FAILED")
        wait_until("node b sees bubbles", lambda: b.lane("bubbles") > 0)
        yield {"a": a, "b": b, "full": full, "read": read, "dir": dir,
               "servers": f"a=127.0.0.1:{a.port},b=127.0.0.1:{b.port}"}
    finally:
        a.stop()
        b.stop()


def test_status_shows_each_node_and_the_total_with_a_read_only_token(cluster):
    a, b = cluster["a"], cluster["b"]
    p = a.cli("status", "--servers", cluster["servers"], "--token-file", cluster["read"], "--json")
    view = json.loads(p.stdout)
    assert view["answered"] == 2 and view["not_answered"] == []
    nodes = {n["name"]: n for n in view["nodes"]}
    assert [n["name"] for n in view["nodes"]] == ["a", "b"]
    assert nodes["a"]["health"] == nodes["b"]["health"] == "ok"
    assert nodes["a"]["server"] == f"127.0.0.1:{a.port}"
    fa, fb = nodes["a"]["figures"], nodes["b"]["figures"]
    assert fa["bubbles"] > 0 and fb["bubbles"] > 0
    assert fa["harvested_ns"] > 0, "node a's task stepped in its bubbles"
    assert fa["lanes_with_stage"] == fb["lanes_with_stage"] == 1
    # The total is the two nodes' own figures added up.
    for key in ("bubbles", "bubble_ns", "harvested_ns", "overrun_ns", "lanes"):
        assert view["total"][key] == fa[key] + fb[key], key
    assert fb["tasks"]["failed"] == 1 and view["total"]["tasks"]["failed"] == 1
    [failed] = view["failed_tasks"]
    assert failed["node"] == "b" and failed["name"] == "breaks" and failed["exit_code"] == 3
    # The overhead estimate is either a number with its lane or null, never a made-up zero.
    worst = view["total"]["worst_overhead"]
    assert worst is None or (worst["node"] in ("a", "b") and worst["cycles"] > 0)

    text = a.cli("status", "--servers", cluster["servers"], "--token-file", cluster["read"]).stdout
    assert "cluster: 2 node(s), 2 answered\n" in text
    assert re.search(r"^a\s+ok\s+1\s+1\s+\d+", text, re.M), text
    assert re.search(r"^b\s+ok\s+1\s+1\s+\d+", text, re.M), text
    assert re.search(r"^total \(2 of 2\)", text, re.M), text
    assert re.search(r"^  b\s+\d+\s+breaks\s+exit 3", text, re.M), text
    assert re.search(r"^a\s+0\s+cpu:0", text, re.M), "the lanes of node a"


def test_report_lists_every_task_of_every_node(cluster):
    a = cluster["a"]
    p = a.cli("report", "--servers", cluster["servers"], "--token-file", cluster["read"])
    assert re.search(r"^a\s+\d+\s+counter\s+0\s+(RUNNING|PAUSED|CREATED)", p.stdout, re.M), p.stdout
    assert re.search(r"^b\s+\d+\s+breaks\s+0\s+FAILED", p.stdout, re.M), p.stdout
    bad = a.cli("report", str(cluster["dir"]), "--servers", cluster["servers"], "--token-file",
                cluster["read"], check=False)
    assert bad.returncode == 2 and "an event log" in bad.stderr


def test_the_read_only_token_cannot_submit(cluster):
    a = cluster["a"]
    server = f"127.0.0.1:{a.port}"
    refused = a.cli("submit", "--server", server, "--token-file", cluster["read"], "--", "/bin/true",
                    check=False)
    assert refused.returncode != 0
    assert "may only read" in refused.stderr, refused.stderr
    names = [t["spec"]["name"] for t in json.loads(a.local("status", "--json", "--all"))["tasks"]["tasks"]]
    assert names == ["counter"], names
    a.cli("status", "--server", server, "--token-file", cluster["read"])  # reading is allowed


def test_a_wrong_token_is_named_per_node(cluster, tmp_path):
    wrong = token_file(tmp_path / "wrong.token", "wrong-token-0123456789abcdef")
    p = cluster["a"].cli("status", "--servers", cluster["servers"], "--token-file", wrong, "--json",
                         check=False)
    assert p.returncode == 1
    view = json.loads(p.stdout)
    assert [n["health"] for n in view["nodes"]] == ["refused", "refused"]
    assert view["answered"] == 0 and view["total"]["bubbles"] == 0


def test_a_node_whose_daemon_is_gone_is_named_and_not_counted(cluster):
    a, b = cluster["a"], cluster["b"]
    b.stop()
    p = a.cli("status", "--servers", cluster["servers"], "--token-file", cluster["read"], "--json",
              check=False)
    assert p.returncode == 1, "a missing node makes the view's exit status 1"
    view = json.loads(p.stdout)
    assert view["answered"] == 1 and view["not_answered"] == ["b"]
    nodes = {n["name"]: n for n in view["nodes"]}
    assert nodes["b"]["health"] == "missing"
    assert f"127.0.0.1:{b.port}" in nodes["b"]["problem"]
    assert "figures" not in nodes["b"]
    assert view["total"]["bubbles"] == nodes["a"]["figures"]["bubbles"]
    assert view["total"]["tasks"]["failed"] == 0, "b's failure is not known while b is gone"

    text = a.cli("status", "--servers", cluster["servers"], "--token-file", cluster["read"],
                 check=False).stdout
    assert "cluster: 2 node(s), 1 answered; 1 NOT COUNTED in the total" in text
    assert re.search(r"^b\s+MISSING\s+the daemon at 127\.0\.0\.1:\d+ is not answering", text, re.M), text
    assert re.search(r"^total \(1 of 2\)", text, re.M), text
    assert re.search(r"^NOT COUNTED: b \(missing\)", text, re.M), text


def test_bad_node_lists_are_refused_clearly(cluster):
    a = cluster["a"]
    p = a.cli("status", "--servers", "a=127.0.0.1", "--token-file", cluster["read"], check=False)
    assert p.returncode == 2 and "is not HOST:PORT" in p.stderr, p.stderr
    p = a.cli("status", "--servers", cluster["servers"], check=False)
    assert p.returncode == 2 and "needs --token-file" in p.stderr, p.stderr
    p = a.cli("status", "--servers", cluster["servers"], "--token-file", cluster["read"], "--watch",
              check=False)
    assert p.returncode == 2 and "--watch" in p.stderr, p.stderr
