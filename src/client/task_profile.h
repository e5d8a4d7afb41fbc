// A side task's profile: how it runs alone on a dedicated device (its
// throughput, step-time distribution and peak memory).  `freeride
// task-profile` writes one; `freeride submit --profile` turns it into the
// memory request and step-time hint the daemon places and dispatches by,
// and into the alone rate that harvest ratios are measured against.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "freeride.pb.h"

namespace freeride {

struct TaskProfile {
  std::vector<std::string> command;
  std::string unit;
  double rate_per_s = 0;  // the alone rate, in unit per second
  double seconds = 0;
  uint64_t steps = 0;
  double step_ms_p50 = 0, step_ms_p90 = 0, step_ms_p99 = 0, step_ms_max = 0;
  uint64_t peak_memory_bytes = 0;     // what the task's own allocator tracked
  uint64_t process_gpu_bytes = 0;     // nvidia-smi's figure for the process (0: not seen)
  std::string host;
  int64_t created_unix = 0;
};

// Builds a profile from the JSON line a task prints when run alone.
// Returns nullopt and sets *error when `line` is not such a line.
std::optional<TaskProfile> ProfileFromStandaloneLine(const std::string& line,
                                                     std::string* error);

std::string TaskProfileToJson(const TaskProfile& profile);

// Reads a profile file; on failure returns nullopt and an *error that names
// the file and what is wrong with it.
std::optional<TaskProfile> ReadTaskProfile(const std::string& path, std::string* error);

// The device memory to reserve for a profiled task: its larger peak plus a
// margin of 10% (at least 64 MiB) for allocator slack; 0 when the profile
// saw no device memory.
uint64_t ProfiledMemoryBytes(const TaskProfile& profile);

// Fills what the profile knows and the spec does not yet set: command,
// memory request, step-time hint (the p99, so that dispatch is cautious
// until it has measured steps) and alone rate.
void ApplyTaskProfile(const TaskProfile& profile, v1::TaskSpec* spec);

}  // namespace freeride
