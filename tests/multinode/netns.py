"""Network namespaces as "nodes" on one machine, joined by a bridge.

Each node is a namespace with `lo` and one interface, IFNAME, holding the
address 10.RR.0.(k+1)/24; a veth pair joins it to a bridge in a hub
namespace of its own, so the machine's own interfaces are never touched and
traffic goes only between the namespaces made here.  The namespaces share
the filesystem: Unix sockets and /dev/shm are common to all the nodes.

Names carry the owner's pid (frmn<pid>-<name>), so that a run whose owner
was killed can be swept by the next one (sweep_stale) and so that two runs
never collide.  Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass

PREFIX = "frmn"
IFNAME = "eth0"  # the same name in every node: GLOO_SOCKET_IFNAME is one value for all


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `ip ARGS`; raises with its stderr when it fails and `check`."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def namespace_pids(namespace: str) -> list[int]:
    """The processes whose network namespace is `namespace` (empty if it is gone)."""
    result = ip("netns", "pids", namespace, check=False)
    return [int(p) for p in result.stdout.split()] if result.returncode == 0 else []


def end_processes(live, grace_s: float) -> None:
    """SIGTERM to every pid live() lists, then SIGKILL to those it still lists
    after `grace_s`; returns once it lists none (or 10 s after the SIGKILL)."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        pids = live()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = live()
        if not pids:
            return


def kill_namespace(namespace: str, grace_s: float = 10.0) -> None:
    """Ends every process in `namespace` (end_processes), then deletes it.  Safe to
    call for a namespace that is gone."""
    end_processes(lambda: namespace_pids(namespace), grace_s)
    ip("netns", "delete", namespace, check=False)


def owned_namespaces(owner: int | None = None) -> dict[str, int]:
    """This harness's namespaces on the machine, {name: owner pid}; only `owner`'s if given."""
    found = {}
    for line in ip("netns", "list").stdout.splitlines():
        m = re.match(rf"({PREFIX}(\d+)-\S+)", line)
        if m and (owner is None or int(m.group(2)) == owner):
            found[m.group(1)] = int(m.group(2))
    return found


def sweep_stale() -> list[str]:
    """Kills and deletes the namespaces of earlier runs whose owner is dead; their names."""
    stale = [name for name, pid in owned_namespaces().items() if not os.path.exists(f"/proc/{pid}")]
    for name in stale:
        kill_namespace(name, grace_s=2.0)
    return stale


@dataclass(frozen=True)
class NetNode:
    """One namespace of a Network."""
    name: str        # short name, e.g. "n1"
    namespace: str   # the namespace's full name
    address: str     # its IFNAME address

    def command(self, argv: list[str]) -> list[str]:
        """argv run inside this node's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]


class Network:
    """Namespaces `names` on one bridge.  create() makes them; delete() kills every
    process left in them and removes them (safe to call twice, and after a failed create)."""

    def __init__(self, names: list[str], subnet: int = 77, owner: int | None = None):
        if len(set(names)) != len(names) or not names or len(names) > 250:
            raise ValueError(f"node names must be 1 to 250 distinct names: {names}")
        if not all(re.fullmatch(r"[a-z][a-z0-9]{0,7}", n) for n in names):
            raise ValueError(f"node names are 1-8 lower-case letters and digits: {names}")
        self.owner = os.getpid() if owner is None else owner
        self.hub = f"{PREFIX}{self.owner}-hub"
        self.nodes = [NetNode(n, f"{PREFIX}{self.owner}-{n}", f"10.{subnet}.0.{k + 1}")
                      for k, n in enumerate(names)]

    def __getitem__(self, name: str) -> NetNode:
        return next(n for n in self.nodes if n.name == name)

    def create(self) -> "Network":
        if os.geteuid() != 0:
            raise PermissionError("network namespaces need root")
        ip("netns", "add", self.hub)
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "link", "set", "br0", "up")
        for k, node in enumerate(self.nodes):
            ip("netns", "add", node.namespace)
            ip("link", "add", IFNAME, "netns", node.namespace, "type", "veth", "peer", "name", f"v{k}",
               "netns", self.hub)
            ip("-n", self.hub, "link", "set", f"v{k}", "master", "br0", "up")
            ip("-n", node.namespace, "addr", "add", f"{node.address}/24", "dev", IFNAME)
            ip("-n", node.namespace, "link", "set", IFNAME, "up")
            ip("-n", node.namespace, "link", "set", "lo", "up")
        return self

    def delete(self) -> None:
        for node in self.nodes:
            kill_namespace(node.namespace)
        ip("netns", "delete", self.hub, check=False)

    def __enter__(self) -> "Network":
        try:
            return self.create()
        except BaseException:
            self.delete()
            raise

    def __exit__(self, *exc: object) -> None:
        self.delete()
