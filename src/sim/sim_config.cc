#include "sim/sim_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "schedule/pipeline_schedule.h"

namespace freeride::sim {
namespace {

// Times beyond a day per action are no training's, and their sums over an
// iteration's actions could overflow to infinity.
constexpr double kMostMs = 86'400'000;
constexpr double kLeastMs = 1e-6;

void RequireTime(double value, const std::string& what) {
  if (!std::isfinite(value) || value < 0)
    throw std::invalid_argument(fmt::format("{} must be a time of 0 ms or more, not {}", what, value));
  if (value > kMostMs)
    throw std::invalid_argument(fmt::format("{} must be at most a day ({} ms), not {}", what, kMostMs, value));
  // The simulator keeps whole nanoseconds: a time below one, not zero,
  // rounded to nothing (stage times of 1e-9 ms gave 100% idle; a task step
  // of 1e-7 ms ran a billion empty steps for an hour).
  if (value > 0 && value < kLeastMs)
    throw std::invalid_argument(
        fmt::format("{} must be 0 or at least a nanosecond ({} ms), not {}", what, kLeastMs, value));
}

// How much slower anything may be simulated: beyond it the times in
// nanoseconds overflowed (--step-slowdown 1e300 gave negative GPU-seconds).
constexpr double kMostSlowdown = 1000;

// What one run may keep and do: bubble history (8 GiB), and task steps
// (about 120 ns each on one core: 40 minutes at the most).
constexpr double kMostHistoryBytes = 8.0 * (1ull << 30);
constexpr double kMostTaskSteps = 2e10;

void RequireAtLeastOne(int64_t value, const char* what) {
  if (value < 1) throw std::invalid_argument(fmt::format("{} must be at least 1, not {}", what, value));
}

}  // namespace

void ValidateSimConfig(const SimConfig& c) {
  RequireAtLeastOne(c.stages, "--stages");
  RequireAtLeastOne(c.microbatches, "the micro-batches per pipeline");
  RequireAtLeastOne(c.data_parallel, "the data-parallel degree");
  RequireAtLeastOne(c.iterations, "--iterations");
  if (c.virtual_stages < 0) throw std::invalid_argument("--virtual-stages cannot be negative");
  if (c.layers < 0) throw std::invalid_argument("--layers cannot be negative");
  // The schedule's own shape rules (torch refuses the same shapes), and its size, first.
  const auto order = BuildActionOrder(c.schedule, c.stages, c.microbatches, c.VirtualStages());
  // Each GPU's lane keeps a history of every gap slot of its rank: a run of
  // 400,000 GPUs x a million micro-batches only ran out of memory.
  size_t most_actions = 0;
  for (const auto& actions : order) most_actions = std::max(most_actions, actions.size());
  const double history_bytes = static_cast<double>(c.Gpus()) * static_cast<double>(most_actions + 1) *
                               std::max(1, c.predictor.window) * sizeof(int64_t);
  if (history_bytes > kMostHistoryBytes)
    throw std::invalid_argument(fmt::format(
        "{} GPUs with {} gaps per rank per iteration would keep {:.1f} GiB of bubble history "
        "(at most {:.0f} GiB): simulate fewer GPUs or micro-batches (replicas change a pipeline's "
        "bubbles only through the slowest one's all-reduce)",
        c.Gpus(), most_actions + 1, history_bytes / double(1ull << 30),
        kMostHistoryBytes / double(1ull << 30)));
  if (c.layers > 0 && c.ModelStages() > c.layers)
    throw std::invalid_argument(fmt::format(
        "{} model stages ({} ranks x {} virtual stages) but only {} layers: every stage needs "
        "at least one layer",
        c.ModelStages(), c.stages, c.VirtualStages(), c.layers));

  if (c.stage_times.size() != 1 && static_cast<int>(c.stage_times.size()) != c.ModelStages())
    throw std::invalid_argument(fmt::format(
        "{} stage times given for {} model stages: give one for all or one per stage",
        c.stage_times.size(), c.ModelStages()));
  for (size_t i = 0; i < c.stage_times.size(); ++i) {
    const StageTimes& t = c.stage_times[i];
    std::string stage = c.stage_times.size() == 1 ? "every stage" : fmt::format("stage {}", i);
    RequireTime(t.forward, fmt::format("the forward time of {}", stage));
    RequireTime(t.backward, fmt::format("the backward time of {}", stage));
    if (t.weight >= 0) RequireTime(t.weight, fmt::format("the weight-gradient time of {}", stage));
    if (t.weight >= 0 && t.weight > t.backward)
      throw std::invalid_argument(fmt::format(
          "the weight-gradient time of {} ({} ms) is longer than its whole backward ({} ms)",
          stage, t.weight, t.backward));
    if (t.forward + t.backward <= 0)
      throw std::invalid_argument(fmt::format("{} has neither forward nor backward time", stage));
  }
  RequireTime(c.p2p_ms, "--p2p");
  RequireTime(c.allreduce_ms, "--allreduce-ms");
  RequireTime(c.optimizer_ms, "--optimizer-ms");
  RequireTime(c.dispatch_latency_ms, "--dispatch-latency-ms");
  if (!std::isfinite(c.jitter_cv) || c.jitter_cv < 0 || c.jitter_cv > 2)
    throw std::invalid_argument(fmt::format("--jitter must be in 0..2, not {}", c.jitter_cv));
  if (!(c.straggler_prob >= 0 && c.straggler_prob <= 1))
    throw std::invalid_argument(fmt::format("--straggler-prob must be in 0..1, not {}", c.straggler_prob));
  if (!(c.straggler_slowdown >= 1 && c.straggler_slowdown <= kMostSlowdown))
    throw std::invalid_argument(fmt::format("--straggler-slowdown must be in 1..{}, not {}", kMostSlowdown,
                                            c.straggler_slowdown));
  if (!(c.step_slowdown >= 1 && c.step_slowdown <= kMostSlowdown))
    throw std::invalid_argument(
        fmt::format("--step-slowdown must be in 1..{}, not {}", kMostSlowdown, c.step_slowdown));
  if (!(c.overrun_cost >= 0 && c.overrun_cost <= 1))
    throw std::invalid_argument(fmt::format("--overrun-cost must be in 0..1, not {}", c.overrun_cost));
  if (c.placement == TaskPlacement::kAll && c.tasks.size() > 64)
    throw std::invalid_argument("at most 64 tasks can share every GPU");

  // The run simulates each task step: bound their number before it starts
  // (day-long stage times and 1 ms steps ran for hours).  A GPU's idle time
  // is about that of the schedule timed with every stage as slow as the
  // slowest and its sends, stretched by a straggler's
  // slowdown and the jitter, plus the all-reduce and optimizer step.
  if (!c.tasks.empty()) {
    StageTimes slowest{.forward = 0, .backward = 0, .p2p_latency = c.p2p_ms, .weight = 0};
    for (int s = 0; s < c.ModelStages(); ++s) {
      const StageTimes& t = c.TimesOf(s);
      slowest.forward = std::max(slowest.forward, t.forward);
      slowest.backward = std::max(slowest.backward, t.backward);
      slowest.weight = std::max(slowest.weight, t.WeightTime());
    }
    const ScheduleTimeline timed =
        TimeSchedule(c.schedule, c.stages, c.microbatches, slowest, 1e-9, c.VirtualStages());
    // Every pipeline waits for the slowest at the all-reduce: an iteration
    // is slowed when any of its GPUs straggles.
    const double any_straggles =
        1 - std::pow(1 - c.straggler_prob, static_cast<double>(c.Gpus()));
    const double idle_ms = timed.iteration * timed.bubble_fraction *
                               (1 + any_straggles * (c.straggler_slowdown - 1)) * (1 + c.jitter_cv) +
                           c.allreduce_ms + c.optimizer_ms;
    double shortest_step_ms = c.tasks.front().step_ms_p50;
    for (const SimTask& t : c.tasks) shortest_step_ms = std::min(shortest_step_ms, t.step_ms_p50);
    const double steps = static_cast<double>(c.Gpus()) * c.iterations * idle_ms /
                         std::max(shortest_step_ms, kLeastMs);
    if (steps > kMostTaskSteps)
      throw std::invalid_argument(fmt::format(
          "this run would simulate about {:.3g} task steps ({} GPUs x {} iterations, each idle about "
          "{:.4g} ms, in steps of {} ms), over the {:.3g} that finish within the hour: give fewer "
          "--iterations or GPUs, shorter stage times, or longer task steps",
          steps, c.Gpus(), c.iterations, idle_ms, shortest_step_ms, kMostTaskSteps));
  }

  for (const SimTask& t : c.tasks) {
    std::string who = fmt::format("task '{}'", t.name);
    RequireTime(t.step_ms_p50, who + " step p50");
    if (t.step_ms_p50 <= 0) throw std::invalid_argument(who + ": its step p50 must be above 0 ms");
    if (!(t.step_ms_p50 <= t.step_ms_p90 && t.step_ms_p90 <= t.step_ms_p99 &&
          t.step_ms_p99 <= t.step_ms_max && std::isfinite(t.step_ms_max)))
      throw std::invalid_argument(fmt::format(
          "{}: step quantiles must rise: p50 {} <= p90 {} <= p99 {} <= max {} ms", who,
          t.step_ms_p50, t.step_ms_p90, t.step_ms_p99, t.step_ms_max));
    if (!(t.rate_per_s >= 0 && std::isfinite(t.rate_per_s)))
      throw std::invalid_argument(who + ": its alone rate cannot be negative");
    if (c.free_memory_bytes != UINT64_MAX && t.memory_bytes > c.free_memory_bytes)
      throw std::invalid_argument(fmt::format(
          "{} needs {:.2f} GiB of GPU memory but the trainer leaves only {:.2f} GiB: it could "
          "never run",
          who, t.memory_bytes / double(1ull << 30), c.free_memory_bytes / double(1ull << 30)));
  }
}

std::vector<SimConfig> ScaleOutConfigs(const SimConfig& base, const std::vector<int64_t>& gpus,
                                       int64_t global_microbatches) {
  if (global_microbatches < 1)
    throw std::invalid_argument("the global batch must hold at least one micro-batch");
  std::vector<SimConfig> configs;
  for (int64_t n : gpus) {
    if (n < base.stages || n % base.stages != 0)
      throw std::invalid_argument(fmt::format(
          "{} GPUs cannot be split into pipelines of {} stages: give a multiple of {}", n,
          base.stages, base.stages));
    int64_t replicas = n / base.stages;
    if (global_microbatches % replicas != 0)
      throw std::invalid_argument(fmt::format(
          "a global batch of {} micro-batches does not split over {} pipelines ({} GPUs): "
          "choose a global batch that is a multiple of {}",
          global_microbatches, replicas, n, replicas));
    SimConfig c = base;
    c.data_parallel = static_cast<int>(replicas);
    c.microbatches = static_cast<int>(global_microbatches / replicas);
    configs.push_back(c);
  }
  return configs;
}

std::vector<SimTask> DefaultTaskMix() {
  constexpr uint64_t kMiB = 1ull << 20;
  return {
      {"pagerank", "edges", 4.834e10, 1.383, 1.390, 1.393, 1.412, 1024 * kMiB, 0},
      {"sgd", "ratings", 2.107e9, 1.994, 2.000, 2.005, 2.011, 1024 * kMiB, 0},
      {"image", "megapixels", 325.6, 1.969, 2.100, 2.219, 2.265, 590 * kMiB, 0},
  };
}

}  // namespace freeride::sim
