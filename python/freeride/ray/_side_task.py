"""The Ray worker's half: submits the work to the node's daemon as a side task and waits for it.

A SideTask lives inside a Ray task or actor (the wrapper).  It submits
`python -m freeride.ray._runner SOCKET` to the node's daemon, with the worker's environment and
working directory, accepts the runner's connection (one only: a runner relaunched later by a
restarted daemon finds nobody listening and exits), sends the work, and answers calls with the
runner's replies.  While it waits it watches the daemon and the lane:

- the runner's connection closes without a reply and the daemon does not answer, or the task is
  not running any more: the node lost its daemon (NodeUnavailable, which Ray retries);
- the side task failed or was cancelled on the node: SideTaskFailed, with the daemon's reason;
- the lane's training stage has ended: no bubbles will come, so the side task is cancelled and
  NodeUnavailable raised (Ray retries).

Whenever it raises NodeUnavailable it first asks Ray to keep bubble work off this node until the
daemon and a stage are back (_blocker).  Not thread-safe: one caller at a time (a Ray actor's
default).
"""
from __future__ import annotations

import os
import select
import shutil
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from freeride.ray import _wire
from freeride.ray._daemon import CommandFailed, DaemonUnreachable, NodeDaemon, lanes_of
from freeride.ray.errors import LaneMemoryError, NodeUnavailable, SideTaskFailed

# How often a waiting wrapper asks the daemon how its side task and lane are (one `freeride
# status`: a process start, which a 2-core node feels if it comes often).  The runner's death is
# seen at once (its connection closes); this finds stages that ended.
_CHECK_EVERY_S = 5.0
# A lane whose stage has ended for this long gets no more bubbles: its work moves elsewhere.
STAGE_GONE_S = 5.0
# The runner connects once it is launched; it waits in the daemon's queue until then (behind
# other side tasks of its lane), so no limit applies to that wait, only the checks above.

_ENDED = ("FINISHED", "FAILED", "CANCELLED")
# How long the daemon may take to see that a runner whose connection closed has exited.
_EXIT_SEEN_S = 30.0


def _package_root() -> str:
    """The folder holding the freeride package this worker imported, for the runner's PYTHONPATH."""
    return str(Path(__file__).resolve().parents[2])


def _runner_env() -> dict[str, str]:
    """The worker's environment (its runtime_env's variables included), with this freeride on
    PYTHONPATH and the Ray node in FREERIDE_RAY_NODE_ID (the side task does not import Ray)."""
    env = dict(os.environ)
    try:
        import ray
        if ray.is_initialized():
            env["FREERIDE_RAY_NODE_ID"] = ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    root = _package_root()
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])
    return env


