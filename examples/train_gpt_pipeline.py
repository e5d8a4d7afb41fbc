"""A GPT-style model trained with torch.distributed.pipelining, optionally
harvested by FreeRide.  Synthetic data; no downloads.

    # 4 GPUs, a 1.3B-parameter model, 1F1B with 4 micro-batches:
    torchrun --nproc-per-node 4 examples/train_gpt_pipeline.py --freeride on
    # CPU (gloo) with a small model, as CI runs it:
    torchrun --nproc-per-node 4 examples/train_gpt_pipeline.py --device cpu --preset tiny

The FreeRide part is the two lines marked below.  Rank 0 writes --out: the
per-iteration times (the slowest rank's), the losses and a checksum of the
trained parameters, so that runs with and without FreeRide can be compared.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules

PRESETS = {  # layers, dim, heads, vocab, seq, micro-batch size
    "tiny": (8, 64, 4, 256, 32, 2),
    "cpu-small": (4, 128, 4, 512, 64, 4),  # CPU dry runs of bench/e2e_gpu.py --arms: bubbles of ~10 ms
    "small": (8, 512, 8, 8192, 256, 4),
    "1.3b": (24, 2048, 16, 32000, 1024, 4),
}
SCHEDULES = {
    "gpipe": (schedules.ScheduleGPipe, 1),
    "1f1b": (schedules.Schedule1F1B, 1),
    "interleaved": (schedules.ScheduleInterleaved1F1B, 2),
    "zbv": (getattr(schedules, "ScheduleZBVZeroBubble", None), 2),
    "dualpipev": (getattr(schedules, "ScheduleDualPipeV", None), 2),
}


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class StageModule(nn.Module):
    """A slice of the GPT: embeddings on the first stage, the head on the last."""

    def __init__(self, first: bool, last: bool, layers: int, dim: int, heads: int, vocab: int,
                 seq: int):
        super().__init__()
        self.first, self.last = first, last
        if first:
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        if last:
            self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        if self.first:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)) if self.last else x


def loss_fn(logits, target):
    return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten())


def stage_indices(rank: int, world: int, virtual: int, schedule: str) -> list[int]:
    if virtual == 1:
        return [rank]
    if schedule in ("zbv", "dualpipev"):  # V shape: rank r holds stages r and 2W-1-r
        return [rank, 2 * world - 1 - rank]
    return [rank + v * world for v in range(virtual)]  # interleaved: round robin


def build_stages(args, preset: str, rank: int, world: int, virtual: int, device, dtype):
    """This rank's stage modules as [(stage index, module)], seeded by index so every run gets the same weights."""
    layers, dim, heads, vocab, seq, _ = PRESETS[preset]
    n_stages = world * virtual
    per_stage = [layers // n_stages + (1 if i < layers % n_stages else 0) for i in range(n_stages)]
    modules = []
    for index in stage_indices(rank, world, virtual, args.schedule):
        torch.manual_seed(args.seed * 1000 + index)
        modules.append((index, StageModule(index == 0, index == n_stages - 1, per_stage[index], dim, heads, vocab,
                                           seq).to(device=device, dtype=dtype)))
    return modules


def announce(params, device, preset: str, text: str) -> int:
    """Counts the pipeline's parameters over all ranks; rank 0 prints them with `text`."""
    count = torch.tensor([sum(p.numel() for p in params)], dtype=torch.int64, device=device)
    dist.all_reduce(count)
    if dist.get_rank() == 0:
        print(f"model: {preset}, {count.item() / 1e9:.2f}B parameters, {text}", flush=True)
    return int(count.item())


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """The options every example trainer shares (bench/e2e_gpu.py drives them alike)."""
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--freeride", choices=["on", "off"], default="off")
    p.add_argument("--freeride-alternate", type=int, default=0, metavar="K",
                   help="switch FreeRide on and off every K iterations (baseline and FreeRide in one launch)")
    p.add_argument("--preset", choices=PRESETS, default=None,
                   help="model size (default: 1.3b on GPUs, tiny on CPU)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--stop-file", default=None, metavar="PATH",
                   help="end at the block boundary (every iteration without --freeride-alternate) after "
                        "the first past the warm-up at which some rank sees PATH, at most --steps iterations: "
                        "a run as long as some other work, with whole marks-on and marks-off blocks (the ranks "
                        "learn of PATH one block late, so that asking never lines them up)")
    p.add_argument("--log-every", type=int, default=0, metavar="N",
                   help="rank 0 prints 'iteration I: T ms, FreeRide on|off, at UNIX' every N iterations "
                        "(0: never), for a driver that follows the run")
    p.add_argument("--warmup", type=int, default=3, help="iterations left out of the timing")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["auto", "bf16", "fp32"], default="auto", help="auto: bf16 on GPUs, fp32 on CPU")
    p.add_argument("--out", default=None, help="JSON results (written by rank 0)")
    p.add_argument("--pin-cores", action="store_true",
                   help="CPU: pin rank r to core r+1, the core `freeride daemon --cpu-lanes` gives lane r's tasks")
    p.add_argument("--cores", default=None, metavar="LIST",
                   help="CPU: pin rank r to the r-th core of LIST (e.g. 0,1), as `freeride daemon "
                        "--lane-cores LIST` pins lane r's tasks")


