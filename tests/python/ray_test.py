"""freeride.ray on a one-node Ray started as a user would (`ray start --head $(python -m
freeride.ray node-args)`), beside a daemon with one CPU lane and a stand-in stage: the three
examples (task, actor, Ray Data) run their work as side tasks, every step inside a bubble; work
asking more lane memory than any lane has is refused at .remote(), saying why; runtime_env
variables reach the side task while the lane's own FREERIDE_* win; an untested Ray warns once.
The placement rule is also checked on made-up clusters (a node without FreeRide gets nothing)."""
from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import warnings

import pytest

from conftest import NORMAL_CPU_TASKS, SOURCE_DIR, Daemon

sys.path.insert(0, str(SOURCE_DIR / "python"))

# Ray's token authentication, explicitly (unset, it depends on whether ~/.ray/auth_token exists),
# with a token of the test's own in the environment of every Ray process; Ray reads it on import.
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
import ray  # noqa: E402  (scripts/python-env.sh installs ray[data]==2.60.0)

import freeride.ray  # noqa: E402
import freeride._versions as versions  # noqa: E402
from freeride.ray._resources import LANE_RESOURCE, MEMORY_LABEL, placement  # noqa: E402
from freeride.ray.errors import LaneMemoryError  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(build_dir, freeride_env):
    """(daemon, head address, env): a daemon with one 512 MiB CPU lane, a stand-in stage, and a
    one-node Ray head offering the lane, started with node-args as docs/ray.md says."""
    daemon = Daemon(build_dir, freeride_env, "--cpu-lanes", "1", "--lane-memory", "512MiB", *NORMAL_CPU_TASKS)
    env = dict(daemon.env, PATH=f"{build_dir}{os.pathsep}{os.environ['PATH']}", RAY_USAGE_STATS_ENABLED="0",
               RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=os.environ["RAY_AUTH_TOKEN"])
    stage = daemon.stage("4", "8,8")
    args = subprocess.run([sys.executable, "-m", "freeride.ray", "node-args"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert args.returncode == 0, args.stderr
    words = shlex.split(args.stdout)
    assert words[0] == "--resources" and json.loads(words[1]) == {LANE_RESOURCE: 1}, words
    assert words[2:] == ["--labels", f"{MEMORY_LABEL}={512 << 20}"], words
    port = free_port()
    temp = tempfile.mkdtemp(prefix="frray-")
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    log = open(os.path.join(daemon.dir, "ray.log"), "w")
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", "--port", str(port), "--num-cpus", "2",
                             "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", temp, *words],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    try:
        # Joined only once started: the head makes Ray's token on a machine that has none.
        deadline = time.monotonic() + 300
        while "Ray runtime started" not in open(log.name).read():
            assert head.poll() is None, f"ray start failed:\n{open(log.name).read()[-3000:]}"
            assert time.monotonic() < deadline, "Ray did not start in 300 s"
            time.sleep(0.5)
        ray.init(address=address, logging_level="ERROR")
        yield daemon, address, env
    finally:
        ray.shutdown()
        head.terminate()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        stage.kill()
        stage.wait()
        daemon.stop()


def run_example(cluster, name: str, *args: str) -> dict:
    daemon, address, env = cluster
    out = os.path.join(daemon.dir, name + ".json")
    p = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / name), "--address", address, "--out", out,
                        *args], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{name} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    print(p.stdout)
    with open(out) as f:
        return json.load(f)


def ray_side_tasks(daemon: Daemon) -> list[dict]:
    tasks = json.loads(daemon.cli_run("status", "--json", "--all"))["tasks"]["tasks"]
    return [t for t in tasks if t["spec"]["name"].startswith("ray.")]


def check_steps_inside_bubbles(daemon: Daemon, task_ids: set[int]) -> float:
    """Every step of these side tasks started inside its bubble; their units in all."""
    time.sleep(0.5)  # the event log is written in batches
    events = daemon.events()
    bubbles = {(e["lane"], e["seq"]): e for e in events if e["type"] == "bubble"}
    steps = [e for e in events if e["type"] == "step" and e["task_id"] in task_ids]
    assert steps, "no steps were logged"
    for s in steps:
        b = bubbles.get((s["lane"], s["bubble_seq"]))
        if b is None:
            assert s.get("late"), f"a step in a bubble the lane knows nothing of: {s}"
            continue
        assert b["begin_ns"] <= s["start_ns"] <= b["end_ns"], f"a step started outside its bubble: {s} {b}"
    return sum(s["units"] for s in steps)


