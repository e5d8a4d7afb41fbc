"""A pipeline trained across nodes: one torchrun per node's namespace, a
static rendezvous at the first node's address, gloo over the nodes' IFNAME."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .cleanup import write_pid_file
from .netns import IFNAME, NetNode

MASTER_PORT = 29511


def trainer_env(base: dict[str, str], socket: str | None) -> dict[str, str]:
    """The environment a node's trainers get: its daemon's socket, and gloo on
    the nodes' interface (by default gloo takes the address the machine's
    hostname resolves to, which no namespace has)."""
    env = dict(base, GLOO_SOCKET_IFNAME=IFNAME)
    if socket:
        env["FREERIDE_SOCKET"] = socket
    return env


def torchrun(nodes: list[tuple[NetNode, str | None]], script: str, args: list[str], run_dir: str,
             env: dict[str, str], nproc_per_node: int = 1, timeout_s: float = 900,
             python: str = sys.executable, per_node_args: list[list[str]] | None = None) -> dict:
    """Trains `script ARGS [per_node_args[k]] --out FILE` with torchrun on every (node,
    daemon socket) of `nodes` (the first node is the master; node k holds ranks
    k*nproc_per_node and on), waits for all of them, and returns rank 0's --out JSON.
    Raises with each failed node's output tail; hangs are cut at `timeout_s`."""
    out = os.path.join(run_dir, "training.json")
    master = nodes[0][0].address
    procs = []
    for rank, (net, socket) in enumerate(nodes):
        log = open(os.path.join(run_dir, f"trainer-{net.name}.log"), "w")
        command = net.command([python, "-m", "torch.distributed.run", "--nnodes", str(len(nodes)),
                               "--node-rank", str(rank), "--nproc-per-node", str(nproc_per_node),
                               "--master-addr", master, "--master-port", str(MASTER_PORT),
                               script, *args, *(per_node_args[rank] if per_node_args else []),
                               "--out", out])
        proc = subprocess.Popen(command, env=trainer_env(env, socket), stdout=log, stderr=subprocess.STDOUT)
        write_pid_file(run_dir, f"trainer-{net.name}", proc.pid)
        procs.append((net, proc, log))
    # A node that fails leaves the others waiting on it in gloo: they get a
    # short grace to fail by themselves, then are killed.
    deadline = time.monotonic() + timeout_s
    while any(proc.poll() is None for _, proc, _ in procs) and time.monotonic() < deadline:
        if any(proc.poll() not in (None, 0) for _, proc, _ in procs):
            deadline = min(deadline, time.monotonic() + 30)
        time.sleep(0.2)
    failures = []
    for net, proc, log in procs:
        if proc.poll() is None:
            proc.kill()
            failures.append(f"{net.name}: training was still running, killed")
        code = proc.wait()
        log.close()
        if code != 0:
            failures.append(f"{net.name}: torchrun exited with {code}:\n{open(log.name).read()[-3000:]}")
    if failures:
        raise RuntimeError("\n".join(failures))
    with open(out) as f:
        return json.load(f)
