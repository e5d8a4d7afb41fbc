// What `freeride simulate` simulates: a data-parallel group of identical
// pipelines, its timing noise, and the side tasks on every GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "policy/bubble_predictor.h"
#include "policy/dispatch_policy.h"
#include "schedule/pipeline_schedule.h"

namespace freeride::sim {

// A side task as `freeride task-profile` measured it alone on a GPU.
struct SimTask {
  std::string name;
  std::string unit = "steps";
  double rate_per_s = 0;  // alone rate in unit/s; 0: work is counted in GPU-seconds only
  // Step-time quantiles alone, in milliseconds (p50 <= p90 <= p99 <= max).
  double step_ms_p50 = 1, step_ms_p90 = 1, step_ms_p99 = 1, step_ms_max = 1;
  uint64_t memory_bytes = 0;  // what the dispatcher checks against free memory
  int priority = 0;
};

// Which tasks each GPU's lane holds.
enum class TaskPlacement {
  kRoundRobin,  // one task per GPU: task (global GPU index) mod (tasks)
  kAll,         // every GPU queues every task; the dispatcher picks per bubble
};

struct SimConfig {
  ScheduleKind schedule = ScheduleKind::k1F1B;
  int stages = 4;          // GPUs per pipeline (pipeline ranks)
  int virtual_stages = 0;  // model stages per rank; 0: the schedule's default
  int microbatches = 4;    // per pipeline and iteration
  int data_parallel = 1;   // pipelines, synchronised after every iteration
  int iterations = 100;
  int layers = 0;          // model layers, only to refuse more stages than layers; 0: unknown

  // Per model stage (ranks x virtual stages of them), in milliseconds; a
  // single entry applies to every stage.
  std::vector<StageTimes> stage_times = {StageTimes{5.7, 11.4, 0, -1}};
  double p2p_ms = 0;        // added to every dependency between ranks
  double allreduce_ms = 0;  // gradient all-reduce at the end of an iteration
  double optimizer_ms = 0;  // optimizer step after the all-reduce

  // Timing noise: every action's length is multiplied by a log-normal
  // factor of mean 1 and this coefficient of variation; in each iteration
  // each GPU is a straggler with straggler_prob, its actions then
  // straggler_slowdown times longer.
  double jitter_cv = 0;
  double straggler_prob = 0;
  double straggler_slowdown = 1.5;

  // The runtime's mechanism, as measured on H200: begin mark to first step
  // (p50 of the signal latency), and how much of an overrun delays the
  // trainer's next action (1: all of it; MPS priority lets it start sooner).
  double dispatch_latency_ms = 0.2;
  double overrun_cost = 1.0;
  // Side-task steps run this much slower in bubbles than alone (sharing the
  // GPU's memory bandwidth with the trainer's communication); work is valued
  // at the alone speed.
  double step_slowdown = 1.0;
  uint64_t free_memory_bytes = UINT64_MAX;  // GPU memory the trainer leaves; UINT64_MAX: no limit

  std::vector<SimTask> tasks;
  TaskPlacement placement = TaskPlacement::kRoundRobin;
  DispatchConfig dispatch;
  BubblePredictorConfig predictor;

  uint64_t seed = 1;
  int threads = 0;          // 0: one per hardware thread (results do not depend on it)
  double gpu_hour_price = 0;

  int VirtualStages() const {
    return virtual_stages > 0 ? virtual_stages : DefaultVirtualStages(schedule);
  }
  // Clamped, not overflowed: ValidateSimConfig refuses a shape that large (BuildActionOrder).
  int ModelStages() const { return ModelStageCount(stages, VirtualStages()); }
  int64_t Gpus() const { return static_cast<int64_t>(stages) * data_parallel; }
  const StageTimes& TimesOf(int model_stage) const {
    return stage_times.size() == 1 ? stage_times[0] : stage_times[model_stage];
  }
};

// Throws std::invalid_argument with a message a user can act on when the
// configuration is impossible: no stages, micro-batches or iterations, more
// stages than layers, negative or non-finite times, a stage-time list of the
// wrong length, a schedule shape torch refuses, task step quantiles out of
// order, or a task that needs more memory than the trainer leaves.
void ValidateSimConfig(const SimConfig& config);

// The configurations of a scale-out sweep at a fixed global batch: for each
// GPU count, data parallelism fills the GPUs not in one pipeline and the
// micro-batches per pipeline are global_microbatches / data-parallel.
// Throws std::invalid_argument naming the scale that does not divide.
std::vector<SimConfig> ScaleOutConfigs(const SimConfig& base, const std::vector<int64_t>& gpus,
                                       int64_t global_microbatches);

// The H200 side tasks of bench/results/tasks_gpu.md (`--step-ms 2`):
// PageRank (R-MAT 22), SGD matrix factorisation (20M ratings) and image
// resize+watermark (1920x1080 to 640 wide).
std::vector<SimTask> DefaultTaskMix();

}  // namespace freeride::sim
