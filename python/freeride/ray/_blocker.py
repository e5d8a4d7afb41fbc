"""Keeps Ray from placing bubble work on a node whose daemon is gone or whose stages have ended.

Ray's custom resources are fixed when a node starts, so a node that loses its daemon still
offers its lanes.  The first wrapper that finds the node unusable starts a blocker: a detached
actor pinned to the node that asks for all of its `freeride_lane` slots.  Ray gives it those
slots as the work placed there fails and lets them go, and places nothing else there while it
holds them; the work is retried on other nodes.  The blocker polls the daemon every second and
exits once the daemon answers and a lane has a stage that has not ended, giving the slots back.
"""
from __future__ import annotations

import sys
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from freeride.ray._daemon import CommandFailed, DaemonUnreachable, NodeDaemon
from freeride.ray._resources import LANE_RESOURCE

NAMESPACE = "freeride"
_LET_BLOCKER_QUEUE_S = 1.0


def node_serves(daemon: NodeDaemon) -> bool:
    """The daemon answers and not every lane's training stage has ended."""
    try:
        lanes = daemon.lanes()
    except (DaemonUnreachable, CommandFailed):
        return False
    return bool(lanes) and not all(lane.stage_ended for lane in lanes)


@ray.remote(num_cpus=0, max_restarts=0)
class NodeBlocker:
    """Holds its node's lane slots until node_serves()."""

    def __init__(self, socket: str | None, cli: str):
        self.daemon = NodeDaemon(socket, cli)

    def hold(self) -> None:
        while not node_serves(self.daemon):
            time.sleep(1.0)
        print(f"freeride.ray: the FreeRide daemon at {self.daemon.where()} serves again; "
              "bubble work may be placed on this node", file=sys.stderr, flush=True)
        ray.actor.exit_actor()


def blocker_name(node_id: str) -> str:
    return f"blocker-{node_id}"


def keep_bubble_work_off_this_node(daemon: NodeDaemon, why: str) -> None:
    """Starts this node's blocker unless it runs already (see the module's doc).  Never raises:
    without it, Ray still retries the work, perhaps on this node again."""
    try:
        if not ray.is_initialized():
            return
        node_id = ray.get_runtime_context().get_node_id()
        slots = next((n["Resources"].get(LANE_RESOURCE, 0) for n in ray.nodes() if n["NodeID"] == node_id), 0)
        if not slots:
            return
        print(f"freeride.ray: {why}; keeping bubble work off node {node_id[:12]} until its daemon serves again",
              file=sys.stderr, flush=True)
        blocker = NodeBlocker.options(
            name=blocker_name(node_id), namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
            resources={LANE_RESOURCE: slots},
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote(daemon.socket, daemon.cli)
        blocker.hold.remote()
        # Ray queues the blocker's request for the slots at the node; the work's retry is asked for
        # only once this raises.  A moment here lets the blocker's request arrive first, so that
        # the retry is less likely to land on this node again (if it does, it fails at once and is
        # retried once more).
        time.sleep(_LET_BLOCKER_QUEUE_S)
    except Exception as e:  # noqa: BLE001 - see the doc
        print(f"freeride.ray: could not keep bubble work off this node: {type(e).__name__}: {e}",
              file=sys.stderr, flush=True)
