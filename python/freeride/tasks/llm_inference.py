"""Batch inference of a GPT-style language model as a FreeRide side task.

Random weights and generated prompts (no downloads).  A step decodes one
token for every sequence of the batch, with a KV cache; a finished batch is
replaced by a new one.  Progress is counted in generated tokens.

    python -m freeride.tasks.llm_inference --preset 350m --batch 32 --device cuda
    freeride submit -- python -m freeride.tasks.llm_inference --preset tiny --device cpu
"""
from __future__ import annotations

import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import freeride
from freeride.tasks.common import (add_device_options, check_memory, choose_device, paced_on_gpus,
                                   parse_task_arguments, peak_bytes, sync)

PRESETS = {"tiny": (2, 64, 4, 256), "125m": (12, 768, 12, 32000), "350m": (24, 1024, 16, 32000)}


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, cache: list, position: int):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        keys, values = cache
        keys[:, :, position:position + t] = k
        values[:, :, position:position + t] = v
        y = F.scaled_dot_product_attention(q, keys[:, :, :position + t], values[:, :, :position + t],
                                           is_causal=t > 1)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class LanguageModel(nn.Module):
    def __init__(self, layers: int, dim: int, heads: int, vocab: int, max_len: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, caches, position: int):
        x = self.tok(tokens) + self.pos(torch.arange(position, position + tokens.shape[1],
                                                     device=tokens.device))
        for block, cache in zip(self.blocks, caches):
            x = block(x, cache, position)
        return self.head(self.ln(x[:, -1]))


class LlmInference(freeride.IterativeTask):
    unit = "tokens"

    def __init__(self, args):
        self.args = args

    def init(self) -> None:
        a = self.args
        self.device = choose_device(a.device)
        layers, dim, heads, vocab = PRESETS[a.preset]
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        max_len = a.prompt + a.generate
        width = 2 if self.dtype == torch.bfloat16 else 4
        weights = (12 * layers * dim * dim + 2 * vocab * dim) * width
        cache = 2 * layers * a.batch * max_len * dim * width
        check_memory(self.device, weights + cache, f"llm-inference {a.preset}, batch {a.batch}")
        torch.manual_seed(a.seed)
        self.model = LanguageModel(layers, dim, heads, vocab, max_len).to(self.device, self.dtype).eval()
        self.shape = (a.batch, heads, max_len, dim // heads)
        self.vocab = vocab
        self.batches = 0
        # The first calls pay for lazy initialisation: make them here, outside
        # any bubble, so that the first step in a bubble does not overrun it.
        self._new_batch()
        for _ in range(2):
            self._decode_one()
        self._new_batch()
        print(f"llm-inference: {a.preset} ({sum(p.numel() for p in self.model.parameters()) / 1e6:.0f}M "
              f"parameters), batch {a.batch}, prompt {a.prompt}, {a.generate} new tokens, on "
              f"{self.device}", file=sys.stderr, flush=True)

    def _new_batch(self) -> None:
        self.caches = [[torch.empty(self.shape, device=self.device, dtype=self.dtype) for _ in range(2)]
                       for _ in self.model.blocks]
        self.tokens = torch.randint(0, self.vocab, (self.args.batch, self.args.prompt), device=self.device)
        self.position = 0
        self.generated = 0

    @torch.inference_mode()
    def step(self):
        a = self.args
        if self.generated == a.generate:
            self.batches += 1
            if a.batches and self.batches >= a.batches:
                return freeride.StepResult(0, True)
            self._new_batch()
        self._decode_one()
        sync(self.device)
        return a.batch

    @torch.inference_mode()
    def _decode_one(self) -> None:
        # The first step of a batch also reads the prompt (prefill).
        new = self.tokens if self.position == 0 else self.tokens[:, -1:]
        logits = self.model(new, self.caches, self.position)
        self.position += new.shape[1]
        self.tokens = torch.cat([self.tokens, logits.argmax(-1, keepdim=True)], dim=1)
        self.generated += 1

    def peak_memory_bytes(self) -> int:
        return peak_bytes(self.device)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m freeride.tasks.llm_inference", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=PRESETS, default="125m")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens")
    p.add_argument("--generate", type=int, default=128, help="new tokens per sequence")
    p.add_argument("--batches", type=int, default=0, help="stop after this many batches (0: never)")
    p.add_argument("--seed", type=int, default=0)
    add_device_options(p)
    args, run_argv = parse_task_arguments(p, argv)
    return paced_on_gpus(args.device)(LlmInference(args), run_argv)


if __name__ == "__main__":
    raise SystemExit(main())
