"""What the multi-node tests need, checked up front with a clear message."""
from __future__ import annotations

import os
import sys


def skip(reason: str) -> None:
    """Exits 77, which ctest reports as skipped, saying why."""
    print(f"skipped: {reason}", flush=True)
    sys.exit(77)


def require_root_and_torch() -> None:
    """Skips when not root (namespaces need it); without torch, fails, or skips
    under FREERIDE_SKIP_TORCH=1, as the other pipeline tests do."""
    if os.geteuid() != 0:
        skip("the multi-node tests make network namespaces, which needs root (CI runs as root)")
    try:
        import numpy  # noqa: F401  (torch.distributed's object p2p needs it)
        import torch.distributed.pipelining  # noqa: F401
    except ImportError as e:
        if os.environ.get("FREERIDE_SKIP_TORCH") == "1":
            skip(f"FREERIDE_SKIP_TORCH=1 and {e}")
        print(f"FAIL: {e} for {sys.executable}: run scripts/python-env.sh (FREERIDE_SKIP_TORCH=1 skips "
              "the tests that need torch)", flush=True)
        sys.exit(1)


def side_task(build: str) -> list[str]:
    """The C++ SGD side task on CPU with 1 ms steps, small enough for CPU bubbles."""
    return [os.path.join(build, "tasks", "freeride-sgd"), "--generate-ratings", "200000", "--device", "cpu",
            "--epochs", "100000", "--step-ms", "1"]
