"""Vision model training (ResNet-18, ResNet-50, VGG-19) as a FreeRide side task.

torchvision models with random initial weights, trained with SGD on
synthetic images (or, with --data, on a local ImageFolder; never a
download).  Progress is counted in images, credited at each optimizer step.

An iteration is cut into short operations (tasks/pieces.py): the forward
and the backward of each chunk of layers (a chunk starts at each layer
with weights: a convolution, a linear layer, a residual block), then the
optimizer step.  With FREERIDE_CUDA_GRAPHS=1, on a GPU each chunk's forward
and backward are CUDA graphs over chained static buffers: a chunk's forward reads the previous chunk's
output where it lies, its backward adds into the parameters' gradients and
writes the gradient the previous chunk's backward reads, so that running an
operation is one graph launch and no Python autograd.  Under a daemon a step is a piece of
about FREERIDE_PIECE_MS of GPU time; alone (--standalone, or
`freeride task-profile`'s FREERIDE_STANDALONE_SECONDS) a step is a whole iteration, so the alone
rate that harvest is valued at is the task's full speed.

    python -m freeride.tasks.vision --model resnet50 --batch 32 --device cuda
"""
from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

import freeride
from freeride.tasks.common import (add_device_options, check_memory, choose_device,
                                   parse_task_arguments, peak_bytes)
from freeride.tasks.pieces import Operation, OperationRunner, run_in_pieces, can_capture_graphs

MODELS = ("resnet18", "resnet50", "vgg19")


