#!/usr/bin/env bash
# Makes a relocatable bundle for GPU nodes: bundle/bin (the CLI, the daemon,
# built-in tasks, examples) and bundle/lib (libfreeride plus every shared
# library they need that a bare node may lack), with RPATH $ORIGIN/../lib.
# Usage: scripts/bundle.sh [OUT_DIR]   (default: bundle/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bundle}
./scripts/build.sh >/dev/null
rm -rf "$out"
cmake --install build --prefix "$out" --strip >/dev/null
rm -rf "$out/include"
# The C library, loader and kernel-facing libraries come from the node.
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libgcc_s\.|libstdc\+\+\.|libcuda\.)'
for f in "$out"/bin/*; do
  ldd "$f" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ "$name" =~ $system ]] && continue
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done
done
# `freeride demo` and the PyTorch integration: the Python package and the
# examples, where the CLI looks for them (share/freeride).
mkdir -p "$out/share/freeride/examples"
cp -r python "$out/share/freeride/python"
find "$out/share/freeride/python" -name __pycache__ -prune -exec rm -rf {} +
cp -r examples/train_gpt_pipeline.py examples/train_gpt_deepspeed.py examples/train_gpt_megatron.py examples/data \
  "$out/share/freeride/examples/"
echo "bundle: $out ($(du -sh "$out" | cut -f1)); run $out/bin/freeride --help"
