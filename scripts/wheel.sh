#!/usr/bin/env bash
# Builds the Python package's wheel from a staged copy of python/ (the
# python_wheel build target stages it, with libfreeride.so in freeride/_lib).
# Usage: scripts/wheel.sh SOURCE_DIR STAGED_DIR OUT_DIR
set -euo pipefail
source_dir=$1 staged=$2 out=$3
python=python3
[ -x "$source_dir/.venv/bin/python" ] && python=$source_dir/.venv/bin/python
mkdir -p "$out"
# Without build isolation when setuptools is there already (no download).
if "$python" -c "import setuptools.command.bdist_wheel" 2>/dev/null; then
  "$python" -m pip wheel -q --no-deps --no-build-isolation -w "$out" "$staged"
else
  "$python" -m pip wheel -q --no-deps -w "$out" "$staged"
fi
ls "$out"/freeride-*.whl
