"""freeride.ray: a queue of side work for the whole cluster.  Ray places it, FreeRide runs it in
the bubbles of each node's training.

    import ray, freeride.ray
    ray.init(address="auto")

    @freeride.ray.remote(lane_memory="1GiB")
    def shard(i):
        for chunk in chunks(i):
            process(chunk)
            yield len(chunk)            # one step: it runs only inside a bubble
        return summary(i)

    ray.get([shard.remote(i) for i in range(100)])

Each training node offers its lanes to Ray (`ray start ... $(python -m freeride.ray node-args)`);
the work asks Ray for a lane slot, and on the node Ray picks, runs as a side task of that node's
daemon, through the same mechanism as any side task.  Actors (@freeride.ray.remote on a class)
and Ray Data stages (freeride.ray.batches) run the same way.  `python -m freeride.ray status`
shows each node's harvest and the training's slowdown beside Ray's placement.  See docs/ray.md.

Importing this package does not import Ray: the side task (freeride.ray._runner) runs without it.
"""
from __future__ import annotations

from typing import Any

from freeride.ray.errors import LaneMemoryError, NodeUnavailable, SideTaskFailed

_API = ("TESTED_RAY", "batches", "check_ray_version", "cluster_report", "format_report", "init", "options",
        "remote")
_RESOURCES = ("LANE_RESOURCE", "MEMORY_LABEL", "node_args", "node_offer")

__all__ = ["LaneMemoryError", "NodeUnavailable", "SideTaskFailed", *_API, *_RESOURCES]


def __getattr__(name: str) -> Any:
    if name in _API:
        from freeride.ray import _api
        return getattr(_api, name)
    if name in _RESOURCES:
        from freeride.ray import _resources
        return getattr(_resources, name)
    raise AttributeError(f"module 'freeride.ray' has no attribute {name!r}")
