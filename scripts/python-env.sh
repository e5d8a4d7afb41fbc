#!/usr/bin/env bash
# Makes .venv with PyTorch (CPU) and numpy for the pipeline test and the CPU
# demo, and the pipeline frameworks FreeRide integrates with, at the versions
# it is tested with: deepspeed 0.19.8 and megatron-core 0.16.1.  Safe to run
# again.  torch==2.13.0 comes from the local wheel where there is one, else
# from PyPI.  The frameworks go in with --no-deps and their own needs named
# here, so that pip never replaces that torch; deepspeed is built without
# its compiled ops (DS_BUILD_OPS=0).  A failure stops the test command, so
# that the PyTorch tests never quietly skip; FREERIDE_SKIP_TORCH=1 runs the
# other tests on a machine that cannot get torch.
set -uo pipefail
cd "$(dirname "$0")/.."
DEEPSPEED=deepspeed==0.19.8
MEGATRON=megatron-core==0.16.1
# What deepspeed and megatron-core require, less torch and numpy.
FRAMEWORK_DEPS=(einops hjson msgpack ninja "packaging>=24.2" psutil py-cpuinfo "pydantic>=2" tqdm)
if [ "${FREERIDE_SKIP_TORCH:-0}" = 1 ]; then
  echo "python-env: FREERIDE_SKIP_TORCH=1: the PyTorch tests will be skipped"
  exit 0
fi
pip_install() { .venv/bin/pip install -q --disable-pip-version-check "$@"; }
if ! { [ -x .venv/bin/python ] && .venv/bin/python -c "import torch, numpy" 2>/dev/null; }; then
  python3 -m venv .venv || { echo "python-env: cannot create .venv (install python3-venv)" >&2; exit 1; }
  echo "python-env: installing torch==2.13.0 and numpy into .venv"
  if ! pip_install torch==2.13.0 numpy; then
    echo "python-env: torch==2.13.0 could not be installed; set FREERIDE_SKIP_TORCH=1 to run the" \
         "other tests without it" >&2
    exit 1
  fi
fi
installed() { .venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }
if installed deepspeed 0.19.8 && installed megatron-core 0.16.1; then
  exit 0
fi
echo "python-env: installing $DEEPSPEED and $MEGATRON into .venv (torch stays as it is)"
if ! pip_install "${FRAMEWORK_DEPS[@]}" ||
   ! DS_BUILD_OPS=0 pip_install --no-deps --no-build-isolation "$DEEPSPEED" "$MEGATRON"; then
  echo "python-env: $DEEPSPEED or $MEGATRON could not be installed; set FREERIDE_SKIP_TORCH=1 to run" \
       "the tests that need neither" >&2
  exit 1
fi
