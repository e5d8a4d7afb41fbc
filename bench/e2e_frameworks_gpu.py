"""End-to-end benchmark of the framework integrations on one 2-GPU node: a
2-stage pipeline of each framework -- DeepSpeed's pipeline engine
(examples/train_gpt_deepspeed.py), megatron-core's 1F1B schedule
(examples/train_gpt_megatron.py) and torch.distributed.pipelining
(examples/train_gpt_pipeline.py) -- trains the same GPT with the built-in
PageRank task in its bubbles, FreeRide alternating with baseline every
--alternate iterations inside one launch (bench/e2e_gpu.py's Bench: the
daemon from the bundle, the task submitted with its task-profile, overhead,
harvest ratio and cost saving).  Rows, with `gpus` and `framework`, go to
OUT/e2e_gpu_frameworks.json as they finish.

    python3 bench/e2e_frameworks_gpu.py --bundle bundle --out $OUT
    # The logic on CPU (CPU lanes, a tiny GPT, PageRank on the CPU):
    python3 bench/e2e_frameworks_gpu.py --bundle bundle --out /tmp/fw --device cpu

With --arms, each framework's launch holds the three arms of bench/e2e_arms.py instead (no side
process, marks off, marks on), serving --sides one after another (default PageRank and the
unmodified ResNet-50 training script) on every GPU lane; rows and the markdown table go to
OUT/e2e_gpu_frameworks_2gpu.{json,md}:

    python3 bench/e2e_frameworks_gpu.py --bundle bundle --out $OUT --arms --frameworks deepspeed,megatron

deepspeed (0.19.8) and megatron-core (0.16.1) are imported by the trainers
(through PYTHONPATH on a node without them: see docs/integrations.md); a
framework that cannot be imported is reported and skipped, the others run,
and the script then exits non-zero.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_arms import Arms, add_arms_arguments  # noqa: E402
from e2e_gpu import PY, TASKS, Bench, add_bench_arguments, log  # noqa: E402

FRAMEWORKS = {  # name: (trainer, module it needs, extra trainer options)
    "deepspeed": ("train_gpt_deepspeed.py", "deepspeed", ()),
    "megatron": ("train_gpt_megatron.py", "megatron.core", ()),
    "torch": ("train_gpt_pipeline.py", "torch", ()),
}
CPU_TASKS = {"pagerank": ["freeride-pagerank", "--rmat-scale", "14", "--max-iterations", "100000000",
                          "--tolerance", "0", "--device", "cpu", "--step-ms", "2"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bench_arguments(p, work="/tmp/freeride-e2e-frameworks", gpus=2, preset=None)  # preset: 1.3b on GPUs, tiny on CPU
    p.add_argument("--frameworks", default="deepspeed,megatron,torch")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: a dry run of the logic with CPU lanes (no GPU needed)")
    add_arms_arguments(p)
    p.add_argument("--sides", default=None,
                   help="--arms: the sides served in each launch (default pagerank,resnet50; with --device cpu "
                        "pagerank,loop); a program may take +VAR=VALUE pieces (bench/e2e_gpu.py --help)")
    a = p.parse_args()
    a.preset = a.preset or ("1.3b" if a.device == "cuda" else "cpu-small" if a.arms else "tiny")
    os.makedirs(a.out, exist_ok=True)
    cpu = a.device == "cpu"
    runnable, skipped = [], []  # (framework, its trainer, its options)
    for framework in a.frameworks.split(","):
        script, module, extra = FRAMEWORKS[framework]
        if importlib.util.find_spec(module.split(".")[0]) is None:
            log(f"== {framework}: {module} is not importable by {PY}; skipped")
            skipped.append(framework)
        else:
            runnable.append((framework, script, (*extra, *(["--device", "cpu"] if cpu else []))))
    tasks = CPU_TASKS if cpu else TASKS
    if a.arms:
        bench = Bench(a, tasks=tasks, results=f"e2e_gpu_frameworks_{a.gpus}gpu.json")
        sides = (a.sides or ("pagerank,loop" if cpu else "pagerank,resnet50")).split(",")
        Arms(bench, sides, cpu).run([("1f1b", a.microbatches, *launch) for launch in runnable])
        if skipped:
            raise SystemExit(f"skipped (not importable): {', '.join(skipped)}")
        return
    bench = Bench(a, tasks=tasks, results="e2e_gpu_frameworks.json")
    bench.start_daemon()
    try:
        for framework, script, extra in runnable:
            log(f"== {framework} 1f1b m{a.microbatches} pagerank")
            bench.run("1f1b", a.microbatches, "pagerank", framework=framework, script=script, extra=extra,
                      naive=False)
    finally:
        bench.close()
    base = {row["framework"]: row["iter_ms"] for row in bench.rows if row["mode"] == "baseline"}
    for row in bench.rows:
        if row["mode"] == "freeride":
            log(f"{row['framework']:>9}: baseline {base[row['framework']]:.1f} ms, FreeRide {row['iter_ms']:.1f} ms "
                f"(overhead {row['overhead_pct']:+.2f}%), harvest {row['harvest_ratio']:.2f}, "
                f"saving {row['cost_saving_pct']:.1f}%")
    if skipped:
        raise SystemExit(f"skipped (not importable): {', '.join(skipped)}")


if __name__ == "__main__":
    main()
