"""freeride.ray's node half without Ray: the wrapper's SideTask against the real daemon, and the
runner it submits.  Work runs as an iterative side task, only inside bubbles; results, the user's
exceptions, a failed side task, a killed daemon and an ended stage each reach the caller as what
they are; a runner whose caller has gone does nothing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import NORMAL_CPU_TASKS, SOURCE_DIR, Daemon

sys.path.insert(0, str(SOURCE_DIR / "python"))

from freeride.ray import _wire  # noqa: E402
from freeride.ray._daemon import NodeDaemon  # noqa: E402
from freeride.ray._side_task import SideTask  # noqa: E402
from freeride.ray.errors import LaneMemoryError, NodeUnavailable, SideTaskFailed  # noqa: E402

import cloudpickle  # noqa: E402

# The side task cannot import this test module: its functions travel by value, as a driver
# script's do.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def counted(n: int, step_s: float):
    """A generator task: n steps of step_s seconds each; returns n."""
    for _ in range(n):
        end = time.monotonic() + step_s
        while time.monotonic() < end:
            pass
        yield 1
    return n


def fails() -> None:
    raise KeyError("the user's own error")


def exits() -> None:
    os._exit(3)


class Accumulator:
    def __init__(self, start: int):
        self.total = start

    def add(self, n: int) -> int:
        self.total += n
        return self.total

    def add_slowly(self, n: int):
        for _ in range(n):
            self.total += 1
            yield 1
        return self.total


@pytest.fixture()
def node(build_dir, freeride_env, monkeypatch):
    """A daemon with one 1 GiB CPU lane, a stand-in stage marking bubbles, and this process's
    environment set as a Ray worker's would be (FREERIDE_SOCKET, the client on PATH)."""
    daemon = Daemon(build_dir, freeride_env, "--cpu-lanes", "1", "--lane-memory", "1GiB", *NORMAL_CPU_TASKS)
    for key in ("FREERIDE_SOCKET", "FREERIDE_LIB", "PYTHONPATH"):
        monkeypatch.setenv(key, daemon.env[key])
    monkeypatch.setenv("PATH", f"{build_dir}{os.pathsep}{os.environ['PATH']}")
    stage = daemon.stage("4", "6,6")
    yield daemon, stage
    stage.kill()
    stage.wait()
    if daemon.process.poll() is None:
        daemon.stop()


def steps_of_task(daemon: Daemon, task_id: int) -> tuple[list, dict]:
    time.sleep(0.5)  # the event log is written in batches
    events = daemon.events()
    bubbles = {(e["lane"], e["seq"]): e for e in events if e["type"] == "bubble"}
    steps = [e for e in events if e["type"] == "step" and e["task_id"] == task_id]
    return steps, bubbles


def test_a_generator_function_runs_a_step_per_yield_inside_bubbles(node):
    daemon, _ = node
    side = SideTask(_wire.Work("function", counted, call=("call", 0, None, (30, 0.001), {})), "counted", 1 << 20)
    try:
        assert side.result() == 30
    finally:
        side.close()
    info = daemon.wait_for_state(str(side.task_id), ("FINISHED", "FAILED"), 30)
    assert info["state"] == "FINISHED", info
    steps, bubbles = steps_of_task(daemon, side.task_id)
    assert sum(s["units"] for s in steps) == 30, steps
    for s in steps:
        b = bubbles.get((s["lane"], s["bubble_seq"]))
        if b is not None or not s.get("late"):
            assert b is not None and b["begin_ns"] <= s["start_ns"] <= b["end_ns"], (s, b)


def test_an_actor_keeps_its_state_and_records_no_step_while_idle(node):
    daemon, _ = node
    side = SideTask(_wire.Work("actor", Accumulator, (10,)), "acc", 1 << 20)
    try:
        assert side.call("add", (5,), {}) == 15
        time.sleep(1.0)  # idle: about a hundred bubbles pass with nothing to do
        idle_steps, _ = steps_of_task(daemon, side.task_id)
        assert side.call("add_slowly", (4,), {}) == 19
    finally:
        side.close()
    steps, _ = steps_of_task(daemon, side.task_id)
    # add: one step; add_slowly: a step per yield and one for its return.
    assert len(idle_steps) == 1, f"steps recorded while idle: {idle_steps}"
    assert len(steps) == 1 + 5, steps
    assert daemon.wait_for_state(str(side.task_id), ("FINISHED",), 30)["state"] == "FINISHED"


def test_the_users_exception_reaches_the_caller_with_the_side_tasks_traceback(node):
    side = SideTask(_wire.Work("function", fails, call=("call", 0, None, (), {})), "fails", 0)
    with pytest.raises(KeyError, match="the user's own error") as caught:
        side.result()
    side.close()
    assert any("in the FreeRide side task" in note for note in getattr(caught.value, "__notes__", []))


