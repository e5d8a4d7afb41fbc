"""How a node's FreeRide lanes are offered to Ray, and how work asks for them.

A node offers `freeride_lane` slots (its lanes, times the side tasks each may hold at once) as a
custom resource, and the memory of its largest lane as the label `freeride-lane-memory` (bytes;
"unlimited" for lanes without a limit).  Both are fixed when the node's Ray starts:
`ray start ... $(python -m freeride.ray node-args)`.  Work asks for one slot, and, when it
declares lane memory, for a node whose label is one of the cluster's values that hold it, so Ray
never places it on a node whose lanes are too small.  A node without FreeRide offers no slot and
gets no bubble work.
"""
from __future__ import annotations

import json

from freeride.ray._daemon import NodeDaemon
from freeride.ray.errors import LaneMemoryError, format_bytes

LANE_RESOURCE = "freeride_lane"
MEMORY_LABEL = "freeride-lane-memory"
UNLIMITED = "unlimited"


def node_offer(daemon: NodeDaemon | None = None, slots_per_lane: int = 1) -> tuple[dict, dict]:
    """(resources, labels) for this node's `ray start`, from its daemon's lanes."""
    if slots_per_lane < 1:
        raise ValueError(f"slots_per_lane must be at least 1, not {slots_per_lane}")
    lanes = (daemon or NodeDaemon()).lanes()
    if not lanes:
        raise RuntimeError("the daemon has no lanes")
    memory = UNLIMITED if any(l.capacity_bytes == 0 for l in lanes) else str(max(l.capacity_bytes for l in lanes))
    return {LANE_RESOURCE: len(lanes) * slots_per_lane}, {MEMORY_LABEL: memory}


def node_args(daemon: NodeDaemon | None = None, slots_per_lane: int = 1) -> list[str]:
    """The `ray start` arguments that offer this node's lanes."""
    resources, labels = node_offer(daemon, slots_per_lane)
    return ["--resources", json.dumps(resources), "--labels", ",".join(f"{k}={v}" for k, v in labels.items())]


def _fits(label: str, lane_memory: int) -> bool:
    return label == UNLIMITED or (label.isdigit() and int(label) >= lane_memory)


def placement(lane_memory: int, nodes: list[dict]) -> dict:
    """The Ray options that place work needing `lane_memory` bytes of a lane on a node that has
    such a lane, among `nodes` (ray.nodes()).  Raises LaneMemoryError, saying why, when none has."""
    options: dict = {"resources": {LANE_RESOURCE: 1}}
    offering = [n for n in nodes if n.get("Alive") and n.get("Resources", {}).get(LANE_RESOURCE)]
    if not offering:
        raise LaneMemoryError(lane_memory, 0)
    if lane_memory <= 0:
        return options
    labels = {n["NodeID"]: n.get("Labels", {}).get(MEMORY_LABEL, "") for n in offering}
    fitting = sorted({v for v in labels.values() if _fits(v, lane_memory)})
    if not fitting:
        sizes = [int(v) for v in labels.values() if v.isdigit()]
        described = ", ".join(f"node {node[:12]}: {format_bytes(int(v)) if v.isdigit() else v or 'no label'}"
                              for node, v in labels.items())
        raise LaneMemoryError(lane_memory, max(sizes, default=0), nodes=described)
    options["label_selector"] = {MEMORY_LABEL: f"in({','.join(fitting)})"}
    return options
