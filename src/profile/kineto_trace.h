// What the bubble profiler needs from one rank's PyTorch profiler (Kineto)
// trace: GPU operations with their streams (or, in a trace without any, the
// CPU operators with their threads), the ProfilerStep windows, device memory
// sizes and the peak memory the caching allocator reserved.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profile/trace_stream.h"

namespace freeride::profile {

struct GpuOp {
  double start_us = 0, end_us = 0;
  int device = -1;
  int64_t stream = -1;
  bool communication = false;  // an NCCL kernel: it may spin while waiting
};

// A CPU operator (cat "cpu_op"): the work of a CPU-only run.
struct CpuOp {
  double start_us = 0, end_us = 0;
  int64_t thread = 0;
  bool communication = false;  // c10d / gloo / NCCL: it may block while it waits
};

struct StepWindow {
  int step = 0;  // N of ProfilerStep#N
  double start_us = 0, end_us = 0;
  int64_t thread = 0;  // the thread that ran the step (CPU marks)
};

struct DeviceInfo {
  std::string name;
  uint64_t total_memory_bytes = 0;
};

struct KinetoTrace {
  std::string path;
  std::optional<int> rank, world_size;
  std::vector<int> group_ranks;          // distributedInfo.pg_config[0].ranks
  std::optional<int64_t> base_time_ns;   // baseTimeNanoseconds
  std::map<int, DeviceInfo> devices;     // deviceProperties by id
  std::map<int, uint64_t> peak_reserved_bytes;  // by CUDA device id
  std::vector<GpuOp> gpu_ops;
  std::vector<CpuOp> cpu_ops;            // only read for a trace without GPU operations
  std::vector<StepWindow> cpu_steps;     // user_annotation ProfilerStep#N
  std::vector<StepWindow> gpu_steps;     // gpu_user_annotation ProfilerStep#N
  uint64_t events = 0;
  uint64_t json_bytes = 0;
  // Operations and steps left out for a negative "dur", and the first one's
  // position in traceEvents (from 0) and duration.
  uint64_t negative_durations = 0;
  uint64_t first_negative_duration_event = 0;
  double first_negative_duration = 0;
};

// A warning for the events a trace's reading skipped: "" when none.
std::string SkippedEventsMessage(const KinetoTrace& trace);

// Reads one trace (plain or .gz).  Throws TraceError for unreadable or
// malformed files, for events whose fields have the wrong types, and for a
// distributedInfo whose rank or world size is not a whole number in range.
// Events with a negative duration are skipped and counted.  It does
// not judge content (no GPU events, no steps): the analysis does that.
// CPU operators are most of a GPU trace's events and of no use there, so
// they are skipped; a trace found to hold no GPU operation (a CPU-only run)
// is read a second time for them.
KinetoTrace LoadKinetoTrace(const std::string& path, const TraceStreamOptions& options = {});

}  // namespace freeride::profile