def test_a_side_task_that_dies_is_a_failure_with_the_daemons_reason(node):
    side = SideTask(_wire.Work("function", exits, call=("call", 0, None, (), {})), "exits", 0)
    with pytest.raises(SideTaskFailed, match="status 3"):
        side.result()
    side.close()


def test_more_memory_than_the_lane_offers_is_refused_before_submitting(node):
    daemon, _ = node
    with pytest.raises(LaneMemoryError, match=r"lane_memory=2 GiB.*offers 1 GiB"):
        SideTask(_wire.Work("function", fails, call=("call", 0, None, (), {})), "big", 2 << 30)
    assert json.loads(daemon.cli_run("status", "--json", "--all"))["tasks"]["tasks"] == []


def test_a_killed_daemon_is_a_lost_node_and_its_relaunched_runner_does_nothing(node, build_dir):
    daemon, _ = node
    side = SideTask(_wire.Work("function", counted, call=("call", 0, None, (100000, 0.001), {})), "long", 0)
    deadline = time.monotonic() + 60
    while daemon.show(str(side.task_id))["steps"] in ("0", 0) and time.monotonic() < deadline:
        time.sleep(0.1)
    daemon.process.send_signal(signal.SIGKILL)
    daemon.process.wait()
    started = time.monotonic()
    with pytest.raises(NodeUnavailable, match="daemon"):
        side.result()
    assert time.monotonic() - started < 15, "the loss was seen by the closed connection, at once"
    side.close()
    # Restarted on the same journal, the daemon relaunches the runner; its caller has gone.
    restarted_at = time.time_ns()
    restarted = subprocess.Popen([daemon.cli, "daemon", "--socket", daemon.socket, "--state-dir", daemon.state,
                                  "--cpu-lanes", "1", "--lane-memory", "1GiB", *NORMAL_CPU_TASKS,
                                  *(["--allow-root"] if os.geteuid() == 0 else [])],
                                 env=daemon.env, stdout=subprocess.DEVNULL, stderr=daemon.log)
    try:
        info = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                info = daemon.show(str(side.task_id))
            except subprocess.CalledProcessError:
                info = {}
            if info.get("state") in ("FINISHED", "FAILED", "CANCELLED"):
                break
            time.sleep(0.3)
        assert info.get("state") in ("FINISHED", "CANCELLED"), info
        assert int(info["attempts"]) >= 1
        steps, _ = steps_of_task(daemon, side.task_id)
        # Steps the restarted daemon logged: after it was started (the first daemon, killed and
        # reaped before then, may have logged its last steps after the first launch, and a runner
        # that exits at once may be reaped before its relaunch is logged).
        assert not [s for s in steps if s["unix_ns"] > restarted_at], "the relaunched runner did work"
    finally:
        restarted.terminate()
        restarted.wait(timeout=30)


def test_an_ended_stage_moves_the_work_off_the_node(node):
    daemon, stage = node
    side = SideTask(_wire.Work("function", counted, call=("call", 0, None, (100000, 0.001), {})), "orphan", 0)
    time.sleep(1.0)
    stage.kill()
    stage.wait()
    with pytest.raises(NodeUnavailable, match="training stage of lane 0 has ended"):
        side.result()
    side.close()
    assert daemon.wait_for_state(str(side.task_id), ("CANCELLED",), 30)["state"] == "CANCELLED"


def test_a_runner_whose_caller_is_gone_exits_at_once_with_nothing_done(node, tmp_path):
    daemon, _ = node
    out = daemon.cli_run("submit", "--json", "--name", "orphan-runner", "--", sys.executable, "-m",
                         "freeride.ray._runner", str(tmp_path / "nobody-listens"))
    task = json.loads(out)
    info = daemon.wait_for_state(str(task["id"]), ("FINISHED", "FAILED"), 60)
    assert info["state"] == "FINISHED", info
    assert "nothing to do" in info["stderr_tail"], info
    assert info["steps"] in ("0", 0), info


def test_node_daemon_reads_lanes(node):
    daemon, _ = node
    lanes = NodeDaemon().lanes()
    assert [(l.index, l.capacity_bytes) for l in lanes] == [(0, 1 << 30)]
    assert lanes[0].stage_alive and not lanes[0].stage_ended


