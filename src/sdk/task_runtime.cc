#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <vector>

#include "base/clock.h"
#include "base/files.h"
#include "channel/step_accounting.h"
#include "freeride/task.h"
#include "policy/quantile.h"
#include "sdk/checkpoint_progress.h"
#include "sdk/checkpoint_schedule.h"
#include "sdk/task_channel.h"
#include "sdk/task_loop.h"

namespace freeride {
namespace {

constexpr Nanos kDefaultCheckpointInterval = 5 * kSecond;

// What StepBudgetNs() answers on this thread: the channel whose grant the
// running Step() serves, or that the task runs alone.
thread_local const TaskChannel* stepping_channel = nullptr;
thread_local bool stepping_alone = false;

// Marks the thread as running Step() for its lifetime.
class SteppingScope {
 public:
  SteppingScope(const TaskChannel* channel, bool alone) {
    stepping_channel = channel;
    stepping_alone = alone;
  }
  ~SteppingScope() {
    stepping_channel = nullptr;
    stepping_alone = false;
  }
  SteppingScope(const SteppingScope&) = delete;
  SteppingScope& operator=(const SteppingScope&) = delete;
};

Nanos CheckpointInterval() {
  if (const char* env = std::getenv("FREERIDE_CHECKPOINT_INTERVAL_MS"))
    return std::atoll(env) * kMillisecond;
  return kDefaultCheckpointInterval;
}

std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint"; }

// Saves with the work done so far (the channel's counters are the task's
// totals), so that a resumed task restarts from the checkpoint's figures.
bool SaveCheckpoint(IterativeTask& task, TaskChannel& channel) {
  const std::string& dir = channel.checkpoint_dir();
  if (dir.empty()) return false;
  CheckpointProgress done{channel.segment().progress(),
                          channel.segment().layout()->steps_done.load(std::memory_order_relaxed)};
  return SaveCheckpointWithProgress(CheckpointPath(dir),
                                    [&](const std::string& tmp) { return task.Save(tmp); }, done);
}

// A step's units are summed into the task's progress and valued at its alone
// rate: a negative or not-a-number count (a NaN loss returned as units) would
// make every figure built on them wrong, so it counts as 0 units, by the
// daemon's own rule (PlausibleUnits), and the task's stderr says so once.
double CountedUnits(const StepResult& r, bool* warned) {
  if (PlausibleUnits(r.units)) return r.units;
  if (!*warned) {
    *warned = true;
    std::fprintf(stderr,
                 "freeride: a step returned %g units of work (below 0 or not a number): counted as "
                 "0; return a finite number, 0 or more\n",
                 r.units);
  }
  return 0;
}

int RunAlone(IterativeTask& task, const RunOptions& options) {
  task.Init();
  Nanos start = MonotonicNow();
  Nanos stop = options.seconds > 0 ? start + static_cast<Nanos>(options.seconds * kSecond) : -1;
  double units = 0;
  uint64_t steps = 0;
  bool done = false;
  std::vector<Nanos> step_ns;
  bool warned_units = false;
  while (!done && (stop < 0 || MonotonicNow() < stop)) {
    Nanos t0 = MonotonicNow();
    StepResult r;
    {
      SteppingScope scope(nullptr, /*alone=*/true);
      r = task.Step();
    }
    done = r.done;
    if (r.idle) {
      // No bubble to hand back alone: wait a little instead of spinning.
      if (!done) usleep(1000);
      continue;
    }
    step_ns.push_back(MonotonicNow() - t0);
    units += CountedUnits(r, &warned_units);
    ++steps;
  }
  task.Finish();
  double seconds = static_cast<double>(MonotonicNow() - start) / kSecond;
  double rate = seconds > 0 ? units / seconds : 0;
  std::sort(step_ns.begin(), step_ns.end());
  auto quantile_ms = [&](double q) {
    if (step_ns.empty()) return 0.0;
    return static_cast<double>(step_ns[NearestRankIndex(step_ns.size(), q)]) / kMillisecond;
  };
  // One JSON line that `freeride task-profile` reads; the unit is the
  // task's own text, so it goes through a JSON writer.
  nlohmann::json summary = {
      {"mode", "standalone"},           {"unit", task.unit()},
      {"steps", steps},                 {"units", units},
      {"seconds", seconds},             {"rate_per_s", rate},
      {"finished", done},               {"step_ms_p50", quantile_ms(0.5)},
      {"step_ms_p90", quantile_ms(0.9)}, {"step_ms_p99", quantile_ms(0.99)},
      {"step_ms_max", quantile_ms(1.0)}, {"peak_memory_bytes", task.peak_memory_bytes()}};
  std::puts(summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  std::fflush(stdout);
  return 0;
}

class ImperativeContextImpl final : public ImperativeContext {
 public:
  explicit ImperativeContextImpl(TaskChannel* channel) : channel_(channel) {}
  void ReportProgress(double units) override {
    if (channel_) channel_->AddProgress(units);
  }
  bool under_daemon() const override { return channel_ != nullptr; }
  std::string checkpoint_dir() const override {
    return channel_ ? channel_->checkpoint_dir() : std::string(".");
  }

 private:
  TaskChannel* channel_;
};

}  // namespace

int64_t StepBudgetNs() {
  if (stepping_channel) return stepping_channel->StepBudget();
  return stepping_alone ? INT64_MAX : 0;
}

int RunUnderDaemon(IterativeTask& task, TaskChannel& channel) {
  Env* env = channel.env();
  channel.SetUnit(task.unit());
  task.Init();
  const std::string& dir = channel.checkpoint_dir();
  // The counters start from the work the task resumes from: the
  // checkpoint's, or none.  A checkpoint without recorded figures (saved by
  // an older SDK) leaves them to the daemon, which adds earlier attempts'.
  std::optional<CheckpointProgress> resumed = CheckpointProgress{};
  if (!dir.empty() && std::filesystem::exists(CheckpointPath(dir))) {
    if (task.Restore(CheckpointPath(dir))) {
      resumed = ReadCheckpointProgress(CheckpointPath(dir));
      std::fprintf(stderr, "freeride: resumed from checkpoint %s (%s)\n",
                   CheckpointPath(dir).c_str(),
                   resumed ? fmt::format("{:g} {} done", resumed->progress, task.unit()).c_str()
                           : "its progress was not recorded");
    }
  }
  if (resumed) channel.ResumeCounters(resumed->progress, resumed->steps);
  channel.Ready();
  CheckpointSchedule checkpoints(CheckpointInterval(), env->Now());
  bool warned_units = false;
  bool done = false;
  while (!done) {
    TaskChannel::Wake wake = channel.WaitForGrant(kSecond);
    if (wake == TaskChannel::Wake::kStop) {
      SaveCheckpoint(task, channel);
      return 0;
    }
    if (wake == TaskChannel::Wake::kCheckpoint) {  // asked for by the daemon
      const Nanos now = env->Now();
      SaveCheckpoint(task, channel);
      checkpoints.Attempted(now, env->Now());
      continue;
    }
    if (wake != TaskChannel::Wake::kGranted) continue;
    task.Resume();
    bool idle = false;
    for (;;) {
      // Timed before the check: a step that passed it started while its
      // bubble was open, even if the bubble ends before Step() is entered.
      Nanos start = env->Now();
      if (!channel.NextStepFits()) {
        // The first forecast may be the short kind of a slot that has long
        // bubbles too; a second look may find this one long.
        if (!channel.TakeSecondLook()) break;
        start = env->Now();
        if (!channel.NextStepFits()) break;
      }
      StepResult r;
      {
        SteppingScope scope(&channel, /*alone=*/false);
        r = task.Step();
      }
      // An idle step did no work: nothing to record, and the rest of the
      // bubble is handed back for the other tasks.  The daemon counts bad
      // units as 0 itself (a task need not use this SDK); said here too.
      if (!r.idle) channel.RecordStep(start, env->Now(), r.units, r.parts);
      if (!r.idle) CountedUnits(r, &warned_units);
      if (r.idle && !r.done) {
        idle = true;
        break;
      }
      if (r.done) {
        done = true;
        break;
      }
    }
    task.Pause();
    if (done) break;
    channel.Yield(idle);
    // Saved after handing the bubble back, never inside it.
    if (const Nanos now = env->Now(); checkpoints.Due(now)) {
      SaveCheckpoint(task, channel);
      checkpoints.Attempted(now, env->Now());
    }
  }
  task.Finish();
  if (!dir.empty()) {
    std::remove(CheckpointPath(dir).c_str());
    std::remove((CheckpointPath(dir) + ".progress").c_str());
  }
  channel.Finished(true);
  return 0;
}

RunOptions ParseRunOptions(int* argc, char** argv) {
  RunOptions options;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], "--standalone") == 0) {
      options.standalone = true;
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < *argc) {
      options.seconds = std::atof(argv[++i]);
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return options;
}

