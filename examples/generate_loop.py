"""A plain Hugging Face `generate` loop, with nothing of FreeRide in it: a
GPT-2-sized model built from its config (random weights, nothing is
downloaded), greedy decoding of a batch of prompts, again and again.

Run it as a side task, unmodified (on a GPU lane its GPU work waits on the
lane's gate):

    freeride submit --kind imperative --name gen -- python examples/generate_loop.py

Each new token of a batch prints "generated N tokens at UNIX_TIME" (N counts
every row's tokens since the start), a progress line that
`--progress-regex 'generated (\\d+) tokens'` counts, and each batch
"generated N batches ... at UNIX_TIME".  A batch takes about a tenth of a
second of GPU work, so a side task's harvest counted in batches moves in
steps of that size; tokens are sixteen times finer.
"""
import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, StoppingCriteria, StoppingCriteriaList

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--prompt", type=int, default=32, help="prompt tokens")
parser.add_argument("--new-tokens", type=int, default=16)
parser.add_argument("--layers", type=int, default=12)
parser.add_argument("--width", type=int, default=768, help="n_embd (GPT-2 XL: 1600, with --heads 25 --layers 48)")
parser.add_argument("--heads", type=int, default=12, help="n_head (must divide --width)")
parser.add_argument("--batches", type=int, default=1_000_000)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
if args.width % args.heads:
    parser.error(f"--heads {args.heads} must divide --width {args.width}")
config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.heads)
model = GPT2LMHeadModel(config).to(device).eval()
if device == "cuda":
    model = model.half()
prompts = torch.randint(0, config.vocab_size, (args.batch, args.prompt), device=device)
mask = torch.ones_like(prompts)


class TokenProgress(StoppingCriteria):
    """Prints the tokens generated so far each time generate asks whether to stop, which is once
    a new token is in input_ids; never stops it.  generate has read the previous token's result
    back to the host before it asks, so the line comes within one token of the GPU's work, and
    the criterion itself launches nothing (its answer is made once)."""

    def __init__(self):
        self.tokens = 0
        self.never = torch.zeros(args.batch, dtype=torch.bool, device=device)

    def __call__(self, input_ids, scores, **kwargs):
        self.tokens += input_ids.shape[0]
        print(f"generated {self.tokens} tokens at {time.time():.6f}", flush=True)
        return self.never


progress = StoppingCriteriaList([TokenProgress()])
with torch.no_grad():
    for batch in range(1, args.batches + 1):
        out = model.generate(input_ids=prompts, attention_mask=mask, max_new_tokens=args.new_tokens,
                             min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0,
                             stopping_criteria=progress)
        tokens = int(out.shape[1] - args.prompt)  # a sync: the batch is done
        print(f"generated {batch} batches ({tokens} new tokens each) at {time.time():.6f}", flush=True)
