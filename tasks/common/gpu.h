// Which processor a built-in task runs on.
#pragma once
#include <cstdint>
#include <string>

namespace freeride::tasks {

enum class Device { kCpu, kCuda };

// True when this build has CUDA and a GPU is usable; else sets *why.
bool CudaUsable(std::string* why);

// Parses --device cpu|cuda|auto.  auto picks CUDA when usable.  Throws
// std::runtime_error for an unknown name or cuda without a usable GPU.
Device ChooseDevice(const std::string& name);
const char* DeviceName(Device d);

// Bytes the task may use: FREERIDE_MEMORY_BYTES from the daemon, else
// `fallback` (0: unlimited).
uint64_t MemoryLimitBytes(uint64_t fallback = 0);

// Throws std::runtime_error "<what>: N needed, more than the task's memory
// limit of L" when need > limit (limit 0: unlimited).
void CheckMemoryFits(uint64_t need, uint64_t limit, const std::string& what);

// Peak GPU memory this process allocated through the tasks' CUDA code.
uint64_t PeakGpuBytes();

}  // namespace freeride::tasks
