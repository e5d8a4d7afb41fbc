"""freeride.pace: long PyTorch steps and unmodified scripts cut into pieces
that fit bubbles, on CPU with the real daemon and runner."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import NORMAL_CPU_TASKS, SOURCE_DIR, Daemon, require_torch

# The tests that run the pacer in this process import the package from the source tree.
sys.path.insert(0, str(SOURCE_DIR / "python"))
SCRIPT = SOURCE_DIR / "examples" / "train_resnet.py"
DONE = ("FINISHED", "FAILED", "CANCELLED")
SMALL = ["--model", "small", "--image-size", "32", "--batch", "8"]


@pytest.fixture(autouse=True)
def _torch() -> None:
    require_torch()


def test_the_pacer_cuts_forward_backward_and_optimizer_into_timed_segments() -> None:
    import torch
    import torch.nn as nn
    from freeride.pace import Pacer
    pieces = []
    # A target of 1000 s: timed segments never reach it, however loaded the machine (at 1 s, a
    # clean clone's test run on two busy cores timed enough to end a third piece).
    pacer = Pacer(torch, "cpu", target_ns=10**12, on_piece_end=lambda _parts: pieces.append(1))
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    def iteration():
        optimizer.zero_grad()
        model(torch.randn(16, 64)).sum().backward()
        optimizer.step()
    pacer.install()
    try:
        # Untimed segments count as a quarter of the target each, so the
        # first pass is cut too (a segment is timed when its piece ends);
        # timed (microseconds), they never reach the target.
        iteration()
        iteration()
        first_passes = len(pieces)
        assert first_passes >= 1
        iteration()
        iteration()
        assert len(pieces) == first_passes, "timed segments far below the target end no piece"
        pacer.end_piece()
    finally:
        pacer.uninstall()
    kinds = sorted({key[0] for key in pacer.estimates})
    assert kinds == ["backward", "forward", "optimizer"], pacer.estimates
    # Three leaf modules forward, their outputs' gradients backward (the last
    # output's gradient hook fires too), one optimizer.
    assert sum(1 for k in pacer.estimates if k[0] == "forward") == 3
    assert pacer.iterations == 4
    # With a target below one segment's time, every point past the first ends a piece.
    tiny = Pacer(torch, "cpu", target_ns=1, on_piece_end=lambda _parts: pieces.append(2))
    tiny.estimates = dict(pacer.estimates)
    tiny.install()
    try:
        model(torch.randn(16, 64)).sum().backward()
    finally:
        tiny.uninstall()
    assert pieces.count(2) >= 5, f"a piece per segment: {pieces}"


def test_the_pacer_plans_a_piece_to_the_rest_of_the_grant_and_counts_its_parts() -> None:
    import torch
    from freeride.pace import Pacer
    ms = 1_000_000
    timed = {("segment", i): ms for i in range(64)}  # every segment takes 1 ms of GPU time
    ended: list[tuple[int, int]] = []  # (the point that ended a piece, its parts)
    at = [0]
    budget = [0]

    def piece_end(parts: int) -> None:
        ended.append((at[0], parts))
        pacer.estimates = dict(timed)  # the CPU clock's microseconds would replace them

    pacer = Pacer(torch, "cpu", target_ns=2 * ms, on_piece_end=piece_end, budget_ns=lambda: budget[0])
    pacer.estimates = dict(timed)

    def pieces_with(budget_ns: int, points: int) -> list[tuple[int, int]]:
        """(segments, parts) of the pieces ended over `points` points under `budget_ns`."""
        ended.clear()
        budget[0] = budget_ns
        for i in range(points):
            at[0] = i
            pacer.point(("segment", i))
        pacer.end_piece()
        starts = [0] + [point for point, _ in ended[:-1]]
        return [(end - start, parts) for start, (end, parts) in zip(starts, ended[:-1])]

    # No grant left beyond a piece: pieces of the 2 ms target, one part each.
    assert pieces_with(0, 9) == [(2, 1)] * 4
    # 7.9 ms left of the grant: seven 1 ms segments in a piece, three whole parts of 2 ms.
    assert pieces_with(int(7.9 * ms), 15) == [(7, 3), (7, 3)]
    # Alone the budget is unbounded: at most four targets (8 ms), four parts.
    assert pieces_with(2**63 - 1, 17) == [(8, 4), (8, 4)]
    # A segment longer than the target: the parts are counted in it, so that one part is
    # never shorter than a step the task can take.
    pacer.estimates = timed = {("segment", i): 3 * ms for i in range(64)}
    assert pieces_with(8 * ms, 7) == [(2, 2), (2, 2), (2, 2)]


def test_the_pacer_hands_an_exception_in_the_model_through_unchanged() -> None:
    import torch
    import torch.nn as nn
    from freeride.pace import Pacer

    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("broken layer")
    pacer = Pacer(torch, "cpu", target_ns=1, on_piece_end=lambda _parts: None)
    pacer.install()
    try:
        with pytest.raises(ValueError, match="broken layer"):
            nn.Sequential(nn.Linear(4, 4), Broken())(torch.randn(2, 4))
    finally:
        pacer.uninstall()


def test_alone_the_script_runs_unpaced_and_prints_its_rate(freeride_env) -> None:
    p = subprocess.run([sys.executable, "-m", "freeride.pace", str(SCRIPT), *SMALL, "--iterations", "12",
                        "--standalone"], env=freeride_env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "trained 12 iterations" in p.stdout
    line = json.loads(p.stdout.strip().splitlines()[-1])
    assert line["mode"] == "standalone" and line["unit"] == "iterations", line
    assert line["units"] == 11 and line["finished"], "timed from the first optimizer step to the last"
    assert line["rate_per_s"] > 0


def test_a_missing_script_is_a_clear_error(freeride_env) -> None:
    p = subprocess.run([sys.executable, "-m", "freeride.pace", "/nonexistent/train.py"], env=freeride_env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no such script" in p.stderr, p.stderr
    # freeride imported freeride.pace eagerly, so runpy warned before every `-m freeride.pace`.
    assert "RuntimeWarning" not in p.stderr, p.stderr


def test_an_unmodified_script_runs_in_pieces_inside_bubbles(freeride_env, build_dir) -> None:
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS)
    stage = None
    try:
        # A small piece target, so that an iteration is several pieces on a fast machine too.
        # 12 iterations, and the wait only guards a hang: even at the normal policy a task
        # shares the cores with whatever else runs.
        daemon.cli_run("submit", "--name", "train", "--", sys.executable, "-m", "freeride.pace", str(SCRIPT),
                       *SMALL, "--iterations", "12", env=dict(daemon.env, FREERIDE_PIECE_MS="0.3"))
        stage = daemon.stage("10", "20")
        info = daemon.wait_for_state("train", DONE, 600)
        task_dir = Path(daemon.state, "tasks", "1")
        assert info["state"] == "FINISHED", (info, (task_dir / "stderr.log").read_text()[-2000:])
        assert "trained 12 iterations" in (task_dir / "stdout.log").read_text()
        # The first iteration (lazy initialisation) ran as the task's init,
        # outside bubbles: it is not credited.
        assert info["progress_unit"] == "iterations" and float(info["progress"]) == 11, info
        steps = [e for e in daemon.events() if e["type"] == "step" and e["task_id"] == 1]
        assert len(steps) > 2 * 11, f"an iteration is cut into several pieces: {len(steps)} steps"
        assert sum(s["units"] for s in steps) == 11, "an iteration is credited once, when its piece ended"
        bubbles = {e["seq"]: e for e in daemon.events() if e["type"] == "bubble"}
        inside = [s for s in steps if s["bubble_seq"] in bubbles and
                  bubbles[s["bubble_seq"]]["begin_ns"] <= s["start_ns"]]
        assert len(inside) == len(steps), "every piece started inside its bubble"
        # How long the pieces took is not asserted: on a loaded machine a side task waits for
        # a core inside its steps.  That they are pieces is (the count above).
    finally:
        if stage:
            stage.kill()
        daemon.stop()


def test_a_failing_script_fails_its_task_with_the_reason(freeride_env, build_dir, tmp_path) -> None:
    script = tmp_path / "bad.py"
    script.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Linear(4, 4)
        model(torch.randn(2, 4))
        raise RuntimeError("the data loader broke")
    """))
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS)
    stage = None
    try:
        daemon.cli_run("submit", "--name", "bad", "--", sys.executable, "-m", "freeride.pace", str(script))
        stage = daemon.stage("5", "20")
        info = daemon.wait_for_state("bad", DONE, 600)
        assert info["state"] == "FAILED", info
        stderr = Path(daemon.state, "tasks", "1", "stderr.log").read_text()
        assert "RuntimeError: the data loader broke" in stderr, stderr[-2000:]
    finally:
        if stage:
            stage.kill()
        daemon.stop()


