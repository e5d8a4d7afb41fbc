"""`freeride demo` end to end from the build tree: CPU mode (real PyTorch; fails
without torch unless FREERIDE_SKIP_TORCH=1) and replay mode, each writing its
report, SVG and Perfetto trace."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import assert_harvested_or_said_why, require_torch


def run_demo(freeride: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FREERIDE_PYTHON=sys.executable)
    # From another working directory: the demo finds its parts from the executable.
    return subprocess.run([freeride, "demo", *args], capture_output=True, text=True, env=env, cwd="/",
                          timeout=600)


def check_outputs(out: str, lanes: int, harvest_required: bool) -> dict:
    """harvest_required: replay mode, whose bubbles (1.5-51 ms, from a 4xH200 run) fit the
    tasks' steps on any machine; in CPU mode the mechanism is asserted instead."""
    report = json.load(open(os.path.join(out, "report.json")))
    assert len(report["lanes"]) == lanes, report["lanes"]
    assert report["bubble_fraction"] > 0.15, report["bubble_fraction"]
    if harvest_required:
        assert report["total"]["harvested_ns"] > 0, "side tasks harvested nothing"
    else:
        assert_harvested_or_said_why(out, report)
    assert report["overhead_pct"] is not None and report["cost_saving_pct"] is not None
    # Every task was valued; on a loaded machine a task whose measured steps fit
    # no bubble of its lane may do nothing.
    assert len(report["tasks"]) == lanes and all(t["alone_rate_per_s"] > 0 for t in report["tasks"]), report["tasks"]
    if harvest_required:
        assert sum(t["work_gpu_s"] for t in report["tasks"]) > 0, report["tasks"]
    svg = ET.parse(os.path.join(out, "timeline.svg")).getroot()
    assert svg.tag.endswith("svg")
    rects = [r for r in svg.iter() if r.tag.endswith("rect")]
    assert len(rects) > 20, f"the SVG draws only {len(rects)} rectangles"
    trace = json.load(open(os.path.join(out, "timeline.perfetto.json")))
    steps = [e for e in trace["traceEvents"] if e.get("cat") == "side_task"]
    assert (steps or not harvest_required) and all(e["ph"] == "X" and e["dur"] >= 0 for e in steps)
    return report


@pytest.mark.parametrize("mode", ["cpu", "replay"])
def test_demo_runs_and_writes_report_svg_and_trace(mode, build_dir, tmp_path):
    if mode == "cpu":
        require_torch()
    out = str(tmp_path / "out")
    # The side tasks at the normal policy, so that they harvest on a machine other work keeps
    # busy too (conftest.NORMAL_CPU_TASKS); the first line says so.
    p = run_demo(str(build_dir / "freeride"), "--mode", mode, "--out", out, "--steps", "40",
                 "--profile-seconds", "1", "--cpu-task-priority", "normal")
    print(p.stdout[-3000:])
    assert p.returncode == 0, f"demo --mode {mode} failed:\n{p.stderr[-3000:]}"
    first = p.stdout.splitlines()[0]
    want = {"cpu": "CPU mode", "replay": "replay mode"}[mode]
    assert want in first, f"the demo's first line does not say it runs {want}: {first}"
    assert "measures" in p.stdout.splitlines()[1], "the second line says what the figures measure"
    assert "normal policy" in p.stdout.splitlines()[1] and "SCHED_IDLE" not in p.stdout.splitlines()[1], \
        "the second line says how the side tasks run"
    daemon_log = open(os.path.join(out, "freeride-daemon.log")).read()
    assert "--cpu-task-priority normal" in daemon_log, f"not passed on to the daemon:\n{daemon_log}"
    assert "[4/4]" in p.stdout and "FreeRide report" in p.stdout
    lanes = max(2, min(4, len(os.sched_getaffinity(0))))  # the pipeline fitted to the cores
    report = check_outputs(out, lanes, harvest_required=mode == "replay")
    print(f"demo --mode {mode}: harvest {report['harvest_ratio']:.2f}, overhead "
          f"{report['overhead_pct']:+.1f}%, saving {report['cost_saving_pct']:+.1f}%")


