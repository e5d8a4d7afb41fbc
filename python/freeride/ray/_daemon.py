"""The node's FreeRide daemon as seen from a Ray worker: its control API through the
`freeride` command-line client (submit, show, cancel, status, all with --json).

The daemon of a node is the one at $FREERIDE_SOCKET, else the default socket: Ray's
worker processes inherit the environment `ray start` ran in, so a node says where its
daemon is by starting Ray with FREERIDE_SOCKET set (docs/ray.md).  Every call runs in
the calling thread and takes at most `timeout` seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The control API's answers are quick; a daemon that does not answer in this long is taken
# as gone (its Unix socket refuses at once when the process is dead).
_TIMEOUT_S = 20.0


class DaemonUnreachable(RuntimeError):
    """No daemon answered at the node's socket (not running, or killed)."""


class CommandFailed(RuntimeError):
    """The daemon answered and refused the request; the message is its reason."""


def find_cli() -> str:
    """The `freeride` client: $FREERIDE_CLI, the one on PATH, $FREERIDE_HOME/bin, or the one beside
    the libfreeride that $FREERIDE_LIB names (a build tree).  Raises FileNotFoundError saying where
    it looked."""
    tried = []
    candidates = [os.environ.get("FREERIDE_CLI"), shutil.which("freeride")]
    if os.environ.get("FREERIDE_HOME"):
        candidates.append(str(Path(os.environ["FREERIDE_HOME"]) / "bin" / "freeride"))
    if os.environ.get("FREERIDE_LIB"):
        lib = Path(os.environ["FREERIDE_LIB"]).resolve().parent
        candidates += [str(lib / "freeride"), str(lib.parent / "bin" / "freeride")]
    for c in candidates:
        if not c:
            continue
        tried.append(c)
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError("the `freeride` client was not found (looked at: " + ", ".join(tried or ["PATH"])
                            + "); put it on PATH or set FREERIDE_CLI, FREERIDE_HOME or FREERIDE_LIB")


@dataclass
class Lane:
    index: int
    capacity_bytes: int   # 0: no limit
    stage_pid: int        # 0: no training stage attached now (none yet, or it closed)
    stage_alive: bool

    @property
    def stage_ended(self) -> bool:
        """A training stage marked bubbles on this lane and died (its pid stays).  A stage that
        closed cleanly sets its pid back to 0, as on a lane no stage has attached to yet: a
        new training may come, so new work may wait for it (a side task that saw the stage
        go tells that apart itself: _side_task.py)."""
        return self.stage_pid != 0 and not self.stage_alive


class NodeDaemon:
    """The daemon at `socket` (None: $FREERIDE_SOCKET or the default), through the client `cli`."""

    def __init__(self, socket: str | None = None, cli: str | None = None):
        self.socket = socket or os.environ.get("FREERIDE_SOCKET") or None
        self.cli = cli or find_cli()

    def where(self) -> str:
        return self.socket or "the default socket"

    def _run(self, *args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> str:
        command = [self.cli, args[0], *(["--socket", self.socket] if self.socket else []), *args[1:]]
        try:
            p = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_S, env=env, cwd=cwd)
        except subprocess.TimeoutExpired:
            raise DaemonUnreachable(f"the FreeRide daemon at {self.where()} did not answer in "
                                    f"{_TIMEOUT_S:.0f} s") from None
        if p.returncode != 0:
            err = (p.stderr or p.stdout).strip()
            # The client exits 1 when no daemon could be reached, 2 when one refused.
            if p.returncode == 1:
                raise DaemonUnreachable(f"no FreeRide daemon answers at {self.where()}: {err}")
            raise CommandFailed(err)
        return p.stdout

    def status(self) -> dict:
        """The daemon's statistics and live tasks (`freeride status --json`)."""
        return json.loads(self._run("status", "--json"))

    def lanes(self) -> list[Lane]:
        return lanes_of(self.status())

    def submit(self, name: str, command: list[str], memory_bytes: int, priority: int, env: dict[str, str],
               cwd: str) -> dict:
        """Submits an iterative side task that runs `command` in `cwd` with the environment `env`;
        the task as the daemon took it.  Raises CommandFailed with the daemon's reason when it
        refuses (e.g. more memory than any lane has)."""
        return json.loads(self._run("submit", "--json", "--name", name, "--memory", str(memory_bytes),
                                    "--priority", str(priority), "--retries", "0", "--", *command,
                                    env=env, cwd=cwd))

    def show(self, task_id: int) -> dict:
        return json.loads(self._run("show", str(task_id), "--json"))

    def cancel(self, task_id: int) -> None:
        self._run("cancel", str(task_id))


def lanes_of(status: dict) -> list[Lane]:
    """The lanes in a `freeride status --json` answer (64-bit integers come as strings)."""
    return [Lane(int(l["lane"]), int(l["capacity_bytes"]), int(l["stage_pid"]), bool(l["stage_alive"]))
            for l in status.get("stats", {}).get("lanes", [])]
