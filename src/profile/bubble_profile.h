// Turns one rank's trace into its bubbles: per iteration, the idle gaps of
// the compute stream (or, in a CPU-only trace, of the training thread's CPU
// operators), typed and matched to slots; across iterations, per-slot
// summaries.  Pure functions of a KinetoTrace, so they are tested on small
// made-up traces as well as real ones.
#pragma once
#include <string>
#include <vector>

#include "profile/kineto_trace.h"
#include "profile/slot_matching.h"
#include "schedule/pipeline_schedule.h"

namespace freeride::profile {

struct ProfileOptions {
  double min_bubble_ms = 1.0;  // shorter gaps count as idle but are not bubbles
  bool all_streams = false;    // busy = any stream, not only the compute stream
};

struct Iteration {
  int step = 0;
  double window_start_us = 0;
  double length_ms = 0, busy_ms = 0;
  std::vector<Gap> gaps;  // only those >= min_bubble_ms, by start
  std::vector<std::pair<double, double>> busy_ms_intervals;  // for pictures
};

struct RankProfile {
  std::string path;
  int rank = 0;
  int world_size = 0;  // 0 when the trace does not say
  // Where busy time was read: "gpu" (kernels of one device's compute
  // stream) or "cpu" (CPU operators of the training thread, for a trace
  // without GPU kernels).
  std::string busy_source;
  int device = -1;  // -1 for "cpu"
  std::string device_name;
  int64_t compute_stream = -1;
  int64_t cpu_thread = 0;  // the thread whose operators are busy time, for "cpu"
  std::string window_source;  // "cpu" or "gpu" ProfilerStep annotations
  std::vector<Iteration> iterations;
  double iteration_ms = 0;   // median
  double busy_ms = 0;        // median
  double idle_fraction = 0;  // median, 0..1
  uint64_t total_memory_bytes = 0, peak_reserved_bytes = 0;
  int64_t free_memory_bytes = -1;  // -1 when memory was not profiled
  std::vector<SlotSummary> slots;  // by median start; empty when slots_conflict is set
  std::string slots_conflict;      // MatchSlots' reason when the gaps form no slots
  int left_out_gaps = 0;           // MatchSlots' gaps of a minority of iterations, in no slot
  double left_out_ms = 0;
};

// Analyses one trace.  Throws TraceError with a plain explanation when the
// trace has neither GPU kernels nor CPU operators, or no ProfilerStep
// windows.  A trace whose gaps do not line up across iterations is no
// error: its slots are empty and slots_conflict says why.
// fallback_rank is used when the trace carries no distributedInfo.
RankProfile AnalyzeRank(const KinetoTrace& trace, int fallback_rank,
                        const ProfileOptions& options = {});

// Checks that the traces belong to one run: one world size, no rank twice,
// and iteration windows that overlap in time.  Throws TraceError otherwise.
void CheckSameRun(const std::vector<KinetoTrace>& traces, const std::vector<RankProfile>& ranks);

}  // namespace freeride::profile
