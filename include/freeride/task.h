// FreeRide C++ side-task SDK.
//
// Iterative tasks implement Step(); FreeRide calls it while a bubble lasts
// and the next step fits.  Imperative tasks write their own loop; the daemon
// stops the process when a bubble ends and continues it at the next one.
//
//   class MyTask : public freeride::IterativeTask {
//     freeride::StepResult Step() override { ...; return {.units = 1000}; }
//   };
//   int main(int argc, char** argv) {
//     MyTask task;
//     return freeride::RunIterativeTask(task, freeride::ParseRunOptions(&argc, argv));
//   }
#pragma once
#include <cstdint>
#include <string>

namespace freeride {

struct StepResult {
  double units = 0;   // work done in this step, in unit()
  bool done = false;  // true when the task has no more work
  // How many parts of the task's grain the step did: a task that sizes its
  // steps to StepBudgetNs() returns the number it planned, so that FreeRide
  // learns the length of one part (what must fit for a bubble to be worth
  // granting), not of a step as long as the last bubble allowed.
  int parts = 1;
  // True when the step did no work: the task found nothing to do now (a
  // server whose next request has not come), or, with done, nothing is left.
  // The step is not recorded, the bubble is handed back at once, and the
  // task is granted again at a later bubble.  Run alone, the runner waits a
  // millisecond before asking again.
  bool idle = false;
};

// While Step() runs under a daemon: the longest the step may take and still
// fit the rest of its grant (the bubble's forecast end, with the safety
// margin and the overhead guard's factor), 0 when the grant is over.  A task
// whose work divides into short parts can plan as many as fit, instead of
// returning after each, and so wait for the device once per step instead of
// once per part.  INT64_MAX when the task runs alone, and 0 outside Step(),
// so cap the plan (the built-in tasks plan at most four default pieces: a
// launched part cannot stop if the bubble ends early).  Call it from the
// thread that runs Step().
int64_t StepBudgetNs();

class IterativeTask {
 public:
  virtual ~IterativeTask() = default;
  // The unit progress is counted in, e.g. "edges", "ratings", "images".
  virtual std::string unit() const { return "steps"; }
  // Allocates and loads; runs once, before the first bubble.
  virtual void Init() {}
  // One chunk of work, short enough to fit a bubble.
  virtual StepResult Step() = 0;
  // Called when the task loses its bubble / before it gets the next one.
  virtual void Pause() {}
  virtual void Resume() {}
  // Called once after the last step.
  virtual void Finish() {}
  // Optional checkpointing.  Save writes the state to `path` and returns
  // true; Restore loads it (called after Init when a checkpoint exists).
  // Under a daemon Save is called between bubbles, every 5 s
  // (FREERIDE_CHECKPOINT_INTERVAL_MS), or 50 times its own last length where
  // that is longer, up to 10 minutes: the task takes no bubble while it saves.
  virtual bool Save(const std::string& path) { return false; }
  virtual bool Restore(const std::string& path) { return false; }
  // Peak accelerator memory the task has used, if it tracks it (0: unknown).
  // Reported by standalone runs, which `freeride task-profile` records.
  virtual uint64_t peak_memory_bytes() const { return 0; }
};

class ImperativeContext {
 public:
  virtual ~ImperativeContext() = default;
  // Adds `units` of work to the task's progress.
  virtual void ReportProgress(double units) = 0;
  // True when running under a FreeRide daemon (false when run alone).
  virtual bool under_daemon() const = 0;
  // A directory that survives restarts, for the task's own checkpoints.
  virtual std::string checkpoint_dir() const = 0;
};

class ImperativeTask {
 public:
  virtual ~ImperativeTask() = default;
  virtual std::string unit() const { return "units"; }
  // The task's whole loop; returns the process exit status.
  virtual int Run(ImperativeContext& context) = 0;
};

struct RunOptions {
  // Run alone, not under a daemon, even if launched by one.
  bool standalone = false;
  // With standalone: stop after this many seconds (0: run to completion).
  double seconds = 0;
};

// Removes --standalone and --seconds T from argv and returns them.
RunOptions ParseRunOptions(int* argc, char** argv);

// Runs an iterative task.  Under a daemon: Init (and Restore), then steps
// inside grants, checkpointing periodically.  Alone: steps back to back and
// prints the alone throughput, step-time quantiles and peak memory as a JSON
// line on stdout.  Also alone when FREERIDE_STANDALONE_SECONDS is set and no
// daemon launched the task (how `freeride task-profile` asks, leaving the
// command's arguments to its own parser), for that many seconds unless
// `options` give them; a value that is not a decimal number of seconds above
// 0 exits 2.  Returns the process exit status.
int RunIterativeTask(IterativeTask& task, const RunOptions& options = {});

// Runs an imperative task.
int RunImperativeTask(ImperativeTask& task);

}  // namespace freeride
