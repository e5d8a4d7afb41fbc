// The daemon's Lane serving scripted bubbles on virtual time
// (FakeEnv::RunVirtualTime): its side tasks are threads that run the SDK's
// own loop (RunUnderDaemon) on a TaskChannel, with steps that take fake
// time, and the stage is a thread that writes the marks.  Seconds of
// serving run in milliseconds, and no other process competes for the CPU,
// so tests of how bubbles are shared need no quiet machine.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// The GPU gate on a virtual lane (docs/gate.md).
struct VirtualGate {
  bool on = false;            // a gated lane: the lane makes a gate page and runs its closer
  bool stage_drives = false;  // the stage writes the gate word at each mark, as its stream would
  bool gated_task = true;     // a gated (imperative) task is resident: the gate closes early
  // A gated process (alive) has published this length of its work (0: none).
  Nanos task_work_p95 = 0;
  // Its late work (gate/late_work.h) as its interposer publishes it: in all,
  // and in how many stretches; before the bubbles (history from before this
  // lane ran), and added after the second bubble's end.
  Nanos task_late = 0;
  uint64_t task_late_bubbles = 0;
  Nanos task_late_during = 0;
  uint64_t task_late_bubbles_during = 0;
  Nanos task_pending = 0;         // pending time published before the lane ran
  Nanos task_pending_during = 0;  // ... and after bubble 2's end
  // Time held on the host while the gate was open (GateTaskSlot's held_unpublished_ns,
  // held_drain_ns, held_fit_ns), published before the lane ran, and after bubble 2's end.
  std::array<Nanos, 3> task_held{};
  std::array<Nanos, 3> task_held_during{};
  // After the bubbles, the stage's "stream" opens the gate with no mark at
  // all and the stage falls silent for this long (0: not done).
  Nanos abandoned_open = 0;
  // After the bubbles, the stage opens one more bubble, marks its begin and
  // falls silent for this long, past its admission deadline (0: not done).
  Nanos silent_in_bubble = 0;
  // The gated task's launched process is not the one that publishes (its
  // slot's process is its child, in its process group).
  bool task_slot_is_child = false;
  // The task manager says the gated task is demoted by its overrun budget.
  bool task_demoted = false;
};

// One overrun the lane recorded for a task (LaneTasks::RecordOverrun).
struct VirtualOverrun {
  int64_t task_id;
  Nanos overrun;
  Nanos bubble;
};

// The next bubble's forecast that the lane had published in the gate page
// when the stage opened a bubble (with VirtualGate::on).
struct VirtualAhead {
  bool published = false;  // for this bubble
  Nanos begin_error = 0;   // the forecast begin less the bubble's begin
  Nanos lead = 0;          // how long before the forecast begin work may be queued
  Nanos window = 0;        // from the forecast begin to its admission deadline
  bool watch_only = false; // nothing may be queued for it behind the shut gate: only watched
};

struct VirtualLaneRun {
  report::EventLogData events;  // the lane's event log
  std::vector<nlohmann::json> gate_bubbles;  // its gate_bubble events, in order
  // The gate's counts (with VirtualGate::on): bubbles closed before their
  // end mark, gates forced shut, the time it was open, and its word at the end.
  uint64_t gate_early_closes = 0;
  // With VirtualGate::stage_drives: bubbles whose word was no longer open
  // when the stage's "stream" came to close it (the lane shut it), and each
  // bubble's published admission deadline after its begin (INT64_MAX: none;
  // -1: nothing published for it).
  uint64_t gate_shut_before_end = 0;
  Nanos gate_margin_ns = 0;  // the lane's last reported margin (status)
  Nanos gate_late_ns = 0;    // the lane's total of its tasks' late work (status)
  Nanos gate_pending_ns = 0; // ... and of their pending waits (status)
  std::array<Nanos, 3> gate_held_ns{};  // ... and of their held time, unpublished / drain / fit (status)
  uint64_t gate_late_bubbles = 0;
  std::vector<int64_t> gate_admission_ns;
  std::vector<VirtualAhead> gate_ahead;  // one per bubble, with VirtualGate::on
  uint64_t gate_forced_closes = 0;
  Nanos gate_open_ns = 0;
  uint32_t gate_word_at_end = 0;
  std::vector<VirtualOverrun> overruns;  // in the order recorded
  uint32_t gate_slot_demoted = 0;        // the gated process's slot's `demoted` at the end
  std::vector<int64_t> task_ids;  // the task id of each VirtualTask, in order
  Nanos started_ns = 0;           // fake time at the first bubble's begin
  // The lane's files (segment, gate page) that existed after Open, and
  // those still there after Stop and RemoveFiles (before the harness
  // removes the gate page itself).
  std::vector<std::string> files_made, files_left;
};

// Serves `bubbles` (after a second of fake time for the tasks to start) to
// `tasks` on lane 0, with `options` (its socket_path and state_dir are set
// here, in a fresh directory).  Blocks until done; the tasks are stopped at
// the end.
VirtualLaneRun RunVirtualLane(const std::vector<VirtualTask>& tasks,
                              const std::vector<VirtualBubble>& bubbles, DaemonOptions options,
                              const VirtualGate& gate = {});

}  // namespace freeride::testing
