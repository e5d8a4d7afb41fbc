"""What a multi-node run is checked for, from each node daemon's own records.

check_node() reads one daemon's event log (docs/event-log.md) and checks
that its lanes saw the training's bubbles, that every side-task step it
logged started inside the bubble it was granted, that `freeride report`
reads the same bubbles, and, once the daemon was meant to be stopped, that
it stopped: its last event is `daemon stop`, and its socket and lane
segments are gone.
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
from dataclasses import dataclass, field

from .paths import lane_segment_path

# Slots at or above this are a stand-in stage's (Daemon.wait_tasks_live), not the training's.
STAND_IN_SLOT_BASE = 1000


class CheckFailed(AssertionError):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def read_events(state_dir: str) -> list[dict]:
    """The daemon's events, oldest first: the rotated files (events.jsonl.N, highest N
    first), then events.jsonl.  A last line cut short (a SIGKILL) is left out."""
    rotated = sorted(glob.glob(os.path.join(state_dir, "events.jsonl.*")),
                     key=lambda p: -int(p.rsplit(".", 1)[1]))
    events = []
    for path in [*rotated, os.path.join(state_dir, "events.jsonl")]:
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    return events


@dataclass
class NodeRecord:
    """One node daemon's run, as its event log tells it."""
    node: str
    bubbles: int = 0               # the training's bubbles the daemon logged
    steps: int = 0                 # side-task steps in them (and in bubbles it never logged)
    steps_in_unlogged_bubbles: int = 0
    harvested_ns: int = 0          # SDK steps' time inside the training's bubbles (the lanes' account)
    bubble_ns: int = 0             # the training's idle time the daemon saw
    daemon_events: list[str] = field(default_factory=list)  # start/stop, in order

    def line(self) -> str:
        return (f"{self.node}: {self.bubbles} bubbles ({self.bubble_ns / 1e6:.0f} ms idle), "
                f"{self.steps} side-task steps all inside their bubble ({self.steps_in_unlogged_bubbles} "
                f"in bubbles the lane did not log), {self.harvested_ns / 1e6:.1f} ms harvested; "
                f"daemon {' -> '.join(self.daemon_events)}")


def check_node(node: str, state_dir: str, min_bubbles: int = 1, min_steps: int = 1,
               stopped: bool = False, socket: str | None = None, lanes: int = 1,
               freeride: str | None = None) -> NodeRecord:
    """Checks one node daemon's record; raises CheckFailed naming `node`.

    min_bubbles / min_steps: the training's bubbles and side-task steps it must
    have logged.  stopped: the daemon must have stopped, and then `socket` (if
    given) and the segments of its `lanes` lanes must be gone.  freeride: the
    CLI, to check that `freeride report` reads the same bubbles from the node's
    state directory."""
    events = read_events(state_dir)
    record = NodeRecord(node)
    record.daemon_events = [e["event"] for e in events if e["type"] == "daemon"]
    expect(record.daemon_events[:1] == ["start"], f"{node}: the daemon never logged its start")
    bubbles = {(e["lane"], e["seq"]): e for e in events
               if e["type"] == "bubble" and e["slot"] < STAND_IN_SLOT_BASE}
    stand_in = {(e["lane"], e["seq"]) for e in events
                if e["type"] == "bubble" and e["slot"] >= STAND_IN_SLOT_BASE}
    steps = [e for e in events if e["type"] == "step" and (e["lane"], e["bubble_seq"]) not in stand_in]
    record.bubbles = len(bubbles)
    record.bubble_ns = sum(b["end_ns"] - b["begin_ns"] for b in bubbles.values())
    record.harvested_ns = sum(b["harvested_ns"] for b in bubbles.values())
    record.steps = len(steps)
    expect(record.bubbles >= min_bubbles,
           f"{node}: its daemon logged {record.bubbles} of the training's bubbles, fewer than {min_bubbles}")
    for s in steps:
        b = bubbles.get((s["lane"], s["bubble_seq"]))
        if b is None:
            # A lane that fell more than the stage's 256-bubble ring behind never
            # logs that bubble; the daemon marks such a step late (docs/event-log.md).
            expect(bool(s.get("late")), f"{node}: a step in a bubble the daemon knows nothing of: {s}")
            record.steps_in_unlogged_bubbles += 1
            continue
        expect(b["begin_ns"] <= s["start_ns"] <= b["end_ns"],
               f"{node}: a side-task step started outside its bubble: step {s}, bubble {b}")
    expect(record.steps >= min_steps,
           f"{node}: {record.steps} side-task steps in the training's bubbles, fewer than {min_steps}")
    expect(record.steps_in_unlogged_bubbles <= record.steps // 2,
           f"{node}: {record.steps_in_unlogged_bubbles} of {record.steps} steps ran in bubbles the "
           "lane never logged")
    if freeride:
        report = subprocess.run([freeride, "report", state_dir, "--json"], capture_output=True, text=True,
                                timeout=120)
        expect(report.returncode == 0, f"{node}: freeride report failed: {report.stderr.strip()}")
        logged = sum(1 for e in events if e["type"] == "bubble")
        total = json.loads(report.stdout)["total"]["bubbles"]
        expect(total == logged, f"{node}: freeride report counts {total} bubbles, the log holds {logged}")
    if stopped:
        expect(record.daemon_events[-1:] == ["stop"],
               f"{node}: the daemon's log does not end with its stop: {record.daemon_events}")
        expect(socket is None or not os.path.exists(socket), f"{node}: the daemon left its socket {socket}")
        if socket is not None:
            for lane in range(lanes):
                segment = lane_segment_path(socket, lane)
                expect(not os.path.exists(segment), f"{node}: the daemon left lane {lane}'s segment {segment}")
    return record


def require_side_steps(records: list[NodeRecord]) -> None:
    """Side-task steps ran in the training's bubbles, on the nodes together.

    Not on each node: a node's task gets a core only in its bubbles, and
    shares it there with whatever else runs, so on a loaded machine one
    node's task can get none in any of them (seen with the tasks at
    SCHED_IDLE, the daemon's default, and 2 cores shared by many processes:
    one node 400 steps, the other none; the tests now run them at the normal
    policy).  Each node's steps were checked to lie inside bubbles by
    check_node."""
    expect(sum(r.steps for r in records) > 0,
           "no side-task step ran in the training's bubbles on any node: " + "; ".join(r.line() for r in records))
