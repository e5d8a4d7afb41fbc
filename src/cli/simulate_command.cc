// `freeride simulate`: what FreeRide would harvest on a pipeline-parallel job
// of any size, by discrete-event simulation with the runtime's own policy.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>

#include "base/units.h"
#include "cli/commands.h"
#include "client/task_profile.h"
#include "sim/cluster_sim.h"
#include "sim/sim_report.h"
#include "sim/stage_times_file.h"

namespace freeride::cli {
namespace {

constexpr int kUnset = std::numeric_limits<int>::min();  // not given

struct SimulateArgs {
  std::string schedule = "1f1b";
  int stages = 4;
  int virtual_stages = 0;
  int microbatches = kUnset;
  int64_t gpus = kUnset;
  int64_t global_batch = 0;
  int microbatch_size = 1;
  int iterations = 100;
  int layers = 0;
  std::string times = "5.7,11.4";
  std::string stage_times_file;
  double backward_ratio = 2;
  int profile_microbatches = kUnset;
  double p2p = 0, allreduce = 0, optimizer = 0;
  double jitter = 0, straggler_prob = 0, straggler_slowdown = 1.5;
  std::vector<std::string> tasks;
  std::string placement = "round-robin";
  std::optional<double> free_memory_gib;  // none: no limit; 0 given is none free
  double dispatch_latency = 0.2, overrun_cost = 1.0, step_slowdown = 1.0;
  uint64_t seed = 1;
  int threads = 0;
  double price = 0;
  bool sweep = false;
  std::vector<int64_t> sweep_gpus = {1024, 2048, 4096, 8192};
  bool json = false, quiet = false;
  std::string config_file;
};

// Fills the options not given on the command line from a TOML file whose
// keys are the flags' names.  Sets *error for an unreadable file or an
// unknown key.
bool ApplyConfigFile(CLI::App* cmd, const std::string& path, std::string* error) {
  std::error_code ec;
  const auto type = std::filesystem::status(path, ec).type();
  if (type == std::filesystem::file_type::directory || type == std::filesystem::file_type::character) {
    // A directory opens and reads as empty, and /dev/zero as one endless key: neither is a config
    // (a pipe, as from <(...), still is).
    *error = fmt::format("--config {}: not a file (give a TOML file of the flags' names)", path);
    return false;
  }
  std::ifstream in(path);
  if (!in) {
    *error = fmt::format("--config {}: cannot open it", path);
    return false;
  }
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_config(in);
  } catch (const CLI::Error& e) {
    *error = fmt::format("--config {}: {}", path, e.what());
    return false;
  }
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    CLI::Option* option = cmd->get_option_no_throw("--" + item.name);
    if (option == nullptr || item.name == "config") {
      *error = fmt::format("--config {}: unknown option '{}'", path, item.name);
      return false;
    }
    if (option->count() > 0) continue;  // the command line wins
    try {
      option->add_result(item.inputs);
      option->run_callback();
    } catch (const CLI::Error& e) {
      *error = fmt::format("--config {}: {}: {}", path, item.name, e.what());
      return false;
    }
  }
  return true;
}

constexpr int kDefaultSweepMicrobatches = 32;

// A built-in task name, "none", or a `freeride task-profile` file.
bool ResolveTasks(const std::vector<std::string>& names, std::vector<sim::SimTask>* tasks,
                  std::string* error) {
  std::vector<sim::SimTask> builtin = sim::DefaultTaskMix();
  if (names.empty()) {
    *tasks = builtin;
    return true;
  }
  for (const std::string& name : names) {
    if (name == "none") continue;
    auto known = std::find_if(builtin.begin(), builtin.end(),
                              [&](const sim::SimTask& t) { return t.name == name; });
    if (known != builtin.end()) {
      tasks->push_back(*known);
      continue;
    }
    if (!std::filesystem::exists(name)) {
      *error = fmt::format(
          "--task {}: neither a built-in task (pagerank, sgd, image, none) nor a file written "
          "by `freeride task-profile`",
          name);
      return false;
    }
    auto profile = ReadTaskProfile(name, error);
    if (!profile) return false;
    sim::SimTask t;
    t.name = std::filesystem::path(name).stem().string();
    t.unit = profile->unit.empty() ? "units" : profile->unit;
    t.rate_per_s = profile->rate_per_s;
    t.step_ms_p50 = profile->step_ms_p50;
    t.step_ms_p90 = std::max(profile->step_ms_p90, t.step_ms_p50);
    t.step_ms_p99 = std::max(profile->step_ms_p99, t.step_ms_p90);
    t.step_ms_max = std::max(profile->step_ms_max, t.step_ms_p99);
    t.memory_bytes = ProfiledMemoryBytes(*profile);
    tasks->push_back(t);
  }
  return true;
}

