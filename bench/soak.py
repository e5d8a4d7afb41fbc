#!/usr/bin/env python3
"""Soak test of the daemon: hours of bubbles, tasks and daemon kills.

A stand-in stage (example_stage_replay) paced for about a million bubbles an
hour on one CPU lane (2.4 ms busy + 1.2 ms bubble; the count itself is not
taken: the report gives the bubbles since the last restart).  Meanwhile tasks are submitted (SDK counters), some
crash (freeride_bad_task --crash-after), some fork children that leave their
process group, some are cancelled, and the daemon is SIGKILLed and
restarted every --kill-every minutes.  At the end the daemon is killed once
more, restarted and asked for every task; then it is stopped cleanly.

Reported: the daemon's RSS and open descriptors (over the run and at the
end), processes of tasks left over after the clean stop, and the journal's
consistency: every acknowledged submission present exactly once, under its
own name.  Exits 1 when consistency fails or processes are left over.

    bench/soak.py --build build --minutes 60                # the full hour
    bench/soak.py --build build --minutes 5 --kill-every 1  # a short run
"""
import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time


def rss_and_fds(pid):
    """The process's resident memory in KiB and its open descriptors."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return 0, 0


def task_processes(socket):
    """Pids of processes launched by the daemon on `socket`, and their children."""
    found = []
    marker = f"FREERIDE_SOCKET={socket}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            pass
    return found


class Soak:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.cli = os.path.join(self.build, "freeride")
        self.dir = tempfile.mkdtemp(prefix="frsoak-")
        self.socket = os.path.join(self.dir, "d.sock")
        self.state = os.path.join(self.dir, "state")
        self.daemon = None
        self.acknowledged = {}  # id -> name
        self.counts = {"submitted": 0, "refused": 0, "cancelled": 0, "kills": 0}
        self.samples = []  # (minute, rss KiB, fds)
        self.restart_s = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run_cli(self, command, *argv, timeout=15):
        return subprocess.run([self.cli, command, "--socket", self.socket, *argv],
                              capture_output=True, text=True, timeout=timeout)

    def start_daemon(self):
        log = open(self.state + ".log", "a")
        argv = [self.cli, "daemon", "--cpu-lanes", "1", "--socket", self.socket,
                "--state-dir", self.state, "--max-resident", "4"]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        started = time.monotonic()
        self.daemon = subprocess.Popen(argv, stdout=log, stderr=log)
        while time.monotonic() - started < 60:
            if self.run_cli("status", "--json").returncode == 0:
                self.restart_s.append(time.monotonic() - started)
                return
            time.sleep(0.05)
        raise RuntimeError("the daemon did not answer within 60 s; see " + self.state + ".log")

    def kill_daemon(self):
        with self.lock:
            self.daemon.send_signal(signal.SIGKILL)
            self.daemon.wait()
            self.counts["kills"] += 1
            self.start_daemon()

    def submit(self, name, argv, *options):
        try:
            r = self.run_cli("submit", "--json", "--name", name, *options, "--", *argv)
        except subprocess.TimeoutExpired:
            self.counts["refused"] += 1
            return None
        if r.returncode != 0:
            self.counts["refused"] += 1  # e.g. while the daemon restarts: not acknowledged
            return None
        task = json.loads(r.stdout)
        self.acknowledged[int(task["id"])] = name
        self.counts["submitted"] += 1
        return int(task["id"])

    def workload(self):
        count = os.path.join(self.build, "example_count_task")
        bad = os.path.join(self.build, "tests", "freeride_bad_task")
        forking = ("sleep 60 & setsid sleep 60 & i=0; "
                   "while [ $i -lt 30 ]; do i=$((i+1)); sleep 0.1; done")
        to_cancel = []
        tick = 0
        while not self.stop.is_set():
            tick += 1
            self.submit(f"count-{tick}", [count, "--total", str(random.randint(200, 2000)),
                                          "--step-us", "300"])
            if tick % 3 == 0:
                self.submit(f"crash-{tick}", [bad, "--step-us", "300", "--crash-after", "40"],
                            "--retries", "1")
            if tick % 4 == 0:
                self.submit(f"fork-{tick}", ["/bin/sh", "-c", forking], "--kind", "imperative")
            if tick % 5 == 0:
                task = self.submit(f"cancel-{tick}", [count, "--total", "100000000",
                                                      "--step-us", "300"])
                if task:
                    to_cancel.append((time.monotonic() + 5, task))
            for due, task in list(to_cancel):
                if time.monotonic() >= due:
                    to_cancel.remove((due, task))
                    try:
                        if self.run_cli("cancel", str(task)).returncode == 0:
                            self.counts["cancelled"] += 1
                    except subprocess.TimeoutExpired:
                        pass
            self.stop.wait(self.args.tick)

    def check_journal(self):
        """Problems with the acknowledged tasks, as the restarted daemon lists them."""
        r = self.run_cli("status", "--json", "--all", timeout=60)
        if r.returncode != 0:
            return [f"status failed: {r.stderr.strip()}"], 0
        listed = json.loads(r.stdout)["tasks"].get("tasks", [])
        seen = {}
        for task in listed:
            seen.setdefault(int(task["id"]), []).append(task["spec"]["name"])
        problems = []
        for task_id, name in sorted(self.acknowledged.items()):
            names = seen.get(task_id, [])
            if names != [name]:
                problems.append(f"task {task_id} '{name}' is listed as {names}")
        db = sqlite3.connect(f"file:{self.state}/journal.db?mode=ro", uri=True)
        rows = dict(db.execute("SELECT id, name FROM tasks"))
        for task_id, name in self.acknowledged.items():
            if rows.get(task_id) != name:
                problems.append(f"task {task_id} '{name}' is journaled as {rows.get(task_id)}")
        return problems, len(listed)

    def run(self):
        args = self.args
        self.start_daemon()
        stage = subprocess.Popen(
            [os.path.join(self.build, "example_stage_replay"), "--socket", self.socket,
             "--iterations", "2000000000", "--busy", "sleep", "--busy-ms", str(args.busy_ms),
             "--bubbles-ms", str(args.bubble_ms)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        worker = threading.Thread(target=self.workload)
        worker.start()
        start = time.monotonic()
        end = start + args.minutes * 60
        next_kill = start + args.kill_every * 60
        next_sample = start
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                self.samples.append(((now - start) / 60, *rss_and_fds(self.daemon.pid)))
                next_sample += 60
            if now >= next_kill and now < end - 5:
                self.kill_daemon()
                next_kill += args.kill_every * 60
            time.sleep(0.5)
        self.stop.set()
        worker.join()
        # The last word: a kill, a restart, and every task asked for.
        self.kill_daemon()
        time.sleep(2)
        rss, fds = rss_and_fds(self.daemon.pid)
        r = self.run_cli("status", "--json")
        lanes = json.loads(r.stdout)["stats"]["lanes"] if r.returncode == 0 else []
        problems, listed = self.check_journal()
        stage.terminate()
        stage.wait()
        self.daemon.send_signal(signal.SIGTERM)
        self.daemon.wait(timeout=60)
        time.sleep(1)
        left = task_processes(self.socket)
        if not self.acknowledged:
            problems.append("no submission was acknowledged")
        self.report(rss, fds, lanes, problems, listed, left, time.monotonic() - start)
        return 1 if problems or left else 0

    def report(self, rss, fds, lanes, problems, listed, left, seconds):
        a = self.args
        bubbles_per_hour = 3600e3 / (a.busy_ms + a.bubble_ms)
        lines = [
            f"soak: {seconds / 60:.1f} min, daemon SIGKILLed every {a.kill_every:g} min "
            f"({self.counts['kills']} kills, the last one at the end)",
            f"stage: one CPU lane, {a.busy_ms:g} ms busy + {a.bubble_ms:g} ms bubble "
            f"= {bubbles_per_hour:,.0f} bubbles an hour",
            f"tasks: {self.counts['submitted']} acknowledged (counters, crashing, forking, "
            f"cancelled), {self.counts['cancelled']} cancelled, {self.counts['refused']} "
            f"submissions refused or unanswered (daemon restarting)",
            f"restarts: answered after {min(self.restart_s):.2f}..{max(self.restart_s):.2f} s",
            "daemon RSS / open descriptors by minute: " + ", ".join(
                f"{m:.0f}: {r / 1024:.1f} MiB/{f}" for m, r, f in self.samples),
            f"at the end (after the last restart): RSS {rss / 1024:.1f} MiB, {fds} descriptors",
        ]
        for lane in lanes:
            lines.append(f"lane {lane['lane']} since the last restart: {lane['bubbles']} bubbles")
        lines.append(f"journal: {listed} tasks listed; "
                     + ("every acknowledged task present exactly once, under its own name"
                        if not problems else f"{len(problems)} PROBLEMS"))
        lines += [f"  {p}" for p in problems[:20]]
        lines.append(f"processes of tasks left after the clean stop: {len(left)}"
                     + (f" {left}" if left else ""))
        lines.append("result: " + ("PASS" if not problems and not left else "FAIL"))
        text = "\n".join(lines) + "\n"
        sys.stdout.write(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build", help="the build directory")
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--kill-every", type=float, default=None,
                        help="minutes between daemon SIGKILLs (default: --minutes / 6)")
    parser.add_argument("--busy-ms", type=float, default=2.4)
    parser.add_argument("--bubble-ms", type=float, default=1.2,
                        help="with --busy-ms 2.4: a million bubbles an hour")
    parser.add_argument("--tick", type=float, default=2.0, help="seconds between submissions")
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args()
    if args.kill_every is None:
        args.kill_every = args.minutes / 6
    sys.exit(Soak(args).run())


if __name__ == "__main__":
    main()
