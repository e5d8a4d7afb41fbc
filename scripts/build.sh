#!/usr/bin/env bash
# Configures and builds FreeRide into build/ (Release with debug info).
set -euo pipefail
cd "$(dirname "$0")/.."
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
# A configure that failed (a library missing, installed since) leaves a cache but no build
# files; configure again from scratch then, or the build would stop at "no build.ninja".
if [ -f build/CMakeCache.txt ] && [ ! -f build/build.ninja ] && [ ! -f build/Makefile ]; then
  rm -rf build/CMakeCache.txt build/CMakeFiles
fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build build -j "$(nproc)"
