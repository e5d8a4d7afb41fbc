// What a lane asks of the tasks it serves: which may take a bubble, the
// runtime through which it drives each, and where their work is booked.
// The daemon's TaskManager is the implementation; a test gives one whose
// tasks are threads on a fake Env, so the lane's serving runs on fake time.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/clock.h"
#include "channel/task_segment.h"
#include "policy/dispatch_policy.h"

namespace freeride {

class TaskCgroup;

// What a lane needs to drive one launched task.
struct TaskRuntime {
  int64_t task_id = 0;
  pid_t pid = -1;
  bool imperative = false;
  // An imperative task on a gated lane: it runs free on the CPU and its GPU
  // work waits on the lane's gate, so the lane never stops or continues it.
  bool gated = false;
  std::shared_ptr<TaskSegment> segment;
  // The task's whole process tree; null where cgroups cannot be used, and
  // then only its process group is reached.
  std::shared_ptr<TaskCgroup> cgroup;
  std::atomic<bool> exited{false};
  // An iterative task that has not attached to the SDK yet.  It was launched
  // stopped and runs only inside bubbles, as an imperative task does, so
  // that a program that never uses the SDK never runs unthrottled.  The lane
  // lets it go at the end of the bubble in which it attached; its init then
  // runs before its first grant, as the SDK expects.
  std::atomic<bool> held{false};
  std::atomic<Nanos> held_run_ns{0};  // bubble time it has run while held

  // Whether the lane continues it when a bubble begins and stops it at the end.
  bool RunsOnlyInBubbles() const {
    return (imperative && !gated) || held.load(std::memory_order_acquire);
  }
  // Whether the SDK in the task has opened its segment.  Any thread.
  bool Attached() const;
  // Stop, continue or SIGKILL every process of the task.  Any thread.
  // Stop returns when the task's process group was stopped (its cgroup,
  // which holds the processes that left the group, may freeze later).
  // Stop and Continue time the lane's runs on the segment's Env.
  Nanos Stop();
  // Thaws the cgroup (which can wait on the same lock) and, if
  // `still_wanted` (when given) says so then, continues the process group;
  // returns when (read before the thaw), or 0 when it was not wanted any
  // more and stays stopped.
  Nanos Continue(const std::function<bool()>& still_wanted = nullptr);
  void Kill();
  // Asks a task that runs only inside bubbles to end: SIGTERM to its process
  // group, continued so that it can act on it.  Any thread.
  void Terminate();
  // Work done by earlier attempts; this process's counters add to it.
  double base_progress = 0;
  uint64_t base_steps = 0;
  uint64_t ring_tail = 0;  // guarded by the LaneTasks implementation's DrainSteps
};

// One step drained from a task's ring, attributed to that task.
struct TaskStep {
  int64_t task_id;
  StepRecord record;
  // An imperative task's run: time it was let run, not a step of known
  // work, so it is accounted as allowed, never as harvested.
  bool allowed_only = false;
};

// A resident gated task (TaskRuntime::gated), as a lane's gate sees it.
struct GatedTask {
  int64_t id = 0;
  pid_t pid = -1;        // its launched process, its process group's leader
  bool demoted = false;  // over its overrun budget: its interposer is told to hold back more
};

// Every member may be called from any thread (the lanes' and the
// daemon's); an implementation synchronises itself.
class LaneTasks {
 public:
  virtual ~LaneTasks() = default;

  // Resident tasks of `lane` waiting for a bubble (PAUSED, or SUBMITTED and
  // held to bubbles until they attach), minus those in `excluded`.
  virtual void Candidates(int lane, const std::vector<int64_t>& excluded,
                          std::vector<DispatchCandidate>* out) const = 0;
  // The runtime of a launched, live task that waits for a bubble (as in
  // Candidates), or null.
  virtual std::shared_ptr<TaskRuntime> RuntimeOf(int64_t id) const = 0;
  // PAUSED -> RUNNING; a no-op in any other state.
  virtual void MarkRunning(int64_t id) = 0;
  // RUNNING -> PAUSED (if the process still lives).
  virtual void EndRun(int64_t id) = 0;
  // For a bubble the armed task had to itself, accounted for after it
  // closed: the flips it made, recorded when the log is due one.
  virtual void NoteArmedRun(int64_t id) = 0;
  // Brings the task's progress and step count up to date from its counters
  // and, when out is given, appends the step records written since the last
  // drain.  Returns how many records the ring overwrote before they were read.
  virtual uint64_t DrainSteps(TaskRuntime& runtime, std::vector<TaskStep>* out) = 0;
  // Accounts bubble time a task spent stepping.
  virtual void AddHarvest(int64_t id, Nanos harvested) = 0;
  // Accounts bubble time an imperative task was let run.
  virtual void AddAllowed(int64_t id, Nanos allowed) = 0;
  // The task's overrun past the end of one bubble of length `bubble` it
  // stepped in (0 if none), judged by its overrun budget.
  virtual void RecordOverrun(int64_t id, Nanos overrun, Nanos bubble) = 0;
  // Kills a task whose step has run `overrun` past its bubble's end and is
  // still running (a hang).
  virtual void KillHung(int64_t id, Nanos overrun) = 0;
  // Counts for lane statistics: tasks with a process, and tasks waiting to
  // be launched.
  virtual void LaneCounts(int lane, uint32_t* resident, uint32_t* queued) const = 0;
  // The resident gated tasks of `lane` (TaskRuntime::gated), whose allowed
  // time is each bubble's time with the gate open, and whose late work
  // (gate/late_work.h) their overrun budget judges.
  virtual void GatedTasks(int lane, std::vector<GatedTask>* out) const { out->clear(); }
};

}  // namespace freeride
