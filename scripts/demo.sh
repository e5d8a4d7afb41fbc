#!/usr/bin/env bash
# The main job: set up, build, and run `freeride demo`.
# With NVIDIA GPUs and PyTorch it trains a GPT pipeline on them with CUDA side
# tasks in the bubbles; elsewhere it runs CPU mode (real daemon, real PyTorch
# pipeline on CPU, real CPU side tasks) and says so.  Either way it prints the
# report and where the timeline pictures are.  Extra arguments go to the demo
# (./scripts/demo.sh --help).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# PyTorch (CPU) for CPU mode; without it the demo falls back to replaying
# profiled bubble timings, and says how to install it.  Before the build, as
# in scripts/test.sh, so that either command may run first.
./scripts/python-env.sh || echo "demo: continuing without PyTorch"
./scripts/build.sh
exec ./build/freeride demo "$@"
