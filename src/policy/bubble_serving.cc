#include "policy/bubble_serving.h"

#include <algorithm>
#include <limits>

namespace freeride {

int64_t ChooseArmed(const DispatchPolicy& policy, std::span<const DispatchCandidate> candidates,
                    uint64_t free_memory_bytes) {
  BubbleView ahead{0, std::numeric_limits<Nanos>::max() / 2, free_memory_bytes};
  DispatchDecision decision = policy.Choose(candidates, ahead);
  if (decision.verdict != DispatchVerdict::kRun) return 0;
  const DispatchCandidate& chosen = candidates[decision.index];
  return chosen.imperative || chosen.demoted ? 0 : chosen.task_id;
}

Nanos ArmedSecondLook(const DispatchPolicy& policy, const AdmissionGate& gate, uint32_t bubble_seq,
                      Nanos begin_ns, const SecondLook& look, Nanos now, Nanos deadline,
                      Nanos step_estimate, double fit_factor) {
  if (!look.exists() || look.after >= look.length) return 0;
  const Nanos at = std::max(now, begin_ns + look.after);
  Admission admission = AdmitAt(gate, bubble_seq, at, begin_ns + look.length);
  if (!admission.serve || admission.deadline <= deadline ||
      !policy.StepFits(at, admission.deadline, step_estimate, fit_factor))
    return 0;
  return admission.deadline;
}

Nanos HandBackLeftover(Nanos begin_ns, Nanos forecast_end, const SecondLook& look, Nanos now) {
  Nanos left = forecast_end - now;
  if (look.exists() && look.after < look.length)
    left = std::max(left, begin_ns + look.length - std::max(now, begin_ns + look.after));
  return left;
}

BubbleServing::BubbleServing(const DispatchPolicy& policy, const Bubble& bubble)
    : policy_(policy), bubble_(bubble), predicted_end_(bubble.predicted_end) {}

ServingAction BubbleServing::Next(Nanos now, std::span<const DispatchCandidate> candidates,
                                  const AdmissionGate& gate) {
  ServingAction action;
  if (second_look_at_ != 0) {
    if (now < second_look_at_) {
      action.kind = ServingActionKind::kWaitUntil;
      action.until = second_look_at_;
      action.verdict = last_verdict_;
      return action;
    }
    // Still open at the point: the bubble is of the slot's long kind.
    second_look_at_ = 0;
    predicted_end_ = bubble_.begin_ns + bubble_.second_look.length;
  }
  for (;;) {
    // The probe's withheld window and the guard hold for the lane's grants
    // as for the armed task's own.
    Admission admission = AdmitAt(gate, bubble_.seq, now, predicted_end_);
    action.verdict = last_verdict_;
    if (!admission.serve) return action;
    BubbleView view{now, admission.deadline, bubble_.free_memory_bytes, admission.fit_factor,
                    predicted_end_ - bubble_.begin_ns};
    DispatchDecision decision = policy_.Choose(candidates, view);
    last_verdict_ = action.verdict = decision.verdict;
    if (decision.verdict == DispatchVerdict::kNoTimeFit && !second_look_taken_) {
      // Nothing fits the first forecast, but a bubble of this slot that is
      // still open a little later may be of the long kind: wait for that
      // point, then offer the longer forecast to the tasks not run yet.
      second_look_taken_ = true;
      const SecondLook& look = bubble_.second_look;
      if (look.exists() && bubble_.begin_ns + look.length > predicted_end_) {
        const Nanos at = bubble_.begin_ns + look.after;
        if (now < at) {
          second_look_at_ = at;
          action.kind = ServingActionKind::kWaitUntil;
          action.until = at;
          return action;
        }
        predicted_end_ = bubble_.begin_ns + look.length;
        continue;
      }
    }
    if (decision.verdict != DispatchVerdict::kRun) return action;
    const DispatchCandidate& chosen = candidates[decision.index];
    excluded_.push_back(chosen.task_id);
    action.kind = ServingActionKind::kGrant;
    action.index = decision.index;
    action.task_id = chosen.task_id;
    action.until = admission.deadline;
    if (chosen.imperative) {
      action.stop_at = admission.deadline < predicted_end_ ? admission.deadline : 0;
    } else if (chosen.demoted) {
      // The policy judged a demoted task by twice its estimate; the task
      // checks its own, so its grant ends one step early.
      action.until -= std::max(chosen.step_estimate, policy_.config().unknown_step_estimate);
    }
    return action;
  }
}

}  // namespace freeride
