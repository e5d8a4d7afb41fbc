#!/usr/bin/env bash
# Fuzzes the trace parser, task-spec and size parsing, the control API's
# request handlers and the shared-memory channel readers, SECONDS each
# (default 60), under AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   scripts/fuzz.sh [SECONDS]        # make-fuzz style: every target, a fixed budget
#
# With clang++ on PATH the targets are libFuzzer binaries (coverage-guided);
# otherwise g++ builds them with FreeRide's mutation driver.  A crashing
# input is written to fuzz/regressions/<target>/crash-*: fix the bug, keep
# the file (renamed to say what it found), and ctest replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build=build-fuzz
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake_args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFREERIDE_CUDA=OFF
            -DFREERIDE_BUILD_TESTS=OFF -DFREERIDE_BUILD_BENCH=OFF
            "-DCMAKE_CXX_FLAGS=$sanitize" "-DCMAKE_C_FLAGS=$sanitize"
            "-DCMAKE_EXE_LINKER_FLAGS=$sanitize" "-DCMAKE_SHARED_LINKER_FLAGS=$sanitize")
if command -v clang++ >/dev/null; then
  echo "fuzz: clang++ found: libFuzzer targets"
  cmake_args+=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DFREERIDE_LIBFUZZER=ON)
else
  echo "fuzz: no clang++: g++ with FreeRide's mutation driver (apt-get install clang for libFuzzer)"
fi
cmake "${cmake_args[@]}" >/dev/null
targets=(trace task_spec control_api channel)
cmake --build "$build" --target "${targets[@]/#/fuzz_}"

status=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"             # libFuzzer adds what it finds here, not to git
  mkdir -p "$work" "fuzz/regressions/$t"
  cp -n fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  echo "== fuzz_$t for ${seconds} s"
  if ! ASAN_OPTIONS=detect_leaks=0 "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -seed=$RANDOM \
       -artifact_prefix="fuzz/regressions/$t/" "$work" "fuzz/regressions/$t"; then
    echo "fuzz_$t: CRASH; the input is in fuzz/regressions/$t/"
    status=1
  fi
done
exit $status