LONG_STEPS = textwrap.dedent("""
    import freeride, torch, torch.nn as nn
    from freeride.pace import run_paced
    class Long(freeride.IterativeTask):
        unit = "samples"
        def init(self):
            # One thread: on a loaded machine a step split over threads waits on whichever
            # thread the scheduler left out, and a piece can then outlast any bubble.
            torch.set_num_threads(1)
            self.device = torch.device("cpu")
            self.model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(48)])
            self.n = 0
        def step(self):
            with torch.no_grad():
                x = torch.randn(512, 256)
                for _ in range(4):
                    x = self.model(x)
            self.n += 1
            return freeride.StepResult(512, self.n >= STEPS)
        def finish(self):
            print(f"stepped {self.n}", flush=True)
    raise SystemExit(run_paced(Long()))
""")
# Each step is about 13 GFLOP (48 layers, 4 passes of 512 x 256) on one thread: 70 ms or more even on
# a fast AVX-512 core, so every step is cut into pieces of the stage's 30 ms bubbles.  One layer's call, the
# finest piece the pacer can cut, is about 67 MFLOP: a few milliseconds even on a loaded core.  (With
# 6 ms bubbles and threads, a 2-core machine kept busy by two other processes took 4.5-43 ms a
# piece, fitted no bubble, and stalled.)
LONG_STEP_COUNT = 10


