#!/usr/bin/env python3
"""What the gate's launch interposer costs a program whose gate is always open.

    python3 bench/interposer_cost_gpu.py --bundle bundle --out $OUT \
        --programs resnet50,tiny --rounds 3 [--variant NAME=PATH.so ...] [--arm NAME=VAR=VALUE[,VAR=VALUE] ...] [--mps]

No daemon and no stage: this script writes a gate page of its own whose gate is
open with no admission deadline (bubble 1, until the end of time), so every piece
of work is admitted at once and what is left is the interposer's own cost on each
launch far inside an open bubble: its host-side look at the gate page, and (since
7d58709) a GPU wait and a fence for one piece in several (MayGoUnwaited in
src/gate/piece_admission.h).  That is its best case: a piece near a bubble's
deadline gets its own wait and fence, and a look at the queue, which this page
never asks for.  A --variant built with every piece waited and fenced measures
that cost.

Arms, each a fresh process of the same program, alternate in rotating blocks
within one launch:
- "plain": the program alone, nothing preloaded;
- "gate": libfreeride_gate.so from --bundle preloaded, on the open page;
- one arm per --variant NAME=PATH (another build of the interposer);
- one arm per --arm NAME=VAR=VALUE[,VAR=VALUE...]: the bundle's interposer with those variables
  in the program's environment (FREERIDE_GATE_RUN, FREERIDE_GATE_SAMPLE_EVERY, ...).

Each block runs the program (gate_gpu.py's program_alone_rate) for
--warm-seconds of progress (not counted: CUDA's start-up, the allocator's
growth) and then --seconds; its rate is its progress over that window, by its
progress lines' own counts and timestamps.  Each
arm's rate is compared with the plain block of the same round, and the ratio's
95% interval is a Student t over rounds.  With --mps every arm joins one MPS
server (as side tasks do under the daemon), and "plain-nomps" is added.

Programs: resnet50 (examples/train_resnet.py, batch 32, a progress line per
iteration), tiny (1,000 one-element additions a unit, a synchronize after
each: the per-launch host cost, nearly nothing else), generate
(examples/generate_loop.py).
"""

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_arms import git_commit, log, mean_interval  # noqa: E402
from gate_gpu import PROGRAMS as GATE_PROGRAMS, program_alone_rate  # noqa: E402

TINY = ("import time, torch\nx = torch.zeros(1, device='cuda')\ni = 0\nwhile True:\n"
        "    for _ in range(1000):\n        x.add_(1)\n    torch.cuda.synchronize()\n"
        "    i += 1\n    print(f'unit {i}: at {time.time():.6f}', flush=True)\n")
# gate_gpu.py's programs (command, and a pattern of the count, then the unix time), and `tiny`.
PROGRAMS = {"resnet50": GATE_PROGRAMS["resnet50"], "generate": GATE_PROGRAMS["generate"],
            "tiny": (["python3", "-c", TINY], r"unit (\d+): at ([\d.]+)")}

# src/gate/gate_page.h's GatePageLayout, the fields an open page needs (version 9).
PAGE_MAGIC = 0x4652474154453031
PAGE_VERSION = 9
PAGE_BYTES = 4096
OFF_WORD, OFF_MAGIC, OFF_VERSION = 0, 8, 16
OFF_ADMIT_BUBBLE, OFF_ADMIT_UNTIL, OFF_AHEAD_BUBBLE = 24, 32, 40
OFF_TASKS, SLOT_BYTES, SLOTS, SLOT_SAMPLES = 104, 80, 32, 16


def write_open_page(path: str) -> None:
    """A gate page whose gate is open (bubble 1) and admits any work: no deadline."""
    page = bytearray(PAGE_BYTES)
    ctypes.c_uint32.from_buffer(page, OFF_WORD).value = (1 << 1) | 1
    ctypes.c_uint64.from_buffer(page, OFF_MAGIC).value = PAGE_MAGIC
    ctypes.c_uint32.from_buffer(page, OFF_VERSION).value = PAGE_VERSION
    ctypes.c_uint32.from_buffer(page, OFF_ADMIT_BUBBLE).value = 1
    ctypes.c_int64.from_buffer(page, OFF_ADMIT_UNTIL).value = 1 << 62
    ctypes.c_uint32.from_buffer(page, OFF_AHEAD_BUBBLE).value = 0xffffffff  # no forecast
    with open(path, "wb") as f:
        f.write(page)


