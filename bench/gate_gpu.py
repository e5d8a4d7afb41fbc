"""The GPU gate on one GPU: harvest, overhead in three arms, and release
latency, with unmodified side programs against the stand-in stage.

    python3 bench/gate_gpu.py --bundle bundle --out $OUT \\
        --profiles h200:0,h200:1,h200:3,interleaved,zbv,gpipe \\
        --programs resnet50,generate,compiled --latency

One daemon (GPU lane 0, MPS, gate on) serves every run.  For each profile and
program, one stand-in launch holds the three arms, marks alternating on and
off in blocks throughout:

- "no side": no side process at all, for --noside-seconds before the program
  is submitted and again after its process has exited;
- "off" and "on": the program, submitted unmodified as an imperative task (so
  the daemon preloads the gate interposer), resident once it has warmed up
  (its GPU start-up runs in the launch's bubbles, and is left out), for
  --measure-seconds; in "off" blocks the gate stays shut, in "on" blocks the
  stage opens it in each bubble.

nvidia-smi samples the SM clock, power and temperature every 50 ms, and
each row gives their means per arm.

Harvest is the program's own progress (its printed lines, each stamped with
the time) during "on" iterations, valued at its alone rate (measured without
the daemon, before the rows and again after them, at the higher of the two:
one reading of a few seconds varies by about 10%), over the bubble time of
those iterations; and, beside it, from its first line to its last within the
arms, against the marks-on bubble time between the two (harvest_between_lines:
no unit is lost or gained whole at either end, which for a program of few
units, ResNet-50 on ZBV, is a tenth of the row).  The side
program's progress during "off" iterations is reported, and must be zero
beyond the work in flight when the block began.  Overhead is the mean
iteration time of "on" against the no-side arm, with a 95% interval (Welch),
and of "off" against the no-side arm, all from the same launch.

--latency also runs bench/gate_latency.cu (built here with nvcc): the stage
marks iterations of 8 bubbles and stamps %globaltimer before it opens the
gate and after it closes it, a side program under the daemon stamps the
start of each of its kernels; the release latency is the first side
kernel's start after each open (over all bubbles, and apart for an
iteration's first bubble, which the daemon only watches: nothing is queued
ahead of it), and any side kernel that starts while the gate is closed is
counted, and every bubble of the side program's run that got no side
kernel is counted apart, beside the daemon's bubbles that admitted nothing
(the overhead probe's withheld iterations).  --latency-marks says which marks
the stage makes, each run in turn: "gated" (the gate's stream writes alone,
read by libfreeride's marks thread, as freeride.torch marks; results'
"latency") and "stream" (the gate's writes beside host functions on the
stream: "latency_stream_marks").

--entry-points runs the same stage against gate_latency.cu's "ops" program: each
round a synchronous cudaMemset2D, a cudaMemPrefetchAsync of managed memory, a
kernel that checks both and stamps its start, and a graph uploaded
(cudaGraphUpload) and launched; the program's exit, its wrong values (must be
0), its kernels started outside the bubbles (must be 0) and the interposer's
gated calls per round (6 when the fill, prefetch and upload are gated with
the rest; 3 if they were not) are reported.

--py-spy PATH samples each program's stacks over its arms (py-spy --idle --native
--nonblocking, the wheel's binary from PyPI, carried to the node) and says where its threads'
time went: held by the gate, waiting for the GPU, in the driver, or in its own host work
(bench/side_stacks.py).  For a program whose harvest is low while the gate held it little.
--keep-logs keeps each program's output and the daemon's events, for bench/progress_per_bubble.py:
how many of its progress lines each bubble saw, and when in it.
"""
from __future__ import annotations

import argparse
import bisect
import gzip
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import typing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIAG_CPU_SPIN = ("import time\ni = 0\nwhile True:\n    end = time.perf_counter() + 0.05\n"
                 "    while time.perf_counter() < end:\n        pass\n"
                 "    i += 1\n    print(f'iteration {i}: at {time.time():.6f}', flush=True)\n")
DIAG_GPU_HELD = ("import time, torch\nx = torch.zeros(1 << 20, device='cuda')\ni = 0\nwhile True:\n"
                 "    for _ in range(50):\n        x.add_(1)\n"
                 "    done = torch.cuda.Event(blocking=True)\n    done.record()\n    done.synchronize()\n"
                 "    i += 1\n    print(f'iteration {i}: at {time.time():.6f}', flush=True)\n")
# A wait on a word that never matches, left pending on a stream of the program's own (no kernel
# behind it, nothing gated): in device memory (DIAG_HELD_WAIT % "dev") or in registered host memory
# ("host"); the host thread only sleeps and prints.
DIAG_HELD_WAIT = ("import ctypes, mmap, time, torch\ncuda = ctypes.CDLL('libcuda.so.1')\n"
                  "word = torch.empty(64, dtype=torch.int32, device='cuda')\nstream = torch.cuda.Stream()\n"
                  "where = '%s'\nif where == 'dev':\n    ptr = word.data_ptr()\nelse:\n"
                  "    page = mmap.mmap(-1, 4096)\n    host = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
                  "    assert cuda.cuMemHostRegister_v2(ctypes.c_void_p(host), ctypes.c_size_t(4096), 3) == 0\n"
                  "    dev = ctypes.c_uint64()\n"
                  "    assert cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), ctypes.c_void_p(host), 0) == 0\n"
                  "    ptr = dev.value\n"
                  "assert cuda.cuStreamWaitValue32_v2(ctypes.c_void_p(stream.cuda_stream), ctypes.c_uint64(ptr), "
                  "ctypes.c_uint32(0xdeadbeef), 1) == 0\n"
                  "i = 0\nwhile True:\n    time.sleep(0.05)\n    i += 1\n"
                  "    print(f'iteration {i}: at {time.time():.6f}', flush=True)\n")
# A one-thread kernel that polls a word that never matches (sleeping `SLEEP` ns between reads), left
# running on a stream of the program's own: what a gate built of a spinning kernel instead of a
# stream wait would leave behind a shut gate.  Launched through the driver's own cuLaunchKernel
# (found with glibc's dlsym, which the interposer does not answer for), so that it is not held by
# the gate: the diagnostic is the resident kernel itself.  held_spin(where, sleep ns) fills it in.
SPIN_PTX = (".version 8.0\\n.target sm_70\\n.address_size 64\\n"
            ".visible .entry spin_until(.param .u64 w, .param .u32 v, .param .u32 s)\\n{\\n"
            ".reg .pred %p<3>;\\n.reg .b32 %r<4>;\\n.reg .b64 %rd<3>;\\n"
            "ld.param.u64 %rd2, [w];\\nld.param.u32 %r1, [v];\\nld.param.u32 %r2, [s];\\n"
            "cvta.to.global.u64 %rd1, %rd2;\\n"
            "L1:\\nld.volatile.global.u32 %r3, [%rd1];\\nsetp.eq.s32 %p1, %r3, %r1;\\n@%p1 bra L2;\\n"
            "nanosleep.u32 %r2;\\nbra L1;\\nL2:\\nret;\\n}\\n")
DIAG_HELD_SPIN = ("import ctypes, mmap, time, torch\n"
                  "cuda = ctypes.CDLL('libcuda.so.1')\nlibc = ctypes.CDLL('libc.so.6')\n"
                  "libc.dlvsym.restype = ctypes.c_void_p\n"
                  "libc.dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]\n"
                  "addr = (libc.dlvsym(libc._handle, b'dlsym', b'GLIBC_2.34') or "
                  "libc.dlvsym(libc._handle, b'dlsym', b'GLIBC_2.2.5'))\n"
                  "real_dlsym = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(addr)\n"
                  "launch = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7), "
                  "ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(real_dlsym(cuda._handle, b'cuLaunchKernel'))\n"
                  "word = torch.empty(64, dtype=torch.int32, device='cuda')\nstream = torch.cuda.Stream()\n"
                  "module = ctypes.c_void_p()\n"
                  "assert cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(b'" + SPIN_PTX + "')) == 0\n"
                  "fn = ctypes.c_void_p()\n"
                  "assert cuda.cuModuleGetFunction(ctypes.byref(fn), module, b'spin_until') == 0\n"
                  "where = '@WHERE@'\nif where == 'dev':\n    ptr = word.data_ptr()\n"
                  "else:\n"
                  "    page = mmap.mmap(-1, 4096)\n    host = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
                  "    assert cuda.cuMemHostRegister_v2(ctypes.c_void_p(host), ctypes.c_size_t(4096), 3) == 0\n"
                  "    dev = ctypes.c_uint64()\n"
                  "    assert cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), ctypes.c_void_p(host), 0) == 0\n"
                  "    ptr = dev.value\n"
                  "w, v, s = ctypes.c_uint64(ptr), ctypes.c_uint32(0xdeadbeef), ctypes.c_uint32(@SLEEP_NS@)\n"
                  "params = (ctypes.c_void_p * 3)(ctypes.addressof(w), ctypes.addressof(v), ctypes.addressof(s))\n"
                  "assert launch(fn, 1, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(stream.cuda_stream), params, None) == 0\n"
                  "i = 0\nwhile True:\n    time.sleep(0.05)\n    i += 1\n"
                  "    print(f'iteration {i}: at {time.time():.6f}', flush=True)\n")

