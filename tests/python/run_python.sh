#!/bin/sh
# Runs the Python the Python tests need, chosen when the test runs (not when
# the build was configured, so that a .venv made after configuring is used):
# $FREERIDE_TEST_PYTHON, else SOURCE_DIR/.venv/bin/python (scripts/python-env.sh),
# else python3.  Usage: run_python.sh SOURCE_DIR PYTHON_ARGS...
source_dir=$1
shift
python=${FREERIDE_TEST_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x "$source_dir/.venv/bin/python" ]; then python=$source_dir/.venv/bin/python; else python=python3; fi
fi
echo "test python: $python"
exec "$python" "$@"
