"""freeride.ray's public functions: Ray tasks, actors and Ray Data stages that run in bubbles.

Each is an ordinary Ray task or actor (a "wrapper") that asks Ray for a `freeride_lane` slot,
takes no CPU of Ray's, and hands its work to a side task on its node's daemon (_side_task),
which runs it only inside that lane's bubbles.  Ray places, retries, moves objects and shows
them in its dashboard; FreeRide only decides when on the node the work runs.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import time
from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from freeride._versions import tested, warn_once
from freeride.ray import _wire
from freeride.ray._daemon import NodeDaemon
from freeride.ray._resources import LANE_RESOURCE, placement
from freeride.ray._side_task import SideTask
from freeride.ray.errors import NodeUnavailable

# The Ray release freeride.ray is tested with (the `freeride[ray]` extra pins it).
TESTED_RAY = "2.60.0"
_TESTED_SERIES = (2, 60)
# Ray retries a task lost with its node's daemon this many times, and restarts an actor as often.
DEFAULT_RETRIES = 4
# How long the cluster's nodes (ray.nodes()) are reused to place work: a GCS round trip per
# submission would slow a queue of thousands.
_NODES_TTL_S = 5.0


def check_ray_version() -> bool:
    """Warns once per process when the installed Ray is outside the tested series; True if tested."""
    version = getattr(ray, "__version__", "unknown")
    if tested(version, _TESTED_SERIES):
        return True
    warn_once(("freeride.ray", "version"),
              f"freeride.ray is tested with Ray {TESTED_RAY} (the {'.'.join(map(str, _TESTED_SERIES))}.x series; "
              f"pip install 'freeride[ray]' installs it) and found Ray {version}; it goes on, but placement "
              "labels and retries may behave differently", stacklevel=3)
    return False


def init(address: str | None = None, **ray_init_kwargs: Any) -> Any:
    """ray.init for bubble work: joins the Ray cluster at `address` ("auto": the one this machine
    belongs to), or, with None, starts a one-node Ray that offers this machine's lanes (its daemon
    at $FREERIDE_SOCKET), for trying freeride.ray out on one machine."""
    check_ray_version()
    if address is not None:
        return ray.init(address=address, **ray_init_kwargs)
    from freeride.ray._resources import node_offer
    resources, labels = node_offer()
    ray_init_kwargs.setdefault("include_dashboard", False)
    return ray.init(resources=resources, labels=labels, **ray_init_kwargs)


def parse_bytes(value: int | str) -> int:
    """2147483648, "2GiB", "512MiB", "1.5GB" -> bytes."""
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"lane_memory must not be negative, not {value}")
        return value
    text = str(value).strip()
    units = {"TIB": 1 << 40, "GIB": 1 << 30, "MIB": 1 << 20, "KIB": 1 << 10, "TB": 10**12, "GB": 10**9,
             "MB": 10**6, "KB": 10**3, "B": 1}
    for suffix, size in units.items():
        if text.upper().endswith(suffix):
            number = text[:-len(suffix)].strip()
            try:
                amount = float(number)
            except ValueError:
                break
            if amount < 0:
                break
            return int(amount * size)
    if text.isdigit():
        return int(text)
    raise ValueError(f"lane_memory {value!r}: give bytes, or a size such as 2GiB or 512MiB")


_nodes_lock = threading.Lock()
_nodes_cache: tuple[float, list] = (0.0, [])


def _nodes() -> list[dict]:
    global _nodes_cache
    with _nodes_lock:
        at, nodes = _nodes_cache
        if time.monotonic() - at > _NODES_TTL_S:
            nodes = ray.nodes()
            _nodes_cache = (time.monotonic(), nodes)
        return nodes


def options(lane_memory: int | str = 0, **ray_options: Any) -> dict:
    """Ray options that place work on a node whose lanes hold `lane_memory`: one `freeride_lane`
    slot, no CPU of Ray's (the work runs in bubbles, not on Ray's share), and a label selector.
    For Ray Data: ``ds.map_batches(freeride.ray.batches(Model), concurrency=2,
    **freeride.ray.options(lane_memory="2GiB"))``.  Raises LaneMemoryError when no node fits."""
    check_ray_version()
    placed = placement(parse_bytes(lane_memory), _nodes())
    merged = {"num_cpus": 0, **ray_options}
    merged["resources"] = {**ray_options.get("resources", {}), **placed["resources"]}
    if "label_selector" in placed:
        merged["label_selector"] = {**ray_options.get("label_selector", {}), **placed["label_selector"]}
    return merged


def _lost(error: NodeUnavailable) -> None:
    """Ends this actor's process so that Ray restarts the actor (elsewhere, once the blocker holds
    this node) and retries its calls: Ray restarts actors whose process died, not ones that raised."""
    print(f"freeride.ray: {error}; ending this actor's process so that Ray restarts it", file=sys.stderr, flush=True)
    sys.stderr.flush()
    os._exit(1)


class RemoteFunction:
    """A function whose calls run as Ray tasks, in bubbles.  .remote(...) and .options(...) as Ray's."""

    def __init__(self, fn: Callable, lane_memory: int, priority: int, unit: str, ray_options: dict,
                 _remote: Any = None):
        self._fn, self._lane_memory, self._priority, self._unit = fn, lane_memory, priority, unit
        self._ray_options = ray_options
        if _remote is not None:  # .options(): the same Ray function, other options at each call
            self._remote = _remote
            return

        def run_in_bubbles(*args: Any, **kwargs: Any) -> Any:
            work = _wire.Work("function", fn, unit=unit, call=("call", 0, None, args, kwargs))
            side = SideTask(work, fn.__name__, lane_memory, priority)
            try:
                return side.result()
            finally:
                side.close()

        functools.update_wrapper(run_in_bubbles, fn)
        defaults = {"num_cpus": 0, "max_retries": DEFAULT_RETRIES, "retry_exceptions": [NodeUnavailable]}
        self._remote = ray.remote(**{**defaults, **ray_options})(run_in_bubbles)

    def options(self, **ray_options: Any) -> "RemoteFunction":
        return RemoteFunction(self._fn, self._lane_memory, self._priority, self._unit,
                              {**self._ray_options, **ray_options}, self._remote)

    def remote(self, *args: Any, **kwargs: Any) -> ray.ObjectRef:
        return self._remote.options(**options(self._lane_memory, **self._ray_options)).remote(*args, **kwargs)


