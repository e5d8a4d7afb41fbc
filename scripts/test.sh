#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (the
# C++ tests and, through pytest, tests/python/), then counts them all
# (gtest cases one by one, pytest's tests in place of the files that ran them).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/python-env.sh
./scripts/build.sh
cd build
status=0
# Passed tests keep their whole output, where pytest writes its count last.
ctest --output-on-failure -j 2 --timeout 900 --test-output-size-passed 1000000 \
  --output-junit ctest.xml || status=$?
# ctest counts each pytest file as one test; the summary counts what pytest ran.
python3 ../scripts/test_summary.py ctest.xml || true
exit $status
