// The discrete-event simulation behind `freeride simulate`: every pipeline
// of a data-parallel job, iteration by iteration, with each GPU's lane
// serving its gaps through the runtime's own DispatchPolicy, BubblePredictor
// and StepEstimator on a simulated clock.
//
// Memory is per pipeline (each GPU's predictor and task estimators, a few
// times per stage); nothing is kept per iteration.  Pipelines are simulated
// on several threads, and each pipeline draws from its own random streams,
// so results do not depend on the thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/sim_config.h"

namespace freeride::sim {

// Per pipeline rank, summed over the data-parallel replicas.
struct StageResult {
  int stage = 0;               // pipeline rank
  int64_t gpus = 0;
  double busy_gpu_s = 0;       // the trainer's own work (baseline run)
  double idle_gpu_s = 0;       // everything else (baseline run)
  double bubble_gpu_s = 0;     // gaps the lanes served (run with side tasks)
  double harvested_gpu_s = 0;  // side-task step time inside those gaps
  double overrun_gpu_s = 0;    // side-task step time past their ends
  double work_gpu_s = 0;       // side work at alone speed (whole steps)
  uint64_t bubbles = 0, steps = 0;
};

struct TaskResult {
  std::string name, unit;
  int64_t gpus = 0;            // lanes that held it
  uint64_t steps = 0;
  double work_gpu_s = 0;
  double units = 0;            // work x alone rate
};

struct SimResult {
  SimConfig config;
  double iteration_ms_baseline = 0, iteration_ms = 0;  // mean over the iterations
  double wall_s_baseline = 0, wall_s = 0;
  double bubble_fraction = 0;        // the trainer's idle share of GPU time (baseline)
  std::optional<double> closed_form_bubble_fraction;  // GPipe/1F1B: (P-1)/(M+P-1)
  double harvest_ratio = 0;          // harvested / served bubble time
  double harvested_fraction = 0;     // harvested / all GPU time of the run with side tasks
  double overhead_pct = 0;           // iteration time against the baseline's
  double work_gpu_s = 0, overrun_gpu_s = 0, bubble_gpu_s = 0, harvested_gpu_s = 0;
  double extra_gpu_equivalents = 0;  // side work / wall time: dedicated GPUs' worth
  double cost_saving_pct = 0;        // (work - slowdown at every GPU) / training GPU time
  std::optional<double> money_saved_per_hour;
  std::vector<StageResult> stages;
  std::vector<TaskResult> tasks;
  double simulated_seconds = 0;      // how long the simulation itself took
  int threads = 0;
};

// Called after each iteration of each of the two runs (baseline first) with
// the run's name, iterations done and the total; for progress lines.
using SimProgress = std::function<void(const char* run, int done, int total)>;

// Simulates `config` twice with the same random draws for the training: once
// without side tasks (the baseline) and once with them.  Throws
// std::invalid_argument for configurations ValidateSimConfig refuses.
SimResult Simulate(const SimConfig& config, const SimProgress& progress = {});

}  // namespace freeride::sim