def _proxy_class(cls: type, work_kind: str, lane_memory: int, priority: int, unit: str,
                 rows_per_step: int = 0) -> type:
    """A class whose instance holds a side task running an instance of `cls`, and whose public
    methods (and __call__, for Ray Data) forward to it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        work = _wire.Work(work_kind, cls, args, kwargs, unit, rows_per_step)
        try:
            self._side = SideTask(work, cls.__name__, lane_memory, priority)
        except NodeUnavailable as e:
            _lost(e)

    def forward(name: str) -> Callable:
        def method(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return self._side.call(None if name == "__call__" and work_kind == "batches" else name, args, kwargs)
            except NodeUnavailable as e:
                _lost(e)
        method.__name__ = method.__qualname__ = name
        return method

    names = [n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")]
    if callable(getattr(cls, "__call__", None)) and "__call__" in vars(cls):
        names.append("__call__")
    namespace = {"__init__": __init__, "__doc__": cls.__doc__, "__module__": cls.__module__,
                 **{n: forward(n) for n in names}}
    return type(cls.__name__, (), namespace)


class RemoteClass:
    """A class whose instances are Ray actors whose method calls run in bubbles."""

    def __init__(self, cls: type, lane_memory: int, priority: int, unit: str, ray_options: dict,
                 _remote: Any = None):
        self._cls, self._lane_memory, self._priority, self._unit = cls, lane_memory, priority, unit
        self._ray_options = ray_options
        if _remote is None:
            defaults = {"num_cpus": 0, "max_restarts": DEFAULT_RETRIES, "max_task_retries": DEFAULT_RETRIES}
            proxy = _proxy_class(cls, "actor", lane_memory, priority, unit)
            _remote = ray.remote(**{**defaults, **ray_options})(proxy)
        self._remote = _remote

    def options(self, **ray_options: Any) -> "RemoteClass":
        return RemoteClass(self._cls, self._lane_memory, self._priority, self._unit,
                           {**self._ray_options, **ray_options}, self._remote)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._remote.options(**options(self._lane_memory, **self._ray_options)).remote(*args, **kwargs)


def remote(target: Callable | type | None = None, *, lane_memory: int | str = 0, priority: int = 0,
           unit: str = "steps", **ray_options: Any) -> Any:
    """Like @ray.remote, for work that runs in FreeRide's bubbles on the node Ray places it on.

    A function is one step, or, written as a generator, a step per ``yield`` (yield the units of
    work done; its return value is the result).  An actor's method calls are one step each, or a
    step per yield.  `lane_memory` (bytes or "2GiB") is the memory it declares: Ray places it
    only on nodes with a lane that large, and raises LaneMemoryError at .remote() when none has.
    `priority` orders it among its lane's side tasks; `unit` names what its steps count.  Other
    keyword arguments are Ray's options (max_retries, resources, runtime_env, ...)."""
    check_ray_version()
    memory = parse_bytes(lane_memory)

    def wrap(t: Callable | type) -> Any:
        if inspect.isclass(t):
            return RemoteClass(t, memory, priority, unit, ray_options)
        if callable(t):
            return RemoteFunction(t, memory, priority, unit, ray_options)
        raise TypeError(f"freeride.ray.remote: {t!r} is neither a function nor a class")

    return wrap(target) if target is not None else wrap