# Two GPU-heavy side programs that differ in what they leave the trainer (bench/overhead_vs_clock.py:
# ResNet-50's slowdown goes partly with a lower clock, PageRank's does not): one streams 1 GiB
# through HBM per copy (0.2 ms kernels, far past the 50 MB L2: the trainer's data is evicted in
# every bubble), the other multiplies 8 MB operands that stay in L2 (power, little memory traffic).
DIAG_MEMORY_STREAM = ("import time, torch\nx = torch.empty(1 << 28, dtype=torch.float16, device='cuda')\n"
                      "y = torch.empty_like(x)\ni = 0\nwhile True:\n    for _ in range(4):\n        y.copy_(x)\n"
                      "    torch.cuda.synchronize()\n    i += 1\n"
                      "    print(f'iteration {i}: at {time.time():.6f}', flush=True)\n")
DIAG_L2_MATMUL = ("import time, torch\na = torch.randn(2048, 2048, dtype=torch.float16, device='cuda')\n"
                  "b = torch.randn_like(a)\nc = torch.empty_like(a)\ni = 0\nwhile True:\n    for _ in range(32):\n"
                  "        torch.mm(a, b, out=c)\n    torch.cuda.synchronize()\n    i += 1\n"
                  "    print(f'iteration {i}: at {time.time():.6f}', flush=True)\n")


def held_spin(where: str, sleep_ns: int) -> str:
    """DIAG_HELD_SPIN with its word in device memory ("dev") or registered host memory ("host")."""
    return DIAG_HELD_SPIN.replace("@WHERE@", where).replace("@SLEEP_NS@", str(sleep_ns))


PROGRAMS = {
    "resnet50": (["python3", "examples/train_resnet.py", "--model", "resnet50", "--batch", "32",
                  "--iterations", "10000000", "--log-every", "1"], r"iteration (\d+):.* at ([\d.]+)"),
    "resnet18": (["python3", "examples/train_resnet.py", "--model", "resnet18", "--batch", "32",
                  "--iterations", "10000000", "--log-every", "1"], r"iteration (\d+):.* at ([\d.]+)"),
    "generate": (["python3", "examples/generate_loop.py", "--batch", "8", "--new-tokens", "16"],
                 r"generated (\d+) tokens.* at ([\d.]+)"),
    "compiled": (["python3", "examples/train_compiled.py", "--log-every", "5"], r"step (\d+):.* at ([\d.]+)"),
    # Built-in tasks, run as any program is (their own SDK step loop, --standalone: no grants, the
    # interposer gates their kernels), counted in their own iterations and epochs; they print no
    # time, so bench/stamp_lines.py stamps each line as it comes.
    "pagerank": (["python3", "bench/stamp_lines.py", "--", "freeride-pagerank", "--standalone", "--rmat-scale", "21",
                  "--max-iterations", "1000000000", "--tolerance", "0", "--device", "cuda", "--step-ms", "2"],
                 r"pagerank: iteration (\d+),.* at ([\d.]+)"),
    "sgd": (["python3", "bench/stamp_lines.py", "--", "freeride-sgd", "--standalone", "--generate-ratings", "2000000",
             "--generate-users", "20000", "--generate-items", "5000", "--epochs", "1000000000", "--device", "cuda",
             "--step-ms", "2"], r"sgd: epoch (\d+),.* at ([\d.]+)"),
    # GPT-2 XL (1.5B) built on the host and copied to the GPU: start-up copies of 40 MB a weight,
    # longer than a zero-bubble schedule's bubbles (gate/copy_split.h cuts them).
    "generate-xl": (["python3", "examples/generate_loop.py", "--batch", "8", "--new-tokens", "16", "--layers", "48",
                     "--width", "1600", "--heads", "25"], r"generated (\d+) tokens.* at ([\d.]+)"),
    # Diagnostics of what a resident side process costs the trainer with the gate shut: a program
    # that only spins on the CPU (no CUDA), one that holds GPU work behind the gate while its host
    # thread sleeps (a blocking event), and ResNet-50 with its threads in SCHED_IDLE.
    "cpuspin": (["python3", "-c", DIAG_CPU_SPIN], r"iteration (\d+):.* at ([\d.]+)"),
    "gpuheld": (["python3", "-c", DIAG_GPU_HELD], r"iteration (\d+):.* at ([\d.]+)"),
    "helddev": (["python3", "-c", DIAG_HELD_WAIT % "dev"], r"iteration (\d+):.* at ([\d.]+)"),
    "heldhost": (["python3", "-c", DIAG_HELD_WAIT % "host"], r"iteration (\d+):.* at ([\d.]+)"),
    "heldspindev": (["python3", "-c", held_spin("dev", 1000)], r"iteration (\d+):.* at ([\d.]+)"),
    "heldspinhost": (["python3", "-c", held_spin("host", 1000)], r"iteration (\d+):.* at ([\d.]+)"),
    "resnet50-idle": (["chrt", "--idle", "0", "python3", "examples/train_resnet.py", "--model", "resnet50",
                       "--batch", "32", "--iterations", "10000000", "--log-every", "1"],
                      r"iteration (\d+):.* at ([\d.]+)"),
    "memstream": (["python3", "-c", DIAG_MEMORY_STREAM], r"iteration (\d+):.* at ([\d.]+)"),
    "l2matmul": (["python3", "-c", DIAG_L2_MATMUL], r"iteration (\d+):.* at ([\d.]+)"),
}
# The built-in tasks with steps of 0.5 ms of work (--step-ms), shorter than the 1-3 ms bubbles
# of the interleaved, ZBV and GPipe profiles (2 ms steps do not fit them with the close margin).
PROGRAMS.update({f"{name}-short": ([*PROGRAMS[name][0][:-1], "0.5"], PROGRAMS[name][1]) for name in ("pagerank", "sgd")})
# The built-in tasks at 2 ms steps even behind the gate (--fixed-steps): by default a task stepping
# alone behind one tries a third of the lane's median bubble against --step-ms and keeps the one that
# does more work a bubble (tasks/common/step_target_chooser.h).
PROGRAMS.update({f"{name}-fixed": ([*PROGRAMS[name][0], "--fixed-steps"], PROGRAMS[name][1]) for name in ("pagerank", "sgd")})
# A program that counts the same unit as another.  bench/gate_rows.py values its work at the higher
# of their rates alone (an iteration of pagerank-short is a PageRank iteration, and its 0.5 ms steps
# run slower alone than 2 ms ones, so its own reading would credit the shorter steps' own cost);
# this script's own rows, read alone, value it at its own reading: compare them through gate_rows.
SAME_UNIT_AS = {f"{name}-{kind}": name for name in ("pagerank", "sgd") for kind in ("short", "fixed")}
# What the daemon is told of each program's progress (--progress-regex): its
# pattern's count, without the time that the bench reads from each line.
DAEMON_PROGRESS = {name: pattern.split(".* at ")[0] for name, (_, pattern) in PROGRAMS.items()}
SCHEDULES = {
    "interleaved": ["--schedule", "interleaved", "--stages", "4", "--microbatches", "8", "--virtual", "2",
                    "--times", "2,4"],
    "zbv": ["--schedule", "zbv", "--stages", "4", "--microbatches", "8", "--times", "1,1,1"],
    "gpipe": ["--schedule", "gpipe", "--stages", "4", "--microbatches", "8", "--times", "1,2"],
}


