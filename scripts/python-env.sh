#!/usr/bin/env bash
# Makes .venv with PyTorch (CPU) and numpy for the pipeline test and the CPU
# demo.  Safe to run again.  torch==2.13.0 comes from the local wheel where
# there is one, else from PyPI.  A failure stops the test command, so that
# the PyTorch pipeline test never quietly skips; FREERIDE_SKIP_TORCH=1 runs
# the other tests on a machine that cannot get torch.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${FREERIDE_SKIP_TORCH:-0}" = 1 ]; then
  echo "python-env: FREERIDE_SKIP_TORCH=1: the PyTorch tests will be skipped"
  exit 0
fi
if [ -x .venv/bin/python ] && .venv/bin/python -c "import torch, numpy" 2>/dev/null; then
  exit 0
fi
python3 -m venv .venv || { echo "python-env: cannot create .venv (install python3-venv)" >&2; exit 1; }
echo "python-env: installing torch==2.13.0 and numpy into .venv"
if ! .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 numpy; then
  echo "python-env: torch==2.13.0 could not be installed; set FREERIDE_SKIP_TORCH=1 to run the" \
       "other tests without it" >&2
  exit 1
fi