def batches(udf: Callable | type, *, lane_memory: int | str = 0, rows_per_step: int = 64,
            priority: int = 0) -> Callable | type:
    """A Ray Data ``map_batches`` UDF whose batches are done in bubbles, `rows_per_step` rows per
    step.  A class (Ray Data's actors) is built once per actor inside its side task; a function
    gets a side task per batch.  Place it with ``**freeride.ray.options(lane_memory=...)``."""
    check_ray_version()
    memory = parse_bytes(lane_memory)
    if rows_per_step < 0:
        raise ValueError(f"rows_per_step must not be negative, not {rows_per_step}")
    if inspect.isclass(udf):
        if "__call__" not in dir(udf):
            raise TypeError(f"freeride.ray.batches: {udf.__name__} has no __call__(batch)")
        return _proxy_class(udf, "batches", memory, priority, "rows", rows_per_step)

    def run_batch_in_bubbles(batch: Any) -> Any:
        work = _wire.Work("batches", udf, unit="rows", rows_per_step=rows_per_step,
                          call=("call", 0, None, (batch,), {}))
        side = SideTask(work, getattr(udf, "__name__", "batch"), memory, priority)
        try:
            return side.result()
        finally:
            side.close()

    functools.update_wrapper(run_batch_in_bubbles, udf)
    return run_batch_in_bubbles


@ray.remote(num_cpus=0)
def _node_status() -> dict:
    try:
        daemon = NodeDaemon()
        return {"socket": daemon.where(), "status": daemon.status()}
    except Exception as e:  # noqa: BLE001 - reported, not raised (no daemon, no client, a refusal)
        return {"error": f"{type(e).__name__}: {e}"}


def cluster_report(timeout_s: float = 30.0) -> list[dict]:
    """Each Ray node that offers lanes, as Ray sees it (its slots, in use or free) beside what its
    daemon reports (per lane: bubble time, harvested share, the training's live slowdown)."""
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(LANE_RESOURCE)]
    try:
        from ray._private.state import state  # per-node free resources: not in Ray's public API
        free = state.available_resources_per_node()
    except Exception as e:  # noqa: BLE001 - the report goes on without it
        print(f"freeride.ray: Ray's free resources per node are unknown: {type(e).__name__}: {e}", file=sys.stderr)
        free = {}
    refs = [_node_status.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in nodes]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    report = []
    for node, ref in zip(nodes, refs):
        answer = ray.get(ref) if ref in ready else {"error": f"no answer in {timeout_s:.0f} s"}
        # Ray leaves out resources none of which is free.
        slots_free = free[node["NodeID"]].get(LANE_RESOURCE, 0.0) if node["NodeID"] in free else None
        entry = {"node_id": node["NodeID"], "address": node.get("NodeManagerAddress", ""),
                 "slots": node["Resources"][LANE_RESOURCE], "slots_free": slots_free, **answer}
        report.append(entry)
    return report


def format_report(report: list[dict]) -> str:
    """cluster_report() as a table, one row per lane."""
    lines = [f"{'ray node':<14} {'address':<15} {'slots':>9}  {'lane':>4} {'stage':>7} {'bubbles':>8} "
             f"{'idle':>9} {'harvest':>8} {'slowdown':>22}  side tasks"]
    for n in report:
        used = "?" if n["slots_free"] is None else f"{n['slots'] - n['slots_free']:g}"
        head = f"{n['node_id'][:12]:<14} {n['address']:<15} {used + '/' + format(n['slots'], 'g') + ' used':>9}"
        if "error" in n:
            lines.append(f"{head}  no FreeRide: {n['error']}")
            continue
        tasks = n["status"].get("tasks", {}).get("tasks", [])
        for lane in n["status"]["stats"]["lanes"]:
            bubble, harvested = int(lane["bubble_ns"]), int(lane["harvested_ns"])
            share = f"{harvested / bubble:.1%}" if bubble else "-"
            o = lane.get("overhead", {})
            slowdown = (f"{o['slowdown']:+.2%} [{o['slowdown_low']:+.2%},{o['slowdown_high']:+.2%}]"
                        if o.get("known") else f"({o.get('cycles', 0)}/{o.get('min_cycles', 0)} cycles)")
            mine = [t for t in tasks if int(t["lane"]) == int(lane["lane"])]
            stage = str(lane["stage_pid"]) if lane["stage_alive"] else "-"
            lines.append(f"{head} {int(lane['lane']):>5} {stage:>7} {int(lane['bubbles']):>8} "
                         f"{bubble / 1e9:>8.2f}s {share:>8} {slowdown:>22}  {len(mine)} live")
            head = " " * len(head)
    return "\n".join(lines)