// Builds the base configuration (one run, or the sweep's template) from the
// flags; sets *error for anything the flags themselves get wrong.
bool BuildConfig(const SimulateArgs& a, sim::SimConfig* c, std::string* error) {
  auto kind = ParseScheduleKind(a.schedule, error);
  if (!kind) return false;
  c->schedule = *kind;
  c->stages = a.stages;
  c->virtual_stages = a.virtual_stages;
  c->iterations = a.iterations;
  c->layers = a.layers;
  if (a.stages < 1) {
    *error = fmt::format("--stages must be at least 1, not {}", a.stages);
    return false;
  }
  if (a.microbatches != kUnset && a.microbatches < 1) {
    *error = fmt::format("--microbatches must be at least 1, not {}", a.microbatches);
    return false;
  }
  if (a.gpus != kUnset && a.gpus < 1) {
    *error = fmt::format("--gpus must be at least 1, not {}", a.gpus);
    return false;
  }
  if (!a.stage_times_file.empty()) {
    if (a.profile_microbatches != kUnset && a.profile_microbatches < 1) {
      *error = fmt::format("--profile-microbatches must be at least 1, not {}", a.profile_microbatches);
      return false;
    }
    // A profile's busy time is split over the micro-batches of the run it was
    // taken from, which need not be the ones simulated.
    int m = a.microbatches != kUnset ? a.microbatches : a.stages;
    int profiled = a.profile_microbatches != kUnset ? a.profile_microbatches : m;
    auto file = sim::ReadStageTimesFile(a.stage_times_file, profiled, a.backward_ratio, error);
    if (!file) return false;
    if (file->source != "profile" && a.profile_microbatches != kUnset) {
      *error = fmt::format("--profile-microbatches is for a profile (`freeride profile --json`); {} "
                           "gives each stage's times itself",
                           a.stage_times_file);
      return false;
    }
    if (file->source == "profile" && a.profile_microbatches == kUnset && (a.sweep || a.global_batch > 0)) {
      *error = fmt::format(
          "with a profile as --stage-times and {} the simulated micro-batches are not --microbatches: "
          "give --profile-microbatches, the micro-batches of the run the profile was taken from",
          a.sweep ? "--sweep" : "--global-batch");
      return false;
    }
    if (file->source == "profile" && a.profile_microbatches == kUnset && !a.quiet)
      fmt::print(stderr,
                 "simulate: the profile is taken to have run {} micro-batches, as simulated; give "
                 "--profile-microbatches if it ran another count\n",
                 m);
    if (file->ranks != c->ModelStages()) {
      *error = fmt::format("{} describes {} stages but the simulation has {} (--stages {}{})",
                           a.stage_times_file, file->ranks, c->ModelStages(), a.stages,
                           c->VirtualStages() > 1 ? fmt::format(" x {} virtual", c->VirtualStages()) : "");
      return false;
    }
    c->stage_times = file->stages;
    if (file->p2p_ms >= 0) c->p2p_ms = file->p2p_ms;
    if (!a.quiet) fmt::print(stderr, "simulate: {}\n", file->note);
  } else {
    if (a.profile_microbatches != kUnset) {
      *error = "--profile-microbatches needs --stage-times with a profile";
      return false;
    }
    StageTimes t;
    if (!ParseStageTimes(a.times, &t, error)) return false;
    c->stage_times = {t};
  }
  if (a.p2p > 0 || a.stage_times_file.empty()) c->p2p_ms = a.p2p;
  c->allreduce_ms = a.allreduce;
  c->optimizer_ms = a.optimizer;
  c->jitter_cv = a.jitter;
  c->straggler_prob = a.straggler_prob;
  c->straggler_slowdown = a.straggler_slowdown;
  c->dispatch_latency_ms = a.dispatch_latency;
  c->overrun_cost = a.overrun_cost;
  c->step_slowdown = a.step_slowdown;
  if (!(a.price >= 0) || !std::isfinite(a.price)) {
    *error = fmt::format("--price {}: give a GPU-hour's price of 0 or more", a.price);
    return false;
  }
  // More than any GPU holds is a typo, not a trainer's figure (and 1e30 GiB
  // would not fit the byte count); NaN compares false with every bound.
  constexpr double kMostFreeMemoryGib = 1024;
  if (a.free_memory_gib) {
    if (!(*a.free_memory_gib >= 0 && *a.free_memory_gib <= kMostFreeMemoryGib)) {
      *error = fmt::format("--free-memory-gib {}: give the GiB of GPU memory the trainer leaves free, "
                           "from 0 to {} (leave it out for no limit)",
                           *a.free_memory_gib, kMostFreeMemoryGib);
      return false;
    }
    c->free_memory_bytes = static_cast<uint64_t>(*a.free_memory_gib * double(1ull << 30));
  }
  if (a.placement == "round-robin") {
    c->placement = sim::TaskPlacement::kRoundRobin;
  } else if (a.placement == "all") {
    c->placement = sim::TaskPlacement::kAll;
  } else {
    *error = fmt::format("--placement {}: use round-robin or all", a.placement);
    return false;
  }
  if (!ResolveTasks(a.tasks, &c->tasks, error)) return false;
  c->seed = a.seed;
  c->threads = a.threads;
  c->gpu_hour_price = a.price;
  if (a.microbatch_size < 1) {
    *error = fmt::format("--microbatch-size must be at least 1, not {}", a.microbatch_size);
    return false;
  }
  if (a.global_batch < 0 || (a.global_batch > 0 && a.global_batch % a.microbatch_size != 0)) {
    *error = fmt::format("--global-batch {} is not a positive multiple of --microbatch-size {}",
                         a.global_batch, a.microbatch_size);
    return false;
  }
  return true;
}

