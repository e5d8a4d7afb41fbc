"""The built-in PyTorch tasks' pieces (freeride/tasks/pieces.py): operations
planned into pieces of a target GPU time, a training iteration cut into
chunks of layers that trains exactly as the whole model does, and LLM decodes
of fixed shape that generate exactly what the growing-cache decode does."""
from __future__ import annotations

import argparse
import copy
import sys

import pytest

from conftest import SOURCE_DIR, require_torch

sys.path.insert(0, str(SOURCE_DIR / "python"))


@pytest.fixture(autouse=True)
def _torch() -> None:
    require_torch()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_a_piece_is_planned_to_the_budget_when_that_is_longer() -> None:
    import torch
    from freeride.tasks.pieces import Operation, OperationRunner
    clock = FakeClock()
    ran: list[str] = []

    def op(name: str) -> Operation:
        def run() -> float:
            clock.now += 1_000_000
            ran.append(name)
            return 1.0
        return Operation(name, run)

    runner = OperationRunner(torch.device("cpu"), lambda: [op(f"op{i}") for i in range(4)],
                             target_ns=2_000_000, now=clock)
    runner.piece(whole=True)  # learns each operation's 1 ms
    ran.clear()
    # The rest of a long bubble: seven operations in one piece, three whole parts of the target.
    step = runner.step(False, budget_ns=7_900_000)
    assert (step.units, step.parts, len(ran)) == (7.0, 3, 7)
    # A budget shorter than the target plans to the target, as without one.
    ran.clear()
    step = runner.step(False, budget_ns=500_000)
    assert (step.units, step.parts, len(ran)) == (2.0, 1, 2)
    # A longer budget (alone it is unbounded) plans at most four parts of the target.
    ran.clear()
    assert runner.step(False, budget_ns=2**63 - 1).parts == 4 and len(ran) == 8
    # An operation longer than the target is the shortest step the task can take: a part is
    # never shorter, so that what the daemon learns as a part fits when it grants.
    runner.estimates["op0"] = runner.estimates["op1"] = 3_000_000
    ran.clear()
    parts = runner.step(False, budget_ns=8_000_000).parts
    assert ran == ["op1", "op2", "op3", "op0"] and parts == 2  # 8 ms planned, parts of 3
    # A whole unit of work is one part, however long.
    ran.clear()
    assert runner.step(True).parts == 1 and ran == ["op1", "op2", "op3"]


def test_pieces_are_planned_to_the_target_from_learned_times() -> None:
    import torch
    from freeride.tasks.pieces import Operation, OperationRunner
    clock = FakeClock()
    ran: list[str] = []

    def op(name: str, took_ns: int, units: float = 0) -> Operation:
        def run() -> float:
            clock.now += took_ns
            ran.append(name)
            return units
        return Operation(name, run)

    unit = lambda: [op("a", 1_000_000), op("b", 1_000_000), op("c", 1_000_000), op("d", 500_000, 10)]
    runner = OperationRunner(torch.device("cpu"), unit, target_ns=2_500_000, now=clock)
    # Untimed, each operation is planned at a quarter of the target: the first piece runs
    # the whole unit (4 x 0.625 ms planned) and credits d's units.
    assert runner.piece() == 10 and ran == ["a", "b", "c", "d"]
    assert runner.estimates == {"a": 1_000_000, "b": 1_000_000, "c": 1_000_000, "d": 500_000}
    # Timed: a piece holds what fits 2.5 ms, and goes on into the next unit.
    ran.clear()
    assert runner.piece() == 0 and ran == ["a", "b"]
    ran.clear()
    assert runner.piece() == 10 and ran == ["c", "d", "a"] and runner.pending()
    # An operation planned longer than the target still runs, alone; a faster run lowers
    # its estimate a quarter of the way, a slower one raises it at once.
    runner.estimates["b"] = 9_000_000
    ran.clear()
    assert runner.piece() == 0 and ran == ["b"]
    assert runner.estimates["b"] == 7_000_000
    runner.estimates["c"] = 100_000
    runner.piece()
    assert runner.estimates["c"] == 1_000_000


def test_a_whole_step_runs_to_the_end_of_the_unit() -> None:
    import torch
    from freeride.tasks.pieces import Operation, OperationRunner
    clock = FakeClock()
    calls = []

    def unit():
        def run(i):
            clock.now += 5_000_000
            calls.append(i)
            return 1.0
        return [Operation(f"op{i}", lambda i=i: run(i)) for i in range(3)]

    runner = OperationRunner(torch.device("cpu"), unit, target_ns=1_000_000, now=clock)
    # Untimed, each is planned at a quarter of the target: a piece runs four, into the next unit.
    assert runner.piece() == 4.0 and calls == [0, 1, 2, 0] and runner.pending()
    assert runner.piece(whole=True) == 2.0 and calls == [0, 1, 2, 0, 1, 2] and not runner.pending()
    assert runner.piece(whole=True) == 3.0 and calls == [0, 1, 2, 0, 1, 2, 0, 1, 2]


def test_a_piece_ends_where_the_work_ends() -> None:
    import torch
    from freeride.tasks.pieces import Operation, OperationRunner
    units = iter([[Operation("a", lambda: 1.0)] * 3, []])
    runner = OperationRunner(torch.device("cpu"), lambda: next(units), target_ns=10**12)
    assert runner.piece() == 3.0 and not runner.pending()


def _resnet_like(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv, self.bn, self.relu = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(x + self.bn(self.conv(x)))

    class Net(nn.Module):  # the attributes torchvision's ResNet has
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.relu = nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(2)
            self.layer1, self.layer2 = nn.Sequential(Block(8), Block(8)), nn.Sequential(Block(8))
            self.layer3, self.layer4 = nn.Sequential(Block(8)), nn.Sequential()
            self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 5)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))
    return Net()


