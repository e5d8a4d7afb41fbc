"""A FreeRide daemon inside one node's namespace, with its own socket, state
directory and so its own shared-memory names (paths.py)."""
from __future__ import annotations

import json
import os
import subprocess
import time

from .checks import STAND_IN_SLOT_BASE
from .cleanup import write_pid_file
from .netns import NetNode
from .paths import lane_segment_path


def wait_for(what: str, ready, timeout_s: float, interval_s: float = 0.2):
    """Polls ready() until it returns something true, and returns that; raises
    TimeoutError naming `what` after `timeout_s` (a hang guard, never an assertion on speed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s:.0f} s")
        time.sleep(interval_s)


class NodeDaemon:
    """`freeride daemon ARGS` in `net`'s namespace, under DIR/<node name>/:
    d.sock, state/, daemon.log.  Its pid is recorded in the run's pid files."""

    def __init__(self, net: NetNode, run_dir: str, build: str, env: dict[str, str], args: list[str]):
        self.net, self.build = net, build
        self.dir = os.path.join(run_dir, net.name)
        os.makedirs(self.dir, exist_ok=True)
        self.socket = os.path.join(self.dir, "d.sock")
        self.state = os.path.join(self.dir, "state")
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.lanes = int(args[args.index("--cpu-lanes") + 1]) if "--cpu-lanes" in args else 1
        self.env = dict(env, FREERIDE_SOCKET=self.socket)
        as_root = ["--allow-root"] if os.geteuid() == 0 else []
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                net.command([os.path.join(build, "freeride"), "daemon", "--socket", self.socket, "--state-dir",
                             self.state, *as_root, *args]),
                env=self.env, stdout=log, stderr=subprocess.STDOUT)
        write_pid_file(run_dir, f"daemon-{net.name}", self.process.pid)
        wait_for(f"{net.name}'s daemon to answer on {self.socket}", self.answers, 60)

    def answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.net.name}'s daemon exited with {self.process.returncode}:\n{self.log()}")
        return os.path.exists(self.socket) and self.cli_result("status", "--json").returncode == 0

    def log(self) -> str:
        return open(self.log_path).read()[-3000:]

    def cli_result(self, command: str, *args: str) -> subprocess.CompletedProcess:
        """`freeride COMMAND --socket SOCKET ARGS` from the machine's namespace (the socket is a file)."""
        return subprocess.run([os.path.join(self.build, "freeride"), command, "--socket", self.socket, *args],
                              env=self.env, capture_output=True, text=True, timeout=60)

    def cli(self, command: str, *args: str) -> str:
        result = self.cli_result(command, *args)
        if result.returncode != 0:
            raise RuntimeError(f"freeride {command} on {self.net.name} failed: {result.stderr.strip()}")
        return result.stdout

    def status(self) -> dict:
        return json.loads(self.cli("status", "--json", "--all"))

    def task_states(self) -> dict[str, str]:
        return {t["spec"]["name"]: t["state"] for t in self.status()["tasks"].get("tasks", [])}

    def submit(self, lane: int, name: str, command: list[str]) -> None:
        self.cli("submit", "--lane", str(lane), "--name", name, "--", *command)

    def lane_segments(self) -> list[str]:
        return [lane_segment_path(self.socket, lane) for lane in range(self.lanes)]

    def wait_tasks_live(self, timeout_s: float = 300) -> None:
        """Waits until every submitted task has finished its init (PAUSED or RUNNING).
        Until a task attaches to the SDK it runs only inside bubbles, so a stand-in
        stage marks bubbles on each lane meanwhile, in slots (1000 + lane) that the
        checks leave out (checks.STAND_IN_SLOT_BASE)."""
        replay = os.path.join(self.build, "example_stage_replay")
        stages = [subprocess.Popen(self.net.command(
            [replay, "--socket", self.socket, "--lane", str(lane), "--iterations", "100000000", "--busy", "sleep",
             "--busy-ms", "5", "--bubbles-ms", "20", "--slot-base", str(STAND_IN_SLOT_BASE + lane)]),
            env=self.env, stdout=subprocess.DEVNULL) for lane in range(self.lanes)]
        try:
            def live():
                states = self.task_states()
                failed = {n: s for n, s in states.items() if s in ("FAILED", "CANCELLED", "FINISHED")}
                if failed:
                    raise RuntimeError(f"{self.net.name}: side tasks ended before the training: {failed}")
                return all(s in ("PAUSED", "RUNNING") for s in states.values())
            wait_for(f"{self.net.name}'s side tasks to finish their init", live, timeout_s)
        finally:
            for stage in stages:
                stage.kill()
                stage.wait()

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, as Slurm's end of a step sends; its exit status."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise TimeoutError(f"{self.net.name}'s daemon did not stop in {timeout_s:.0f} s after SIGTERM")
