"""Ray on the harness's nodes: a head in one namespace, and workers that join it from others,
each offering its node's FreeRide lanes as docs/ray.md says (`ray start ... $(python -m
freeride.ray node-args)`), with FREERIDE_SOCKET set to its node's daemon.

Each Ray node runs `ray start --block` in its namespace, with its own temporary folder; the
run's pid files and the namespaces' cleanup (cleanup.py) stop it with the rest.
"""
from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys

from .cleanup import write_pid_file
from .netns import NetNode
from .node import NodeDaemon, wait_for

RAY_PORT = 6379
RUN_TOKEN = secrets.token_hex(32)


def ray_env(base: dict[str, str], build: str, socket: str | None) -> dict[str, str]:
    """The environment `ray start` runs in, and so the one its workers inherit: this build's
    client on PATH, its node's daemon (if any) in FREERIDE_SOCKET."""
    # Ray's token authentication, explicitly (unset, it depends on whether ~/.ray/auth_token exists),
    # with the run's own token: every node and the driver get it.
    env = dict(base, PATH=f"{build}{os.pathsep}{base.get('PATH', os.defpath)}", RAY_USAGE_STATS_ENABLED="0",
               RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=RUN_TOKEN)
    env.pop("FREERIDE_SOCKET", None)
    if socket:
        env["FREERIDE_SOCKET"] = socket
    return env


def node_args(daemon: NodeDaemon, env: dict[str, str]) -> list[str]:
    """`python -m freeride.ray node-args` for the node of `daemon`, run in its namespace."""
    p = subprocess.run(daemon.net.command([sys.executable, "-m", "freeride.ray", "node-args"]),
                       env=ray_env(env, daemon.build, daemon.socket), capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"node-args on {daemon.net.name}: {p.stderr.strip()}")
    return shlex.split(p.stdout)


class RayNode:
    """`ray start --block` in `net`'s namespace: a head (address None) or a worker joining
    `head_address`, with `extra` arguments (a worker's node-args)."""

    def __init__(self, net: NetNode, run_dir: str, build: str, env: dict[str, str], head_address: str | None,
                 socket: str | None = None, extra: list[str] = ()):
        self.net = net
        self.dir = os.path.join(run_dir, f"ray-{net.name}")
        os.makedirs(self.dir, exist_ok=True)
        self.env = ray_env(env, build, socket)
        ray = os.path.join(os.path.dirname(sys.executable), "ray")
        role = (["--head", "--port", str(RAY_PORT), "--include-dashboard=false", "--disable-usage-stats"]
                if head_address is None else ["--address", head_address])
        command = [ray, "start", "--block", *role, "--node-ip-address", net.address, "--num-cpus", "1",
                   "--temp-dir", self.dir, *extra]
        self.log_path = os.path.join(run_dir, f"ray-{net.name}.log")
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(net.command(command), env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT)
        write_pid_file(run_dir, f"ray-{net.name}", self.process.pid)

    @property
    def address(self) -> str:
        return f"{self.net.address}:{RAY_PORT}"

    def log(self) -> str:
        return open(self.log_path).read()[-3000:]

    def wait_started(self, timeout_s: float = 300) -> None:
        def started() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"ray on {self.net.name} exited with {self.process.returncode}:\n{self.log()}")
            return "Ray runtime started" in open(self.log_path).read()
        wait_for(f"Ray to start on {self.net.name}", started, timeout_s, interval_s=0.5)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