int RunIterativeTask(IterativeTask& task, const RunOptions& given) {
  RunOptions options = given;
  // `freeride task-profile` asks through the environment (kEnvStandaloneSeconds);
  // the command line's --standalone --seconds, where given, win.  Never under a
  // daemon (which drops the variable from what it launches in any case): the
  // task would run outside the bubbles.
  const char* value = std::getenv(kEnvStandaloneSeconds);
  const char* segment = std::getenv(kEnvTaskSegment);
  if (value && *value && !(segment && *segment)) {
    const std::optional<double> seconds = ParseStandaloneSeconds(value);
    if (!seconds) {
      std::fprintf(stderr, "freeride: %s=%s is not a number of seconds above 0\n", kEnvStandaloneSeconds, value);
      return 2;
    }
    options.standalone = true;
    if (given.seconds <= 0) options.seconds = *seconds;
  }
  try {
    std::string reason;
    std::unique_ptr<TaskChannel> channel;
    if (!options.standalone) channel = TaskChannel::AttachFromEnvironment(&reason);
    if (!channel) {
      if (!options.standalone)
        std::fprintf(stderr, "freeride: %s; running alone\n", reason.c_str());
      return RunAlone(task, options);
    }
    return RunUnderDaemon(task, *channel);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "freeride: task failed: %s\n", e.what());
    return 1;
  }
}

int RunImperativeTask(ImperativeTask& task) {
  std::string reason;
  auto channel = TaskChannel::AttachFromEnvironment(&reason);
  if (channel) {
    channel->SetUnit(task.unit());
    channel->Ready();
  }
  ImperativeContextImpl context(channel.get());
  try {
    int status = task.Run(context);
    if (channel) channel->Finished(status == 0);
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "freeride: task failed: %s\n", e.what());
    if (channel) channel->Finished(false);
    return 1;
  }
}

}  // namespace freeride