def page_samples(path: str) -> int:
    """The timed pieces every gated process published in its slot: above 0 once one gated."""
    with open(path, "rb") as f:
        page = f.read(PAGE_BYTES)
    total = 0
    for slot in range(SLOTS):
        base = OFF_TASKS + slot * SLOT_BYTES
        pid = int.from_bytes(page[base:base + 8], "little", signed=True)
        if pid > 0:
            total += int.from_bytes(page[base + SLOT_SAMPLES:base + SLOT_SAMPLES + 8], "little")
    return total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", default="bundle")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/interposer_cost")
    p.add_argument("--programs", default="resnet50,tiny")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=PATH.so",
                   help="another build of the interposer, as an arm of its own")
    p.add_argument("--arm", action="append", default=[], metavar="NAME=VAR=VALUE[,VAR=VALUE]",
                   help="the bundle's interposer with these environment variables, as an arm of its own")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warm-seconds", type=float, default=4)
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--mps", action="store_true")
    args = p.parse_args()
    for name in args.programs.split(","):
        if name not in PROGRAMS:
            raise SystemExit(f"--programs {name}: give some of {sorted(PROGRAMS)}")
    if args.rounds < 2:
        raise SystemExit("--rounds: at least 2, for an interval")
    bundle_lib = os.path.abspath(os.path.join(args.bundle, "lib", "libfreeride_gate.so"))
    arms = {"plain": None, "gate": bundle_lib}
    arm_env: dict[str, dict[str, str]] = {}  # an arm's variables beyond the gate page's
    for spec in args.variant:
        name, sep, path = spec.partition("=")
        if not sep or not name or name in arms:
            raise SystemExit(f"--variant {spec}: give NAME=PATH.so with a new NAME")
        arms[name] = os.path.abspath(path)
    for spec in args.arm:
        name, sep, assignments = spec.partition("=")
        pairs = [a.partition("=") for a in assignments.split(",")] if sep else []
        if not name or name in arms or not pairs or any(not var or not eq for var, eq, _ in pairs):
            raise SystemExit(f"--arm {spec}: give NAME=VAR=VALUE[,VAR=VALUE...] with a new NAME, e.g. "
                             "run32=FREERIDE_GATE_RUN=32")
        arms[name] = bundle_lib
        arm_env[name] = {var: value for var, _, value in pairs}
    for name, lib in arms.items():
        if lib and not os.path.isfile(lib):
            raise SystemExit(f"arm {name}: {lib} does not exist (scripts/bundle.sh builds the bundle)")
    os.makedirs(args.out, exist_ok=True)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    # In shared memory, as the daemon's pages are: the driver pins it (cuMemHostRegister), which a
    # file on a disk's file system refuses.
    page = f"/dev/shm/freeride-interposer-cost-{os.getpid()}.page"
    # The caller's own FREERIDE_GATE_* settings would make the "gate" arm something other than the
    # interposer's defaults: each arm gets only the ones it names.
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("FREERIDE_GATE_")}
    mps_pipe = None
    if args.mps:
        mps_pipe = os.path.join(args.work, "mps-pipe")
        os.makedirs(mps_pipe)
        os.makedirs(os.path.join(args.work, "mps-log"))
        mps_env = dict(base_env, CUDA_MPS_PIPE_DIRECTORY=mps_pipe,
                       CUDA_MPS_LOG_DIRECTORY=os.path.join(args.work, "mps-log"))
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env=mps_env, check=True)
        arms = {"plain-nomps": None, **arms}
    order = list(arms)
    rows = []
    commit = git_commit()

    def save(partial: dict | None) -> None:  # after each block: a call cut short keeps what it measured
        with open(os.path.join(args.out, "interposer_cost.json"), "w") as f:
            json.dump({"command": sys.argv, "commit": commit, "arms": arms, "arm_env": arm_env,
                       "rows": rows + ([partial] if partial else [])}, f, indent=1)

    try:
        for program in args.programs.split(","):
            rates = {arm: [] for arm in order}
            for round_index in range(args.rounds):
                rotation = order[round_index % len(order):] + order[:round_index % len(order)]
                for arm in rotation:
                    # Outside MPS unless the arm joins it, whatever the caller's environment says.
                    env = dict(base_env, CUDA_MPS_PIPE_DIRECTORY=mps_pipe if mps_pipe and arm != "plain-nomps"
                               else "/nonexistent")
                    lib = arms[arm]
                    if lib:
                        write_open_page(page)
                        env.update(LD_PRELOAD=lib, FREERIDE_GATE_PAGE=page, **arm_env.get(arm, {}))
                    err = os.path.join(args.out, f"{program}-{arm}-{round_index + 1}.err")
                    cmd, pattern = PROGRAMS[program]
                    rate = program_alone_rate(cmd, pattern, env, err, args.warm_seconds, args.seconds)
                    if lib and page_samples(page) == 0:
                        raise SystemExit(f"{program} under {arm}: no piece of work was gated (timed pieces 0 "
                                         f"in the page); see {err}")
                    rates[arm].append(rate)
                    log(f"{program} round {round_index + 1} {arm}: {rate:.2f} units/s")
                    save({"program": program, "rates": rates, "partial": True})
            row = {"program": program, "rates": rates, "arms": {}}
            for arm in order:
                ratio = mean_interval([r / p for r, p in zip(rates[arm], rates["plain"])])
                row["arms"][arm] = {"rate_mean": statistics.fmean(rates[arm]), "vs_plain": ratio["pct"],
                                    "vs_plain_low": ratio["low"], "vs_plain_high": ratio["high"]}
                log(f"{program} {arm}: {statistics.fmean(rates[arm]):.2f} units/s, "
                    f"{ratio['pct']:.3f} of plain [{ratio['low']:.3f}, {ratio['high']:.3f}]")
            rows.append(row)
            save(None)
    finally:
        if os.path.exists(page):
            os.unlink(page)
        if mps_pipe:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True,
                           env=dict(base_env, CUDA_MPS_PIPE_DIRECTORY=mps_pipe))
    return 0


if __name__ == "__main__":
    sys.exit(main())
