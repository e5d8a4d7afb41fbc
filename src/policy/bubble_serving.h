// How one open bubble is served: the dispatcher's decisions as a state
// machine on injected time.  The daemon's lane and the simulator drive it
// (and the armed task decides its second look by ArmedSecondLook); none of
// them decides anything itself, so `freeride simulate` runs the serving
// algorithm the daemon runs.
//
// A bubble is served in two phases.  First the armed task, chosen ahead of
// the bubble (ChooseArmed), takes it by itself: it steps while its next step
// fits, and once it no longer fits, may take the slot's second look
// (ArmedSecondLook).  Then the dispatcher (BubbleServing) grants the other
// tasks, one at a time, each until its steps no longer fit; when no task's
// step fits the first forecast it waits, once, for the second look's point
// and offers the longer forecast to the tasks not run yet.
//
// Pure: no threads, no clock, no I/O.  Not thread-safe; one driver per
// bubble.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "base/clock.h"
#include "policy/admission.h"
#include "policy/bubble_predictor.h"
#include "policy/dispatch_policy.h"

namespace freeride {

// The task that takes the next bubble of a lane directly, chosen before the
// bubble begins; 0 for none.  Ahead of the bubble only memory, priority and
// arrival order can be judged: the armed task checks the time fit itself
// when the bubble begins.  Imperative and demoted tasks are never armed (an
// armed task's grant is the whole forecast; a demoted one must stop a step
// early).
int64_t ChooseArmed(const DispatchPolicy& policy, std::span<const DispatchCandidate> candidates,
                    uint64_t free_memory_bytes);

// The armed task's second look: after its steps stopped fitting `deadline`
// at `now`, whether the slot's second look `look` of the bubble that began
// at `begin_ns` would let its next step (`step_estimate`) fit a later
// deadline.  Returns that deadline (to be used once the bubble is still open
// at `begin_ns + look.after`), or 0 when there is no such look.
Nanos ArmedSecondLook(const DispatchPolicy& policy, const AdmissionGate& gate, uint32_t bubble_seq,
                      Nanos begin_ns, const SecondLook& look, Nanos now, Nanos deadline,
                      Nanos step_estimate, double fit_factor);

// What the armed task leaves of a bubble that began at `begin_ns`, handed
// back at `now` with its forecast ending at `forecast_end`: the forecast's
// rest, or, when the slot's second look `look` promises more, the rest of
// its longer forecast from its point on (the dispatcher waits for the point
// before it grants, as BubbleServing does).  The armed task and the lane
// judge a hand-back by this one rule, so that one wakes the other when the
// dispatcher would serve what is left (each from its own view of the
// forecast: the task's deadline and published second look, which is
// rounded to microseconds, and the lane's predictor).
Nanos HandBackLeftover(Nanos begin_ns, Nanos forecast_end, const SecondLook& look, Nanos now);

enum class ServingActionKind {
  kGrant,      // run task_id until `until` (or stop an imperative one at `stop_at`)
  kWaitUntil,  // nothing fits yet; call Next again at `until` if the bubble is still open
  kDone,       // nothing more to grant in this bubble (see `verdict`)
};

struct ServingAction {
  ServingActionKind kind = ServingActionKind::kDone;
  int index = -1;        // kGrant: into the candidates given to Next
  int64_t task_id = 0;   // kGrant
  // kGrant of an iterative task: the grant's deadline (a demoted task's is
  // one step early).  kGrant of an imperative task: the admission's
  // deadline.  kWaitUntil: the time to call Next again.
  Nanos until = 0;
  // kGrant of an imperative task: where to stop it before the bubble's end
  // (a withheld window's start); 0: at the bubble's end.
  Nanos stop_at = 0;
  // The last choice's verdict.  When the admission gate refuses the bubble,
  // no choice is made and this stays the previous one's (kNoCandidates at
  // first).
  DispatchVerdict verdict = DispatchVerdict::kNoCandidates;
};

class BubbleServing {
 public:
  struct Bubble {
    uint32_t seq = 0;       // its begin mark's sequence
    Nanos begin_ns = 0;
    Nanos predicted_end = 0;  // the forecast when serving starts
    SecondLook second_look;   // the slot's; none when length is 0
    uint64_t free_memory_bytes = UINT64_MAX;
  };

  // `policy` outlives this.
  BubbleServing(const DispatchPolicy& policy, const Bubble& bubble);

  // Keeps `task_id` out of this bubble's grants: the armed task, which
  // served itself, or a task that cannot be run.
  void Exclude(int64_t task_id) { excluded_.push_back(task_id); }

  // The next action at `now`.  `candidates` are the lane's runnable tasks;
  // the caller leaves out those in excluded(), which Next does not filter.
  // `gate` is the admission in force now.  A granted task joins excluded():
  // each task gets one grant per bubble, and its own steps fill it.
  ServingAction Next(Nanos now, std::span<const DispatchCandidate> candidates,
                     const AdmissionGate& gate);

  // The forecast end: the first forecast, or the second look's once taken.
  Nanos predicted_end() const { return predicted_end_; }
  const std::vector<int64_t>& excluded() const { return excluded_; }
  DispatchVerdict last_verdict() const { return last_verdict_; }

 private:
  const DispatchPolicy& policy_;
  Bubble bubble_;
  Nanos predicted_end_;
  std::vector<int64_t> excluded_;
  bool second_look_taken_ = false;
  Nanos second_look_at_ = 0;  // non-zero while waiting for the second look's point
  DispatchVerdict last_verdict_ = DispatchVerdict::kNoCandidates;
};

}  // namespace freeride
