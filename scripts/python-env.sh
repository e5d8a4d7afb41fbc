#!/usr/bin/env bash
# Makes .venv for the Python tests and the CPU demo: pytest always, and
# PyTorch (CPU) with numpy unless FREERIDE_SKIP_TORCH=1.  Safe to run again.
# torch==2.13.0 comes from the local wheel where there is one, else from
# PyPI.  A failure stops the test command, so that a test that needs torch
# never quietly skips; FREERIDE_SKIP_TORCH=1 runs the other tests on a
# machine that cannot get torch (the torch tests then report themselves
# skipped).
set -uo pipefail
cd "$(dirname "$0")/.."
want=(pytest)
check="import pytest"
if [ "${FREERIDE_SKIP_TORCH:-0}" = 1 ]; then
  echo "python-env: FREERIDE_SKIP_TORCH=1: no PyTorch; the tests that need it will be skipped"
else
  want+=(torch==2.13.0 numpy)
  check+=", torch, numpy, torch.distributed.pipelining"
fi
if [ -x .venv/bin/python ] && .venv/bin/python -c "$check" 2>/dev/null; then
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv || { echo "python-env: cannot create .venv (install python3-venv)" >&2; exit 1; }
fi
echo "python-env: installing ${want[*]} into .venv"
if ! .venv/bin/pip install -q --disable-pip-version-check "${want[@]}"; then
  echo "python-env: ${want[*]} could not be installed; set FREERIDE_SKIP_TORCH=1 to run the" \
       "tests that do not need torch without it" >&2
  exit 1
fi
