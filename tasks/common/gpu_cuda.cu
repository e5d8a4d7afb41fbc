// CUDA side of the tasks' device helpers.
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "common/cuda_check.h"
#include "common/gpu.h"

namespace freeride::tasks {

static std::atomic<uint64_t> g_current{0}, g_peak{0};

bool CudaUsable(std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("no usable GPU: ") + cudaGetErrorString(e);
    return false;
  }
  if (count == 0) {
    *why = "no GPU found";
    return false;
  }
  return true;
}

uint64_t PeakGpuBytes() { return g_peak.load(); }

void* GpuAlloc(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  uint64_t now = g_current.fetch_add(bytes) + bytes;
  uint64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void GpuFree(void* p, size_t bytes) {
  if (p == nullptr) return;
  cudaFree(p);
  g_current.fetch_sub(bytes);
}

}  // namespace freeride::tasks
