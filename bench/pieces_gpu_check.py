"""On a GPU: the built-in tasks' CUDA-graph pieces compute what their eager
operations compute.  Vision training: the parameters after three iterations
with graphs and without (FREERIDE_CUDA_GRAPHS=0), from the same weights and
batch; LLM inference: the tokens of one batch.  Prints each comparison and
exits 1 if one differs beyond floating-point reordering.

    python3 bench/pieces_gpu_check.py
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import torch  # noqa: E402

from freeride.tasks.llm_inference import LlmInference  # noqa: E402
from freeride.tasks.vision import VisionTraining  # noqa: E402


def vision(model: str, graphs: bool) -> tuple[VisionTraining, list[torch.Tensor]]:
    os.environ["FREERIDE_CUDA_GRAPHS"] = "1" if graphs else "0"
    torch.manual_seed(0)
    args = argparse.Namespace(model=model, batch=8, image_size=64, classes=10, data=None, iterations=0,
                              seed=0, device="cuda")
    task = VisionTraining(args)
    task.init()
    before = [p.detach().float().clone() for p in task.model.parameters()]
    for _ in range(2):
        task.runner.piece(whole=True)
    torch.cuda.synchronize()
    after = [p.detach().float().clone() for p in task.model.parameters()]
    if any(torch.equal(a, b) for a, b in zip(before, after)):
        print(f"{model}: a parameter did not move in two iterations (graphs {graphs})")
        after = []
    return task, after


def llm(graphs: bool) -> torch.Tensor:
    os.environ["FREERIDE_CUDA_GRAPHS"] = "1" if graphs else "0"
    args = argparse.Namespace(preset="125m", batch=4, prompt=16, generate=24, batches=0, seed=0,
                              device="cuda")
    task = LlmInference(args)
    task.init()
    torch.manual_seed(3)
    task.prompt.copy_(torch.randint(0, task.vocab, task.prompt.shape, device="cuda"))
    with torch.no_grad():
        task._prefill()
        for _ in range(args.generate - 1):
            task._decode()
    torch.cuda.synchronize()
    return task.output[:, :args.prompt + args.generate].clone()


def main() -> int:
    if not torch.cuda.is_available():
        print("pieces_gpu_check: no GPU")
        return 77
    torch.backends.cudnn.benchmark = False
    bad = []
    for model in ("resnet18", "vgg19"):
        graphed, with_graphs = vision(model, True)
        _, without = vision(model, False)
        if not with_graphs or not without:
            bad.append(model)
            continue
        worst = max(((a - b).abs().max() / (b.abs().max() + 1e-12)).item() for a, b in zip(with_graphs, without))
        print(f"{model}: graphs {bool(graphed.graphs)}, largest relative parameter difference {worst:.2e} "
              f"after 3 iterations (graphs against eager)", flush=True)
        if not graphed.graphs or worst > 1e-2:  # VGG-19's dropout draws differ with graphs
            bad.append(model)
    a, b = llm(True), llm(False)
    same = (a == b).float().mean().item()
    print(f"llm-inference: {100 * same:.1f}% of tokens the same with graphs and without", flush=True)
    if same < 0.9:
        bad.append("llm-inference")
    if bad:
        print(f"differ: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
