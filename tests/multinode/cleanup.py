"""Cleaning up a multi-node run, even when the test dies.

A run keeps, in its run directory:
  pids/NAME.pid   one process it started: "PID START" (START: the process's
                  start time in clock ticks, /proc/PID/stat field 22, so that
                  a reused pid is never killed), or a pid file that the
                  process wrote itself ("PID"; then its command name must
                  start with what the file's name says, e.g. slurmd-n1.pid
                  holds a "slurmd").
  namespaces      the network namespaces it made, one a line.

clean(run_dir) stops the processes by their pid files (SIGTERM, then
SIGKILL), kills whatever is left in the namespaces and deletes them, and
removes the shared-memory segments of daemons killed before they could.

A Reaper is a process in its own session that waits for its owner to end
(its stdin closes when the owner dies, however it dies, SIGKILL included)
and then runs clean(run_dir); so a test killed by its timeout still leaves
no daemon or namespace behind.  Run as `python3 -m multinode.cleanup RUN_DIR`
(with tests/ on the path), it is that process.
"""
from __future__ import annotations

import glob
import os
import stat
import subprocess
import sys

from .netns import end_processes, kill_namespace
from .paths import segment_prefix


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def write_pid_file(run_dir: str, name: str, pid: int) -> str:
    """Records a process this run started, so that clean() can stop it."""
    os.makedirs(os.path.join(run_dir, "pids"), exist_ok=True)
    path = os.path.join(run_dir, "pids", name + ".pid")
    with open(path, "w") as f:
        f.write(f"{pid} {start_time(pid) or 0}\n")
    return path


def record_namespace(run_dir: str, namespace: str) -> None:
    with open(os.path.join(run_dir, "namespaces"), "a") as f:
        f.write(namespace + "\n")


def pid_from_file(path: str) -> int | None:
    """The live process a pid file names, or None (no file, a dead or reused pid)."""
    try:
        fields = open(path).read().split()
        pid = int(fields[0])
    except (OSError, ValueError, IndexError):
        return None
    if len(fields) > 1:
        return pid if start_time(pid) == fields[1] else None
    # A pid file the process wrote itself: its command must be the one the file is named after.
    expected = os.path.basename(path).split("-")[0].split(".")[0]
    try:
        comm = open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return None
    return pid if comm.startswith(expected) else None


def stop_pids(paths: list[str], grace_s: float = 15.0) -> None:
    """SIGTERM to every live process of `paths`, SIGKILL to those alive after `grace_s`."""
    end_processes(lambda: [pid for pid in map(pid_from_file, paths) if pid is not None], grace_s)


def remove_segments(run_dir: str) -> list[str]:
    """Removes the /dev/shm segments of daemons whose sockets are under `run_dir`.
    A daemon removes its own when it stops; one killed leaves them, and its
    socket file, which names them (paths.py).  The removed paths."""
    removed = []
    for root, _, files in os.walk(run_dir):
        for name in files:
            path = os.path.join(root, name)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                for segment in glob.glob(glob.escape(segment_prefix(path)) + "-*"):
                    os.unlink(segment)
                    removed.append(segment)
    return removed


def clean(run_dir: str) -> None:
    """Stops the run's processes by their pid files, then empties and deletes its
    namespaces, and removes the segments killed daemons left."""
    pid_dir = os.path.join(run_dir, "pids")
    if os.path.isdir(pid_dir):
        stop_pids([os.path.join(pid_dir, f) for f in sorted(os.listdir(pid_dir))])
    try:
        namespaces = open(os.path.join(run_dir, "namespaces")).read().split()
    except OSError:
        namespaces = []
    for namespace in reversed(namespaces):
        kill_namespace(namespace)
    remove_segments(run_dir)


class Reaper:
    """Runs clean(run_dir) once this process ends, however it ends."""

    def __init__(self, run_dir: str):
        tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.process = subprocess.Popen([sys.executable, "-m", "multinode.cleanup", run_dir],
                                        stdin=subprocess.PIPE, start_new_session=True, cwd=tests,
                                        env=dict(os.environ, PYTHONPATH=tests),
                                        stdout=subprocess.DEVNULL,
                                        stderr=open(os.path.join(run_dir, "reaper.log"), "w"))

    def close(self) -> None:
        """Lets the reaper clean now and waits for it (the owner cleaned first; nothing is left to do twice)."""
        if self.process.stdin:
            self.process.stdin.close()
            self.process.stdin = None
        self.process.wait(timeout=120)


if __name__ == "__main__":
    sys.stdin.read()  # returns at EOF: the owner closed the pipe or died
    clean(sys.argv[1])