def setup_device(args):
    """(rank, world size, cuda?, device) of this torchrun rank; on CPU one thread, deterministic,
    pinned if asked."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(local)
        return rank, world, True, torch.device("cuda", local)
    if args.cores:
        cores = [int(c) for c in args.cores.split(",")]
        os.sched_setaffinity(0, {cores[local % len(cores)]})
    elif args.pin_cores and (os.cpu_count() or 1) > world:
        os.sched_setaffinity(0, {local + 1})
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    return rank, world, False, torch.device("cpu")


def train_dtype(args, cuda: bool) -> torch.dtype:
    if args.dtype == "auto":
        return torch.bfloat16 if cuda else torch.float32
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]


def make_batch(args, generator, vocab: int, seq: int, mbs: int, device):
    """One iteration's synthetic tokens: (inputs, targets), --microbatches x mbs rows."""
    tokens = torch.randint(0, vocab, (args.microbatches * mbs, seq + 1), generator=generator)
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


def train_loop(args, harvest, next_batch, one_step, device, cuda: bool):
    """Runs args.steps timed iterations of one_step(next_batch()) -> [losses], switching
    FreeRide on and off every --freeride-alternate iterations; (times ms, FreeRide on?, losses,
    unix start times)."""
    times, losses, modes, starts = [], [], [], []
    block = args.freeride_alternate if args.freeride == "on" else 0
    stop = StopCheck(args.stop_file, device) if args.stop_file else None
    printing = args.log_every > 0 and dist.get_rank() == 0
    for step in range(args.steps):
        if block:
            on = (step // block) % 2 == 0
            (harvest.resume if on else harvest.pause)()
        batch = next_batch()
        starts.append(time.time())
        start = time.perf_counter()
        step_losses = one_step(batch)
        if cuda:
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
        modes.append(args.freeride == "on" and getattr(harvest, "enabled", False))
        if step_losses:
            losses.append(float(torch.stack([l.detach().float().reshape(()) for l in step_losses]).mean()))
        if printing and (step + 1) % args.log_every == 0:
            print(f"iteration {step}: {times[-1]:.1f} ms, FreeRide {'on' if modes[-1] else 'off'}, "
                  f"at {starts[-1]:.6f}", flush=True)
        # Checked only where a block ends (every rank asks at the same steps), so that the run
        # ends with whole blocks.
        block_ends = not block or (step + 1) % block == 0
        if stop and step >= args.warmup and block_ends and stop.asked():
            break
    return times, modes, losses, starts


class StopCheck:
    """Whether any rank has seen the stop file, asked at the same steps on every rank, so that
    every rank stops after the same iteration.

    The answer is the previous ask's: each ask starts an all-reduce of whether this rank sees the
    file and reads the one started at the ask before, long done by then.  Waiting for this ask's
    own all-reduce would line the ranks up at every block's end, so each block's first iteration
    would start with every stage at once, and the last stage's first wait would be the pipeline's
    fill alone instead of the slack it has in every other iteration (bench/results/
    e2e_gpu_2gpu_stop_check.md): a slot of two kinds, one of them made by the benchmark.  The run
    ends one block later for it."""

    def __init__(self, path: str, device):
        self._path = path
        self._device = device
        self._pending = None  # (work, tensor) of the last ask

    def asked(self) -> bool:
        seen = False
        if self._pending is not None:
            work, tensor = self._pending
            work.wait()
            seen = bool(tensor.item())
            if seen:  # every rank read the same answer: none starts another ask
                self._pending = None
                return True
        tensor = torch.tensor([1.0 if os.path.exists(self._path) else 0.0], device=self._device)
        self._pending = (dist.all_reduce(tensor, op=dist.ReduceOp.MAX, async_op=True), tensor)
        return seen


def write_results(args, result: dict, params, times, modes, losses, marks: int, starts: list[float]) -> None:
    """Gathers every rank's times, start times, losses, parameter checksum and marks; rank 0 prints
    and writes --out.  Iteration i's time is the slowest rank's; it began (iter_unix) when the
    first rank began it and ended (iter_end_unix) when the last rank ended it.  Each rank's own
    start times and times are kept too (rank_iter_unix, rank_iter_ms: the ranks need not start an
    iteration together, so a side task on a rank's lane is told apart by that rank's iterations)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    checksum = float(sum(p.detach().double().sum() for p in params))
    gathered = [None] * world
    dist.all_gather_object(gathered, {"times": times, "starts": starts, "losses": losses, "checksum": checksum,
                                      "marks": marks})
    if rank != 0:
        return
    count = min(len(g["times"]) for g in gathered)
    iter_ms = [max(g["times"][i] for g in gathered) for i in range(count)]
    iter_unix = [min(g["starts"][i] for g in gathered) for i in range(count)]
    iter_end_unix = [max(g["starts"][i] + g["times"][i] / 1e3 for g in gathered) for i in range(count)]
    all_losses = next((g["losses"] for g in gathered if g["losses"]), [])
    timed = [(t, m) for t, m in zip(iter_ms[args.warmup:], modes[args.warmup:])]
    mean = sum(t for t, _ in timed) / max(1, len(timed))
    print(f"iteration {mean:.1f} ms (mean of {len(timed)} after {args.warmup} warm-up), "
          f"final loss {all_losses[-1] if all_losses else float('nan'):.4f}, FreeRide marks per rank "
          f"{[g['marks'] for g in gathered]}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(result, microbatches=args.microbatches, ranks=world, freeride=args.freeride,
                           warmup=args.warmup, iter_ms=iter_ms, iter_unix=iter_unix, iter_end_unix=iter_end_unix,
                           rank_iter_unix=[g["starts"][:count] for g in gathered],
                           rank_iter_ms=[g["times"][:count] for g in gathered],
                           freeride_on=modes[:count], losses=all_losses,
                           checksums=[g["checksum"] for g in gathered],
                           marks=[g["marks"] for g in gathered]), f, indent=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedule", choices=SCHEDULES, default="1f1b")
    p.add_argument("--torchtitan-schedule", default=None, metavar="NAME",
                   help="build the schedule as torchtitan does: torch's get_schedule_class(NAME) "
                        "(torchtitan's pipeline_parallel_schedule, e.g. 1F1B, Interleaved1F1B, ZBVZeroBubble), "
                        "scale_grads=False; overrides --schedule")
    add_common_arguments(p)
    args = p.parse_args()

    rank, world, cuda, device = setup_device(args)
    dist.init_process_group("nccl" if cuda else "gloo")
    preset = args.preset or ("1.3b" if cuda else "tiny")
    layers, dim, heads, vocab, seq, mbs = PRESETS[preset]
    dtype = train_dtype(args, cuda)
    if args.torchtitan_schedule:
        schedule_class = schedules.get_schedule_class(args.torchtitan_schedule)
        virtual = 2 if issubclass(schedule_class, schedules.PipelineScheduleMulti) else 1
        v_shaped = getattr(schedules, "ScheduleZBVZeroBubble", None), getattr(schedules, "ScheduleDualPipeV", None)
        args.schedule = "zbv" if schedule_class in v_shaped else "interleaved" if virtual == 2 else "1f1b"
    else:
        schedule_class, virtual = SCHEDULES[args.schedule]
    if schedule_class is None:
        raise SystemExit(f"this PyTorch ({torch.__version__}) has no {args.schedule} schedule")

    n_stages = world * virtual
    modules = build_stages(args, preset, rank, world, virtual, device, dtype)
    stages = [PipelineStage(module, index, n_stages, device) for index, module in modules]
    params = [p for _, module in modules for p in module.parameters()]
    # torchtitan (distributed/pipeline_parallel.py) passes scale_grads=False.
    extra = {"scale_grads": False} if args.torchtitan_schedule else {}
    schedule = schedule_class(stages[0] if virtual == 1 else stages, n_microbatches=args.microbatches,
                              loss_fn=loss_fn, **extra)
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    count = announce(params, device, preset, f"{n_stages} stages on {world} ranks ({'cuda' if cuda else 'cpu'}), "
                                     f"{args.schedule} with {args.microbatches} micro-batches, FreeRide {args.freeride}")

    # FreeRide: these two lines are all a training script needs.
    import freeride.torch
    harvest = freeride.torch.instrument(schedule, enabled=args.freeride == "on")

    generator = torch.Generator().manual_seed(args.seed)
    has_first = any(s.is_first for s in stages)
    has_last = any(s.is_last for s in stages)

    def one_step(batch):
        inputs, target = batch
        optimizer.zero_grad(set_to_none=True)
        step_losses: list = []
        if has_first and has_last:  # V schedules: rank 0 holds the first and the last stage
            schedule.step(inputs, target=target, losses=step_losses)
        elif has_first:
            schedule.step(inputs)
        elif has_last:
            schedule.step(target=target, losses=step_losses)
        else:
            schedule.step()
        optimizer.step()
        return step_losses

    times, modes, losses, starts = train_loop(args, harvest,
                                              lambda: make_batch(args, generator, vocab, seq, mbs, device),
                                              one_step, device, cuda)
    harvest.close()
    write_results(args, {"framework": "torch", "preset": preset, "parameters": count,
                         "schedule": args.torchtitan_schedule or args.schedule, "virtual_stages": virtual,
                         "device": "cuda" if cuda else "cpu"},
                  params, times, modes, losses, harvest.marks, starts)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
