#!/usr/bin/env bash
# The wheel on a GPU node where nothing was installed with apt (issue 31):
# `pip install` of the wheel into the node's Python, `freeride doctor`, then
# `freeride demo --mode gpu`, each one's output and exit status in OUT_DIR
# (install.txt, doctor.txt, demo.txt, demo/ with the report and timelines).
#
#   bench/wheel_gpu.sh WHEEL OUT_DIR [DEMO_OPTIONS...]     (PYTHON: default python3)
#
# It also records whether the node has gRPC or protobuf of its own (the wheel
# must not need them) and which library each executable loads.
set -uo pipefail
wheel=$1 out=$2
shift 2
python=${PYTHON:-python3}
mkdir -p "$out"
{
  echo "# $(date -u +%FT%TZ), $(uname -r)"
  grep PRETTY_NAME /etc/os-release
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  echo "gRPC/protobuf libraries on this node: $(ldconfig -p | grep -cE 'libgrpc|libprotobuf')"
  echo "\$ $python -m pip install --no-index --no-deps $(basename "$wheel")"
  "$python" -m pip install --no-index --no-deps --force-reinstall --disable-pip-version-check "$wheel"
  echo "exit $?"
} >"$out/install.txt" 2>&1
cat "$out/install.txt"
freeride=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/freeride
package=$("$python" -c 'import freeride, os; print(os.path.dirname(freeride.__file__))')
{
  echo "\$ ldd $package/_bin/freeride (libraries not from the wheel)"
  ldd "$package/_bin/freeride" | grep -v -e "$package" -e freeride.libs
} >>"$out/install.txt" 2>&1
echo "\$ freeride doctor" >"$out/doctor.txt"
"$freeride" doctor >>"$out/doctor.txt" 2>&1
echo "exit $?" >>"$out/doctor.txt"
cat "$out/doctor.txt"
echo "\$ freeride demo --mode gpu $*" >"$out/demo.txt"
PYTHONUNBUFFERED=1 "$freeride" demo --mode gpu --out "$out/demo" "$@" >>"$out/demo.txt" 2>&1
echo "exit $?" >>"$out/demo.txt"
cat "$out/demo.txt"
