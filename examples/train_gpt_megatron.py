"""The GPT of train_gpt_pipeline.py trained by megatron-core's pipeline
schedules (megatron-core 0.16.x), optionally harvested by FreeRide.
Synthetic data.

    # 2 GPUs, a 1.3B GPT, Megatron's 1F1B with 4 micro-batches (or --schedule interleaved):
    torchrun --nproc-per-node 2 examples/train_gpt_megatron.py --freeride on
    # CPU (gloo), as CI runs it:
    torchrun --nproc-per-node 2 examples/train_gpt_megatron.py --device cpu

The FreeRide part is the two lines marked below.  Options and --out are those
of train_gpt_pipeline.py, so bench/e2e_gpu.py drives both alike.  The layers
are this project's own (no Transformer Engine); the schedules, the p2p
communication and the process groups are megatron-core's.

megatron-core assumes CUDA: it allocates its receive buffers on
``torch.cuda.current_device()`` and counts tokens in a tensor on "cuda".
With --device cpu, CudaOnCpu sends those to the CPU, so that megatron-core's
real schedules and p2p code run over gloo; nothing else is changed.
"""
from __future__ import annotations

import argparse
import sys
from functools import partial

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from train_gpt_pipeline import (PRESETS, StageModule, add_common_arguments, announce, build_stages, loss_fn,
                                make_batch, setup_device, train_dtype, train_loop, write_results)


class CudaOnCpu(TorchFunctionMode):
    """Creates on the CPU what megatron-core creates on "cuda" (CPU runs only)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if device is not None and (isinstance(device, int) or torch.device(device).type == "cuda"):
            kwargs = dict(kwargs, device="cpu")
        return func(*args, **kwargs)

    @staticmethod
    def install() -> "CudaOnCpu":
        torch.cuda.current_device = lambda: 0  # a device index, which the mode maps to the CPU
        torch.cuda.synchronize = lambda *a, **k: None  # gloo's p2p is done when its wait returns
        mode = CudaOnCpu()
        mode.__enter__()
        return mode


class Chunk(nn.Module):
    """One model chunk as megatron-core's schedules expect it: a config, a model type,
    set_input_tensor(), and activations laid out (sequence, batch, hidden)."""

    def __init__(self, stage: StageModule, config):
        super().__init__()
        from megatron.core.enums import ModelType
        self.stage = stage
        self.config = config
        self.model_type = ModelType.encoder_or_decoder
        self.input_tensor = None

    def set_input_tensor(self, tensors) -> None:
        self.input_tensor = tensors[0] if isinstance(tensors, list) else tensors

    def forward(self, tokens):
        x = tokens if self.stage.first else self.input_tensor.transpose(0, 1)
        y = self.stage(x)
        return y if self.stage.last else y.transpose(0, 1).contiguous()


def forward_step(data_iterator, model):
    tokens, target = next(data_iterator)
    output = model(tokens)
    if not model.stage.last:
        return output, None

    def loss_func(logits):
        loss = loss_fn(logits, target)
        return loss, {"lm loss": loss.detach().clone()}  # the schedule scales loss in place
    return output, loss_func


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedule", choices=["1f1b", "interleaved"], default="1f1b")
    p.add_argument("--p2p", choices=["auto", "batched", "unbatched"], default="auto",
                   help="auto, Megatron-LM's default: interleaved overlaps its p2p (waits on the handles "
                        "between computations), 1f1b batches it (batch_isend_irecv, waited at once); "
                        "unbatched: isend/irecv waited at once")
    add_common_arguments(p)
    args = p.parse_args()
    rank, world, cuda, device = setup_device(args)
    if not cuda:
        CudaOnCpu.install()
    import megatron.core
    from megatron.core import parallel_state
    from megatron.core.transformer.transformer_config import TransformerConfig

    dist.init_process_group("nccl" if cuda else "gloo")
    virtual = 2 if args.schedule == "interleaved" else 1
    parallel_state.initialize_model_parallel(pipeline_model_parallel_size=world,
                                             virtual_pipeline_model_parallel_size=virtual if virtual > 1 else None)
    preset = args.preset or ("1.3b" if cuda else "tiny")
    layers, dim, heads, vocab, seq, mbs = PRESETS[preset]
    dtype = train_dtype(args, cuda)
    # The schedules read the transformer's config (sizes, offloading, MoE); its layers here are our own.
    config = TransformerConfig(num_layers=layers, hidden_size=dim, num_attention_heads=heads,
                               pipeline_model_parallel_size=world,
                               virtual_pipeline_model_parallel_size=virtual if virtual > 1 else None,
                               pipeline_dtype=dtype, overlap_p2p_comm=args.p2p == "auto" and virtual > 1,
                               batch_p2p_comm=args.p2p == "batched" or (args.p2p == "auto" and virtual == 1))

    chunks = [Chunk(module, config) for _, module in build_stages(args, preset, rank, world, virtual, device, dtype)]
    params = [p for chunk in chunks for p in chunk.parameters()]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    count = announce(params, device, preset, f"{world * virtual} stages on {world} ranks ({'cuda' if cuda else 'cpu'}), "
                                     f"megatron-core {megatron.core.__version__} {args.schedule} with "
                                     f"{args.microbatches} micro-batches, p2p {args.p2p}, FreeRide {args.freeride}")

    # FreeRide: these two lines are all a training script needs.
    import freeride.megatron
    harvest = freeride.megatron.instrument(enabled=args.freeride == "on")

    from megatron.core.pipeline_parallel import get_forward_backward_func
    generator = torch.Generator().manual_seed(args.seed)

    def one_step(batch):
        inputs, target = batch
        micro = list(zip(inputs.split(mbs), target.split(mbs)))
        optimizer.zero_grad(set_to_none=True)
        results = get_forward_backward_func()(
            forward_step_func=forward_step, data_iterator=[iter(micro) for _ in chunks],
            model=chunks if virtual > 1 else chunks[0], num_microbatches=args.microbatches,
            seq_length=seq, micro_batch_size=mbs)
        optimizer.step()
        return [r["lm loss"] for r in results] if results else []

    times, modes, losses, starts = train_loop(args, harvest,
                                              partial(make_batch, args, generator, vocab, seq, mbs, device),
                                              one_step, device, cuda)
    harvest.close()
    write_results(args, {"framework": "megatron", "megatron_core": megatron.core.__version__, "preset": preset,
                         "parameters": count, "schedule": args.schedule, "p2p": args.p2p,
                         "device": "cuda" if cuda else "cpu"},
                  params, times, modes, losses, harvest.marks, starts)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
