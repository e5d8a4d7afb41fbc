// What a run looked like from the daemon's event log: idle time per lane, how
// much of it side tasks used, what it cost the training, and what the side
// work was worth.  Pure functions of the parsed log (no clock, no files), so
// every figure can be checked against hand-computed event logs.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/event_log_reader.h"

namespace freeride::report {

struct ReportOptions {
  // Alone rates (units per second on a dedicated GPU) by task name; they
  // override the rates logged at submission (`submit --profile`).
  std::map<std::string, double> alone_rates;
  double gpu_hour_price = 0;  // currency per GPU-hour; 0: no money figures
};

struct LaneReport {
  int lane = 0;
  uint64_t bubbles = 0;
  int64_t span_ns = 0;          // first bubble begin to last bubble end
  int64_t bubble_ns = 0;
  int64_t harvested_ns = 0;     // side-task time inside bubbles
  int64_t allowed_ns = 0;       // imperative tasks' time let run in bubbles: not harvested
  int64_t overrun_ns = 0;       // side-task time past bubble ends
  int64_t overrun_p99_ns = 0;   // over this lane's bubbles (bubbles without overrun count as 0)
  int64_t overrun_max_ns = 0;
  uint64_t steps = 0;
  uint64_t iterations = 0;      // iteration periods measured
  double iteration_ms = 0;      // 0: no slot seen twice
};

struct TaskReport {
  int64_t id = 0;
  std::string name;
  int lane = -1;
  std::string unit;
  std::string state;
  uint64_t steps = 0;
  // From the step events of this log, counted from the task's latest start
  // (its checkpoint's figures): work redone after a restart counts once.
  double units = 0;
  int64_t step_ns = 0;           // total step time
  int64_t overrun_ns = 0;
  double alone_rate_per_s = 0;   // 0: unknown, so its work is not valued
  double work_gpu_s = 0;         // units / alone rate: GPU-seconds of dedicated work
};

struct RunReport {
  std::string path;
  std::vector<LaneReport> lanes;
  std::vector<TaskReport> tasks;
  LaneReport total;               // lane = -1; iteration_ms averaged over lanes
  double bubble_fraction = 0;     // bubble time / span, over all lanes
  double harvest_ratio_time = 0;  // harvested / bubble time
  // Against the baseline, when one was given and both have iterations.
  std::optional<double> baseline_iteration_ms;
  std::optional<double> overhead_pct;
  double work_gpu_s = 0;          // Σ task work valued at alone rates
  double slowdown_gpu_s = 0;      // the training's extra time, at every GPU
  std::optional<double> cost_saving_pct;
  std::optional<double> money_saved;           // over the logged run
  std::optional<double> money_saved_per_hour;  // per hour of training
  double gpu_hour_price = 0;
  // The daemon's own live estimate per lane (the newest in the log), from
  // iterations with side work withheld; it needs no baseline run.
  std::vector<OverheadRecord> live_overhead;
  // The run log's records left out as repeats (report/repeated_records.h).
  uint64_t dropped_bubble_records = 0, dropped_step_records = 0;
  std::vector<std::string> notes;  // what could not be computed, and why
};

// Computes the report for `run`, comparing iteration times with `baseline`
// (a log of the same training without side tasks) when given.
RunReport ComputeRunReport(const EventLogData& run, const EventLogData* baseline,
                           const ReportOptions& options);

// The training's iteration time: per lane, the mean period between the
// begins of the slot it served most often (once per iteration), averaged over
// the lanes.  Periods over 3x the lane's median (pauses between runs, a stage
// with marks switched off) are left out.  Returns 0 when no lane saw a slot
// twice.
// Each lane's iteration starts, sorted.  Each slot recurs once per
// iteration, but a lane does not serve a bubble that closes before its thread
// looks (a few microseconds long), so the slot a lane served most often (the
// lowest of equals) marks its iterations.
std::map<int, std::vector<int64_t>> IterationStartsByLane(const EventLogData& log);

double IterationMs(const EventLogData& log, uint64_t* periods = nullptr);

// The time a lane's training ran, from its bubbles (begin, end): first begin
// to last end, less the pauses between runs (a gap between bubbles over 3x
// the lane's median iteration period), so that one daemon's log of several
// trainings counts only their time.  median_period_ns 0: no pause is known.
int64_t ActiveSpanNs(std::vector<std::pair<int64_t, int64_t>> bubbles, int64_t median_period_ns);

std::string FormatRunReport(const RunReport& report);
std::string RunReportToJson(const RunReport& report);

// Parses an --alone-rates file: a JSON object mapping task names to a rate
// (units per second) or to a `freeride task-profile` object (its
// "rate_per_s").  Returns nullopt and sets *error naming the file otherwise.
std::optional<std::map<std::string, double>> ReadAloneRates(const std::string& path,
                                                            std::string* error);

}  // namespace freeride::report