def layers_in_order(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The layers a torchvision ResNet or VGG applies, in order, residual blocks whole."""
    if hasattr(model, "layer1"):  # ResNet
        return [model.conv1, model.bn1, model.relu, model.maxpool,
                *model.layer1, *model.layer2, *model.layer3, *model.layer4,
                model.avgpool, torch.nn.Flatten(1), model.fc]
    if hasattr(model, "features"):  # VGG
        return [*model.features, model.avgpool, torch.nn.Flatten(1), *model.classifier]
    raise ValueError(f"no layer order known for {type(model).__name__}")


def chunks_of(layers: list[torch.nn.Module]) -> list[torch.nn.Sequential]:
    """Consecutive layers grouped so that each group starts at a layer with weights other
    than a normalisation (a convolution, a linear layer, a residual block): activations,
    pooling and batch norm join the layer before them."""
    chunks: list[list[torch.nn.Module]] = []
    for layer in layers:
        weighted = any(True for _ in layer.parameters()) and not isinstance(
            layer, torch.nn.modules.batchnorm._BatchNorm)
        if weighted or not chunks:
            chunks.append([layer])
        else:
            chunks[-1].append(layer)
    return [torch.nn.Sequential(*c) for c in chunks]


class _WithLoss(torch.nn.Module):
    """The last chunk, ending in the loss (so that its backward starts the iteration's)."""

    def __init__(self, body: torch.nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x, labels):
        return F.cross_entropy(self.body(x), labels)


class VisionTraining(freeride.IterativeTask):
    whole_steps = True  # run_in_pieces sets it: False under a daemon
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
        # Static buffers: a batch from --data is copied into them, so that graphs can read them.
        self.images = torch.randn(a.batch, 3, a.image_size, a.image_size, generator=generator).to(self.device)
        self.labels = torch.randint(0, a.classes, (a.batch,), generator=generator).to(self.device)
        # Gradients exist from the start and stay, so that every backward (a captured one
        # too) adds into them in place.
        for parameter in self.model.parameters():
            parameter.grad = torch.zeros_like(parameter)
        chunks = chunks_of(layers_in_order(self.model))
        chunks[-1] = _WithLoss(chunks[-1])
        self.chunks = chunks
        self.inputs: list = [None] * len(chunks)
        self.outputs: list = [None] * len(chunks)
        self.graphs = None
        # Graphs only when asked (FREERIDE_CUDA_GRAPHS=1): on an H200 the graphed chunks'
        # parameters drifted from the eager ones' after three iterations beyond what
        # reordering explains (bench/results/e2e_gpu_pieces.md), cause not yet found.
        if can_capture_graphs(self.device, default=False):
            self.graphs = self._graphed(chunks)
        self.iterations = 0
        self.runner = OperationRunner(self.device, self._iteration)
        # The first iteration pays for lazy initialisation (cuDNN's choice of
        # algorithms, cuBLAS, the optimizer's state): pay it here, outside
        # any bubble, so that the first piece in a bubble does not overrun it.
        self.runner.piece(whole=True)
        self.iterations = 1  # a real step, so --iterations N trains N (it is not credited as work)
        print(f"vision: {a.model} ({params / 1e6:.1f}M parameters), batch {a.batch} of "
              f"{a.image_size}x{a.image_size}, {'data ' + a.data if a.data else 'synthetic data'}, "
              f"on {self.device}, {len(chunks)} chunks"
              f"{' as CUDA graphs' if self.graphs else ''}", file=sys.stderr, flush=True)

    def _graphed(self, chunks: list) -> tuple[list, list] | None:
        """Each chunk's forward and backward captured as CUDA graphs over chained static
        buffers (self.inputs, self.outputs); None, said once, where capture fails."""
        device = self.device
        stream = torch.cuda.Stream(device)
        try:
            # Two eager iterations on the capture stream first: cuDNN's choices and lazy
            # initialisation, and the autograd nodes of the parameters on this stream.
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    for i in range(len(chunks)):
                        self._forward(i)
                    for i in reversed(range(len(chunks))):
                        self._backward(i)
            torch.cuda.current_stream(device).wait_stream(stream)
            torch.cuda.synchronize(device)
            pool = torch.cuda.graph_pool_handle()
            forwards, backwards = [], [None] * len(chunks)
            last = len(chunks) - 1
            for i, chunk in enumerate(chunks):
                x = self.images if i == 0 else self.outputs[i - 1].detach().requires_grad_()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                    out = chunk(x, self.labels) if i == last else chunk(x)
                self.inputs[i], self.outputs[i] = x, out
                forwards.append(graph)
            for i in reversed(range(len(chunks))):
                graph = torch.cuda.CUDAGraph()
                # The parameters' gradients exist, so the captured backward adds into them in
                # place; a chunk input's gradient is made during capture, a static buffer.
                with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                    if i == last:
                        self.outputs[i].backward(retain_graph=True)
                    else:
                        self.outputs[i].backward(self.inputs[i + 1].grad, retain_graph=True)
                backwards[i] = graph
            torch.cuda.synchronize(device)
            self.optimizer.zero_grad(set_to_none=False)  # the warm-up's gradients
            return [g.replay for g in forwards], [g.replay for g in backwards]
        except Exception as e:  # noqa: BLE001 - any capture failure leaves the eager path
            torch.cuda.synchronize(device)
            self.inputs = [None] * len(chunks)
            self.outputs = [None] * len(chunks)
            self.optimizer.zero_grad(set_to_none=False)
            print(f"freeride: vision runs without CUDA graphs ({type(e).__name__}: {e})",
                  file=sys.stderr, flush=True)
            return None

    def _iteration(self) -> list[Operation]:
        if self.args.iterations and self.iterations >= self.args.iterations:
            return []
        last = len(self.chunks) - 1
        return ([Operation(f"forward {i}", lambda i=i: self._forward(i)) for i in range(last + 1)]
                + [Operation(f"backward {i}", lambda i=i: self._backward(i)) for i in range(last, -1, -1)]
                + [Operation("optimizer", self._optimizer_step)])

    def _forward(self, i: int) -> float:
        if i == 0 and self.loader is not None:
            images, labels = next(self.loader)
            self.images.copy_(images, non_blocking=True)
            self.labels.copy_(labels, non_blocking=True)
        if self.graphs:
            self.graphs[0][i]()
            return 0
        x = self.images if i == 0 else self.outputs[i - 1].detach().requires_grad_()
        self.inputs[i] = x
        last = i == len(self.chunks) - 1
        self.outputs[i] = self.chunks[i](x, self.labels) if last else self.chunks[i](x)
        return 0

    def _backward(self, i: int) -> float:
        if self.graphs:
            self.graphs[1][i]()
            return 0
        if i == len(self.chunks) - 1:
            self.outputs[i].backward()
        else:
            self.outputs[i].backward(self.inputs[i + 1].grad)
            self.inputs[i + 1] = None
        self.outputs[i] = None
        return 0

    def _optimizer_step(self) -> float:
        self.optimizer.step()
        # Gradients stay allocated: the next backward adds into them in place.
        self.optimizer.zero_grad(set_to_none=False)
        if not self.graphs:
            self.inputs[0] = None
        self.iterations += 1
        return self.args.batch

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
        result = self.runner.step(whole=self.whole_steps)
        if a.iterations and self.iterations >= a.iterations and not self.runner.pending():
            result.done = True
        return result

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
    return run_in_pieces(VisionTraining(args), run_argv)


if __name__ == "__main__":
    raise SystemExit(main())
