#!/usr/bin/env bash
# Makes .venv with PyTorch (CPU) for the pipeline tests and the CPU demo.
# Safe to run again.  torch==2.13.0 comes from the local wheel where there is
# one, else from PyPI.  Failure here is not fatal: the tests that need torch
# then say so and skip.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ] && .venv/bin/python -c "import torch, numpy" 2>/dev/null; then
  exit 0
fi
python3 -m venv .venv || { echo "python-env: cannot create .venv (install python3-venv)"; exit 0; }
echo "python-env: installing torch==2.13.0 and numpy into .venv"
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 numpy ||
  echo "python-env: torch could not be installed; the PyTorch tests will be skipped"
exit 0
