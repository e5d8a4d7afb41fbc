"""bench/stamp_lines.py: the wrapper that stamps a program's progress lines with the time they
came, so that bench/gate_gpu.py can value the built-in tasks' own lines (they print no time)."""
from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys

from conftest import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "bench"))
from gate_gpu import DAEMON_PROGRESS, PROGRAMS  # noqa: E402

STAMP = [sys.executable, str(SOURCE_DIR / "bench" / "stamp_lines.py"), "--"]
STAMPED = re.compile(r"^(.*) at (\d+\.\d{6})$")


def test_lines_of_both_outputs_come_stamped_in_order_on_standard_output_with_the_programs_status() -> None:
    program = ("import sys\n"
               "for i in range(50):\n"
               "    print(f'out {i}', flush=True)\n"
               "    print(f'err {i}', file=sys.stderr, flush=True)\n"
               "sys.exit(3)\n")
    run = subprocess.run([*STAMP, sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert run.returncode == 3
    assert run.stderr == ""
    lines = [STAMPED.match(line) for line in run.stdout.splitlines()]
    assert all(lines), run.stdout
    texts = [m.group(1) for m in lines]
    assert [t for t in texts if t.startswith("out")] == [f"out {i}" for i in range(50)]
    assert [t for t in texts if t.startswith("err")] == [f"err {i}" for i in range(50)]
    times = [float(m.group(2)) for m in lines]
    assert times == sorted(times), "stamped as they come, under one lock"


def test_a_program_that_cannot_run_or_dies_by_a_signal_says_so_in_its_status() -> None:
    missing = subprocess.run([*STAMP, "/nonexistent/program"], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 127 and "cannot run /nonexistent/program" in missing.stderr
    killed = subprocess.run([*STAMP, "sh", "-c", "kill -TERM $$"], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 128 + signal.SIGTERM
    usage = subprocess.run([*STAMP], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_the_program_dies_with_the_wrapper_however_the_wrapper_is_killed() -> None:
    """The bench kills an alone run's wrapper with SIGKILL: its program must not run on."""
    wrapper = subprocess.Popen([*STAMP, sys.executable, "-c",
                                "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)\n"],
                               stdout=subprocess.PIPE)
    child = int(STAMPED.match(wrapper.stdout.readline().decode().strip()).group(1))
    pidfd = os.pidfd_open(child)  # readable once the program has exited; its pid cannot be reused meanwhile
    try:
        assert select.select([pidfd], [], [], 0)[0] == [], "the program runs"
        wrapper.kill()
        wrapper.wait(timeout=120)
        # The kernel kills the program as the wrapper dies; the bound only ends a failing run.
        assert select.select([pidfd], [], [], 120)[0] == [pidfd], f"program {child} runs on without its wrapper"
    finally:
        os.close(pidfd)


def test_a_reader_that_goes_away_ends_the_program_and_the_wrapper() -> None:
    """`stamp_lines.py -- PROGRAM | head -1`: the program is killed, as a pipeline's writer is by
    SIGPIPE, and the wrapper does not wait for good on a program blocked on a full pipe."""
    wrapper = subprocess.Popen([*STAMP, sys.executable, "-c",
                                "import os\nprint(os.getpid(), flush=True)\nwhile True:\n    print('x' * 1000)\n"],
                               stdout=subprocess.PIPE)
    child = int(STAMPED.match(wrapper.stdout.readline().decode().strip()).group(1))
    pidfd = os.pidfd_open(child)
    try:
        wrapper.stdout.close()
        assert wrapper.wait(timeout=120) == 128 + signal.SIGPIPE
        assert select.select([pidfd], [], [], 120)[0] == [pidfd]
    finally:
        os.close(pidfd)


def test_lines_pass_as_bytes_whatever_their_encoding() -> None:
    program = "import sys\nsys.stdout.buffer.write(b'caf\\xc3\\xa9 \\xff\\xfe\\n')\n"
    run = subprocess.run([*STAMP, sys.executable, "-c", program], capture_output=True, timeout=120,
                         env=dict(os.environ, PYTHONIOENCODING="ascii"))
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(rb"caf\xc3\xa9 \xff\xfe at \d+\.\d{6}\n", run.stdout), run.stdout


def test_the_built_in_tasks_lines_match_the_benchs_patterns_when_stamped(build_dir) -> None:
    """gate_gpu.py's pagerank and sgd rows run the real task binaries under this wrapper, with
    --standalone; here on the CPU, a few iterations each: every progress line gives the bench a
    rising count and a time, and the daemon's pattern the same count."""
    for name, device_args in (("pagerank", ["--rmat-scale", "10", "--max-iterations", "6"]),
                              ("sgd", ["--generate-ratings", "20000", "--generate-users", "200",
                                       "--generate-items", "50", "--epochs", "4"])):
        cmd, pattern = PROGRAMS[name]
        binary = cmd[cmd.index("--") + 1]
        args = [str(build_dir / "tasks" / binary), "--standalone", *device_args, "--device", "cpu"]
        if name == "pagerank":
            args += ["--tolerance", "0"]
        run = subprocess.run([*STAMP, *args], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout
        counts = [int(m.group(1)) for m in map(re.compile(pattern).search, run.stdout.splitlines()) if m]
        assert counts == list(range(1, len(counts) + 1)) and len(counts) >= 4, (name, run.stdout)
        daemon = [int(m.group(1)) for m in map(re.compile(DAEMON_PROGRESS[name]).search, run.stdout.splitlines())
                  if m]
        assert daemon == counts, name
        assert "--standalone" in cmd, "under the daemon a built-in task would wait for grants"
        short, short_pattern = PROGRAMS[f"{name}-short"]
        assert short_pattern == pattern and short[-2:] == ["--step-ms", "0.5"] and short[:-1] == cmd[:-1]
