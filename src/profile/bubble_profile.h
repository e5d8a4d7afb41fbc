// Turns one rank's trace into its bubbles: per iteration, the idle gaps of
// the compute stream, typed and matched to slots; across iterations, per-slot
// summaries.  Pure functions of a KinetoTrace, so they are tested on small
// made-up traces as well as real ones.
#pragma once
#include <string>
#include <vector>

#include "profile/kineto_trace.h"
#include "schedule/pipeline_schedule.h"

namespace freeride::profile {

struct ProfileOptions {
  double min_bubble_ms = 1.0;  // shorter gaps count as idle but are not bubbles
  bool all_streams = false;    // busy = any stream, not only the compute stream
};

struct Gap {
  double start_ms = 0;  // from the iteration window's start
  double duration_ms = 0;
  BubbleType type = BubbleType::kSteady;
  int ordinal = 0;  // index among gaps of the same type in the iteration
};

struct Iteration {
  int step = 0;
  double window_start_us = 0;
  double length_ms = 0, busy_ms = 0;
  std::vector<Gap> gaps;  // only those >= min_bubble_ms, by start
  std::vector<std::pair<double, double>> busy_ms_intervals;  // for pictures
};

// One bubble slot summarised over the iterations that had it.
struct SlotSummary {
  BubbleType type = BubbleType::kSteady;
  int ordinal = 0;
  int iterations = 0;  // how many iterations had this slot
  double start_ms = 0;  // median
  double median_ms = 0, p10_ms = 0, min_ms = 0, max_ms = 0;
};

struct RankProfile {
  std::string path;
  int rank = 0;
  int world_size = 0;  // 0 when the trace does not say
  int device = -1;
  std::string device_name;
  int compute_stream = -1;
  std::string window_source;  // "cpu" or "gpu" ProfilerStep annotations
  std::vector<Iteration> iterations;
  double iteration_ms = 0;   // median
  double busy_ms = 0;        // median
  double idle_fraction = 0;  // median, 0..1
  uint64_t total_memory_bytes = 0, peak_reserved_bytes = 0;
  int64_t free_memory_bytes = -1;  // -1 when memory was not profiled
  std::vector<SlotSummary> slots;  // by median start
};

// Analyses one trace.  Throws TraceError with a plain explanation when the
// trace has no GPU kernels (a CPU-only profile) or no ProfilerStep windows.
// fallback_rank is used when the trace carries no distributedInfo.
RankProfile AnalyzeRank(const KinetoTrace& trace, int fallback_rank,
                        const ProfileOptions& options = {});

// Checks that the traces belong to one run: one world size, no rank twice,
// and iteration windows that overlap in time.  Throws TraceError otherwise.
void CheckSameRun(const std::vector<KinetoTrace>& traces, const std::vector<RankProfile>& ranks);

}  // namespace freeride::profile