def test_a_task_whose_steps_outlast_the_bubbles_runs_paced_and_is_cancelled_cleanly(
        freeride_env, build_dir, tmp_path) -> None:
    script = tmp_path / "long.py"
    script.write_text(LONG_STEPS.replace("STEPS", str(LONG_STEP_COUNT)))
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS)
    stage = None
    try:
        daemon.cli_run("submit", "--name", "long", "--", sys.executable, str(script))
        daemon.cli_run("submit", "--name", "forever", "--", sys.executable, "-m", "freeride.pace",
                       str(SCRIPT), *SMALL, "--iterations", "1000000")
        stage = daemon.stage("5", "30")
        # A loaded machine may take many minutes (the bubbles are shared with "forever"): the
        # guard is a stall of the task's progress, not the whole run's length.
        info = daemon.wait_while_progressing("long", DONE, 300)
        assert info["state"] == "FINISHED", (info, Path(daemon.state, "tasks", "1", "stderr.log").read_text())
        assert float(info["progress"]) == LONG_STEP_COUNT * 512, info
        steps = [e for e in daemon.events() if e["type"] == "step" and e["task_id"] == 1]
        assert len(steps) > LONG_STEP_COUNT, f"steps longer than the 30 ms bubbles were cut into pieces: {len(steps)}"
        # The script parked between pieces ends when cancelled.
        live = daemon.wait_for_state("forever", ("RUNNING", "PAUSED"), 600)
        assert live["state"] in ("RUNNING", "PAUSED"), f"the script never started: {live}"
        daemon.cli_run("cancel", "forever")
        assert daemon.wait_for_state("forever", DONE, 120)["state"] == "CANCELLED"
    finally:
        if stage:
            stage.kill()
        daemon.stop()


def test_a_paced_task_is_judged_by_a_piece_not_by_its_profiled_whole_step(freeride_env, build_dir) -> None:
    # A profile of the unpaced script gives its whole iteration (here 80 ms)
    # as the step time; the dispatcher grants no step that does not fit, so
    # judged by that, the task would never run in 20 ms bubbles.  Ready, the
    # paced task publishes a piece-sized first estimate (FREERIDE_PIECE_MS)
    # and is granted pieces.  What it measures afterwards depends on how busy
    # the machine is, so only the grants are asserted, not a snapshot of the
    # estimate.
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS)
    stage = None
    try:
        daemon.cli_run("submit", "--name", "train", "--step-time", "80ms", "--", sys.executable, "-m",
                       "freeride.pace", str(SCRIPT), *SMALL, "--iterations", "1000000",
                       env=dict(daemon.env, FREERIDE_PIECE_MS="3"))
        stage = daemon.stage("5", "20")
        deadline = time.monotonic() + 240
        while float(daemon.show("train")["progress"]) < 3:
            assert time.monotonic() < deadline, "no iteration done in the 20 ms bubbles"
            time.sleep(0.2)
        # The steps' time reaches harvested_ns when the lane accounts for their bubbles, in
        # batches after the task's own counters: on a clean clone's first run it read 0 with 11
        # steps.  Waited for, within the same guard.
        info = daemon.show("train")
        while not (int(info["steps"]) > 0 and int(info["harvested_ns"]) > 0):
            assert time.monotonic() < deadline, info
            time.sleep(0.2)
            info = daemon.show("train")
    finally:
        if stage:
            stage.kill()
        daemon.stop()


