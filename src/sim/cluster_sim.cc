#include "sim/cluster_sim.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "sim/serve_gap.h"
#include "schedule/pipeline_timer.h"
#include "sim/random.h"

namespace freeride::sim {
namespace {

constexpr double kNsPerMs = 1e6;
constexpr double kSecondsPerNs = 1e-9;

// One GPU's lane: what the daemon's Lane keeps between bubbles, and which
// of the job's tasks each of its GapLane::tasks is.
struct SimLane {
  GapLane serving;
  std::vector<int> task_of;  // index into SimConfig::tasks
  double slowdown = 1;       // this iteration's straggler factor
};

struct SimPipeline {
  RandomStream timing;  // action lengths and stragglers: the same in both runs
  RandomStream steps;   // side-task step times
  std::vector<SimLane> lanes;
  std::vector<double> last_end;  // per rank, this iteration's last action
};

// Sums in whole nanoseconds, so that they do not depend on the order in
// which threads add them up.
struct StageSums {
  int64_t busy_ns = 0, bubble_ns = 0, harvested_ns = 0, overrun_ns = 0, work_ns = 0;
  uint64_t bubbles = 0, steps = 0;
};
struct TaskSums {
  int64_t work_ns = 0;
  uint64_t steps = 0;
};

// What one thread adds up over its pipelines; merged at the end.
struct Totals {
  std::vector<StageSums> stages;
  std::vector<TaskSums> tasks;
};

int64_t Ns(double ns) { return std::llround(ns); }

// One run (baseline or with side tasks) of the whole data-parallel job.
class ClusterRun {
 public:
  ClusterRun(const SimConfig& config, bool with_tasks, int threads)
      : c_(config),
        with_tasks_(with_tasks && !config.tasks.empty()),
        policy_(config.dispatch),
        threads_(threads) {
    const int model_stages = c_.ModelStages();
    for (int s = 0; s < model_stages; ++s) {
      const StageTimes& t = c_.TimesOf(s);
      forward_ns_.push_back(t.forward * kNsPerMs);
      backward_ns_.push_back(t.backward * kNsPerMs);
      input_ns_.push_back(t.InputTimeOf(s) * kNsPerMs);
      weight_ns_.push_back(t.WeightTimeOf(s) * kNsPerMs);
    }
    for (const SimTask& task : c_.tasks) samplers_.emplace_back(task);
    if (c_.jitter_cv > 0) jitter_sigma_ = std::sqrt(std::log1p(c_.jitter_cv * c_.jitter_cv));
    PipelineTimer probe(c_.schedule, c_.stages, c_.microbatches, c_.VirtualStages());
    for (const auto& actions : probe.order())
      drain_slot_.push_back(static_cast<uint32_t>(actions.size()));
  }

