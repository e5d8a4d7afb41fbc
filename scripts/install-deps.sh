#!/usr/bin/env bash
# Installs the Debian packages FreeRide builds with.  Safe to run again.
# With package names as arguments, installs those instead (install-slurm.sh).
set -euo pipefail
PACKAGES=(build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libre2-dev
  libsqlite3-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsimdjson-dev zlib1g-dev libdeflate-dev
  libjpeg-dev libpng-dev python3-venv libcpp-httplib-dev openssl)
[ $# -gt 0 ] && PACKAGES=("$@")
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
