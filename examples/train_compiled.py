"""A plain training script compiled with torch.compile (Triton kernels; with --mode reduce-overhead
its steps run as CUDA graphs); nothing of
FreeRide in it.  On a GPU lane each graph launch waits on the lane's gate.

    freeride submit --kind imperative --name compiled -- python examples/train_compiled.py

Prints "step N ... at UNIX_TIME" every --log-every steps.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=2048)
parser.add_argument("--depth", type=int, default=8)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--steps", type=int, default=1_000_000)
parser.add_argument("--log-every", type=int, default=10)
parser.add_argument("--mode", default="default", help="torch.compile mode (reduce-overhead: CUDA graphs)")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
layers = []
for _ in range(args.depth):
    layers += [nn.Linear(args.width, args.width), nn.GELU()]
model = nn.Sequential(*layers, nn.Linear(args.width, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(args.batch, args.width, device=device)
y = torch.randint(0, 10, (args.batch,), device=device)


compiled = torch.compile(model, mode=args.mode)  # forward and backward become CUDA graphs

for step in range(1, args.steps + 1):
    optimizer.zero_grad(set_to_none=False)
    torch.compiler.cudagraph_mark_step_begin()
    loss = F.cross_entropy(compiled(x), y)
    loss.backward()
    optimizer.step()
    if step % args.log_every == 0:
        print(f"step {step}: loss {loss.item():.3f} at {time.time():.6f}", flush=True)
