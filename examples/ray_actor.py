"""A Ray actor whose method calls run in the bubbles of the training on the node Ray places it on.

The actor keeps a model between calls (a linear model fitted by SGD, in numpy).  Its constructor
runs once in the side task, before its first bubble; each call of `fit` is a step per chunk of
rows (`yield`), and `predict` is one step.  Between calls the side task has nothing to do and
hands each bubble back to the lane's other side tasks at once.

    python examples/ray_actor.py --address auto       # on a cluster (docs/ray.md)
    python examples/ray_actor.py                      # one machine: a daemon and a stage running
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import ray

import freeride.ray


@freeride.ray.remote(lane_memory="128MiB", unit="rows")
class LinearModel:
    def __init__(self, features: int, seed: int = 0):
        self.w = np.zeros(features)
        self.rng = np.random.default_rng(seed)

    def fit(self, x: np.ndarray, y: np.ndarray, epochs: int = 5, rows_per_step: int = 128, lr: float = 0.2):
        for _ in range(epochs):
            for start in range(0, len(x), rows_per_step):
                xb, yb = x[start:start + rows_per_step], y[start:start + rows_per_step]
                self.w -= lr * xb.T @ (xb @ self.w - yb) / len(xb)
                yield len(xb)                 # one step: rows fitted
        return float(np.mean((x @ self.w - y) ** 2))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return x @ self.w

    def weights(self) -> list:
        return self.w.tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="a Ray cluster (auto: this machine's); default: a one-node Ray here")
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()

    freeride.ray.init(args.address)
    rng = np.random.default_rng(1)
    true_w = np.array([2.0, -1.0, 0.5, 3.0])
    x = rng.normal(size=(args.rows, 4))
    y = x @ true_w + rng.normal(scale=0.01, size=args.rows)
    model = LinearModel.remote(4)
    first = ray.get(model.fit.remote(x, y))
    second = ray.get(model.fit.remote(x, y))          # the actor kept its weights between calls
    predicted = ray.get(model.predict.remote(x[:3]))
    weights = ray.get(model.weights.remote())
    print(f"mean squared error after one fit {first:.5f}, after two {second:.5f}; weights "
          f"{np.round(weights, 3).tolist()} (true {true_w.tolist()})")
    print(freeride.ray.format_report(freeride.ray.cluster_report()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"first": first, "second": second, "weights": weights,
                       "predicted": predicted.tolist(), "expected": (x[:3] @ np.array(weights)).tolist()}, f)


if __name__ == "__main__":
    main()
