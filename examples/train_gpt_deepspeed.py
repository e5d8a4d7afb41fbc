"""The GPT of train_gpt_pipeline.py trained by DeepSpeed's pipeline engine
(deepspeed 0.19.x), optionally harvested by FreeRide.  Synthetic data.

    # 2 GPUs, a 1.3B GPT, DeepSpeed's 1F1B with 4 micro-batches:
    deepspeed --num_gpus 2 examples/train_gpt_deepspeed.py --freeride on     # or torchrun
    # CPU (gloo, DeepSpeed's CPU accelerator), as CI runs it:
    DS_ACCELERATOR=cpu torchrun --nproc-per-node 2 examples/train_gpt_deepspeed.py --device cpu

The FreeRide part is the two lines marked below.  Options and --out are those
of train_gpt_pipeline.py, so bench/e2e_gpu.py drives both alike.
"""
from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn

from train_gpt_pipeline import (PRESETS, Block, StageModule, add_common_arguments, announce, loss_fn,
                                make_batch, setup_device, train_dtype, train_loop, write_results)


class Embedding(StageModule):
    """The first layer: tokens -> activations."""

    def __init__(self, dim: int, heads: int, vocab: int, seq: int):
        super().__init__(True, False, 0, dim, heads, vocab, seq)


class Head(StageModule):
    """The last layer: activations -> logits."""

    def __init__(self, dim: int, heads: int, vocab: int, seq: int):
        super().__init__(False, True, 0, dim, heads, vocab, seq)


class Cast(nn.Module):
    """Builds a layer in the training dtype (DeepSpeed builds each stage's layers itself)."""

    def __init__(self, layer: type, dtype: torch.dtype, *args):
        super().__init__()
        self.layer = layer(*args).to(dtype)

    def forward(self, x):
        return self.layer(x)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedule", choices=["1f1b"], default="1f1b", help="DeepSpeed's TrainSchedule is 1F1B")
    add_common_arguments(p)
    args = p.parse_args()
    rank, world, cuda, device = setup_device(args)
    if not cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    from deepspeed.pipe import LayerSpec, PipelineModule

    deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")
    preset = args.preset or ("1.3b" if cuda else "tiny")
    layers, dim, heads, vocab, seq, mbs = PRESETS[preset]
    dtype = train_dtype(args, cuda)
    specs = ([LayerSpec(Cast, Embedding, dtype, dim, heads, vocab, seq)]
             + [LayerSpec(Cast, Block, dtype, dim, heads) for _ in range(layers)]
             + [LayerSpec(Cast, Head, dtype, dim, heads, vocab, seq)])
    # The same weights in every run: DeepSpeed seeds layer i with base_seed + i.
    model = PipelineModule(specs, num_stages=world, loss_fn=loss_fn, partition_method="uniform",
                           seed_layers=True, base_seed=args.seed * 1000 + 1)
    params = [p for p in model.parameters()]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    config = {"train_micro_batch_size_per_gpu": mbs, "gradient_accumulation_steps": args.microbatches,
              "steps_per_print": 10**9, "gradient_clipping": 0.0, "wall_clock_breakdown": False}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    count = announce(params, device, preset, f"{world} stages ({'cuda' if cuda else 'cpu'}), DeepSpeed "
                                     f"{deepspeed.__version__} 1F1B with {args.microbatches} micro-batches, "
                                     f"FreeRide {args.freeride}")

    # FreeRide: these two lines are all a training script needs.
    import freeride.deepspeed
    harvest = freeride.deepspeed.instrument(engine, enabled=args.freeride == "on")

    generator = torch.Generator().manual_seed(args.seed)

    def one_step(batch):
        inputs, target = batch
        micro = iter(zip(inputs.split(mbs), target.split(mbs)))
        return [engine.train_batch(data_iter=micro)]

    times, modes, losses, starts = train_loop(args, harvest,
                                              lambda: make_batch(args, generator, vocab, seq, mbs, device),
                                              one_step, device, cuda)
    harvest.close()
    write_results(args, {"framework": "deepspeed", "deepspeed": deepspeed.__version__, "preset": preset,
                         "parameters": count, "schedule": "1f1b", "device": "cuda" if cuda else "cpu"},
                  params, times, modes, losses if engine.is_last_stage() else [], harvest.marks, starts)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