def test_a_side_task_whose_stage_closed_cleanly_gives_its_node_up_and_new_work_waits_for_the_next(
        monkeypatch) -> None:
    """freeride_stage_close() sets the lane's stage pid back to 0, as on a lane no stage has
    attached to: only a crashed stage kept its pid, so a side task waited for bubbles for good
    once training ended normally.  A task that saw the stage alive now gives the node up; the
    node itself still serves new work (a new training may come)."""
    import freeride.ray._side_task as side_task
    from freeride.ray._daemon import lanes_of

    def status(pid: int, alive: bool) -> dict:
        return {"stats": {"lanes": [{"lane": 0, "capacity_bytes": "0", "stage_pid": str(pid),
                                     "stage_alive": alive, "bubbles": "594"}]},
                "tasks": {"tasks": [{"id": "7", "state": "PAUSED", "lane": 0}]}}

    class Daemon:
        def __init__(self, answers: list[dict]) -> None:
            self.answers = answers
            self.cancelled = False

        def status(self) -> dict:
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

        def cancel(self, task_id: int) -> None:
            self.cancelled = True

    def waiting_task(daemon: Daemon) -> side_task.SideTask:
        task = object.__new__(side_task.SideTask)  # its state, without a runner
        task.daemon, task.task_id, task._stage_gone_since, task._saw_stage = daemon, 7, None, False
        task.connection = None  # still waiting for the runner to connect
        task._unavailable = lambda why: side_task.NodeUnavailable(why)  # not the blocker: no Ray here
        return task

    monkeypatch.setattr(side_task, "STAGE_GONE_S", 0.0)
    closed = Daemon([status(4242, True), status(0, False)])
    task = waiting_task(closed)
    task._check()  # the stage marks: wait on
    with pytest.raises(side_task.NodeUnavailable, match="has ended"):
        task._check()
    assert closed.cancelled
    # Submitted after the training ended: it never saw a stage, so it waits for the next one.
    later = Daemon([status(0, False)])
    task = waiting_task(later)
    task._check()
    task._check()
    assert not later.cancelled
    assert not lanes_of(status(0, False))[0].stage_ended and lanes_of(status(4242, False))[0].stage_ended


def test_a_reply_sent_just_before_the_runner_exited_is_the_result_not_a_lost_node(monkeypatch) -> None:
    """The runner replies, then exits, while the wrapper asks the daemon how the task is (a
    process start, slow on a loaded node): the daemon already says FINISHED, but the reply is
    in the socket.  That reply is the result; taking the task as lost had Ray run the finished
    work again on another node (tests/multinode/ray_test.py saw work recorded twice)."""
    import socket

    import freeride.ray._side_task as side_task

    wrapper_end, runner_end = socket.socketpair()

    class Daemon:
        def __init__(self) -> None:
            self.cancelled = False

        def status(self) -> dict:
            # The runner finishes during this call: its reply, then its exit.
            if runner_end.fileno() >= 0:
                _wire.send(runner_end, ("result", 0, "the work's result"))
                runner_end.close()
            return {"stats": {"lanes": [{"lane": 0, "capacity_bytes": "0", "stage_pid": "4242",
                                         "stage_alive": True, "bubbles": "9"}]},
                    "tasks": {"tasks": [{"id": "7", "state": "FINISHED", "lane": 0}]}}

        def show(self, task_id: int) -> dict:
            return {"state": "FINISHED", "pid": "4343", "message": "exited with status 0"}

        def cancel(self, task_id: int) -> None:
            self.cancelled = True

    task = object.__new__(side_task.SideTask)  # its state, with a connection and no daemon process
    task.daemon, task.task_id, task.runner_pid, task.connection = Daemon(), 7, 4343, wrapper_end
    task._stage_gone_since, task._saw_stage = None, False
    task._unavailable = lambda why: side_task.NodeUnavailable(why)  # not the blocker: no Ray here
    monkeypatch.setattr(side_task, "_CHECK_EVERY_S", 0.0)  # check at once: nothing was sent yet
    try:
        assert task.result() == "the work's result"
        assert not task.daemon.cancelled
    finally:
        wrapper_end.close()


def test_a_reply_sent_while_the_side_task_is_cancelled_for_an_ended_stage_is_the_result(monkeypatch) -> None:
    """The lane's stage has ended, so the wrapper cancels the side task; the runner, finishing its
    last step, replies before the cancel reaches it.  Its work is done: the reply is the result, not
    a lost node (which would have Ray run it again elsewhere)."""
    import socket

    import freeride.ray._side_task as side_task

    wrapper_end, runner_end = socket.socketpair()

    class Daemon:
        cancelled = False

        def status(self) -> dict:  # the stage has died: its pid stays, not alive
            return {"stats": {"lanes": [{"lane": 0, "capacity_bytes": "0", "stage_pid": "4242",
                                         "stage_alive": False, "bubbles": "9"}]},
                    "tasks": {"tasks": [{"id": "7", "state": "RUNNING", "lane": 0}]}}

        def cancel(self, task_id: int) -> None:
            self.cancelled = True
            _wire.send(runner_end, ("result", 0, "done before the cancel"))

    task = object.__new__(side_task.SideTask)
    task.daemon, task.task_id, task.runner_pid, task.connection = Daemon(), 7, 4343, wrapper_end
    task._stage_gone_since, task._saw_stage = None, True
    task._unavailable = lambda why: side_task.NodeUnavailable(why)
    monkeypatch.setattr(side_task, "_CHECK_EVERY_S", 0.0)
    monkeypatch.setattr(side_task, "STAGE_GONE_S", 0.0)
    try:
        assert task.result() == "done before the cancel"
        assert task.daemon.cancelled
    finally:
        wrapper_end.close()
        runner_end.close()
