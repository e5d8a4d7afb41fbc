#include "common/gpu.h"

#include <cstdlib>
#include <stdexcept>

#include "base/units.h"
#include "sdk/task_channel.h"  // kEnvMemory: how the daemon passes the limit

namespace freeride::tasks {

#ifndef FREERIDE_WITH_CUDA
bool CudaUsable(std::string* why) {
  *why = "this build has no CUDA (nvcc was not found at configure time)";
  return false;
}
uint64_t PeakGpuBytes() { return 0; }
#endif

Device ChooseDevice(const std::string& name) {
  std::string why;
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") {
    if (!CudaUsable(&why)) throw std::runtime_error("--device cuda: " + why);
    return Device::kCuda;
  }
  if (name == "auto") return CudaUsable(&why) ? Device::kCuda : Device::kCpu;
  throw std::runtime_error("--device must be cpu, cuda or auto, not '" + name + "'");
}

const char* DeviceName(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

void CheckMemoryFits(uint64_t need, uint64_t limit, const std::string& what) {
  if (limit > 0 && need > limit)
    throw std::runtime_error(what + ": " + FormatBytes(need) +
                             " needed, more than the task's memory limit of " + FormatBytes(limit));
}

uint64_t MemoryLimitBytes(uint64_t fallback) {
  const char* v = std::getenv(kEnvMemory);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  return (end && *end == '\0' && n > 0) ? n : fallback;
}

}  // namespace freeride::tasks
