"""Vision model training (ResNet-18, ResNet-50, VGG-19) as a FreeRide side task.

torchvision models with random initial weights, trained with SGD on
synthetic images (or, with --data, on a local ImageFolder; never a
download).  A step is one training iteration of one mini-batch; progress is
counted in images.

    python -m freeride.tasks.vision --model resnet50 --batch 32 --device cuda
"""
from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

import freeride
from freeride.tasks.common import (add_device_options, check_memory, choose_device, paced_on_gpus,
                                   parse_task_arguments, peak_bytes, sync)

MODELS = ("resnet18", "resnet50", "vgg19")


class VisionTraining(freeride.IterativeTask):
    unit = "images"

    def __init__(self, args):
        self.args = args

    def init(self) -> None:
        try:
            import torchvision
        except ImportError as e:
            raise SystemExit("the vision task needs torchvision (pip install torchvision)") from e
        a = self.args
        self.device = choose_device(a.device)
        model = getattr(torchvision.models, a.model)(weights=None, num_classes=a.classes)
        params = sum(p.numel() for p in model.parameters())
        # Weights, gradients and momentum, plus a rough allowance for activations.
        activations = a.batch * a.image_size * a.image_size * 3 * 4 * (60 if a.model == "resnet50" else 30)
        check_memory(self.device, params * 12 + activations, f"{a.model} training, batch {a.batch}")
        self.model = model.to(self.device).train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loader = self._loader(torchvision) if a.data else None
        generator = torch.Generator().manual_seed(a.seed)
        self.images = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=generator).to(self.device)
        self.labels = torch.randint(0, a.classes, (a.batch,), generator=generator).to(self.device)
        self.iterations = 0
        # The first iteration pays for lazy initialisation (cuDNN's choice of
        # algorithms, cuBLAS, the optimizer's state): pay it here, outside
        # any bubble, so that the first piece in a bubble does not overrun it.
        self._train_once(self.images, self.labels)
        sync(self.device)
        self.iterations = 1  # a real step, so --iterations N trains N (it is not credited as work)
        print(f"vision: {a.model} ({params / 1e6:.1f}M parameters), batch {a.batch} of "
              f"{a.image_size}x{a.image_size}, {'data ' + a.data if a.data else 'synthetic data'}, "
              f"on {self.device}", file=sys.stderr, flush=True)

    def _loader(self, torchvision):
        t = torchvision.transforms
        dataset = torchvision.datasets.ImageFolder(self.args.data, t.Compose([
            t.RandomResizedCrop(self.args.image_size), t.ToTensor()]))
        loader = torch.utils.data.DataLoader(dataset, batch_size=self.args.batch, shuffle=True,
                                             drop_last=True, num_workers=2)
        while True:
            yield from loader

    def step(self):
        a = self.args
        images, labels = (self.images, self.labels) if self.loader is None else [
            x.to(self.device, non_blocking=True) for x in next(self.loader)]
        self._train_once(images, labels)
        sync(self.device)
        self.iterations += 1
        if a.iterations and self.iterations >= a.iterations:
            return freeride.StepResult(a.batch, True)
        return a.batch

    def _train_once(self, images, labels) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(self.model(images), labels).backward()
        self.optimizer.step()

    def save(self, path: str) -> bool:
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "iterations": self.iterations}, path)
        return True

    def restore(self, path: str) -> bool:
        state = torch.load(path, map_location=self.device)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.iterations = state["iterations"]
        return True

    def peak_memory_bytes(self) -> int:
        return peak_bytes(self.device)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m freeride.tasks.vision", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=MODELS, default="resnet18")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--data", default=None, help="a local ImageFolder (default: synthetic images)")
    p.add_argument("--iterations", type=int, default=0, help="stop after this many (0: never)")
    p.add_argument("--seed", type=int, default=0)
    add_device_options(p)
    args, run_argv = parse_task_arguments(p, argv)
    return paced_on_gpus(args.device)(VisionTraining(args), run_argv)


if __name__ == "__main__":
    raise SystemExit(main())
