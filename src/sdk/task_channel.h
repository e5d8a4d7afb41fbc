// The side task's end of the control channel: waits for grants, decides
// whether the next step fits, and reports steps.  Used by the C ABI and by
// the C++ SDK runner.  Nothing in it is synchronised: one thread of the task
// at a time (the counters in the segment have a single writer).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/env.h"
#include "channel/lane_segment.h"
#include "channel/task_segment.h"
#include "policy/bubble_serving.h"
#include "policy/dispatch_policy.h"
#include "policy/step_estimator.h"

namespace freeride {

// Environment variables through which the daemon hands a task its channel.
inline constexpr const char* kEnvTaskSegment = "FREERIDE_TASK_SEGMENT";
inline constexpr const char* kEnvLaneSegment = "FREERIDE_LANE_SEGMENT";
inline constexpr const char* kEnvCheckpointDir = "FREERIDE_CHECKPOINT_DIR";
inline constexpr const char* kEnvStepHint = "FREERIDE_STEP_HINT_NS";
inline constexpr const char* kEnvTaskId = "FREERIDE_TASK_ID";
inline constexpr const char* kEnvMemory = "FREERIDE_MEMORY_BYTES";
// Set by `freeride task-profile` (not in the command's arguments, which its
// own parser may refuse): the task runs alone for this many seconds, unless
// a daemon launched it.
inline constexpr const char* kEnvStandaloneSeconds = "FREERIDE_STANDALONE_SECONDS";
// Its value's seconds: decimal digits with an optional point and exponent
// (no sign, space, hex or underscore: Python's reader agrees on every
// spelling), finite and above 0; nothing otherwise.
std::optional<double> ParseStandaloneSeconds(std::string_view text);

class TaskChannel {
 public:
  enum class Wake { kGranted, kTimeout, kStop, kCheckpoint };

  // Attaches using the environment the daemon set, and tells the daemon
  // that the task uses the SDK.  Returns nullptr (and a reason in *error)
  // when the process was not launched by a daemon or its segments cannot be
  // mapped.
  static std::unique_ptr<TaskChannel> AttachFromEnvironment(std::string* error);

  // What AttachFromEnvironment reads from the environment, given directly.
  struct Endpoints {
    std::string task_segment, lane_segment, checkpoint_dir;
    Nanos step_hint = 0;        // the estimator's prior; 0: none
    uint64_t memory_bytes = 0;  // declared; 0: not declared
  };
  // Attaches to the segments at `endpoints`, waiting and telling time through
  // `env` (which outlives the channel): Env::Default() in a task, a fake in
  // tests that run a task's loop on fake time.  nullptr and *error when a
  // segment cannot be mapped.
  static std::unique_ptr<TaskChannel> Attach(const Endpoints& endpoints, Env* env,
                                             std::string* error);

  // Declares the unit of work, cut to 31 bytes.
  void SetUnit(std::string_view unit);
  // Init is done: publishes the step estimate (the prior, before any step)
  // and lets the daemon grant bubbles.
  void Ready();
  // Sleeps until a grant, a command or the timeout (negative: none).  A
  // checkpoint command is consumed by the call that returns it; a stop
  // command is returned by every call from then on.
  Wake WaitForGrant(Nanos timeout);
  // True while the grant holds, its bubble is open and a step of the learned
  // length fits before the deadline.
  bool NextStepFits() const;
  // The longest step that, started now, fits what NextStepFits judges by
  // (the grant, its bubble, its deadline, the guard's factor): 0 whenever
  // NextStepFits would say no for any step length.
  Nanos StepBudget() const;
  // Once per bubble taken while armed, after NextStepFits said no: when the
  // lane publishes a second look for the bubble's slot (a bubble of it still
  // open a little later is one of the long kind) under which a step would
  // fit, sleeps until that point (waking early at a begin mark) and, if the
  // bubble is still open, extends the deadline to the longer forecast and
  // returns true.  Ask NextStepFits again then, with a new start time.
  bool TakeSecondLook();
  // Records a step of the grant being served and feeds the step estimate
  // with the length of one of its `parts` (StepResult::parts).
  void RecordStep(Nanos start, Nanos end, double units, int parts = 1);
  // Counts work done outside a step.
  void AddProgress(double units);
  // Before Ready(): the work the task starts from (its checkpoint's, or 0
  // for a fresh start), so that its counters are its totals and work redone
  // after a restart counts once.
  void ResumeCounters(double progress, uint64_t steps);
  // Hands the grant back (an armed task's bubble too, waking the lane when
  // enough of it is left for another task).  `idle`: the task stops because
  // it has nothing to do, not because its next step does not fit, so any
  // other task may use the rest.
  void Yield(bool idle = false);
  // Reports the end of the task (kFinished, or kFailed when !ok) and wakes
  // the lane as Yield does.
  void Finished(bool ok);
  // The learned step time; the prior before the first step.
  Nanos StepEstimate() const { return estimator_.Estimate(); }
  // Where the task keeps its checkpoint; empty when the daemon gave none.
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }
  TaskSegment& segment() { return task_; }
  // The clock and waits the channel uses.
  Env* env() const { return env_; }

 private:
  Env* env_ = Env::Default();
  TaskSegment task_;
  LaneSegment lane_;
  StepEstimator estimator_;
  DispatchPolicy policy_;
  // Takes an open bubble directly while armed; true when one was taken.
  bool TakeArmedBubble();
  // The grant being served still holds: not stopped, its bubble open, and
  // (lane grant) still active or (armed) the memory it needs free.
  bool GrantHolds() const;
  // Tells the estimator how many bubbles the lane served since the last
  // call in which this task ran no step (see StepEstimator::PassedOver).
  void AgeStepEstimate();
  void PublishStepEstimate();
  // Re-maps the lane segment when its file was deleted and made again (the
  // daemon remakes it: systemd's RemoveIPC deletes /dev/shm files).  At most
  // once a second; the task's own thread only.
  void MaybeReattachLane();
  // Records the granted bubble as handed back; `rest_free`: leaving the rest
  // to any task (idle, finished), not only to tasks with shorter steps.
  void MarkServed(bool rest_free);
  // After handing back a bubble it took while armed: wakes the lane when what
  // is left of the bubble's forecast is worth offering to another task
  // (`rest_free` as for MarkServed).
  void WakeLaneIfWorthIt(bool rest_free);

  uint32_t seen_grant_ = 0;
  uint32_t aged_through_seq_ = 0;  // the lane's bubble_seq at the last AgeStepEstimate
  bool stepped_since_aging_ = false;
  std::string checkpoint_dir_;
  std::string lane_path_;
  Nanos next_lane_check_ns_ = 0;
  uint64_t memory_bytes_ = 0;  // declared; an armed task checks it itself
  // The grant being served: from the dispatcher, or taken while armed.
  uint32_t granted_seq_ = 0;
  Nanos deadline_ = 0;
  double fit_factor_ = 1.0;  // the overhead guard's, read when the bubble was taken
  bool armed_grant_ = false;
  uint32_t armed_slot_ = 0;       // of the bubble taken while armed
  Nanos armed_begin_ns_ = 0;
  bool second_look_taken_ = false;
  uint64_t granted_free_memory_ = UINT64_MAX;
  uint32_t last_served_seq_ = 0;
};

}  // namespace freeride