def busy_bubble_ms(text: str, option: str, example: str, prefix: str = "") -> tuple[float, float]:
    """(busy, bubble) in ms from `text`, "{prefix}BUSY_MS:BUBBLE_MS"; SystemExit naming `option`
    (with an `example` of a good value) unless both are finite numbers above 0."""
    try:
        busy, bubble = (float(x) for x in text.removeprefix(prefix).split(":"))
    except ValueError:
        raise SystemExit(f"{option} {text!r}: give {prefix}BUSY_MS:BUBBLE_MS, e.g. {example}") from None
    if not (0 < busy < math.inf and 0 < bubble < math.inf):
        raise SystemExit(f"{option} {text!r}: both times must be finite and above 0")
    return busy, bubble


def gap_profile(name: str) -> dict:
    """The profile of `gap:BUSY_MS:BUBBLE_MS`: an iteration of BUSY_MS of busy time, then one
    bubble of BUBBLE_MS, on rank 0.  `gap:1:500` leaves the gate open almost all the time, so its
    harvest is what the daemon, the interposer and MPS leave of a program's rate alone; a sweep of
    BUBBLE_MS shows how harvest falls as bubbles shorten.  SystemExit with the reason for a name
    that is not one."""
    busy_ms, bubble_ms = busy_bubble_ms(name, "--profiles", "gap:2:2", prefix="gap:")
    return {"ranks": [{"rank": 0, "iteration_ms": busy_ms + bubble_ms,
                       "bubbles": [{"start_ms": busy_ms, "duration_ms": bubble_ms}]}]}


def file_name(tag: str) -> str:
    """A row's tag ("h200:3-generate") as a file name with no character a copy back might refuse."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", tag)


def check_profile_name(name: str) -> None:
    """SystemExit, before anything starts, for a --profiles entry that is none of h200:RANK,
    gap:BUSY:BUBBLE or a schedule's name."""
    if name.startswith("gap:"):
        gap_profile(name)
    elif name.startswith("h200:"):
        if not name.split(":", 1)[1].isdigit():
            raise SystemExit(f"--profiles {name}: give h200:RANK, e.g. h200:1")
    elif name not in SCHEDULES:
        raise SystemExit(f"--profiles {name}: give h200:RANK, gap:BUSY_MS:BUBBLE_MS or one of {sorted(SCHEDULES)}")


def log(*args) -> None:
    print(time.strftime("%H:%M:%S"), *args, flush=True)


def mean_ci(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return (xs[0] if xs else float("nan"), float("nan"))
    return statistics.fmean(xs), 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))


def diff_ci(a: list[float], b: list[float]) -> dict:
    """(mean(a) / mean(b) - 1) in %, with a Welch 95% half-width."""
    ma, ea = mean_ci(a)
    mb, eb = mean_ci(b)
    pct = (ma / mb - 1) * 100
    half = 100 * math.sqrt((ea / mb) ** 2 + (ma * eb / mb**2) ** 2)
    return {"pct": pct, "low": pct - half, "high": pct + half}


def label_arms(starts: list[float], times_ms: list[float], modes: list[bool], warmup: int,
               t_submit: float, t_warm: float, t_cancel: float, t_gone: float,
               t_from: float = -math.inf, t_until: float = math.inf) -> list[str]:
    """Each iteration's arm: "noside_on"/"noside_off" (it ended before the program was submitted or
    began after its process had gone; by its marks), "on"/"off" (it ran wholly between the
    program's warm-up and its cancel), or "" (warm-up iterations, and those that straddle a
    change).  Iterations that begin before t_from or end after t_until belong to no arm: a launch
    that serves several programs in turn gives each the no-side time next to its own."""
    arms = []
    for i, (begin, ms, on) in enumerate(zip(starts, times_ms, modes)):
        end = begin + ms / 1e3
        if i < warmup or begin < t_from or end > t_until:
            arms.append("")
        elif end <= t_submit or begin >= t_gone:
            arms.append("noside_on" if on else "noside_off")
        elif begin >= t_warm and end <= t_cancel:
            arms.append("on" if on else "off")
        else:
            arms.append("")
    return arms


def judge_over_blocks(row: dict, starts: list[float], times_ms: list[float], arms: list[str]) -> None:
    """As the pipeline benchmark does (bench/e2e_arms.py): adds to `row` the overhead against a
    line through the no-side iterations before and after the program, over blocks of iterations
    (the Welch interval over iterations treats correlated iterations as independent, so it is
    too narrow), every iteration (`series`), and the targets it misses, judged by the worse of
    the plain and the drift-adjusted figure."""
    from e2e_arms import drift_adjusted, iteration_series, missed_targets  # e2e_arms imports this module
    row["overhead_on_vs_no_side_drift_adjusted"] = drift_adjusted(starts, times_ms, arms, "on")
    row["overhead_off_vs_no_side_drift_adjusted"] = drift_adjusted(starts, times_ms, arms, "off")
    row["series"] = iteration_series(starts, times_ms, arms)
    row["missed_targets"] = missed_targets(row)


def units_by_arm(done: list[tuple[int, float]], starts: list[float], times_ms: list[float],
                 modes: list[bool], arms: list[str]) -> dict[str, int]:
    """The program's progress (cumulative counts, each with its time) that fell in "on" iterations,
    and in "off" iterations other than each block's first (work in flight when the gate shut)."""
    first_of_block = {i for i in range(len(modes)) if i == 0 or modes[i] != modes[i - 1]}
    units = {"on": 0, "off": 0}
    last = None
    for count, at in done:
        step = count - last if last is not None else 0
        last = count
        for i, begin in enumerate(starts):
            if begin <= at < begin + times_ms[i] / 1e3:
                if arms[i] == "on":
                    units["on"] += step
                elif arms[i] == "off" and i not in first_of_block:
                    units["off"] += step
                break
    return units


def harvest_between_lines(done: list[tuple[int, float]], starts: list[float], times_ms: list[float],
                          arms: list[str], bubble_ms: float, rate: float) -> dict | None:
    """Harvest from the program's first progress line to its last within the arms ("on" and "off"
    iterations): the units between the two lines, against the marks-on bubble time between their
    times (a partly covered iteration by the share of it covered), valued at `rate` units a second
    alone.  The row's `harvest` counts the lines in marks-on iterations against all their bubble
    time, so the unit in progress at each end of the arms is lost or gained whole: a tenth of a
    ZBV ResNet-50 row, whose 10 s of arms hold about 5 iterations.  Between lines, each end is a
    unit's end.  None with fewer than 2 lines, or no marks-on bubble time, between them."""
    span = [(b, b + ms / 1e3) for b, ms, a in zip(starts, times_ms, arms) if a in ("on", "off")]
    if not span:
        return None
    lines = [(count, at) for count, at in done if span[0][0] <= at <= span[-1][1]]
    if len(lines) < 2:
        return None
    (first, t0), (last, t1) = lines[0], lines[-1]
    bubble_s = 0.0
    for b, ms, a in zip(starts, times_ms, arms):
        if a == "on":
            covered = max(0.0, min(b + ms / 1e3, t1) - max(b, t0))
            bubble_s += covered / (ms / 1e3) * bubble_ms / 1e3
    if bubble_s <= 0:
        return None
    units = last - first
    return {"units": units, "bubble_s": bubble_s, "seconds": t1 - t0, "harvest": units / rate / bubble_s}


def read_gpu_samples(path: str) -> list[tuple[float, int, float, float, float]]:
    """GpuSampler's CSV as (unix time, GPU index, SM MHz, power W, temperature C); lines that do
    not parse (a last line cut short) are skipped."""
    out = []
    for line in open(path):
        parts = [x.strip() for x in line.split(",")]
        try:
            stamp, ms = parts[0].rsplit(".", 1)
            at = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + int(ms) / 1e3
            out.append((at, int(parts[1]), float(parts[2]), float(parts[3]), float(parts[4])))
        except (ValueError, IndexError):
            continue
    return out


