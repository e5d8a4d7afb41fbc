#!/usr/bin/env bash
# On a GPU node, with bundle/ carried: checks that CUDA MPS can start (and
# keeps its logs), then runs `freeride demo` in GPU mode and in CPU mode.
# Usage: bench/device_demo.sh OUT_DIR
set -uo pipefail
out=${1:?usage: bench/device_demo.sh OUT_DIR}
mkdir -p "$out"
export PATH=$PWD/bundle/bin:$PATH
{
  echo "== MPS check: $(date -u)"
  nvidia-smi --query-gpu=index,name,compute_mode --format=csv
  mps=/tmp/mps-check; rm -rf $mps; mkdir -p $mps/pipe $mps/log
  export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
  nvidia-cuda-mps-control -d; echo "mps-control -d exit $?"
  sleep 1; ls -la $mps/pipe $mps/log
  python3 - <<'PY'
import torch, time
t = time.time(); x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize()
print("client on MPS ok:", float(x.sum()), f"{time.time() - t:.2f} s")
PY
  echo get_server_list | nvidia-cuda-mps-control; echo "server list exit $?"
  cat $mps/log/control.log; tail -20 $mps/log/server.log 2>/dev/null
  echo quit | nvidia-cuda-mps-control; sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
} >"$out/mps_check.txt" 2>&1
cat "$out/mps_check.txt"
echo "== freeride demo --mode gpu"
timeout 330 freeride demo --mode gpu --out "$out/demo-gpu" 2>&1 | tee "$out/demo-gpu.txt"
echo "== freeride demo --mode cpu ($(nproc) cores)"
timeout 200 freeride demo --mode cpu --out "$out/demo-cpu" 2>&1 | tee "$out/demo-cpu.txt"
# One archive of both runs' folders (logs, event logs, reports, timelines).
tar czf "$out/demo-runs.tgz" -C "$out" demo-gpu demo-cpu && rm -rf "$out/demo-gpu" "$out/demo-cpu"