// Data parallelism and micro-batches for a single run.
bool ShapeSingleRun(const SimulateArgs& a, sim::SimConfig* c, std::string* error) {
  int64_t gpus = a.gpus != kUnset ? a.gpus : a.stages;
  if (gpus % a.stages != 0) {
    *error = fmt::format("--gpus {} is not a multiple of --stages {}: every pipeline needs {} GPUs",
                         gpus, a.stages, a.stages);
    return false;
  }
  int64_t replicas = gpus / a.stages;
  // A guard against typos, not a memory bound: a pipeline's state grows with its stages and
  // actions (about 24 KB for 8 stages, bench/results/sim_scale.md), and it is allocated in the
  // simulator's worker threads, where running out of memory ends the process.
  if (replicas > 100'000) {
    *error = fmt::format("{} pipelines is more than this simulator is built for (100,000)", replicas);
    return false;
  }
  c->data_parallel = static_cast<int>(replicas);
  if (a.global_batch > 0) {
    int64_t microbatches = a.global_batch / a.microbatch_size;
    if (microbatches % replicas != 0) {
      *error = fmt::format(
          "a global batch of {} micro-batches ({} samples of {}) does not split over {} pipelines",
          microbatches, a.global_batch, a.microbatch_size, replicas);
      return false;
    }
    if (a.microbatches != kUnset && a.microbatches != microbatches / replicas) {
      *error = fmt::format("--microbatches {} contradicts --global-batch, which gives {} per pipeline",
                           a.microbatches, microbatches / replicas);
      return false;
    }
    c->microbatches = static_cast<int>(microbatches / replicas);
  } else {
    c->microbatches = a.microbatches != kUnset ? a.microbatches : a.stages;
  }
  return true;
}

