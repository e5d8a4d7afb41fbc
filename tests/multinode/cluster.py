"""Cluster: several "nodes" on one machine for a test, and their cleanup.

    with Cluster(build, source, ["n1", "n2"]) as cluster:
        daemons = [cluster.start_daemon(name, "--cpu-lanes", "1") for name in ("n1", "n2")]
        ...
        result = cluster.torchrun(daemons, "examples/train_gpt_pipeline.py", [...])

The run directory (cluster.dir) holds each node's files (DIR/<node>/), the
pid files and the list of namespaces; a Reaper cleans them up even if the
test is killed, and __exit__ cleans them up at once.  The directory is
removed after a run that passed, and kept after one that failed, for its logs.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from . import netns, pipeline
from .cleanup import Reaper, clean, record_namespace
from .node import NodeDaemon


class Cluster:
    """Namespaces `names` (plus `extra` ones that hold no FreeRide daemon, e.g. a
    Slurm controller's) on one bridge, for the life of the `with` block."""

    def __init__(self, build: str, source: str, names: list[str], extra: list[str] = (),
                 subnet: int = 77, keep: bool = False):
        self.build, self.source, self.keep = str(build), str(source), keep
        self.dir = tempfile.mkdtemp(prefix="frmn-")
        os.chmod(self.dir, 0o755)  # Slurm's daemons and the munge user read beneath it
        self.names = list(names)
        self.network = netns.Network([*names, *extra], subnet=subnet)
        self.daemons: dict[str, NodeDaemon] = {}
        self.env = dict(os.environ, PYTHONPATH=os.path.join(self.source, "python"),
                        FREERIDE_LIB=os.path.join(self.build, "libfreeride.so"))
        self.reaper: Reaper | None = None

    def __enter__(self) -> "Cluster":
        netns.sweep_stale()
        for namespace in [self.network.hub, *(n.namespace for n in self.network.nodes)]:
            record_namespace(self.dir, namespace)
        self.reaper = Reaper(self.dir)
        try:
            self.network.create()
        except BaseException:
            self.close(passed=False)
            raise
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        self.close(passed=exc_type is None)

    def close(self, passed: bool) -> None:
        """Stops every process the run started and deletes its namespaces."""
        clean(self.dir)
        if self.reaper:
            self.reaper.close()
            self.reaper = None
        if passed and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print(f"multinode: run directory kept: {self.dir}", flush=True)

    def node(self, name: str) -> netns.NetNode:
        return self.network[name]

    def start_daemon(self, name: str, *args: str) -> NodeDaemon:
        """A FreeRide daemon in node `name`'s namespace with its own socket and state
        directory (DIR/<name>/); checks that no other node's lane segments collide with its own."""
        daemon = NodeDaemon(self.node(name), self.dir, self.build, self.env, list(args))
        mine = set(daemon.lane_segments())
        for other in self.daemons.values():
            if mine & set(other.lane_segments()):
                raise RuntimeError(f"nodes {other.net.name} and {name} share lane segments: {mine}")
        missing = [s for s in mine if not os.path.exists(s)]
        if missing:
            raise RuntimeError(f"{name}'s daemon made no lane segment at {missing} (src/base/paths.cc moved?)")
        self.daemons[name] = daemon
        return daemon

    def torchrun(self, daemons: list[NodeDaemon], script: str, args: list[str], **kwargs) -> dict:
        """pipeline.torchrun over `daemons`' nodes, each trainer with its node's socket."""
        return pipeline.torchrun([(d.net, d.socket) for d in daemons], os.path.join(self.source, script), args,
                                 self.dir, self.env, **kwargs)
