// The daemon's Lane serving scripted bubbles on virtual time
// (FakeEnv::RunVirtualTime): its side tasks are threads that run the SDK's
// own loop (RunUnderDaemon) on a TaskChannel, with steps that take fake
// time, and the stage is a thread that writes the marks.  Seconds of
// serving run in milliseconds, and no other process competes for the CPU,
// so tests of how bubbles are shared need no quiet machine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "daemon/daemon_options.h"
#include "report/event_log_reader.h"

namespace freeride::testing {

struct VirtualTask {
  int priority = 0;
  std::vector<Nanos> steps;  // step lengths, used in turn
  Nanos prior = 0;           // the estimator's prior before its first step; 0: none
  // Each step plans as many parts of the next length in `steps` as
  // StepBudgetNs() allows (at least one), as the built-in PyTorch tasks do.
  bool sized_to_budget = false;
  // Held over its overrun budget throughout: never armed, and granted only
  // where twice its step estimate fits (DispatchCandidate::demoted).
  bool demoted = false;
  // Finds nothing to do at every step (a server without requests):
  // StepResult::idle, so it never records a step and hands each bubble back.
  bool idle = false;
};

struct VirtualBubble {
  uint32_t slot = 0;
  Nanos length = 0;
  Nanos busy_after = 0;  // the stage's work before the next bubble
  // The process that marks it (a live one, to the lane); 0: the test's own.  A
  // change stands for another training process taking over the lane.
  int64_t stage_pid = 0;
};

struct VirtualLaneRun {
  report::EventLogData events;  // the lane's event log
  std::vector<int64_t> task_ids;  // the task id of each VirtualTask, in order
  Nanos started_ns = 0;           // fake time at the first bubble's begin
};

// Serves `bubbles` (after a second of fake time for the tasks to start) to
// `tasks` on lane 0, with `options` (its socket_path and state_dir are set
// here, in a fresh directory).  Blocks until done; the tasks are stopped at
// the end.
VirtualLaneRun RunVirtualLane(const std::vector<VirtualTask>& tasks,
                              const std::vector<VirtualBubble>& bubbles, DaemonOptions options);

}  // namespace freeride::testing
