"""Shared pieces of the built-in torch side tasks."""
from __future__ import annotations

import argparse
import os
import sys

import torch

from freeride.task import parse_run_options


def parse_task_arguments(parser: argparse.ArgumentParser, argv=None):
    """Parses a task's own options, leaving --standalone/--seconds to run_task.

    Returns (options, argv for run_task).  Bad options exit with status 2
    before anything is loaded."""
    argv = list(sys.argv if argv is None else argv)
    standalone, seconds, rest = parse_run_options(argv[1:])
    options = parser.parse_args(rest)
    run_argv = argv[:1] + (["--standalone"] if standalone else []) + (
        ["--seconds", str(seconds)] if seconds else [])
    return options, run_argv


def add_device_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")


def choose_device(name: str) -> torch.device:
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no usable GPU (torch.cuda.is_available() is False)")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def check_memory(device: torch.device, need_bytes: int, what: str) -> None:
    """Refuses to start when the daemon's memory grant (FREERIDE_MEMORY_BYTES) is too small."""
    limit = int(os.environ.get("FREERIDE_MEMORY_BYTES", "0") or 0)
    if device.type == "cuda" and limit:
        # Keeps the caching allocator inside the grant, too.
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), device)
    if limit and need_bytes > limit:
        raise SystemExit(f"{what}: about {need_bytes / 2**20:.0f} MiB needed, more than the task's "
                         f"memory limit of {limit / 2**20:.0f} MiB")


def sync(device: torch.device) -> None:
    """Steps end when their GPU work has ended, so that step times are true."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_bytes(device: torch.device) -> int:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