def _vgg_like(torch):
    nn = torch.nn

    class Net(nn.Module):  # the attributes torchvision's VGG has
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                                          nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True))
            self.avgpool = nn.AdaptiveAvgPool2d(2)
            self.classifier = nn.Sequential(nn.Linear(32, 16), nn.ReLU(True), nn.Linear(16, 5))

        def forward(self, x):
            return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))
    return Net()


@pytest.mark.parametrize("family", ["resnet", "vgg"])
def test_training_in_chunks_of_layers_matches_the_whole_model(family: str) -> None:
    import torch
    import torch.nn.functional as F
    from freeride.tasks.vision import _WithLoss, chunks_of, layers_in_order
    torch.manual_seed(0)
    model = (_resnet_like if family == "resnet" else _vgg_like)(torch).train()
    whole = copy.deepcopy(model)
    images, labels = torch.randn(4, 3, 18, 18), torch.randint(0, 5, (4,))
    F.cross_entropy(whole(images), labels).backward()

    chunks = chunks_of(layers_in_order(model))
    # Each chunk starts at a layer with weights; batch norm and activations join it.
    for chunk in chunks:
        first = chunk[0]
        assert any(True for _ in first.parameters())
        assert not isinstance(first, torch.nn.BatchNorm2d)
    assert len(chunks) == (6 if family == "resnet" else 4)
    chunks[-1] = _WithLoss(chunks[-1])
    inputs, outputs = [], []
    x = images
    for i, chunk in enumerate(chunks):
        x_in = x if i == 0 else x.detach().requires_grad_()
        inputs.append(x_in)
        x = chunk(x_in, labels) if i == len(chunks) - 1 else chunk(x_in)
        outputs.append(x)
    for i in reversed(range(len(chunks))):
        outputs[i].backward() if i == len(chunks) - 1 else outputs[i].backward(inputs[i + 1].grad)
    for (name, p), q in zip(model.named_parameters(), whole.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6), name
    for a, b in zip(model.buffers(), whole.buffers()):  # batch norm's running statistics
        assert torch.allclose(a.float(), b.float())


def test_the_vision_task_trains_in_pieces_and_credits_images_at_each_optimizer_step(monkeypatch) -> None:
    import types

    import torch
    from freeride.tasks import vision
    fake = types.ModuleType("torchvision")  # CI has no torchvision: its models' layout, small
    fake.models = types.SimpleNamespace(resnet18=lambda weights, num_classes: _resnet_like(torch))
    monkeypatch.setitem(sys.modules, "torchvision", fake)
    args = argparse.Namespace(model="resnet18", batch=4, image_size=18, classes=5, data=None, iterations=3,
                              seed=0, device="cpu")
    task = vision.VisionTraining(args)
    task.whole_steps = False  # as run_in_pieces sets it under a daemon
    task.init()  # trains one iteration, not credited
    assert task.iterations == 1
    weights = [p.detach().clone() for p in task.model.parameters()]
    task.runner.target_ns = 1  # one operation a piece: 6 forwards, 6 backwards, the optimizer
    units = [task.step().units for _ in range(13)]
    assert [u for u in units if u] == [4] and units[-1] == 4
    unchanged = [n for (n, p), w in zip(task.model.named_parameters(), weights) if torch.equal(p, w)]
    assert not unchanged, unchanged
    task.runner.target_ns = 10**12
    result = task.step()  # the third iteration, in one piece, ends the run (--iterations 3)
    assert result.units == 4 and result.done


def test_alone_a_built_in_task_steps_whole_units(capfd, monkeypatch, build_dir) -> None:
    import freeride
    monkeypatch.setenv("FREERIDE_LIB", str(build_dir / "libfreeride.so"))
    from freeride.tasks.pieces import run_in_pieces

    class Task(freeride.IterativeTask):
        whole_steps = False

        def step(self):
            return 1

    task = Task()
    assert run_in_pieces(task, ["task", "--standalone", "--seconds", "0.05"]) == 0
    assert task.whole_steps
    assert "\"mode\":\"standalone\"" in capfd.readouterr().out


def test_unknown_models_are_refused_by_name() -> None:
    import torch
    from freeride.tasks.vision import layers_in_order
    with pytest.raises(ValueError, match="Linear"):
        layers_in_order(torch.nn.Linear(2, 2))


def test_fixed_shape_decodes_generate_what_the_growing_cache_generates() -> None:
    import torch
    from freeride.tasks.llm_inference import LanguageModel, LlmInference
    prompt_len, generate, batch = 8, 16, 3
    args = argparse.Namespace(preset="tiny", batch=batch, prompt=prompt_len, generate=generate, batches=0,
                              seed=0, device="cpu")
    task = LlmInference(args)
    task.init()
    torch.manual_seed(1)
    model = LanguageModel(2, 64, 4, 256, prompt_len + generate).eval()
    task.model.load_state_dict(model.state_dict())
    prompt = torch.randint(0, 256, (batch, prompt_len))
    with torch.no_grad():
        caches = [[torch.zeros(batch, 4, prompt_len + generate, 16) for _ in range(2)] for _ in model.blocks]
        tokens, new, position = prompt, prompt, 0
        for _ in range(generate):
            nxt = model(new, caches, position).argmax(-1, keepdim=True)
            position += new.shape[1]
            tokens, new = torch.cat([tokens, nxt], 1), nxt
        task.prompt.copy_(prompt)
        task._prefill()
        for _ in range(generate - 1):
            task._decode()
    assert torch.equal(task.output[:, :prompt_len + generate], tokens)
    # A whole step is a batch: a prefill and generate - 1 decodes, batch tokens each.
    assert task.step().units == batch * generate
