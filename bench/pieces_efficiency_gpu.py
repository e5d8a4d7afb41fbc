"""On one GPU, alone: how much of each built-in PyTorch task's full speed its
pieces keep, by how long a piece is planned to be.

A piece ends with a device synchronisation, and the GPU idles until the next
one is launched.  Under a daemon a step is now planned to the rest of its
grant (`freeride.step_budget_ns()`), so a long bubble is one long piece
instead of many of the default length (FREERIDE_PIECE_MS, 2 ms).  For each
task this runs whole units of work back to back (the alone rate that harvest
is valued at), then pieces planned to each budget, back to back, and prints
the rate in pieces over the alone rate ("efficiency") and the pieces' mean
length.  No daemon and no trainer: the figure isolates the cost of cutting.
(bench/results/pieces_efficiency_gpu.md ran at 69ca590, before the runner
capped a piece at four default pieces' worth, with a 16 ms plan too.)

    python3 bench/pieces_efficiency_gpu.py --rounds 3 --out $OUT/pieces_efficiency.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import torch  # noqa: E402

from freeride.tasks.llm_inference import LlmInference  # noqa: E402
from freeride.tasks.vision import VisionTraining  # noqa: E402

# As bench/e2e_gpu.py runs them.
TASKS = {
    "resnet18": lambda d: VisionTraining(argparse.Namespace(model="resnet18", batch=32, image_size=224,
                                                            classes=1000, data=None, iterations=0, seed=0,
                                                            device=d)),
    "resnet50": lambda d: VisionTraining(argparse.Namespace(model="resnet50", batch=16, image_size=224,
                                                            classes=1000, data=None, iterations=0, seed=0,
                                                            device=d)),
    "vgg19": lambda d: VisionTraining(argparse.Namespace(model="vgg19", batch=8, image_size=224,
                                                         classes=1000, data=None, iterations=0, seed=0,
                                                         device=d)),
    "llm-inference": lambda d: LlmInference(argparse.Namespace(preset="125m", batch=8, prompt=32, generate=96,
                                                               batches=0, seed=0, device=d)),
}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def rate(task, seconds: float, whole: bool, budget_ns: int) -> tuple[float, float]:
    """Units per second and mean piece length (ms), pieces run back to back for `seconds`
    (whole units of work: `whole`)."""
    units, pieces = 0.0, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or units == 0:
        units += task.runner.piece(whole=whole, budget_ns=budget_ns)
        pieces += 1
    elapsed = time.perf_counter() - start
    return units / elapsed, 1000 * elapsed / pieces


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--budgets-ms", default="0,4,8",
                   help="0: the default piece length alone; the runner plans at most four default "
                        "pieces' worth (8 ms by default), so longer budgets plan that")
    p.add_argument("--seconds", type=float, default=2.5, help="per measurement")
    p.add_argument("--rounds", type=int, default=3, help="of every plan, alternating their order")
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    a = p.parse_args()
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("pieces_efficiency_gpu: no GPU")
        return 77
    rows = []
    budgets = [float(b) for b in a.budgets_ms.split(",")]
    print(f"{'task':14} {'round':>5} {'piece plan':>12} {'mean piece ms':>14} {'units/s':>10} {'efficiency':>10}",
          flush=True)
    for name in a.tasks.split(","):
        task = TASKS[name](a.device)
        task.whole_steps = False
        task.init()
        for _ in range(3):
            task.runner.piece(whole=True)
        sync(a.device)
        # Rounds alternate the plans, so that drift in the GPU's clocks falls on all of them;
        # each round's efficiencies are against its own whole-unit rate.
        for round_ in range(a.rounds):
            alone, whole_ms = rate(task, a.seconds, whole=True, budget_ns=0)
            print(f"{name:14} {round_:5} {'whole':>12} {whole_ms:14.2f} {alone:10.1f} {1.0:10.3f}", flush=True)
            rows.append({"task": name, "round": round_, "plan": "whole", "budget_ms": None, "piece_ms": whole_ms,
                         "rate": alone, "efficiency": 1.0})
            order = budgets if round_ % 2 == 0 else list(reversed(budgets))
            for budget_ms in order:
                # What the last piece left of its unit is finished first, so each plan starts clean.
                if task.runner.pending():
                    task.runner.piece(whole=True)
                r, piece_ms = rate(task, a.seconds, whole=False, budget_ns=int(budget_ms * 1e6))
                plan = "default" if budget_ms == 0 else f"{budget_ms:g} ms"
                print(f"{name:14} {round_:5} {plan:>12} {piece_ms:14.2f} {r:10.1f} {r / alone:10.3f}", flush=True)
                rows.append({"task": name, "round": round_, "plan": plan, "budget_ms": budget_ms,
                             "piece_ms": piece_ms, "rate": r, "efficiency": r / alone})
        del task
        if a.device.startswith("cuda"):
            torch.cuda.empty_cache()
    print("\nefficiency by plan: mean [min, max] over the rounds")
    for name in a.tasks.split(","):
        cells = []
        for budget_ms in budgets:
            plan = "default" if budget_ms == 0 else f"{budget_ms:g} ms"
            e = [r["efficiency"] for r in rows if r["task"] == name and r["plan"] == plan]
            cells.append(f"{plan}: {sum(e) / len(e):.3f} [{min(e):.3f}, {max(e):.3f}]")
        print(f"  {name:14} " + "   ".join(cells))
    meta = {"device": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else a.device,
            "torch": torch.__version__, "FREERIDE_PIECE_MS": os.environ.get("FREERIDE_PIECE_MS", "(default)"),
            "seconds": a.seconds, "rounds": a.rounds}
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
