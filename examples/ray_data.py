"""A Ray Data `map_batches` stage whose batches are done in the bubbles of the training.

Each batch is cut into steps of `rows_per_step` rows, and each step runs only while the lane's
bubble lasts; the outputs are joined into the batch Ray Data gets back.  The UDF class is built
once per Ray Data actor, inside its side task.

    python examples/ray_data.py --address auto        # on a cluster (docs/ray.md)
    python examples/ray_data.py                       # one machine: a daemon and a stage running
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import ray

import freeride.ray


class Embed:
    """A fixed random projection of each row's id, then a norm: a stand-in for batch inference."""

    def __init__(self, dim: int):
        self.projection = np.random.default_rng(7).normal(size=(1, dim))

    def __call__(self, batch: dict) -> dict:
        features = np.tanh(batch["id"].reshape(-1, 1) / 100.0 @ self.projection)
        return {"id": batch["id"], "norm": np.linalg.norm(features, axis=1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="a Ray cluster (auto: this machine's); default: a one-node Ray here")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()

    freeride.ray.init(args.address)
    ds = ray.data.range(args.rows).map_batches(
        freeride.ray.batches(Embed, rows_per_step=100), fn_constructor_args=(16,), batch_size=500,
        batch_format="numpy", concurrency=1, **freeride.ray.options(lane_memory="64MiB"))
    rows = sorted(ds.take_all(), key=lambda r: r["id"])
    expected = Embed(16)({"id": np.arange(args.rows)})["norm"]
    worst = float(np.max(np.abs(np.array([r["norm"] for r in rows]) - expected)))
    print(f"{len(rows)} rows; largest difference from the UDF run directly: {worst:.2e}")
    print(freeride.ray.format_report(freeride.ray.cluster_report()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": len(rows), "ids": [int(r["id"]) for r in rows], "worst": worst}, f)


if __name__ == "__main__":
    main()