  // Runs every iteration; returns per-thread totals and sets wall_ns().
  std::vector<Totals> Execute(const SimProgress& progress, const char* name) {
    const int64_t pipelines = c_.data_parallel;
    const int threads = static_cast<int>(std::min<int64_t>(threads_, pipelines));
    std::vector<Totals> totals(threads);
    // Per thread: the latest last-action end and resume time of each rank
    // over its pipelines; every thread then reduces them alike.
    std::vector<std::vector<double>> last_end_max(threads, std::vector<double>(c_.stages));
    std::vector<std::vector<double>> resume_max = last_end_max;
    std::barrier sync(threads);
    const double iteration_tail_ns = (c_.allreduce_ms + c_.optimizer_ms) * kNsPerMs;

    // A thread that cannot build its pipelines (out of memory) says so to
    // the others at the first barrier, and all return; the caller gets its
    // exception (an exception escaping a thread ended the process).
    std::mutex setup_mu;
    std::exception_ptr setup_error;
    std::atomic<bool> setup_failed{false};

    auto worker = [&](int t) {
      Totals& mine = totals[t];
      const int64_t begin = pipelines * t / threads, end = pipelines * (t + 1) / threads;
      std::vector<SimPipeline> local;
      std::optional<PipelineTimer> built_timer;
      try {
        mine.stages.resize(c_.stages);
        mine.tasks.resize(c_.tasks.size());
        local.reserve(end - begin);
        for (int64_t p = begin; p < end; ++p) local.push_back(MakePipeline(p));
        built_timer.emplace(c_.schedule, c_.stages, c_.microbatches, c_.VirtualStages());
      } catch (...) {
        std::lock_guard lock(setup_mu);
        if (!setup_error) setup_error = std::current_exception();
        setup_failed = true;
      }
      sync.arrive_and_wait();
      if (setup_failed) return;
      PipelineTimer& timer = *built_timer;
      std::vector<double> start(c_.stages, 0.0);
      std::vector<DispatchCandidate> candidates;  // ServeGap's scratch
      for (int k = 0; k < c_.iterations; ++k) {
        std::fill(last_end_max[t].begin(), last_end_max[t].end(), 0.0);
        for (SimPipeline& p : local) {
          if (c_.straggler_prob > 0) {
            for (SimLane& lane : p.lanes)
              lane.slowdown = p.timing.Uniform() < c_.straggler_prob ? c_.straggler_slowdown : 1;
          }
          Hooks hooks{*this, p, mine, candidates};
          timer.Run(start.data(), c_.p2p_ms * kNsPerMs, hooks, p.last_end.data());
          for (int r = 0; r < c_.stages; ++r)
            last_end_max[t][r] = std::max(last_end_max[t][r], p.last_end[r]);
        }
        sync.arrive_and_wait();
        // Every replica of a stage joins the gradient all-reduce, so each
        // rank's drain gap lasts until the slowest replica is done.
        std::vector<double> all_done(c_.stages, 0.0);
        for (int r = 0; r < c_.stages; ++r)
          for (int u = 0; u < threads; ++u) all_done[r] = std::max(all_done[r], last_end_max[u][r]);
        std::fill(resume_max[t].begin(), resume_max[t].end(), 0.0);
        for (SimPipeline& p : local) {
          for (int r = 0; r < c_.stages; ++r) {
            double resume = all_done[r];
            if (with_tasks_ && all_done[r] > p.last_end[r])
              resume = Serve(p, r, drain_slot_[r], p.last_end[r], all_done[r], mine, candidates);
            resume_max[t][r] = std::max(resume_max[t][r], resume);
            mine.stages[r].busy_ns += Ns(iteration_tail_ns);
          }
        }
        sync.arrive_and_wait();
        for (int r = 0; r < c_.stages; ++r) {
          double ready = 0;
          for (int u = 0; u < threads; ++u) ready = std::max(ready, resume_max[u][r]);
          start[r] = ready + iteration_tail_ns;
        }
        if (t == 0 && progress) progress(name, k + 1, c_.iterations);
      }
      if (t == 0) wall_ns_ = *std::max_element(start.begin(), start.end());
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
    worker(0);
    for (std::thread& thread : pool) thread.join();
    if (setup_error) std::rethrow_exception(setup_error);
    return totals;
  }

  double wall_ns() const { return wall_ns_; }

 private:
  // The timer's callbacks for one pipeline's iteration.
  struct Hooks {
    ClusterRun& run;
    SimPipeline& pipeline;
    Totals& totals;
    std::vector<DispatchCandidate>& candidates;

    double Duration(int rank, int, const PipelineAction& a) {
      double base = 0;
      switch (a.type) {
        case PipelineAction::kForward: base = run.forward_ns_[a.stage]; break;
        case PipelineAction::kBackward: base = run.backward_ns_[a.stage]; break;
        case PipelineAction::kBackwardInput: base = run.input_ns_[a.stage]; break;
        case PipelineAction::kBackwardWeight: base = run.weight_ns_[a.stage]; break;
      }
      double factor = pipeline.lanes[rank].slowdown;
      if (run.jitter_sigma_ > 0) {
        double sigma = run.jitter_sigma_;
        factor *= std::exp(sigma * pipeline.timing.Normal() - sigma * sigma / 2);
      }
      return base * factor;
    }
    double Start(int rank, int index, double free, double ready) {
      if (!run.with_tasks_ || ready <= free) return ready;
      return run.Serve(pipeline, rank, static_cast<uint32_t>(index), free, ready, totals,
                       candidates);
    }
    void Done(int rank, int, double start, double end) {
      totals.stages[rank].busy_ns += Ns(end - start);
    }
  };

  SimPipeline MakePipeline(int64_t index) const {
    SimPipeline p{RandomStream(c_.seed, index, 0), RandomStream(c_.seed, index, 1), {}, {}};
    p.last_end.assign(c_.stages, 0.0);
    int max_slot = *std::max_element(drain_slot_.begin(), drain_slot_.end());
    BubblePredictorConfig predictor = c_.predictor;
    predictor.max_slots = max_slot + 1;  // a slot per gap before each action, and the drain
    p.lanes.reserve(c_.stages);
    for (int r = 0; r < c_.stages; ++r) {
      SimLane lane{{BubblePredictor(predictor), {}}, {}, 1};
      if (with_tasks_) {
        auto add = [&](int task) {
          const SimTask& spec = c_.tasks[task];
          // The prior is what `submit --profile` gives the daemon: the p99.
          const Nanos prior = static_cast<Nanos>(spec.step_ms_p99 * kNsPerMs);
          lane.serving.tasks.push_back({spec.priority, spec.memory_bytes, StepEstimator(prior)});
          lane.task_of.push_back(task);
        };
        if (c_.placement == TaskPlacement::kAll) {
          for (size_t i = 0; i < c_.tasks.size(); ++i) add(static_cast<int>(i));
        } else {
          add(static_cast<int>((index * c_.stages + r) % static_cast<int64_t>(c_.tasks.size())));
        }
      }
      p.lanes.push_back(std::move(lane));
    }
    return p;
  }

  // One gap [begin, end) on a rank, served by ServeGap (sim/serve_gap.h)
  // with steps drawn from the tasks' samplers, and added to the totals.
  // Returns when the rank can start its next action: the gap's end, or later
  // when a step overran it.
  double Serve(SimPipeline& p, int rank, uint32_t slot, double begin, double end, Totals& totals,
               std::vector<DispatchCandidate>& candidates) {
    SimLane& lane = p.lanes[rank];
    StageSums& stage = totals.stages[rank];
    stage.bubble_ns += Ns(end - begin);
    ++stage.bubbles;
    double alone = 0;  // the step being run, at the task's alone speed
    auto next_length = [&](size_t task) {
      alone = samplers_[lane.task_of[task]].Draw(p.steps);
      return alone * c_.step_slowdown;
    };
    auto stepped = [&](const GapStep& step) {
      stage.harvested_ns += Ns(std::min(step.end, end) - step.start);
      if (step.end > end) stage.overrun_ns += Ns(step.end - end);
      stage.work_ns += Ns(alone);
      ++stage.steps;
      TaskSums& task_total = totals.tasks[lane.task_of[step.task]];
      task_total.work_ns += Ns(alone);
      ++task_total.steps;
    };
    const double last_step_end =
        ServeGap(policy_, lane.serving,
                 {slot, begin, end, c_.dispatch_latency_ms * kNsPerMs, c_.free_memory_bytes},
                 next_length, stepped, &candidates);
    return last_step_end > end ? end + c_.overrun_cost * (last_step_end - end) : end;
  }

  const SimConfig& c_;
  const bool with_tasks_;
  const DispatchPolicy policy_;
  const int threads_;
  std::vector<double> forward_ns_, backward_ns_, input_ns_, weight_ns_;  // per model stage
  std::vector<StepSampler> samplers_;
  std::vector<uint32_t> drain_slot_;  // per rank: its action count
  double jitter_sigma_ = 0;
  double wall_ns_ = 0;
};

Totals Merge(const std::vector<Totals>& parts, int stages, size_t tasks) {
  Totals sum;
  sum.stages.resize(stages);
  sum.tasks.resize(tasks);
  for (const Totals& part : parts) {
    for (int r = 0; r < stages; ++r) {
      StageSums& s = sum.stages[r];
      const StageSums& x = part.stages[r];
      s.busy_ns += x.busy_ns;
      s.bubble_ns += x.bubble_ns;
      s.harvested_ns += x.harvested_ns;
      s.overrun_ns += x.overrun_ns;
      s.work_ns += x.work_ns;
      s.bubbles += x.bubbles;
      s.steps += x.steps;
    }
    for (size_t i = 0; i < tasks; ++i) {
      sum.tasks[i].steps += part.tasks[i].steps;
      sum.tasks[i].work_ns += part.tasks[i].work_ns;
    }
  }
  return sum;
}

int ThreadCount(const SimConfig& config) {
  if (config.threads > 0) return config.threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

SimResult Simulate(const SimConfig& config, const SimProgress& progress) {
  ValidateSimConfig(config);
  auto started = std::chrono::steady_clock::now();
  const int threads = ThreadCount(config);
  const int stages = config.stages;
  const int64_t gpus = config.Gpus();

  ClusterRun baseline_run(config, /*with_tasks=*/false, threads);
  Totals baseline = Merge(baseline_run.Execute(progress, "baseline"), stages, config.tasks.size());
  ClusterRun harvest_run(config, /*with_tasks=*/true, threads);
  Totals harvest = Merge(harvest_run.Execute(progress, "with side tasks"), stages, config.tasks.size());

  SimResult result;
  result.config = config;
  result.threads = static_cast<int>(std::min<int64_t>(threads, config.data_parallel));
  result.wall_s_baseline = baseline_run.wall_ns() * kSecondsPerNs;
  result.wall_s = harvest_run.wall_ns() * kSecondsPerNs;
  result.iteration_ms_baseline = result.wall_s_baseline * 1e3 / config.iterations;
  result.iteration_ms = result.wall_s * 1e3 / config.iterations;
  if (config.schedule == ScheduleKind::kGPipe || config.schedule == ScheduleKind::k1F1B)
    result.closed_form_bubble_fraction = ClosedFormBubbleFraction(stages, config.microbatches);

  double busy = 0;
  for (int r = 0; r < stages; ++r) {
    const StageSums& h = harvest.stages[r];
    StageResult s;
    s.stage = r;
    s.gpus = config.data_parallel;
    s.bubble_gpu_s = h.bubble_ns * kSecondsPerNs;
    s.harvested_gpu_s = h.harvested_ns * kSecondsPerNs;
    s.overrun_gpu_s = h.overrun_ns * kSecondsPerNs;
    s.work_gpu_s = h.work_ns * kSecondsPerNs;
    s.bubbles = h.bubbles;
    s.steps = h.steps;
    s.busy_gpu_s = baseline.stages[r].busy_ns * kSecondsPerNs;
    s.idle_gpu_s = s.gpus * result.wall_s_baseline - s.busy_gpu_s;
    busy += s.busy_gpu_s;
    result.bubble_gpu_s += s.bubble_gpu_s;
    result.harvested_gpu_s += s.harvested_gpu_s;
    result.overrun_gpu_s += s.overrun_gpu_s;
    result.work_gpu_s += s.work_gpu_s;
    result.stages.push_back(s);
  }
  const double gpu_time_baseline = gpus * result.wall_s_baseline;
  result.bubble_fraction = gpu_time_baseline > 0 ? 1 - busy / gpu_time_baseline : 0;
  result.harvest_ratio = result.bubble_gpu_s > 0 ? result.harvested_gpu_s / result.bubble_gpu_s : 0;
  result.harvested_fraction = result.harvested_gpu_s / (gpus * result.wall_s);
  result.overhead_pct = (result.wall_s / result.wall_s_baseline - 1) * 100;
  result.extra_gpu_equivalents = result.work_gpu_s / result.wall_s;
  double slowdown_gpu_s = gpus * (result.wall_s - result.wall_s_baseline);
  result.cost_saving_pct = (result.work_gpu_s - slowdown_gpu_s) / gpu_time_baseline * 100;
  if (config.gpu_hour_price > 0)
    result.money_saved_per_hour = (result.work_gpu_s - slowdown_gpu_s) / result.wall_s *
                                  config.gpu_hour_price;

  for (size_t i = 0; i < config.tasks.size(); ++i) {
    TaskResult t;
    t.steps = harvest.tasks[i].steps;
    t.work_gpu_s = harvest.tasks[i].work_ns * kSecondsPerNs;
    t.name = config.tasks[i].name;
    t.unit = config.tasks[i].unit;
    t.units = t.work_gpu_s * config.tasks[i].rate_per_s;
    if (config.placement == TaskPlacement::kAll) {
      t.gpus = gpus;
    } else {
      int64_t n = static_cast<int64_t>(config.tasks.size());
      t.gpus = gpus / n + (static_cast<int64_t>(i) < gpus % n ? 1 : 0);
    }
    result.tasks.push_back(t);
  }
  result.simulated_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace freeride::sim
