#!/usr/bin/env python3
"""Does launch ahead (FREERIDE_GATE_AHEAD=N) change what a program computes?

    python3 bench/ahead_check_gpu.py --bundle bundle --out $OUT/ahead_check.json [--ahead 1,1024]

One deterministic PyTorch program (below) runs, each time a fresh process, as
- "plain" twice (nothing preloaded: shows the program is deterministic here),
- "gate": libfreeride_gate.so preloaded on a gate page that is always open
  (interposer_cost_gpu.py's page: every piece admitted at once),
- "ahead-N" for each N of --ahead: the same, with FREERIDE_GATE_AHEAD=N, so
  its launches are copied into the interposer's queue and submitted by its
  own thread (N=1: the program blocks at nearly every launch; 1024: it runs
  far ahead).

The program trains a small conv net and an MLP in eager mode (cuBLAS, cuDNN,
PyTorch's own kernels, .item() reads that synchronise), through torch.compile
(Triton kernels), and replays a captured CUDA graph, and prints a checksum of
the bytes of its tensors after each part.  Every arm must print the plain
run's checksums; the exit status is 1 where one differs or a run fails.  The
interposer's counts (FREERIDE_GATE_STATS) show how many pieces each arm
deferred, so an arm that deferred nothing cannot pass as a check.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interposer_cost_gpu import write_open_page  # noqa: E402

PROGRAM = r"""
import hashlib, os, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
dev = "cuda"

def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]

conv = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                     nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.BatchNorm2d(64), nn.ReLU(),
                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(dev)
opt = torch.optim.SGD(conv.parameters(), lr=0.01, momentum=0.9)
images, labels = torch.randn(64, 3, 64, 64, device=dev), torch.randint(0, 10, (64,), device=dev)
losses = []
for step in range(40):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(conv(images), labels)
    loss.backward()
    opt.step()
    if step % 5 == 0:
        losses.append(round(loss.item(), 6))  # a synchronising read amid queued work
print("eager", digest(list(conv.parameters())), losses, flush=True)

mlp = nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 512)).to(dev)
x = torch.randn(256, 512, device=dev)
compiled = torch.compile(mlp)
outs = [compiled(x + i) for i in range(20)]
print("compiled", digest(outs), flush=True)

static_x = torch.randn(128, 512, device=dev)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        mlp(static_x)
torch.cuda.current_stream().wait_stream(s)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_y = mlp(static_x)
ys = []
for i in range(20):
    static_x.add_(0.01)
    graph.replay()
    ys.append(static_y.clone())
print("graph", digest(ys), flush=True)
"""


def run_arm(name: str, env_extra: dict, work: str) -> dict:
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", **env_extra)
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=600)
    lines = {line.split()[0]: line.split(None, 1)[1] for line in proc.stdout.splitlines()
             if line.split() and line.split()[0] in ("eager", "compiled", "graph")}
    result = {"arm": name, "rc": proc.returncode, "checksums": lines}
    stats = env_extra.get("FREERIDE_GATE_STATS")
    if stats and os.path.exists(stats):
        with open(stats) as f:
            result["gate_stats"] = [json.loads(line) for line in f if line.strip()]
    if proc.returncode != 0:
        result["stderr_tail"] = proc.stderr[-3000:]
    print(json.dumps({k: v for k, v in result.items() if k != "gate_stats"}), flush=True)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", default="bundle")
    p.add_argument("--out", required=True, help="a JSON file of every arm's checksums and counts")
    p.add_argument("--ahead", default="1,1024", help="queue bounds to check, comma-separated")
    args = p.parse_args()
    gate = os.path.abspath(os.path.join(args.bundle, "lib", "libfreeride_gate.so"))
    if not os.path.exists(gate):
        raise SystemExit(f"no interposer at {gate}: build the bundle (scripts/bundle.sh)")
    try:
        bounds = [int(b) for b in args.ahead.split(",") if b]
    except ValueError:
        raise SystemExit(f"--ahead {args.ahead!r}: give whole numbers, e.g. 1,1024") from None
    if not bounds or any(b < 1 for b in bounds):
        raise SystemExit(f"--ahead {args.ahead!r}: each bound must be 1 or more")
    work = tempfile.mkdtemp(prefix="ahead_check_")
    arms = [("plain", {}), ("plain-again", {})]
    pages = []
    for name, ahead in [("gate", None)] + [(f"ahead-{b}", b) for b in bounds]:
        # In /dev/shm: the driver registers the page as host memory, which a file
        # on another file system (an overlay /tmp) may refuse.
        page = f"/dev/shm/freeride-ahead-check-{os.getpid()}-{name}.page"
        pages.append(page)
        write_open_page(page)
        env = {"LD_PRELOAD": gate, "FREERIDE_GATE_PAGE": page,
               "FREERIDE_GATE_STATS": os.path.join(work, f"{name}.stats.jsonl")}
        if ahead:
            env["FREERIDE_GATE_AHEAD"] = str(ahead)
        arms.append((name, env))
    try:
        results = [run_arm(name, env, work) for name, env in arms]
    finally:
        for page in pages:
            os.unlink(page)
    reference = results[0]["checksums"]
    failures = []
    for r in results:
        if r["rc"] != 0 or set(r["checksums"]) != {"eager", "compiled", "graph"}:
            failures.append(f"{r['arm']}: exit {r['rc']}, parts {sorted(r['checksums'])}")
        elif r["checksums"] != reference:
            failures.append(f"{r['arm']}: checksums differ from plain's: {r['checksums']} against {reference}")
        if r["arm"].startswith("ahead-"):
            deferred = sum(s.get("ahead_deferred", 0) for s in r.get("gate_stats", []))
            r["ahead_deferred"] = deferred
            if deferred == 0:
                failures.append(f"{r['arm']}: deferred no launch, so it checks nothing")
    with open(args.out, "w") as f:
        json.dump({"arms": results, "failures": failures}, f, indent=1)
    for line in failures:
        print("FAIL", line)
    print("ahead check:", "passed" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
