"""Batch inference of a GPT-style language model as a FreeRide side task.

Random weights and generated prompts (no downloads).  A batch is a prefill
of the prompts, then one decode for each further token, with a KV cache of
fixed size; a finished batch is replaced by a new one.  Progress is counted
in generated tokens.

The prefill and a decode are each one operation (tasks/pieces.py), on a GPU
one CUDA graph each: a decode reads its position from a tensor and attends
through a mask over the whole cache, so that its shapes never change.  Under
a daemon a step is a piece of about FREERIDE_PIECE_MS of GPU time (several
decodes); alone (--standalone) a step is a whole batch.

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
from freeride.tasks.common import (add_device_options, check_memory, choose_device,
                                   parse_task_arguments, peak_bytes)
from freeride.tasks.pieces import Operation, OperationRunner, run_in_pieces, capture_graph

PRESETS = {"tiny": (2, 64, 4, 256), "125m": (12, 768, 12, 32000), "350m": (24, 1024, 16, 32000)}


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, cache: list, position, mask=None):
        """Tokens `x` at `position`: an int (prefill, attending causally to the cache before
        and within x), or, with `mask`, a one-element tensor (one token, attending through
        the mask over the whole cache: shapes that never change, for a CUDA graph)."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        keys, values = cache
        if mask is None:
            keys[:, :, position:position + t] = k
            values[:, :, position:position + t] = v
            y = F.scaled_dot_product_attention(q, keys[:, :, :position + t], values[:, :, :position + t],
                                               is_causal=t > 1)
        else:
            keys.index_copy_(2, position, k)
            values.index_copy_(2, position, v)
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class LanguageModel(nn.Module):
    def __init__(self, layers: int, dim: int, heads: int, vocab: int, max_len: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, caches, position, mask=None):
        """Logits of the next token; `position` and `mask` as in Block.forward."""
        places = position if mask is not None else torch.arange(
            position, position + tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(places)
        for block, cache in zip(self.blocks, caches):
            x = block(x, cache, position, mask)
        return self.head(self.ln(x[:, -1]))


class LlmInference(freeride.IterativeTask):
    whole_steps = True  # run_in_pieces sets it: False under a daemon
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
        device = self.device
        # The state a batch lives in, allocated once so that graphs can read and write it.
        self.caches = [[torch.zeros(self.shape, device=device, dtype=self.dtype) for _ in range(2)]
                       for _ in self.model.blocks]
        self.prompt = torch.zeros(a.batch, a.prompt, dtype=torch.long, device=device)
        self.output = torch.zeros(a.batch, max_len, dtype=torch.long, device=device)
        self.token = torch.zeros(a.batch, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.places = torch.arange(max_len, device=device)
        self.mask = torch.zeros(1, 1, 1, max_len, dtype=torch.bool, device=device)
        with torch.no_grad():
            self._prefill = capture_graph(device, self._prefill_body, "llm-inference's prefill")
            # Each warm-up decode writes the cache at 0 and a token at 1, inside any batch's.
            self._decode = capture_graph(device, self._decode_body, "llm-inference's decode",
                                         reset=self.position.zero_)
        self.runner = OperationRunner(device, self._batch)
        # The first batch pays for lazy initialisation: run it here, outside
        # any bubble, so that the first step in a bubble does not overrun it.
        self.runner.piece(whole=True)
        self.batches = 0
        print(f"llm-inference: {a.preset} ({sum(p.numel() for p in self.model.parameters()) / 1e6:.0f}M "
              f"parameters), batch {a.batch}, prompt {a.prompt}, {a.generate} new tokens, on "
              f"{self.device}{', CUDA graphs' if self._decode != self._decode_body else ''}",
              file=sys.stderr, flush=True)

    def _prefill_body(self) -> None:
        logits = self.model(self.prompt, self.caches, 0)
        self.token.copy_(logits.argmax(-1, keepdim=True))
        self.position.fill_(self.args.prompt)
        self.output[:, :self.args.prompt].copy_(self.prompt)
        self.output[:, self.args.prompt:self.args.prompt + 1].copy_(self.token)

    def _decode_body(self) -> None:
        torch.le(self.places, self.position, out=self.mask.view(-1))
        logits = self.model(self.token, self.caches, self.position, self.mask)
        self.token.copy_(logits.argmax(-1, keepdim=True))
        self.position.add_(1)
        self.output.index_copy_(1, self.position, self.token)

    def _batch(self) -> list[Operation]:
        if self.args.batches and self.batches >= self.args.batches:
            return []
        return ([Operation("prefill", self._new_batch)]
                + [Operation("decode", self._decode_one)] * (self.args.generate - 1))

    @torch.no_grad()
    def _new_batch(self) -> float:
        self.batches += 1
        self.prompt.random_(0, self.vocab)
        self._prefill()
        return self.args.batch

    @torch.no_grad()
    def _decode_one(self) -> float:
        self._decode()
        return self.args.batch

    def step(self):
        result = self.runner.step(whole=self.whole_steps)
        if self.args.batches and self.batches >= self.args.batches and not self.runner.pending():
            result.done = True
        return result

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
    for name in ("batch", "prompt", "generate"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    return run_in_pieces(LlmInference(args), run_argv)


if __name__ == "__main__":
    raise SystemExit(main())