def test_the_examples_run_their_work_in_bubbles(cluster):
    daemon = cluster[0]
    tasks = run_example(cluster, "ray_tasks.py", "--tasks", "6", "--chunks", "8", "--per-chunk", "500")
    assert sorted(r["seed"] for r in tasks["results"]) == list(range(6)) and not tasks["wrong"], tasks
    node = ray.get_runtime_context().get_node_id()
    assert {r["node"] for r in tasks["results"]} == {node}
    assert tasks["report"][0]["node_id"] == node and tasks["report"][0]["slots"] == 1, tasks["report"]
    lane = tasks["report"][0]["status"]["stats"]["lanes"][0]
    assert int(lane["harvested_ns"]) > 0, lane

    actor = run_example(cluster, "ray_actor.py", "--rows", "1024")
    # The second fit starts from the first one's weights: the actor kept its state between calls.
    assert actor["second"] < actor["first"] and actor["second"] < 1e-3, actor
    assert actor["predicted"] == pytest.approx(actor["expected"])

    data = run_example(cluster, "ray_data.py", "--rows", "600")
    assert data["ids"] == list(range(600)) and data["worst"] < 1e-9, data

    side = ray_side_tasks(daemon)
    assert all(t["state"] == "FINISHED" for t in side), [(t["spec"]["name"], t["state"], t["message"]) for t in side]
    by_kind = {kind: [t for t in side if t["spec"]["name"].startswith(f"ray.{kind}.")]
               for kind in ("hash_chain", "LinearModel", "Embed")}
    assert len(by_kind["hash_chain"]) == 6 and len(by_kind["LinearModel"]) == 1 and by_kind["Embed"], by_kind
    units = check_steps_inside_bubbles(daemon, {int(t["id"]) for t in by_kind["hash_chain"]})
    assert units == 6 * 8, "a unit per chunk"
    rows = check_steps_inside_bubbles(daemon, {int(t["id"]) for t in by_kind["Embed"]})
    assert rows == 600, "every row once, in steps of 100"
    fitted = check_steps_inside_bubbles(daemon, {int(t["id"]) for t in by_kind["LinearModel"]})
    assert fitted >= 2 * 5 * 1024, "two fits of five epochs"


def test_more_lane_memory_than_any_lane_is_refused_at_remote_saying_why(cluster):
    @freeride.ray.remote(lane_memory="1GiB")
    def big() -> int:
        return 1

    with pytest.raises(LaneMemoryError, match=r"lane_memory=1 GiB but the largest FreeRide lane in this Ray "
                                              r"cluster offers 512 MiB"):
        big.remote()
    with pytest.raises(LaneMemoryError):
        freeride.ray.options(lane_memory="600MiB")
    fits = freeride.ray.options(lane_memory="256MiB")
    assert fits["label_selector"] == {MEMORY_LABEL: f"in({512 << 20})"} and fits["num_cpus"] == 0, fits


def test_runtime_env_variables_reach_the_side_task_and_the_lanes_own_win(cluster):
    daemon = cluster[0]

    @freeride.ray.remote(runtime_env={"env_vars": {"FREERIDE_TEST_MARK": "from-runtime-env",
                                                   "FREERIDE_LANE": "7"}})
    def environment() -> dict:
        return {k: os.environ.get(k) for k in ("FREERIDE_TEST_MARK", "FREERIDE_SOCKET", "FREERIDE_LANE",
                                                "FREERIDE_TASK_SEGMENT", "FREERIDE_RAY_NODE_ID")}

    seen = ray.get(environment.remote(), timeout=300)
    assert seen["FREERIDE_TEST_MARK"] == "from-runtime-env", seen
    assert seen["FREERIDE_SOCKET"] == daemon.socket and seen["FREERIDE_LANE"] == "0", seen
    assert seen["FREERIDE_TASK_SEGMENT"], seen
    assert seen["FREERIDE_RAY_NODE_ID"] == ray.get_runtime_context().get_node_id(), seen


def test_an_untested_ray_version_warns_once(monkeypatch):
    from freeride.ray._api import check_ray_version
    monkeypatch.setattr(ray, "__version__", "2.59.1")
    versions._warned.discard(("freeride.ray", "version"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert check_ray_version() is False
        assert check_ray_version() is False
    texts = [str(w.message) for w in caught]
    assert len(texts) == 1 and "tested with Ray 2.60.0" in texts[0] and "found Ray 2.59.1" in texts[0], texts
    monkeypatch.setattr(ray, "__version__", "2.60.0")
    assert check_ray_version() is True


def made_up_node(node_id: str, lanes: int | None, memory: str | None) -> dict:
    resources = {"CPU": 4.0}
    labels = {}
    if lanes is not None:
        resources[LANE_RESOURCE] = float(lanes)
    if memory is not None:
        labels[MEMORY_LABEL] = memory
    return {"NodeID": node_id, "Alive": True, "Resources": resources, "Labels": labels}


def test_placement_asks_for_a_lane_slot_and_a_node_whose_lanes_hold_the_memory():
    head = made_up_node("head", None, None)                    # no FreeRide: never chosen
    small, large = made_up_node("small", 2, str(4 << 30)), made_up_node("large", 4, str(80 << 30))
    assert placement(0, [head, small, large]) == {"resources": {LANE_RESOURCE: 1}}
    assert placement(8 << 30, [head, small, large])["label_selector"] == {MEMORY_LABEL: f"in({80 << 30})"}
    assert placement(1 << 30, [head, small, large])["label_selector"] == \
        {MEMORY_LABEL: f"in({4 << 30},{80 << 30})"}
    unlimited = made_up_node("cpu", 1, "unlimited")
    assert placement(1 << 40, [small, unlimited])["label_selector"] == {MEMORY_LABEL: "in(unlimited)"}
    with pytest.raises(LaneMemoryError, match=r"offers 80 GiB \(node small: 4 GiB, node large: 80 GiB\)"):
        placement(100 << 30, [head, small, large])
    with pytest.raises(LaneMemoryError, match="no node of this Ray cluster offers FreeRide lanes"):
        placement(0, [head])
    dead = dict(large, Alive=False)
    with pytest.raises(LaneMemoryError, match="offers 4 GiB"):
        placement(8 << 30, [head, small, dead])