class SideTask:
    """`work` run by a side task on this node's daemon; see the module's doc.  `name` names the
    side task (a suffix makes it unique)."""

    def __init__(self, work: _wire.Work, name: str, lane_memory: int = 0, priority: int = 0,
                 daemon: NodeDaemon | None = None):
        self.daemon = daemon or _daemon_or_unavailable()
        self.lane_memory = lane_memory
        self.task_id = 0
        self.runner_pid = 0
        self.connection: socket.socket | None = None
        self._next_call = 1
        self._stage_gone_since: float | None = None
        self._saw_stage = False  # a stage was alive on the watched lanes while this task waited
        self._folder = tempfile.mkdtemp(prefix="freeride-ray-")
        try:
            self._start(work, name, priority)
        except BaseException:
            self._cancel()  # a runner still queued or starting would only find nobody listening
            self.close()
            raise

    # ----------------------------------------------------------------- start --
    def _start(self, work: _wire.Work, name: str, priority: int) -> None:
        lanes = self._lanes_or_unavailable()
        fitting = [l for l in lanes if l.capacity_bytes == 0 or l.capacity_bytes >= self.lane_memory]
        if not fitting:
            raise LaneMemoryError(self.lane_memory, max(l.capacity_bytes for l in lanes), where="this node")
        path = os.path.join(self._folder, "s")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            listener.listen(1)
            unique = f"ray.{name}.{uuid.uuid4().hex[:8]}"[-120:]
            try:
                info = self.daemon.submit(unique, [sys.executable, "-m", "freeride.ray._runner", path],
                                          self.lane_memory, priority, _runner_env(), os.getcwd())
            except DaemonUnreachable as e:
                raise self._unavailable(str(e)) from None
            except CommandFailed as e:
                raise SideTaskFailed(f"the FreeRide daemon at {self.daemon.where()} refused the side task: {e}") \
                    from None
            self.task_id = int(info["id"])
            self.connection = self._accept(listener)
        finally:
            listener.close()
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        _wire.send(self.connection, ("start", work))
        reply = self._reply()
        if reply[0] == "failed":
            _, error, trace = reply
            raise _with_trace(error, trace)
        self.runner_pid = int(reply[1])

    def _accept(self, listener: socket.socket) -> socket.socket:
        """The runner's connection, once the daemon has launched it."""
        while True:
            ready, _, _ = select.select([listener], [], [], _CHECK_EVERY_S)
            if ready:
                connection, _ = listener.accept()
                return connection
            self._check()

    # ----------------------------------------------------------------- calls --
    def call(self, method: str | None, args: tuple, kwargs: dict) -> Any:
        """Runs one call in the side task and returns its result, or raises its exception."""
        if self.connection is None:
            raise NodeUnavailable("this side task has already ended")
        call_id = self._next_call
        self._next_call += 1
        try:
            _wire.send(self.connection, ("call", call_id, method, args, kwargs))
        except OSError:
            raise self._runner_ended() from None
        return self._result(call_id)

    def result(self) -> Any:
        """The result of a function's call (sent with the work)."""
        return self._result(0)

    def _result(self, call_id: int) -> Any:
        reply = self._reply()
        kind, got = reply[0], reply[1]
        if got != call_id:
            raise RuntimeError(f"freeride.ray: reply to call {got}, expected {call_id}")
        if kind == "error":
            raise _with_trace(reply[2], reply[3])
        return reply[2]

    def _reply(self) -> tuple:
        assert self.connection is not None
        while True:
            ready, _, _ = select.select([self.connection], [], [], _CHECK_EVERY_S)
            if ready:
                try:
                    return _wire.receive(self.connection)
                except _wire.Closed:
                    raise self._runner_ended() from None
            self._check()

    # ------------------------------------------------------------ watching --
    def _check(self) -> None:
        """Raises when the daemon is gone, the side task ended, or its lane's stage has ended;
        returns without judging when the runner's connection is readable (its reply is read first)."""
        try:
            status = self.daemon.status()  # the lanes and the live tasks, in one call
        except DaemonUnreachable as e:
            if self._reply_waiting():
                return
            raise self._unavailable(str(e)) from None
        # The runner may have replied, and exited, while the status was asked (a process start,
        # slow on a loaded node): its reply comes first, or its finished work would be lost and
        # done again elsewhere.  It wrote the reply before it exited, so the reply is readable
        # by the time the daemon reports the exit.
        if self._reply_waiting():
            return
        task = next((t for t in status.get("tasks", {}).get("tasks", []) if int(t["id"]) == self.task_id), None)
        if task is None or task.get("state") in _ENDED:
            raise self._runner_ended()
        lane = int(task.get("lane", -1))
        lanes = lanes_of(status)
        watched = [l for l in lanes if l.index == lane] if lane >= 0 else lanes
        # A stage that closed cleanly sets its pid back to 0, as on a lane none has attached
        # to yet: ended for this task if it saw one alive there, as for a stage that died.
        self._saw_stage = self._saw_stage or any(l.stage_alive for l in watched)
        if watched and all(l.stage_ended or (self._saw_stage and not l.stage_alive) for l in watched):
            now = time.monotonic()
            self._stage_gone_since = self._stage_gone_since or now
            if now - self._stage_gone_since >= STAGE_GONE_S:
                self._cancel()
                if self._reply_sent():
                    return  # it finished while being cancelled: its result stands
                raise self._unavailable(f"the training stage of lane {lane if lane >= 0 else 'any'} has ended "
                                        "on this node: no more bubbles")
        else:
            self._stage_gone_since = None

    def _reply_waiting(self) -> bool:
        """Whether the runner's connection has something to read now: a reply, or its close."""
        if self.connection is None:
            return False
        ready, _, _ = select.select([self.connection], [], [], 0)
        return bool(ready)

    def _reply_sent(self) -> bool:
        """Whether a reply (not only the connection's close) is waiting to be read."""
        if self.connection is None:
            return False
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # BlockingIOError included: nothing to read yet
            return False

    def _runner_ended(self) -> BaseException:
        """Why the runner ended without replying: the exception to raise.  The daemon learns of
        its task's exit a moment after the connection closes, so this waits for that (up to
        _EXIT_SEEN_S), unless the task is another process by then (a restarted daemon's)."""
        deadline = time.monotonic() + _EXIT_SEEN_S
        while True:
            try:
                info = self.daemon.show(self.task_id)
            except DaemonUnreachable as e:
                return self._unavailable(f"the daemon died, and its side tasks with it ({e})")
            except CommandFailed as e:
                return SideTaskFailed(f"side task {self.task_id}: {e}")
            same_process = self.runner_pid in (0, int(info.get("pid", 0)))
            if info.get("state") in _ENDED or not same_process or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        state = info.get("state", "")
        why = info.get("message", "") or "no reason given"
        tail = info.get("stderr_tail", "")
        if state == "FAILED":
            return SideTaskFailed(f"side task {self.task_id} on {self.daemon.where()} failed: {why}"
                                  + (f"\n--- its stderr ---\n{tail}" if tail else ""))
        if state == "CANCELLED":
            return SideTaskFailed(f"side task {self.task_id} was cancelled on its node: {why}")
        # Relaunched by a restarted daemon, or ended without a reply: this attempt is lost.
        self._cancel()
        return self._unavailable(f"side task {self.task_id} ended without a reply ({state}: {why}); "
                                 "its daemon may have restarted")

    def _unavailable(self, why: str) -> NodeUnavailable:
        from freeride.ray import _blocker  # imports ray: only here, where a node is lost
        _blocker.keep_bubble_work_off_this_node(self.daemon, why)
        return NodeUnavailable(why)

    def _cancel(self) -> None:
        if self.task_id:
            try:
                self.daemon.cancel(self.task_id)
            except (DaemonUnreachable, CommandFailed):
                pass  # gone or ended already

    def _lanes_or_unavailable(self):
        try:
            return self.daemon.lanes()
        except DaemonUnreachable as e:
            raise self._unavailable(str(e)) from None

    # ------------------------------------------------------------------ end --
    def close(self) -> None:
        """Ends the side task (the runner stops at its next step) and removes its folder."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        shutil.rmtree(self._folder, ignore_errors=True)


def _daemon_or_unavailable() -> NodeDaemon:
    try:
        return NodeDaemon()
    except FileNotFoundError as e:
        raise NodeUnavailable(f"this node has no FreeRide: {e}") from None


def _with_trace(error: BaseException, trace: str) -> BaseException:
    """The user's exception, with the side task's traceback as a note."""
    if hasattr(error, "add_note"):
        error.add_note("--- in the FreeRide side task ---\n" + trace.rstrip())
    return error