def test_demo_refuses_a_folder_that_is_not_empty(build_dir, tmp_path):
    (tmp_path / "something").write_text("kept")
    p = run_demo(str(build_dir / "freeride"), "--out", str(tmp_path))
    assert p.returncode == 2 and "not empty" in p.stderr, p.stderr
    assert (tmp_path / "something").read_text() == "kept"


def test_the_cpu_demos_mechanism_check_fails_where_it_should(tmp_path):
    from conftest import NO_TIME_FIT

    def check(bubbles, steps, harvested_ns):
        events = [{"cat": "bubble", "pid": lane, "ts": ts, "dur": dur, "args": {"verdict": verdict}}
                  for lane, ts, dur, verdict in bubbles]
        events += [{"cat": "side_task", "pid": lane, "ts": ts, "dur": 1, "args": args}
                   for lane, ts, args in steps]
        (tmp_path / "timeline.perfetto.json").write_text(json.dumps({"traceEvents": events}))
        assert_harvested_or_said_why(tmp_path, {"total": {"harvested_ns": harvested_ns}})

    check([(0, 100, 50, "run")], [(0, 120, {})], 5)
    check([(0, 100, 50, NO_TIME_FIT)], [], 0)  # nothing done, and the dispatcher said why
    check([(0, 100, 50, "run")], [(0, 300, {"late": True})], 5)  # marked late by the daemon
    with pytest.raises(AssertionError, match="no bubble says why"):
        check([(0, 100, 50, "no runnable task")], [], 0)
    with pytest.raises(AssertionError, match="outside every bubble of lane 1"):
        check([(0, 100, 50, "run"), (1, 400, 50, "run")], [(1, 120, {})], 5)


def test_a_demo_whose_side_tasks_did_nothing_says_why_and_what_to_do():
    """On a machine whose other work keeps every core busy, SCHED_IDLE side tasks (the CPU and replay
    modes' default) get no core and do no step: the report shows 0% used, and the demo says why and
    how to run it instead of leaving a bare 0."""
    import argparse

    from conftest import SOURCE_DIR
    sys.path.insert(0, str(SOURCE_DIR / "python"))
    from freeride.demo import Demo

    demo = object.__new__(Demo)  # its state, without running it
    demo.mode, demo.args = "replay", argparse.Namespace(cpu_task_priority="idle")
    nothing = json.dumps({"lanes": [{"lane": 0, "steps": 0}, {"lane": 1, "steps": 0}]})
    why = demo.side_tasks_did_nothing(nothing)
    assert "SCHED_IDLE" in why and "--cpu-task-priority normal" in why and "load average" in why, why
    assert demo.side_tasks_did_nothing(json.dumps({"lanes": [{"lane": 0, "steps": 3}]})) == ""
    assert demo.side_tasks_did_nothing("not json") == ""
    demo.args.cpu_task_priority = "normal"
    assert "did no step" in demo.side_tasks_did_nothing(nothing)
    assert "SCHED_IDLE" not in demo.side_tasks_did_nothing(nothing)


@pytest.mark.parametrize("option, value, said", [
    ("--steps", "-5", "-5 is below 1"), ("--steps", "0", "0 is below 1"), ("--rounds", "0", "0 is below 1"),
    ("--profile-seconds", "0", "0 is below 0.01"), ("--gpu-hour-price", "-3", "-3 is below 0"),
    ("--steps", "many", "'many' is not a whole number"), ("--profile-seconds", "nan", "nan is not a finite number")])
def test_demo_refuses_counts_that_are_none_before_it_runs(build_dir, tmp_path, option, value, said):
    """--steps -5 ran the whole demo, "2 trainings of -5 steps", and exited 0."""
    p = run_demo(str(build_dir / "freeride"), "--quick", option, value, "--out", str(tmp_path / "out"))
    assert p.returncode == 2 and f"argument {option}: {said}" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists(), "refused before anything was made"
