"""What freeride.ray raises.  Imports nothing from Ray, so that a side task can raise them too."""
from __future__ import annotations


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


class NodeUnavailable(RuntimeError):
    """The node lost its FreeRide daemon, or its training stage ended, while the work was placed
    there.  Ray retries it (freeride.ray's tasks list it in retry_exceptions; its actors exit so
    that Ray restarts them), and the node gets no bubble work until the daemon and a stage are back."""


class SideTaskFailed(RuntimeError):
    """The node's daemon refused the side task, or the side task failed or was cancelled on the node
    (the message has the daemon's reason and the task's stderr).  Not retried: Ray's retries are for
    lost nodes, not for work that fails."""


class LaneMemoryError(ValueError):
    """The work asks for more memory than any FreeRide lane offers (in the cluster, or on the node
    it was placed on), so it is not placed there."""

    def __init__(self, asked: int, largest: int, where: str = "this Ray cluster", nodes: str = ""):
        self.asked, self.largest = asked, largest
        detail = f" ({nodes})" if nodes else ""
        if largest:
            text = (f"freeride.ray: the work asks for lane_memory={format_bytes(asked)} but the largest FreeRide "
                    f"lane in {where} offers {format_bytes(largest)}{detail}; ask for less, or add a node whose "
                    "lanes have more (freeride daemon --lane-memory, or larger GPUs)")
        else:
            text = (f"freeride.ray: no node of {where} offers FreeRide lanes{detail}: start each training node's "
                    "Ray with `python -m freeride.ray node-args` (docs/ray.md)")
        super().__init__(text)