// Progress on stderr for runs longer than a second, at most once a second.
sim::SimProgress ProgressPrinter(bool quiet, const std::string& prefix) {
  if (quiet) return {};
  auto started = std::chrono::steady_clock::now();
  auto last = std::make_shared<std::chrono::steady_clock::time_point>(started);
  return [=](const char* run, int done, int total) {
    auto now = std::chrono::steady_clock::now();
    if (now - *last < std::chrono::seconds(1)) return;
    *last = now;
    fmt::print(stderr, "simulate: {}{}: iteration {} of {}\n", prefix, run, done, total);
  };
}

int RunSimulate(const SimulateArgs& a) {
  std::string error;
  sim::SimConfig base;
  auto fail = [&](const std::string& why) {
    fmt::print(stderr, "freeride simulate: {}\n", why);
    return 2;
  };
  if (!BuildConfig(a, &base, &error)) return fail(error);
  try {
    if (!a.sweep) {
      if (!ShapeSingleRun(a, &base, &error)) return fail(error);
      sim::SimResult result = sim::Simulate(base, ProgressPrinter(a.quiet, ""));
      if (a.json)
        fmt::print("{}\n", sim::SimResultToJson(result).dump(2));
      else
        fmt::print("{}", sim::FormatSimResult(result));
      return 0;
    }
    if (a.gpus != kUnset) return fail("--sweep takes its GPU counts from --sweep-gpus, not --gpus");
    std::vector<int64_t> scales = a.sweep_gpus;
    std::sort(scales.begin(), scales.end());
    if (scales.empty()) return fail("--sweep-gpus is empty");
    int64_t global = a.global_batch / a.microbatch_size;
    if (global == 0) {
      int per_pipeline = a.microbatches != kUnset ? a.microbatches : kDefaultSweepMicrobatches;
      global = static_cast<int64_t>(per_pipeline) * std::max<int64_t>(1, scales.front() / a.stages);
    }
    std::vector<sim::SimConfig> configs = sim::ScaleOutConfigs(base, scales, global);
    std::vector<sim::SimResult> rows;
    for (size_t i = 0; i < configs.size(); ++i) {
      if (!a.quiet)
        fmt::print(stderr, "simulate: scale {} of {}: {}, {} per pipeline\n", i + 1, configs.size(),
                   Counted(configs[i].Gpus(), "GPU", "GPUs"),
                   Counted(configs[i].microbatches, "micro-batch", "micro-batches"));
      rows.push_back(sim::Simulate(
          configs[i], ProgressPrinter(a.quiet, Counted(configs[i].Gpus(), "GPU", "GPUs") + ", ")));
    }
    if (a.json)
      fmt::print("{}\n", sim::SweepToJson(rows).dump(2));
    else
      fmt::print("{}", sim::FormatSweep(rows));
  } catch (const std::invalid_argument& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("the simulation does not fit in this machine's memory: give fewer stages, micro-batches "
                "or GPUs");
  } catch (const std::logic_error& e) {  // the schedule's own check (a deadlock): a bug, said as one
    return fail(fmt::format("internal error: {}", e.what()));
  }
  return 0;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate FreeRide on a pipeline-parallel job of any size: bubbles, harvest, overhead, "
      "cost saving.");
  cmd->add_option("--config", a->config_file,
                  "Read options from a TOML file (key = value, keys as the flags without --); "
                  "flags on the command line win");
  cmd->add_option("--schedule", a->schedule, "gpipe, 1f1b, interleaved, loopedbfs, interleavedzb, zbv or dualpipev")->capture_default_str();
  cmd->add_option("--stages", a->stages, "Pipeline ranks P (GPUs per pipeline)")->capture_default_str();
  cmd->add_option("--virtual", a->virtual_stages, "Stages per rank V (default 1; 2 for interleaved and zbv)");
  cmd->add_option("--microbatches", a->microbatches,
                  "Micro-batches per pipeline and iteration (default: P; with --sweep, the count "
                  "at the smallest scale, default 32)");
  cmd->add_option("--gpus", a->gpus, "Total GPUs; data parallelism fills what one pipeline does not (default: P)");
  cmd->add_option("--global-batch", a->global_batch,
                  "Samples per iteration over all pipelines; sets the micro-batches per pipeline");
  cmd->add_option("--microbatch-size", a->microbatch_size, "Samples per micro-batch")->capture_default_str();
  cmd->add_option("--iterations", a->iterations, "Training iterations")->capture_default_str();
  cmd->add_option("--layers", a->layers, "Model layers (checked against the stages)");
  cmd->add_option("--times", a->times,
                  "Milliseconds of one action on one stage: F,B or F,B,W (default: a 1.3B GPT stage on H200)")
      ->capture_default_str();
  cmd->add_option("--stage-times", a->stage_times_file,
                  "Per-stage times from a JSON file: {\"stages\": [{\"forward_ms\", \"backward_ms\"}]} "
                  "or `freeride profile --json` output");
  cmd->add_option("--backward-ratio", a->backward_ratio,
                  "Backward / forward time when times come from a profile")->capture_default_str();
  cmd->add_option("--profile-microbatches", a->profile_microbatches,
                  "Micro-batches of the run a --stage-times profile was taken from (default: the "
                  "simulated --microbatches)");
  cmd->add_option("--p2p", a->p2p, "Milliseconds added to each send between ranks")->capture_default_str();
  cmd->add_option("--allreduce-ms", a->allreduce, "Gradient all-reduce per iteration")->capture_default_str();
  cmd->add_option("--optimizer-ms", a->optimizer, "Optimizer step per iteration")->capture_default_str();
  cmd->add_option("--jitter", a->jitter, "Coefficient of variation of every action's time (log-normal)")
      ->capture_default_str();
  cmd->add_option("--straggler-prob", a->straggler_prob,
                  "Chance that a GPU straggles in an iteration")->capture_default_str();
  cmd->add_option("--straggler-slowdown", a->straggler_slowdown,
                  "How much slower a straggler's actions are")->capture_default_str();
  cmd->add_option("--task", a->tasks,
                  "A side task: pagerank, sgd, image (H200 profiles), a `freeride task-profile` "
                  "file, or none; repeat for a mix (default: pagerank, sgd, image)");
  cmd->add_option("--placement", a->placement,
                  "round-robin: one task per GPU; all: every GPU queues every task")->capture_default_str();
  cmd->add_option("--free-memory-gib", a->free_memory_gib,
                  "GPU memory the trainer leaves free (default: no limit)");
  cmd->add_option("--dispatch-latency-ms", a->dispatch_latency,
                  "Bubble begin to first side-task step (measured p50 on H200)")->capture_default_str();
  cmd->add_option("--step-slowdown", a->step_slowdown,
                  "How much slower side-task steps run in bubbles than alone")->capture_default_str();
  cmd->add_option("--overrun-cost", a->overrun_cost,
                  "Share of an overrun that delays the trainer (1: all of it)")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Random seed")->capture_default_str();
  cmd->add_option("--threads", a->threads, "Simulation threads (default: all; results do not change)");
  cmd->add_option("--price", a->price, "Price of a GPU-hour, for the money saved");
  cmd->add_flag("--sweep", a->sweep, "Scale out at a fixed global batch: a row per GPU count");
  cmd->add_option("--sweep-gpus", a->sweep_gpus, "GPU counts of the sweep")->capture_default_str()->delimiter(',');
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->add_flag("--quiet", a->quiet, "No progress lines on stderr");
  cmd->callback([a, cmd, exit_code] {
    std::string error;
    if (!a->config_file.empty() && !ApplyConfigFile(cmd, a->config_file, &error)) {
      fmt::print(stderr, "freeride simulate: {}\n", error);
      *exit_code = 2;
      return;
    }
    *exit_code = RunSimulate(*a);
  });
}

}  // namespace freeride::cli
