"""A cluster queue of side work through Ray, run in the bubbles of a pipeline trained across two
"nodes" on one machine, as a new user would set it up (docs/ray.md).

Three network namespaces: a Ray head without FreeRide, and two nodes, n1 and n2, each with a
FreeRide daemon (one CPU lane), a Ray worker that joined the head offering that lane
(`ray start ... $(python -m freeride.ray node-args)`), and one stage of a 2-stage GPT pipeline
trained by torchrun over gloo across the namespaces.  The pipeline first trains alone (the
baseline iteration time, Ray running idle); then it trains again while a driver on the head
submits a queue of tasks through Ray (examples/ray_tasks.py).  Once a task of the queue has
stepped on n1, n1's daemon is killed with SIGKILL, and restarted on its journal 15 s later.

Checks: every task completed exactly once (one right result each, and one record of its work);
the work ran on both nodes and none on the head; every side-task step on each node started
inside a training bubble; the killed node's work was retried (its lost attempts redone, its
relaunched runners did nothing) and nothing was lost or done twice.  It prints the training's
iteration time beside two runs without the queue, one before and one after it, and the
`freeride.ray status` table.

Usage: ray_test.py SOURCE_DIR BUILD_DIR [--tasks N] [--results FILE].  Exit 77 (skipped, with
the reason) when not root, or without torch under FREERIDE_SKIP_TORCH=1.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from multinode import Cluster, NodeDaemon, check_node, read_events, wait_for  # noqa: E402
from multinode.checks import expect  # noqa: E402
from multinode.prereqs import require_root_and_torch  # noqa: E402
from multinode.ray_nodes import RayNode, node_args, ray_env  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "python"))
from freeride.ray._api import format_report  # noqa: E402

# Side tasks at the normal policy, not SCHED_IDLE: the queue must finish on a machine other work
# keeps busy, and they still run only in bubbles (tests/python/conftest.py: NORMAL_CPU_TASKS).
DAEMON_ARGS = ["--cpu-lanes", "1", "--lane-memory", "1GiB", "--cpu-task-priority", "normal"]
RESTART_AFTER_S = 15
# The queue takes 1 to 3 minutes on a loaded 2-core machine; a queue not done in 20 fails the
# test with what each node was doing, inside ctest's 40-minute limit.
QUEUE_TIMEOUT_S = 1200
CHUNKS = 20  # steps per task of the queue
TRAIN = ["--device", "cpu", "--preset", "tiny", "--schedule", "1f1b", "--warmup", "3", "--freeride", "on"]


def mean_iteration_ms(result: dict) -> float:
    return statistics.mean(result["iter_ms"][result["warmup"]:])


def ray_side_tasks(daemon: NodeDaemon) -> list[dict]:
    return [t for t in daemon.status()["tasks"].get("tasks", []) if t["spec"]["name"].startswith("ray.")]


def without_the_killed_daemons_cut_tail(state: str, killed_ns: int, run_dir: str) -> tuple[str, int]:
    """A copy of `state`'s event log for check_node, less the steps that a daemon SIGKILLed at
    killed_ns logged in its last seconds without their bubble's event: a lane writes a bubble's
    event after its steps' (docs/event-log.md), up to 100 ms after the bubble and in batches, and
    the kill can cut a batch between them (5 s: a lane thread may lag on a loaded machine).  Every
    other step must still have started inside its bubble.  (copy's folder, steps left out)"""
    events = read_events(state)
    bubbles = {(e["lane"], e["seq"]) for e in events if e["type"] == "bubble"}
    cut = [e for e in events if e["type"] == "step" and (e["lane"], e["bubble_seq"]) not in bubbles
           and not e.get("late") and killed_ns - 5_000_000_000 <= e["start_ns"] <= killed_ns]
    copy = os.path.join(run_dir, "n1-events-checked")
    os.makedirs(copy, exist_ok=True)
    with open(os.path.join(copy, "events.jsonl"), "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in events if not any(e is c for c in cut))
    return copy, len(cut)


def stuck_report(daemons: dict[str, NodeDaemon], driver_log: str) -> str:
    """What each node's lane and side tasks were doing, for a queue that did not end."""
    lines = []
    for name, d in daemons.items():
        try:
            status = d.status()
            lanes = status["stats"]["lanes"]
            lines.append(f"{name}: lanes {json.dumps(lanes)[:1500]}")
            for t in status["tasks"].get("tasks", []):
                lines.append(f"  {t['spec']['name']} {t.get('state')} pid {t.get('pid')} progress "
                             f"{t.get('progress')} {t.get('message', '')}")
        except Exception as e:  # noqa: BLE001 - a report of what could be seen
            lines.append(f"{name}: no status ({e})")
        lines.append(f"{name}'s daemon log, last lines:\n{d.log()[-1500:]}")
    lines.append("the driver's log, last lines:\n" + open(driver_log).read()[-3000:])
    return "\n".join(lines)


class Training(threading.Thread):
    """cluster.torchrun in the background; .result or .error once joined."""

    def __init__(self, cluster: Cluster, daemons: list[NodeDaemon], args: list[str], per_node: list[list[str]]):
        super().__init__(daemon=True)
        self.cluster, self.daemons, self.args, self.per_node = cluster, daemons, args, per_node
        self.result: dict | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.cluster.torchrun(self.daemons, "examples/train_gpt_pipeline.py", self.args,
                                                per_node_args=self.per_node, timeout_s=3600)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("build")
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--results", help="also write the summary to this file")
    args = parser.parse_args()
    source, build = args.source, args.build
    require_root_and_torch()
    cores = sorted(os.sched_getaffinity(0))
    started = time.monotonic()
    summary: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        summary.append(line)

    with Cluster(build, source, ["n1", "n2"], extra=["head"]) as cluster:
        nodes = ["n1", "n2"]
        daemons, per_node = {}, []
        for k, name in enumerate(nodes):
            # Stage k and its lane's side tasks share core k: the tasks get it only while the stage
            # waits (in its bubbles).
            core = str(cores[k % len(cores)])
            daemons[name] = cluster.start_daemon(name, *DAEMON_ARGS, "--lane-cores", core)
            per_node.append(["--cores", core])
        head = RayNode(cluster.node("head"), cluster.dir, build, cluster.env, None)
        head.wait_started()
        workers = [RayNode(cluster.node(n), cluster.dir, build, cluster.env, head.address, daemons[n].socket,
                           node_args(daemons[n], cluster.env)) for n in nodes]
        for w in workers:
            w.wait_started()
        say(f"Ray: head {head.address} (no FreeRide), workers on {', '.join(w.address for w in workers)} "
            f"offering one lane each; started in {time.monotonic() - started:.0f} s")

        # The baseline: the same training with Ray idle and no queue.
        never = os.path.join(cluster.dir, "never")
        base = cluster.torchrun(list(daemons.values()), "examples/train_gpt_pipeline.py",
                                [*TRAIN, "--steps", "60", "--stop-file", never], per_node_args=per_node)

        # The training again, until the queue is done.
        stop = os.path.join(cluster.dir, "stop")
        training = Training(cluster, list(daemons.values()), [*TRAIN, "--steps", "100000", "--stop-file", stop],
                            per_node)
        training.start()
        wait_for("the training's bubbles on both nodes",
                 lambda: all(int(d.status()["stats"]["lanes"][0]["bubbles"]) > 20 for d in daemons.values()), 300)

        record, out = os.path.join(cluster.dir, "record.jsonl"), os.path.join(cluster.dir, "queue.json")
        driver_log = open(os.path.join(cluster.dir, "driver.log"), "w")
        driver = subprocess.Popen(cluster.node("head").command(
            [sys.executable, os.path.join(source, "examples", "ray_tasks.py"), "--address", head.address, "--tasks",
             str(args.tasks), "--chunks", str(CHUNKS), "--per-chunk", "1500", "--record", record, "--out", out]),
            env=ray_env(cluster.env, build, None), stdout=driver_log, stderr=subprocess.STDOUT)

        # Kill n1's daemon while a task of the queue is halfway through there.  The daemon's view of a
        # task's progress lags its steps (an armed task's are accounted in batches, up to 100 ms
        # apart, later under load), so a task it shows halfway may have finished meanwhile: the
        # task's runner is frozen (SIGSTOP) first, and taken only if it has not recorded its
        # result.  Frozen, it cannot finish before the kill; it dies with the daemon (SIGKILL
        # through its parent-death signal ends a stopped process too).
        n1 = daemons["n1"]
        halfway = lambda t: t["state"] in ("RUNNING", "PAUSED") and 1 <= float(t["progress"]) <= CHUNKS // 2
        live_at_kill: dict[str, int] = {}

        def recorded_pids() -> set[int]:
            if not os.path.exists(record):
                return set()
            with open(record) as f:
                return {json.loads(line)["pid"] for line in f if line.strip()}

        def halfway_frozen() -> bool:
            tasks = ray_side_tasks(n1)
            for t in filter(halfway, tasks):
                pid = int(t["pid"])
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                if pid not in recorded_pids():
                    live_at_kill.clear()
                    live_at_kill.update({t["spec"]["name"]: int(t["pid"]) for t in ray_side_tasks(n1)
                                         if t["state"] not in ("FINISHED", "FAILED", "CANCELLED")})
                    live_at_kill[t["spec"]["name"]] = pid
                    return True
                os.kill(pid, signal.SIGCONT)  # finished already: not the one
            return False
        wait_for("a task of the queue halfway through on n1, frozen before its end", halfway_frozen, 600,
                 interval_s=0.1)
        n1.process.send_signal(signal.SIGKILL)
        killed_ns = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock of the events' *_ns
        n1.process.wait()
        say(f"killed n1's daemon (SIGKILL) with side tasks {sorted(live_at_kill)} live there, one halfway")
        time.sleep(RESTART_AFTER_S)
        shutil.copy(n1.log_path, n1.log_path + ".killed")
        n1 = daemons["n1"] = NodeDaemon(n1.net, cluster.dir, build, cluster.env, [*DAEMON_ARGS, "--lane-cores",
                                                                                 per_node[0][1]])
        say(f"restarted n1's daemon on its journal after {RESTART_AFTER_S} s")

        try:
            try:
                code = driver.wait(timeout=QUEUE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                expect(False, f"the queue was not done in {QUEUE_TIMEOUT_S} s:\n" + stuck_report(daemons, driver_log.name))
        finally:
            if driver.poll() is None:
                driver.kill()
            driver_log.close()
            with open(stop, "w"):
                pass
            training.join(timeout=600)
        driver_text = open(driver_log.name).read()
        expect(code == 0, f"the driver failed ({code}):\n{driver_text[-4000:]}")
        expect(training.error is None and training.result is not None, f"the training failed: {training.error}")
        with open(out) as f:
            queue = json.load(f)

        # Every task completed exactly once.
        results = queue["results"]
        expect(sorted(r["seed"] for r in results) == list(range(args.tasks)), f"results: {results}")
        expect(not queue["wrong"], f"wrong digests for seeds {queue['wrong']}")
        with open(record) as f:
            done = [json.loads(line) for line in f]
        counts = {s: sum(1 for d in done if d["seed"] == s) for s in range(args.tasks)}
        twice = {s: c for s, c in counts.items() if c != 1}
        expect(not twice, f"tasks whose work was recorded other than once: {twice}")

        # Spread over both nodes, none on the head (it offers no lane).
        by_address = {n["address"]: n["node_id"] for n in queue["report"]}
        expect(set(by_address) == {cluster.node(n).address for n in nodes},
               f"nodes offering lanes: {sorted(by_address)}")
        per_node_count = {n: sum(1 for r in results if r["node"] == by_address[cluster.node(n).address])
                          for n in nodes}
        expect(all(per_node_count.values()), f"tasks per node: {per_node_count}")
        expect(sum(per_node_count.values()) == args.tasks, f"tasks on other nodes than n1 and n2: {per_node_count}")

        # The killed node's work: the attempts lost with its daemon (live then, and no record of their
        # work) were retried by Ray, whose records are above; the runners the restarted daemon
        # relaunched found their Ray task gone and did nothing.
        submitted = {n: ray_side_tasks(daemons[n]) for n in nodes}
        worked = {d["pid"] for d in done}
        lost = [json.loads(daemons["n1"].cli("show", name, "--json"))  # `show` has the stderr tail
                for name, pid in live_at_kill.items() if pid not in worked]
        expect(lost, f"no attempt was lost with n1's daemon: {live_at_kill} all finished")
        n1_events = read_events(daemons["n1"].state)
        for t in lost:
            # Its progress is the lost attempt's (the daemon keeps it across a relaunch); the relaunch
            # itself must have done nothing: no step after its launch.
            relaunched_ns = max(e["unix_ns"] for e in n1_events if e["type"] == "launch" and e["task_id"] == int(t["id"]))
            later = [e for e in n1_events if e["type"] == "step" and e["task_id"] == int(t["id"])
                     and e["unix_ns"] > relaunched_ns]
            expect(t["state"] in ("FINISHED", "CANCELLED") and not later
                   and ("nothing to do" in t.get("stderr_tail", "") or t["state"] == "CANCELLED"),
                   f"n1's relaunched runner {t['spec']['name']} is {t['state']} with {len(later)} steps after its "
                   f"relaunch: {t.get('message')} {t.get('stderr_tail', '')[-500:]}")
        attempts = sum(len(v) for v in submitted.values())
        expect(attempts >= args.tasks + len(lost), f"{attempts} side tasks for {args.tasks} tasks and "
                                                    f"{len(lost)} lost attempts: nothing was retried")
        say(f"{args.tasks} tasks, each completed once: {per_node_count['n1']} on n1, {per_node_count['n2']} on n2, "
            f"none on the head; {len(lost)} lost with n1's daemon and retried by Ray; {attempts} side tasks "
            f"in all; queue done in {queue['seconds']:.0f} s")

        # No side task stepped outside a bubble.
        for n in nodes:
            state, cut = daemons[n].state, 0
            if n == "n1":
                state, cut = without_the_killed_daemons_cut_tail(daemons[n].state, killed_ns, cluster.dir)
            rec = check_node(n, state, min_bubbles=60, min_steps=1)
            say(rec.line() + (f"; {cut} steps of the SIGKILLed daemon's last seconds lost their bubble's event"
                              if cut else ""))

        # The baseline again after the queue: two runs without it bracket the one with it, which
        # shows how much the machine's own load moved meanwhile.
        after = cluster.torchrun(list(daemons.values()), "examples/train_gpt_pipeline.py",
                                 [*TRAIN, "--steps", "60", "--stop-file", never], per_node_args=per_node)
        base_ms, after_ms = mean_iteration_ms(base), mean_iteration_ms(after)
        queue_ms = mean_iteration_ms(training.result)
        without = (base_ms + after_ms) / 2
        say(f"training iteration time: {queue_ms:.1f} ms with the queue ({len(training.result['iter_ms']) - 3} "
            f"iterations, the SIGKILL and restart included) against {base_ms:.1f} ms before it and "
            f"{after_ms:.1f} ms after it without the queue ({len(base['iter_ms']) - 3} iterations each): "
            f"{queue_ms / without - 1:+.1%} against their mean")
        say("freeride.ray status at the end of the queue (harvest: of all the idle time the lane saw):\n"
            + format_report(queue["report"]))
        for n in nodes:
            daemons[n].stop()
    say(f"PASS in {time.monotonic() - started:.0f} s")
    if args.results:
        with open(args.results, "w") as f:
            f.write("\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