def gpu_means_by_arm(samples: list[tuple[float, int, float, float, float]], starts: list[float],
                     times_ms: list[float], arms: list[str], gpu: int | None = None) -> dict:
    """Mean SM MHz, power W and temperature C of the samples (of GPU `gpu`, or of every GPU) inside
    each arm's iterations."""
    samples = sorted(x for x in samples if gpu is None or x[1] == gpu)
    stamps = [x[0] for x in samples]
    acc: dict[str, list] = {}
    for begin, ms, arm in zip(starts, times_ms, arms):
        if not arm:
            continue
        lo, hi = bisect.bisect_left(stamps, begin), bisect.bisect_right(stamps, begin + ms / 1e3)
        acc.setdefault(arm, []).extend(samples[lo:hi])
    return {arm: {"samples": len(xs), "sm_mhz": statistics.fmean(x[2] for x in xs),
                  "power_w": statistics.fmean(x[3] for x in xs), "temp_c": statistics.fmean(x[4] for x in xs)}
            for arm, xs in acc.items() if xs}


def power_field(select: list[str]) -> str:
    """nvidia-smi's instantaneous power draw where it has one (power.draw is a one-second average
    on recent GPUs, which blurs blocks shorter than that into their neighbours), else power.draw."""
    try:
        probe = subprocess.run(["nvidia-smi", *select, "--query-gpu=power.draw.instant",
                                "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        float(probe.stdout.split()[0])
        return "power.draw.instant" if probe.returncode == 0 else "power.draw"
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return "power.draw"


class GpuSampler:
    """nvidia-smi's SM clock, power and temperature of `gpus` (default: every GPU) every 50 ms, in
    the background: does the side work move the clocks the stage runs at?"""

    def __init__(self, path: str, gpus: list[int] | None = None):
        self.path = path
        select = ["-i", ",".join(map(str, gpus))] if gpus else []
        self.power_field = power_field(select)
        self.proc = subprocess.Popen(
            ["nvidia-smi", *select, f"--query-gpu=timestamp,index,clocks.sm,{self.power_field},temperature.gpu",
             "--format=csv,noheader,nounits", "-lms", "50"],
            stdout=open(path, "w"), stderr=subprocess.DEVNULL)

    def by_arm(self, starts: list[float], times_ms: list[float], arms: list[str], gpu: int | None = None) -> dict:
        """Mean SM MHz, power W and temperature C of the samples inside each arm's iterations."""
        return gpu_means_by_arm(read_gpu_samples(self.path), starts, times_ms, arms, gpu)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


class AloneRun(typing.NamedTuple):
    rate: float  # units a second, timed after the warm-up
    # The count its progress had reached alone when its rate first settled (settled_units): the
    # same amount of its own work is its warm-up in bubbles too, so that its rate there is
    # compared with its rate alone at the same point of its life.
    warm_units: int


def settled_units(marks: list[tuple[int, float]], rate: float, share: float = 0.8,
                  window_s: float = 0.5) -> int | None:
    """The count at the first progress line (marks: (count, time), in order) from which the
    program went on at `share` of `rate` or more for `window_s` (or for 3 lines, if they are
    sparser), measured from that line to every line of the window from its third on, so that
    a slow tail is not averaged away by the fast lines after it: where its warm-up ended.  A
    generate loop's first batch made a token step in 42 ms where later ones took 6 ms;
    ResNet-50's first steps choose cuDNN's algorithms.  None if its rate never got there."""
    for i, (count, at) in enumerate(marks):
        last = i + 3
        while last < len(marks) and marks[last][1] - at < window_s:
            last += 1
        if last >= len(marks):
            return None
        if all(marks[j][1] > at and (marks[j][0] - count) / (marks[j][1] - at) >= share * rate
               for j in range(i + 3, last + 1)):
            return count
    return None


def program_alone_run(cmd: list[str], pattern: str, env: dict, err_path: str, warmup_s: float,
                      seconds: float, limit_s: float = 180, warm_share: float = 0.8) -> AloneRun:
    """An unmodified program's rate alone (units a second), from its own progress lines (`pattern`:
    the count, then the unix time).  Its warm-up (cuDNN's and cuBLAS's first calls, compilation) is
    left out: the rate is timed from the first line printed after `warmup_s` seconds of progress,
    for `seconds`.  Also where its warm-up ended, in units (settled_units at `warm_share`; the
    timed window's start if its rate had not settled before).  A program still short of that
    after `limit_s` seconds is killed."""
    import threading
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=open(err_path, "w"), text=True)
    watchdog = threading.Timer(limit_s, proc.kill)
    watchdog.start()
    every, marks, first, deadline = [], [], None, None
    for line in proc.stdout:
        m = re.search(pattern, line)
        if not m:
            continue
        at = float(m.group(2))
        every.append((int(m.group(1)), at))
        first = first or at
        if at - first < warmup_s:
            continue
        marks.append((int(m.group(1)), at))
        if deadline is None:
            deadline = at + seconds
        if at > deadline:
            break
    watchdog.cancel()
    proc.kill()
    proc.wait()
    if len(marks) < 2:
        raise SystemExit(f"{' '.join(cmd)}: too few progress lines alone (in {limit_s:.0f} s at most); see {err_path}")
    rate = (marks[-1][0] - marks[0][0]) / (marks[-1][1] - marks[0][1])
    settled = settled_units(every, rate, warm_share)
    return AloneRun(rate, min(settled, marks[0][0]) if settled is not None else marks[0][0])


def program_alone_rate(cmd: list[str], pattern: str, env: dict, err_path: str, warmup_s: float,
                       seconds: float, limit_s: float = 180) -> float:
    """program_alone_run's rate alone."""
    return program_alone_run(cmd, pattern, env, err_path, warmup_s, seconds, limit_s).rate


def is_warm(counts: list[int], warm_units: int) -> bool:
    """Whether a side program's progress counts (those of its progress lines, in order) show it
    past its warm-up: 3 lines at least, and as much of its own work as it had done alone when
    its rate settled (AloneRun.warm_units; 0 where unknown).  A program's first calls (cuDNN's and
    cuBLAS's choices, the caching allocator's growth, a generate loop's first batch) can take
    many bubbles; timed among the arms they would be charged to the gate, where its rate alone
    leaves them out."""
    return len(counts) >= 3 and counts[-1] >= warm_units



def bubbles_admitting_nothing(events_path: str, offset: int) -> dict:
    """Of the daemon's gate_bubble events in `events_path` from byte `offset` on (one latency
    run's), how many admitted no side work (a deadline at the begin: the overhead probe's
    withheld iterations, the guard, no forecast), and their slots: bubbles a side program
    rightly got no kernel in."""
    if not os.path.exists(events_path):
        return {"daemon_gate_bubbles": None, "daemon_gate_bubbles_admitting_nothing": None}
    seen, nothing, slots = 0, 0, {}
    with open(events_path, "rb") as f:
        f.seek(offset)
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written
            if e.get("type") != "gate_bubble":
                continue
            seen += 1
            if e.get("deadline_ns", 1) <= 0:
                nothing += 1
                slots[e.get("slot")] = slots.get(e.get("slot"), 0) + 1
    return {"daemon_gate_bubbles": seen, "daemon_gate_bubbles_admitting_nothing": nothing,
            "daemon_admitting_nothing_by_slot": slots}


def release_latencies(bubbles: list, starts: list, slots: int = 8, piece_us: float = 20) -> dict:
    """gate_latency.cu's stamps paired: `bubbles` (open, close) on the GPU's clock, in order, and
    `starts`, the side kernels' starts, sorted; `slots` bubbles an iteration (the stage's kSlots);
    `piece_us`, how long each side kernel works.
    The release latency is each bubble's first side kernel's start less its open, over all
    bubbles, an iteration's first (slot 0) and the others apart, and from the bubble after the
    first 3 iterations on; every bubble of the side program's run (from its first kernel's bubble
    to its last's) that got no side kernel is counted apart (missed: it has no latency, so the
    quantiles cannot hold it), and so is every start outside the bubbles.  The fill takes each
    side kernel that started in a bubble as working `piece_us` there."""
    latencies = []
    by_position = {"first": [], "rest": []}  # an iteration's first bubble (slot 0), and the others
    # Once the daemon can forecast each bubble: it forecasts a slot's next bubble once 3 have
    # followed it (policy/next_bubble.h), seen at their begins, so the first bubble forecast
    # after the slot before it is the one after bubble 3 * slots (the 4th iteration's second).
    learned = []
    worst = []  # (latency us, bubble, slot)
    served = []
    for i, (opened, closed) in enumerate(bubbles):
        j = bisect.bisect_left(starts, opened)
        served.append(j < len(starts) and starts[j] < closed)
        if served[-1]:
            latencies.append((starts[j] - opened) / 1e3)
            by_position["first" if i % slots == 0 else "rest"].append(latencies[-1])
            if i > 3 * slots:
                learned.append(latencies[-1])
            worst.append((latencies[-1], i, i % slots))
    run = [i for i, s in enumerate(served) if s]
    missed = [(i, i % slots) for i in (range(run[0], run[-1] + 1) if run else ()) if not served[i]]
    opens = [b[0] for b in bubbles]
    outside_us = []  # each start outside: (us past the last close, or None before any open; us to the next open)
    inside = 0  # side kernels started inside a bubble (the others are outside)
    for s in starts:
        i = bisect.bisect_right(opens, s) - 1
        if i >= 0 and s <= bubbles[i][1]:
            inside += 1
        else:
            after_next = (opens[i + 1] - s) / 1e3 if i + 1 < len(opens) else None
            outside_us.append([(s - bubbles[i][1]) / 1e3 if i >= 0 else None, after_next])

    def quantiles(values: list, prefix: str) -> dict:
        values = sorted(values)
        q = lambda p: values[min(len(values) - 1, int(p * len(values)))] if values else float("nan")
        return {f"{prefix}p50": q(0.5), f"{prefix}p90": q(0.9), f"{prefix}p99": q(0.99),
                f"{prefix}max": values[-1] if values else None, f"{prefix}count": len(values)}
    return {"bubbles": len(bubbles), "bubbles_with_side_kernel": len(latencies), "side_kernels": len(starts),
            "side_kernels_outside_bubbles": len(starts) - inside, "outside_us_past_close_and_to_next_open": outside_us[:50],
            **quantiles(latencies, "latency_us_"),
            # An iteration's first bubble (slot 0) is only watched: nothing is queued ahead of it.
            **quantiles(by_position["first"], "latency_first_in_iteration_us_"),
            **quantiles(by_position["rest"], "latency_rest_us_"),
            **quantiles(learned, "latency_forecast_learned_us_"),
            "bubbles_missed_first_in_iteration": sum(1 for _, slot in missed if slot == 0),
            "bubbles_missed_rest": sum(1 for _, slot in missed if slot != 0),
            "missed_bubble_slot": missed[:48],
            # The share of the served bubbles' time the side kernels ran (each works for
            # piece_us: gate_latency.cu's 20): the mechanism's own ceiling for a program of
            # short, even pieces launched as fast as it may.
            "fill_of_served_bubbles": (inside * piece_us * 1e3 / sum(bubbles[i][1] - bubbles[i][0] for i in run))
                                      if run else None,
            "worst_us_bubble_slot": sorted(worst, reverse=True)[:24]}

class Bench:
    def __init__(self, a):
        self.a = a
        self.bundle = os.path.abspath(a.bundle)
        self.work = a.work
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.socket = os.path.join(self.work, "fr.sock")
        self.warm_units: dict[str, int] = {}  # each program's warm-up in units (AloneRun)
        self.env = dict(os.environ, PYTHONUNBUFFERED="1",
                        PATH=f"{self.bundle}/bin:{os.environ['PATH']}",
                        PYTHONPATH=f"{self.bundle}/share/freeride/python",
                        FREERIDE_HOME=self.bundle, FREERIDE_SOCKET=self.socket)
        self.daemon = None
        self.sampler: GpuSampler | None = None
        self.rows: list[dict] = []
        self.results = {"command": " ".join(sys.argv), "rows": self.rows}

    def cli(self, *args: str) -> str:
        return subprocess.run(["freeride", args[0], "--socket", self.socket, *args[1:]], env=self.env, cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout

    def start_daemon(self, lanes: tuple[str, ...] | None = None) -> None:
        """The daemon with `lanes` (default: GPU lane 0 under --mps), and --daemon-args."""
        lanes = lanes if lanes is not None else ("--gpus", "0", "--mps", self.a.mps)
        self.daemon_log = open(os.path.join(self.a.out, "daemon.log"), "w")
        self.daemon = subprocess.Popen(
            ["freeride", "daemon", *lanes, "--allow-root", "--socket", self.socket,
             "--state-dir", os.path.join(self.work, "state"), *self.a.daemon_args.split()],
            env=self.env, cwd=ROOT, stdout=self.daemon_log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(self.socket):
                break
            time.sleep(0.1)
        time.sleep(1)
        pipe = os.path.join(self.work, "state", "mps", "pipe")
        if os.path.exists(os.path.join(pipe, "control")):
            self.env["CUDA_MPS_PIPE_DIRECTORY"] = pipe  # the stand-in joins at priority 0
        log(open(os.path.join(self.a.out, "daemon.log")).read().strip())

    def profile_path(self, name: str) -> tuple[str, int]:
        if name.startswith("h200:"):
            return os.path.join(ROOT, "examples/data/h200_1f1b_bubbles.json"), int(name.split(":")[1])
        path = os.path.join(self.work, f"{name.replace(':', '-')}.json")
        if name.startswith("gap:"):
            with open(path, "w") as f:
                json.dump(gap_profile(name), f)
            return path, 0
        with open(path, "w") as f:
            f.write(subprocess.run(["freeride", "schedule", *SCHEDULES[name], "--json"], env=self.env,
                                   check=True, capture_output=True, text=True).stdout)
        return path, self.a.schedule_rank

    def alone_rate(self, name: str, when: str = "") -> float:
        """`name`'s rate alone; before the rows (`when` ""), also its warm-up in units (is_warm)."""
        cmd, pattern = PROGRAMS[name]
        run = program_alone_run(cmd, pattern, dict(self.env, CUDA_MPS_PIPE_DIRECTORY="/nonexistent"),
                                os.path.join(self.a.out, f"alone-{name}{'-' + when if when else ''}.err"),
                                self.a.alone_warmup, self.a.alone_seconds,
                                warm_share=getattr(self.a, "warm_share", 0.8))
        if not when:
            self.warm_units[name] = run.warm_units
            self.results.setdefault("warm_units", {})[name] = run.warm_units
        log(f"{name}: alone {run.rate:.2f} units/s{' ' + when + ' the rows' if when else ''}"
            f"{'' if when else f'; warm after {run.warm_units} units (where its rate alone settled)'}")
        return run.rate

    def submit(self, name: str) -> str:
        """Submits program `name` (a PROGRAMS entry, optionally with +VAR=VALUE pieces: its
        environment, e.g. an interposer experiment) to lane 0; the task's name."""
        from e2e_arms import split_side, task_name, under_env  # e2e_arms imports this module
        base, env = split_side(name)
        cmd = under_env(PROGRAMS[base][0], env)
        task = task_name(file_name(name), str(len(self.rows)))  # the row's number keeps it unique
        self.cli("submit", "--name", task, "--kind", "imperative", "--lane", "0", "--memory", "16GiB",
                 "--progress-regex", DAEMON_PROGRESS[base], "--", *cmd)
        return task

    def task_log(self, task: str) -> str:
        info = json.loads(self.cli("show", task, "--json"))
        return os.path.join(self.work, "state", "tasks", str(info["id"]), "stdout.log")

    def stand_in_async(self, profile: str, rank: int, tag: str, stop_file: str) -> tuple[subprocess.Popen, str]:
        """A stand-in launch that runs until stop_file exists (at a block boundary); (process, its JSON)."""
        out = os.path.join(self.work, f"{file_name(tag)}.json")
        cmd = ["python3", "examples/stage_replay_gpu.py", "--profile", profile, "--rank", str(rank),
               "--steps", "1000000", "--warmup", "3", "--freeride", "on", "--freeride-alternate",
               str(self.a.alternate), "--stop-file", stop_file, "--socket", self.socket, "--out", out,
               "--copy-share", str(self.a.stage_copy_share)]
        proc = subprocess.Popen(cmd, env=self.env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=open(os.path.join(self.a.out, f"{file_name(tag)}.err"), "w"), text=True)
        first = proc.stdout.readline()  # "replaying rank ...": its set-up is done
        if not first.startswith("replaying"):
            proc.kill()
            raise SystemExit(f"stand-in failed to start: {first}; see {tag}.err")
        return proc, out

    def task_ended(self, task: str) -> bool:
        info = json.loads(self.cli("show", task, "--json"))
        pid = int(info.get("pid", 0))
        return info.get("state") in ("CANCELLED", "FINISHED", "FAILED") and not (pid and os.path.exists(f"/proc/{pid}"))

    def measure(self, profile_name: str, program: str, rate: float) -> None:
        """One stand-in launch holds all three arms: no side process (before the program is
        submitted and after it has exited), and, in between, marks off and on in alternating
        blocks once the program has warmed up."""
        from e2e_arms import split_side  # e2e_arms imports this module
        base = split_side(program)[0]  # a +VAR=VALUE variant has its plain program's pattern and warm-up
        profile, rank = self.profile_path(profile_name)
        tag = f"{profile_name}-{program}"
        stop = os.path.join(self.work, f"{file_name(tag)}.stop")
        stage, out = self.stand_in_async(profile, rank, tag, stop)
        try:
            time.sleep(self.a.noside_seconds)
            lane_before = self.lane_stats()  # the lane's counters run from the daemon's start
            t_submit = time.time()
            task = self.submit(program)
            # Its GPU start-up (upload, warm-up, compilation's benchmarks) runs in bubbles too,
            # in this launch; the arms with the program start once it is warm (is_warm).
            stdout = self.task_log(task)
            _, pattern = PROGRAMS[base]
            deadline = time.time() + self.a.warm_seconds
            warm_units = self.warm_units.get(base, 0)
            warm_reached = True
            while time.time() < deadline:
                lines = [l for l in open(stdout)] if os.path.exists(stdout) else []
                if is_warm([int(m.group(1)) for m in (re.search(pattern, l) for l in lines) if m], warm_units):
                    break
                time.sleep(0.2)
            else:
                warm_reached = False
                log(f"{tag}: not warm after {self.a.warm_seconds:g} s (want 3 progress lines and "
                    f"{warm_units} units); its arms begin anyway, and the row says so")
            t_warm = time.time()
            lane_warm = self.lane_stats()
            stacks = self.sample_stacks(task, tag)
            time.sleep(self.a.measure_seconds)
            t_cancel = time.time()
            py_spy = self.stacks_summary(stacks)
            show = json.loads(self.cli("show", task, "--json"))
            lane = self.lane_stats()  # while the program's learned work length still counts
            margin = int(lane.get("gate_margin_ns", 0))  # the base plus the tasks' longest published work
            self.cli("cancel", task)
            while not self.task_ended(task):
                time.sleep(0.1)
            t_gone = time.time()
            if getattr(self.a, "keep_logs", False):  # for bench/progress_per_bubble.py, beside events.jsonl
                shutil.copy(stdout, os.path.join(self.a.out, f"{file_name(tag)}.stdout.log"))
            time.sleep(self.a.noside_seconds)
        finally:
            open(stop, "w").close()
            stage.wait()
        run = json.load(open(out))
        with open(profile) as f:
            p = json.load(f)
        if "iteration" in p:
            r = p["ranks"][rank]
            bubble_ms = sum(b["duration"] for b in r["idle"])
        else:
            r = {int(x["rank"]): x for x in p["ranks"]}[rank]
            bubble_ms = sum(b["duration_ms"] for b in r["bubbles"])
        done = [(int(m.group(1)), float(m.group(2)))
                for m in (re.search(pattern, line) for line in open(stdout)) if m]
        arm = label_arms(run["iter_unix"], run["iter_ms"], run["freeride_on"], run["warmup"],
                         t_submit, t_warm, t_cancel, t_gone)
        units = units_by_arm(done, run["iter_unix"], run["iter_ms"], run["freeride_on"], arm)
        iters = {k: [t for t, a in zip(run["iter_ms"], arm) if a == k]
                 for k in ("noside_on", "noside_off", "on", "off")}
        no_side = iters["noside_on"] + iters["noside_off"]
        on_bubble_s = len(iters["on"]) * bubble_ms / 1e3
        harvest = (units["on"] / rate) / on_bubble_s if on_bubble_s else float("nan")
        between_lines = harvest_between_lines(done, run["iter_unix"], run["iter_ms"], arm, bubble_ms, rate)
        from e2e_arms import format_interval, gate_misses, verdict  # e2e_arms imports this module
        # One lane, in e2e_arms's terms, so that its revalue_harvest applies.
        row = {"profile": profile_name, "rank": rank, "program": program, "alone_rate_per_s": rate,
               "units_on_by_lane": [units["on"]], "bubble_s_on_by_lane": [on_bubble_s],
               "stage_copy_share": self.a.stage_copy_share,
               "bubble_ms_per_iteration": bubble_ms, "harvest": harvest,
               "harvest_between_lines": between_lines,
               "units_on": units["on"], "units_off_after_block_start": units["off"],
               "iterations": {k: len(v) for k, v in iters.items()},
               "no_side_ms": mean_ci(no_side), "on_ms": mean_ci(iters["on"]), "off_ms": mean_ci(iters["off"]),
               "overhead_on_vs_no_side": diff_ci(iters["on"], no_side),
               "overhead_off_vs_no_side": diff_ci(iters["off"], no_side),
               "overhead_on_vs_off": diff_ci(iters["on"], iters["off"]),
               "marks_alone_on_vs_off": diff_ci(iters["noside_on"], iters["noside_off"]),
               "warm_units": self.warm_units.get(base, 0),
               # e2e_arms.missed_targets reads these: a row measured cold meets no target.
               "warm": warm_reached, "why_not_warm": "" if warm_reached else
               f"short of {self.warm_units.get(base, 0)} units in {self.a.warm_seconds:g} s",
               "seconds": {"warm": t_warm - t_submit, "measured": t_cancel - t_warm, "exit": t_gone - t_cancel},
               "gpu_samples": self.sampler.by_arm(run["iter_unix"], run["iter_ms"], arm) if self.sampler else None,
               "task_state": show.get("state"), "task_message": show.get("message"),
               "daemon_progress": show.get("progress"), "daemon_allowed_ns": show.get("allowed_ns"),
               "gate_margin_ns": margin,
               # The gate's own misses (the lane's totals' growth): late work (running), pending
               # time (waiting on a wait) and held-open time, from warm-up's end to the cancel
               # (the arms), and over the warm-up apart.
               "gate_misses": gate_misses([lane_warm], [lane])[0],
               "gate_misses_warm_up": gate_misses([lane_before], [lane_warm])[0]}
        if py_spy is not None:
            row["py_spy"] = py_spy
        judge_over_blocks(row, run["iter_unix"], run["iter_ms"], arm)
        self.rows.append(row)
        a = row["overhead_on_vs_no_side_drift_adjusted"]
        blocks = "" if a is None else f" (drift-adjusted, over blocks: {format_interval(a)})"
        lines = "" if between_lines is None else (f" ({between_lines['harvest']:.2f} between its first and last "
                                                  f"lines, {between_lines['units']} units)")
        log(f"{tag}: harvest {harvest:.2f}{lines}; on {format_interval(row['overhead_on_vs_no_side'])}{blocks}, off "
            f"{row['overhead_off_vs_no_side']['pct']:+.2f}%, on vs off {row['overhead_on_vs_off']['pct']:+.2f}% "
            f"(same launch); units off {units['off']}; iterations {row['iterations']}; {verdict(row)}")
        if py_spy is not None:
            shares = ", ".join(f"{c} {x:.0%}" for c, x in py_spy.get("share", {}).items())
            log(f"{tag}: stacks over the arms: {py_spy.get('samples', 0)} samples; {shares or py_spy.get('error')}")
        self.save()

    def sample_stacks(self, task: str, tag: str) -> tuple[subprocess.Popen, str] | None:
        """With --py-spy, py-spy recording the task's process for --measure-seconds (the arms):
        (its process, its raw output's path); else None."""
        if not self.a.py_spy:
            return None
        pid = int(json.loads(self.cli("show", task, "--json")).get("pid", 0))
        path = os.path.join(self.a.out, f"{file_name(tag)}.stacks.txt")
        # --nonblocking: py-spy's default stops the program for each sample, which at 500 a second
        # (with --native) cut a generate loop's harvest from 0.47 to 0.02.
        cmd = [self.a.py_spy, "record", "--pid", str(pid), "--rate", str(self.a.py_spy_rate), "--idle",
               "--native", "--nonblocking", "--format", "raw", "--duration", str(max(1, math.ceil(self.a.measure_seconds))),
               "--output", path]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                stderr=open(os.path.join(self.a.out, f"{file_name(tag)}.stacks.err"), "w")), path

    def stacks_summary(self, stacks: tuple[subprocess.Popen, str] | None) -> dict | None:
        """side_stacks.summarize of what sample_stacks recorded, or why there is nothing."""
        if stacks is None:
            return None
        proc, path = stacks
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()
        if not os.path.exists(path):
            return {"error": f"py-spy exited {proc.returncode} without samples; see {os.path.basename(path)[:-4]}.err"}
        from side_stacks import summarize
        with open(path) as f:
            return dict(summarize(f), file=os.path.basename(path))

    def lane_stats(self) -> dict:
        """The daemon's one lane's statistics (`freeride status --json`)."""
        lanes = json.loads(self.cli("status", "--json")).get("stats", {}).get("lanes", [])
        return lanes[0] if lanes else {}

    def latency(self, role: str = "side", marks: str = "gated", shape: tuple = (2000, 2000),
                side_env: str = "") -> None:
        """gate_latency.cu's stage, marking with `marks` ("gated" or "stream"), against its side
        program `role`: "side" (20 us kernels: the release latency, results' "latency", or
        "latency_stream_marks") or "ops" (fills, prefetches and graph uploads, each checked:
        results' "entry_points", with the side task's end and its wrong values).  `side_env`,
        VAR=VALUE or "": one more variable in the side program's environment (the results' key and
        the stamps' names gain _VAR_VALUE)."""
        binary = os.path.join(self.work, "gate_latency")
        if not os.path.exists(binary):
            subprocess.run(["nvcc", "-O2", "-arch=sm_90", "-I", os.path.join(ROOT, "include"), "-o", binary,
                            os.path.join(ROOT, "bench/gate_latency.cu"), "-L", f"{self.bundle}/lib", "-lfreeride",
                            f"-Xlinker=-rpath={self.bundle}/lib"], check=True)
        # where its results go
        busy_us, bubble_us = shape
        other_shape = shape != (2000, 2000)
        key = "entry_points" if role == "ops" else "latency" if marks == "gated" else f"latency_{marks}_marks"
        env_name = file_name(side_env.replace("=", "_"))
        key += f"_busy{busy_us}_bubble{bubble_us}" if other_shape else ""
        key += f"_{env_name}" if side_env else ""
        run = f"{role}-{marks}" + (f"-{busy_us}-{bubble_us}" if other_shape else "")
        run += f"-{env_name}" if side_env else ""
        side_out, stage_out = os.path.join(self.work, f"{run}.txt"), os.path.join(self.work, f"stage-{run}.txt")
        stats = os.path.join(self.work, f"{run}.gate_stats.jsonl")  # the interposer's counts at exit
        task = json.loads(self.cli("submit", "--json", "--name", f"latency-{role}", "--kind", "imperative", "--lane",
                                   "0", "--memory", "2GiB", "--", "env", f"FREERIDE_GATE_STATS={stats}",
                                   *([side_env] if side_env else []), binary,
                                   role, str(self.a.latency_seconds), side_out))
        time.sleep(3)  # the side program's CPU start-up (not gated)
        events = os.path.join(self.work, "state", "events.jsonl")
        events_from = os.path.getsize(events) if os.path.exists(events) else 0  # this run's start there
        iterations = int((self.a.latency_seconds + 6) * 1e6 / (busy_us + bubble_us))
        subprocess.run([binary, "stage", str(iterations), str(busy_us), str(bubble_us), stage_out, marks], env=self.env,
                       check=True)
        for _ in range(100):
            if os.path.exists(side_out):
                break
            time.sleep(0.2)
        ended = {}
        for _ in range(100):
            try:
                ended = json.loads(self.cli("show", str(task["id"]), "--json"))
            except subprocess.CalledProcessError as e:
                ended = {"state": "UNKNOWN", "message": f"freeride show failed: {e.stderr.strip()}"}
            if ended.get("state") in ("FINISHED", "FAILED", "CANCELLED"):
                break
            time.sleep(0.2)
        else:  # still there 20 s after its stage: it would hold the lane from the rows that follow
            subprocess.run(["freeride", "cancel", "--socket", self.socket, str(task["id"])], env=self.env,
                           capture_output=True)
            ended = dict(ended, cancelled_by_bench="not ended 20 s after its stage")
        if not os.path.exists(side_out):
            self.results[key] = {"error": "the side program wrote nothing", "side_task": ended}
            log(role, "the side program wrote nothing:", ended.get("state"), ended.get("message"))
            self.save()
            return
        bubbles = [tuple(map(int, l.split()[1:])) for l in open(stage_out) if l.startswith("B ")]
        starts = sorted(int(l.split()[1]) for l in open(side_out) if l.startswith("S "))
        res = {"side_task": {k: ended.get(k) for k in ("state", "message", "stderr_tail")}, "marks": marks,
               "busy_us": busy_us, "bubble_us": bubble_us, "side_env": side_env,
               **release_latencies(bubbles, starts), **bubbles_admitting_nothing(events, events_from)}
        # The stamps themselves, for a look at single bubbles later.
        for name, path in (("stage", stage_out), ("side", side_out)):
            with open(path, "rb") as f, gzip.open(os.path.join(self.a.out, f"latency-{run}-{name}.txt.gz"), "wb") as z:
                shutil.copyfileobj(f, z)
        if role == "ops":
            summary = [l.split() for l in open(side_out) if l.startswith("# rounds")]
            res["rounds"], res["wrong_values"] = (int(summary[0][2]), int(summary[0][4])) if summary else (0, None)
        if os.path.exists(stats):
            counts = json.loads(open(stats).read().splitlines()[-1])
            res["gate_stats"] = counts
            if role == "ops" and res["rounds"]:
                # A round makes 6 gated calls (fill, prefetch, kernel, upload, graph launch, copy back);
                # with the fill, prefetch and upload ungated it would make 3.
                res["gated_calls_per_round"] = (counts.get("waits", 0) + counts.get("unwaited", 0)) / res["rounds"]
        self.results[key] = res
        log(role, res)
        self.save()

    def save(self) -> None:
        with open(os.path.join(self.a.out, "gate_gpu.json"), "w") as f:
            json.dump(self.results, f, indent=1, default=lambda o: None)

    def close(self) -> None:
        if self.sampler:
            self.sampler.close()
        if self.daemon:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
            events = os.path.join(self.work, "state", "events.jsonl")
            if getattr(self.a, "keep_logs", False) and os.path.exists(events):
                shutil.copy(events, os.path.join(self.a.out, "events.jsonl"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", default="bundle")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/gate_gpu")
    p.add_argument("--profiles", default="h200:0,interleaved",
                   help="h200:RANK (examples/data/h200_1f1b_bubbles.json), a schedule's name "
                        f"({', '.join(SCHEDULES)}: `freeride schedule`, rank --schedule-rank, 1 unit = 1 ms), "
                        "or gap:BUSY_MS:BUBBLE_MS (one bubble an iteration; gap:1:500 is a gate open "
                        "almost all the time), comma-separated")
    p.add_argument("--programs", default="resnet50,generate,compiled",
                   help="comma-separated; each may take +VAR=VALUE pieces, its environment under the daemon "
                        "(e.g. resnet50+FREERIDE_GATE_LENGTHS=kind: an interposer experiment beside the plain "
                        "program, from the same daemon and launch order), valued at its plain program's rate alone; "
                        "pagerank and sgd are built-in tasks run as any program, counted in their own iterations "
                        "and epochs")
    p.add_argument("--schedule-rank", type=int, default=1)
    p.add_argument("--noside-seconds", type=float, default=8,
                   help="the no-side arm: this long before the program is submitted and after it exits")
    p.add_argument("--measure-seconds", type=float, default=16,
                   help="the on and off arms: this long once the program has warmed up")
    p.add_argument("--alternate", type=int, default=5)
    p.add_argument("--alone-seconds", type=float, default=8)
    p.add_argument("--alone-again", action=argparse.BooleanOptionalAction, default=True,
                   help="measure each program's alone rate again after the rows, and value harvest at the higher "
                        "of its two readings")
    p.add_argument("--alone-warmup", type=float, default=4)
    p.add_argument("--stage-copy-share", type=float, default=0.0,
                   help="the stand-in's --copy-share: share of its busy time in memory copies (0: "
                        "products alone, at an H200's power limit)")
    p.add_argument("--latency", action="store_true")
    p.add_argument("--latency-seconds", type=float, default=6)
    p.add_argument("--latency-shapes", default="2000:2000",
                   help="--latency's stage: BUSY_US:BUBBLE_US, comma-separated, each run in turn (results' "
                        "keys gain _busyB_bubbleL but for 2000:2000)")
    p.add_argument("--latency-marks", default="gated,stream",
                   help="the marks --latency's stage makes, each run in turn: gated (results' \"latency\"), "
                        "stream (\"latency_stream_marks\")")
    p.add_argument("--latency-side-env", default="",
                   help="--latency's side program in turn with each of these, comma-separated: VAR=VALUE in "
                        "its environment, or plain (nothing more), e.g. plain,FREERIDE_GATE_WATCH=spin "
                        "(each shape and marks runs every one in turn)")
    p.add_argument("--entry-points", action="store_true",
                   help="run gate_latency.cu's \"ops\" side program against its stage as --latency does: "
                        "cudaMemset2D, cudaMemPrefetchAsync and cudaGraphUpload under the gate, every value "
                        "checked on the GPU, and its kernels' starts outside the bubbles counted")
    p.add_argument("--daemon-args", default="")
    p.add_argument("--mps", default="auto")
    p.add_argument("--py-spy", default="",
                   help="path of a py-spy binary: samples each program's stacks over its arms "
                        "(--idle --native --nonblocking), keeps them as PROFILE-PROGRAM.stacks.txt and sums them up "
                        "in the row's py_spy (bench/side_stacks.py: gate hold, GPU wait, driver, python)")
    p.add_argument("--py-spy-rate", type=int, default=250, help="py-spy's samples a second")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep each program's output (PROFILE-PROGRAM.stdout.log, ':' written '_') and the "
                        "daemon's events.jsonl in --out, for bench/progress_per_bubble.py")
    p.add_argument("--warm-seconds", type=float, default=120,
                   help="the arms begin once the program is warm (3 progress lines, and the units it "
                        "had done alone when its rate settled: --warm-share), or after this long")
    p.add_argument("--warm-share", type=float, default=0.8,
                   help="a program's rate alone has settled once it keeps this share of its timed rate "
                        "for half a second; in bubbles it is warm once it has done the work it had done then")
    a = p.parse_args()
    for name in [x for x in a.profiles.split(",") if x]:
        check_profile_name(name)
    if a.py_spy and not shutil.which(a.py_spy):
        raise SystemExit(f"--py-spy {a.py_spy}: no such executable (unzip py-spy's wheel from PyPI and give "
                         "the path of py_spy-*.data/scripts/py-spy)")
    if not 0 < a.warm_share <= 1:
        raise SystemExit(f"--warm-share {a.warm_share}: give a share above 0, up to 1")
    if a.py_spy_rate <= 0:
        raise SystemExit(f"--py-spy-rate {a.py_spy_rate}: give samples a second above 0")
    if not 0 <= a.stage_copy_share < 1:
        raise SystemExit(f"--stage-copy-share {a.stage_copy_share}: give a share from 0 up to (not including) 1")
    latency_marks = [x for x in a.latency_marks.split(",") if x]
    if not latency_marks or any(x not in ("gated", "stream") for x in latency_marks):
        raise SystemExit(f"--latency-marks {a.latency_marks}: give gated, stream or both, comma-separated")
    try:
        latency_shapes = [tuple(int(v) for v in x.split(":")) for x in a.latency_shapes.split(",") if x]
    except ValueError:
        latency_shapes = []
    if not latency_shapes or any(len(x) != 2 or min(x) <= 0 for x in latency_shapes):
        raise SystemExit(f"--latency-shapes {a.latency_shapes}: give BUSY_US:BUBBLE_US pairs of positive whole "
                         "microseconds, comma-separated (e.g. 2000:2000,2000:1000)")
    # "" (plain: nothing more) when the option is not given.
    latency_side_envs = ["" if x == "plain" else x for x in a.latency_side_env.split(",") if x] or [""]
    if a.latency_side_env and (not any(a.latency_side_env.split(",")) or any(
            x and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", x) for x in latency_side_envs)):
        raise SystemExit(f"--latency-side-env {a.latency_side_env}: give plain or VAR=VALUE, comma-separated "
                         "(e.g. plain,FREERIDE_GATE_WATCH=spin)")
    if len(set(latency_side_envs)) != len(latency_side_envs):
        raise SystemExit(f"--latency-side-env {a.latency_side_env}: each entry once (a second run would take the "
                         "first's place in the results)")
    os.makedirs(a.out, exist_ok=True)
    b = Bench(a)
    from e2e_arms import bundle_commit, git_commit  # e2e_arms imports this module
    b.results["commit"] = git_commit()
    b.results["bundle_commit"] = bundle_commit(a.bundle)
    b.results["daemon_args"] = a.daemon_args  # the command line kept in "command" loses its quotes
    from e2e_arms import split_side  # e2e_arms imports this module
    programs = [x for x in a.programs.split(",") if x]
    bases = list(dict.fromkeys(split_side(x)[0] for x in programs))  # SystemExit for a bad +VAR=VALUE
    unknown = [x for x in bases if x not in PROGRAMS]
    if unknown:
        raise SystemExit(f"--programs: unknown {', '.join(unknown)}; known: {', '.join(sorted(PROGRAMS))} "
                         "(each may take +VAR=VALUE pieces: its environment, e.g. resnet50+FREERIDE_GATE_LENGTHS=kind)")
    # A variant's rate alone is its plain program's (measured once, without the interposer).
    base_rates = {name: b.alone_rate(name) for name in bases}
    rates = {name: base_rates[split_side(name)[0]] for name in programs}
    b.results["alone_rates"] = rates
    b.start_daemon()
    try:
        if a.latency:
            for shape in latency_shapes:
                for marks in latency_marks:
                    for side_env in latency_side_envs:
                        b.latency("side", marks, shape, side_env)
        if a.entry_points:
            b.latency("ops")
        if shutil.which("nvidia-smi"):
            b.sampler = GpuSampler(os.path.join(a.out, "gpu_samples.csv"), [0])  # the daemon's one lane
        for profile in [x for x in a.profiles.split(",") if x]:
            for program in programs:
                b.measure(profile, program, rates[program])
    finally:
        b.close()
        b.save()
    # Alone again once the daemon (and its MPS) is gone, as before the rows.
    if a.alone_again and b.rows:
        try:
            after_bases = {name: b.alone_rate(name, "after") for name in bases}
            after = {name: after_bases[split_side(name)[0]] for name in programs}
        except SystemExit as e:
            log(f"the alone rates could not be measured again: {e}")
            return
        b.results["alone_rates_after"] = after
        from e2e_arms import revalue_harvest  # e2e_arms imports this module
        for row in b.rows:
            revalue_harvest(row, after.get(row["program"]))
            log(f"{row['profile']}-{row['program']}: harvest {row['harvest']:.2f} at the better alone rate "
                f"({row.get('alone_rate_used_per_s', row['alone_rate_per_s']):.2f}/s; before the rows "
                f"{row['alone_rate_per_s']:.2f}, after {after[row['program']]:.2f})")
        b.save()


if __name__ == "__main__":
    main()