def test_only_leading_or_trailing_run_options_are_the_pacers() -> None:
    from freeride.pace import split_run_options
    assert split_run_options(["train.py", "--seconds", "60", "--lr", "1"]) == (
        False, 0.0, ["train.py", "--seconds", "60", "--lr", "1"]), "the script's own --seconds"
    assert split_run_options(["train.py", "--seconds", "60", "--standalone", "--seconds", "5"]) == (
        True, 5.0, ["train.py", "--seconds", "60"]), "what task-profile appended before it set FREERIDE_STANDALONE_SECONDS"
    assert split_run_options(["--standalone", "train.py"]) == (True, 0.0, ["train.py"])
    with pytest.raises(SystemExit, match="give a number of seconds"):
        split_run_options(["train.py", "--standalone", "--seconds", "1h"])


def test_forked_workers_and_passed_through_parameters_are_left_alone() -> None:
    import torch
    import torch.nn as nn
    from freeride.pace import Pacer
    parked = []
    pacer = Pacer(torch, "cpu", target_ns=1, on_piece_end=lambda _parts: parked.append(os.getpid()))
    weight = nn.Parameter(torch.randn(4))
    identity = nn.Identity()
    pacer.install()
    try:
        for _ in range(5):
            identity(weight)
        assert not weight._backward_hooks, "no hook piles up on a leaf tensor"
        pid = os.fork()
        if pid == 0:  # a DataLoader worker: a transform module must not wait for a runner
            code = 0
            try:
                for _ in range(10):
                    nn.Linear(4, 4)(torch.randn(2, 4))
                code = 0 if os.getpid() not in parked else 3
            finally:
                os._exit(code)
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                pytest.fail("a forked child blocked at a point")
            time.sleep(0.05)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        pacer.uninstall()


# The spellings of FREERIDE_STANDALONE_SECONDS, read alike by Python and by the C++ runner
# (tests/channel_test.cc's StandaloneSeconds test has the same table).
STANDALONE_SPELLINGS = {"0.2": 0.2, "5": 5.0, "1e1": 10.0, ".5": 0.5, "5.": 5.0}
STANDALONE_REFUSED = [" 0.2", "0.2 ", "1_0", "0x0.4p0", "-1", "+1", "0", "1e-400", "nan", "inf", "1e400", "abc",
                      "1e", ".."]


def test_task_profiles_seconds_are_read_from_the_environment_only_when_no_daemon_launched_it(
        monkeypatch, capsys) -> None:
    from freeride.task import standalone_seconds_from_environment
    monkeypatch.delenv("FREERIDE_TASK_SEGMENT", raising=False)
    monkeypatch.delenv("FREERIDE_STANDALONE_SECONDS", raising=False)
    assert standalone_seconds_from_environment() is None
    for value, seconds in STANDALONE_SPELLINGS.items():
        monkeypatch.setenv("FREERIDE_STANDALONE_SECONDS", value)
        assert standalone_seconds_from_environment() == seconds, value
    for value in STANDALONE_REFUSED:
        monkeypatch.setenv("FREERIDE_STANDALONE_SECONDS", value)
        with pytest.raises(SystemExit) as exit_:
            standalone_seconds_from_environment()
        assert exit_.value.code == 2, value
        assert f"FREERIDE_STANDALONE_SECONDS={value} is not a number of seconds above 0" in capsys.readouterr().err
    # Under a daemon (a stray export in the submitting shell): ignored, not a run outside the bubbles.
    monkeypatch.setenv("FREERIDE_TASK_SEGMENT", "/dev/shm/freeride-task-1")
    monkeypatch.setenv("FREERIDE_STANDALONE_SECONDS", "3")
    assert standalone_seconds_from_environment() is None
    from freeride.pace import runs_alone
    assert not runs_alone(False)
