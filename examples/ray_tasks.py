"""A queue of side work submitted once to Ray and run in the bubbles of the training on each node.

Each task hashes a chain of SHA-256 digests, a chunk per step (`yield` ends a step: FreeRide runs
it only while its lane's bubble lasts), and returns the digest with the node it ran on.  Ray
places each task on a node that offers a free FreeRide lane, retries it if that node loses its
daemon, and moves the results; the node's daemon decides when it runs.

On a Ray cluster whose training nodes offer their lanes (docs/ray.md):
    python examples/ray_tasks.py --address auto --tasks 200
On one machine, with a daemon and a training stage (or a stand-in) marking bubbles:
    freeride daemon --cpu-lanes 1 &
    example_stage_replay --lane 0 --iterations 100000 --busy-ms 20 --bubbles-ms 5,12,3 &
    python examples/ray_tasks.py --tasks 20      # starts a one-node Ray offering this machine's lanes
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

import ray

import freeride.ray


def chain(seed: int, chunks: int, per_chunk: int) -> str:
    """The digest the task computes, computed at once (to check the tasks' results)."""
    digest = hashlib.sha256(str(seed).encode()).digest()
    for _ in range(chunks * per_chunk):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()


@freeride.ray.remote(lane_memory="64MiB", unit="chunks")
def hash_chain(seed: int, chunks: int, per_chunk: int, record: str | None = None):
    digest = hashlib.sha256(str(seed).encode()).digest()
    for _ in range(chunks):
        for _ in range(per_chunk):
            digest = hashlib.sha256(digest).digest()
        yield 1                                   # one chunk done: one step
    node = os.environ.get("FREERIDE_RAY_NODE_ID", "")   # the Ray node, set by freeride.ray
    if record:                                    # the work's own effect, for tests to count
        with open(record, "a") as f:
            f.write(json.dumps({"seed": seed, "node": node, "pid": os.getpid()}) + "\n")
    return {"seed": seed, "digest": digest.hex(), "pid": os.getpid(), "node": node}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="a Ray cluster (auto: this machine's); default: a one-node Ray here")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20, help="steps per task")
    parser.add_argument("--per-chunk", type=int, default=2000, help="SHA-256 rounds per step")
    parser.add_argument("--record", help="append one line per finished task to this file")
    parser.add_argument("--out", help="write the results and the cluster report as JSON here")
    args = parser.parse_args()

    freeride.ray.init(args.address)
    start = time.monotonic()
    refs = [hash_chain.remote(seed, args.chunks, args.per_chunk, args.record) for seed in range(args.tasks)]
    results = ray.get(refs)
    seconds = time.monotonic() - start
    wrong = [r["seed"] for r in results if r["digest"] != chain(r["seed"], args.chunks, args.per_chunk)]
    nodes: dict[str, int] = {}
    for r in results:
        nodes[r["node"]] = nodes.get(r["node"], 0) + 1
    print(f"{len(results)} tasks in {seconds:.1f} s; wrong digests: {wrong or 'none'}; tasks per node: "
          + ", ".join(f"{n[:12]} {c}" for n, c in nodes.items()))
    report = freeride.ray.cluster_report()
    print(freeride.ray.format_report(report))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"results": results, "seconds": seconds, "wrong": wrong, "report": report}, f)
    if wrong:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
