#!/usr/bin/env bash
# Makes a relocatable bundle for GPU nodes: bundle/bin (the CLI, the daemon,
# built-in tasks, examples), bundle/lib (libfreeride plus every shared
# library they need that a bare node may lack), with RPATH $ORIGIN/../lib,
# and bundle/share/freeride (the Python package and the examples).  On the
# node: bundle/bin/freeride doctor, then bundle/bin/freeride demo.
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
  [ "$(head -c 4 "$f")" = $'\x7fELF' ] || continue  # scripts (freeride-slurm) need no libraries
  ldd "$f" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ "$name" =~ $system ]] && continue
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done
done
# The install put the Python package and the examples in share/freeride,
# where `freeride demo` and `freeride doctor` look for them.
# The commit it was built from, for results made on a node whose copy of the tree has an older .git.
if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
  echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')" > "$out/COMMIT"
fi
echo "bundle: $out ($(du -sh "$out" | cut -f1)); run $out/bin/freeride --help"
