"""A plain PyTorch training script, with nothing of FreeRide in it.

Run it as a side task, unmodified, with one command:

    freeride submit --name resnet18 -- python -m freeride.pace examples/train_resnet.py

and measure its alone rate first, so that `report` values its work:

    freeride task-profile --name resnet18 -- python -m freeride.pace examples/train_resnet.py

Synthetic images (no downloads).  --model small needs no torchvision.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="resnet18", help="a torchvision model, or 'small'")
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--image-size", type=int, default=224)
parser.add_argument("--iterations", type=int, default=1000)
parser.add_argument("--log-every", type=int, default=100, help="print a progress line every N iterations")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
if args.model == "small":
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
                          nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
else:
    import torchvision
    model = getattr(torchvision.models, args.model)(num_classes=10)
model = model.to(device).train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images = torch.randn(args.batch, 3, args.image_size, args.image_size, device=device)
labels = torch.randint(0, 10, (args.batch,), device=device)

start = time.time()
for iteration in range(1, args.iterations + 1):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    if iteration % args.log_every == 0:
        print(f"iteration {iteration}: loss {loss.item():.3f}, {time.time() - start:.1f} s, "
              f"at {time.time():.6f}", flush=True)
print(f"trained {args.iterations} iterations", flush=True)
