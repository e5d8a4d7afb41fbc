#include "common/step_target_chooser.h"

namespace freeride::tasks {

const char* StepChoiceName(StepChoice choice) {
  return choice == StepChoice::kStepMs ? "--step-ms" : "the bubble-sized target";
}

void StepTargetChooser::StartTrial(int64_t now_ns, StepChoice choice) {
  phase_ = Phase::kTrial;
  current_ = choice;
  phase_start_ns_ = now_ns;
  counting_ = false;
  counted_units_ = 0;
}

StepChoice StepTargetChooser::Choose(int64_t now_ns, uint32_t bubble, bool differ) {
  if (!differ) {
    phase_ = Phase::kNone;
    current_ = StepChoice::kStepMs;
    return current_;
  }
  const int64_t elapsed = now_ns - phase_start_ns_;
  switch (phase_) {
    case Phase::kNone:
      // The bubble-sized target first: it is new.
      tried_both_ = false;
      StartTrial(now_ns, StepChoice::kBubbleSized);
      break;
    case Phase::kTrial: {
      if (!counting_) {
        if (elapsed >= kSettleNs) {
          counting_ = true;
          first_bubble_ = bubble;
        }
        break;
      }
      const uint32_t bubbles = bubble - first_bubble_;  // the sequence wraps
      if (elapsed < kTrialNs || bubbles < kTrialBubbles) break;
      work_[static_cast<int>(current_)] = counted_units_ / bubbles;
      if (!tried_both_) {
        tried_both_ = true;
        StartTrial(now_ns, current_ == StepChoice::kStepMs ? StepChoice::kBubbleSized : StepChoice::kStepMs);
        break;
      }
      // A tie keeps --step-ms: the user's own setting.
      current_ = work_[1] > work_[0] ? StepChoice::kBubbleSized : StepChoice::kStepMs;
      phase_ = Phase::kKept;
      phase_start_ns_ = now_ns;
      decided_ = true;
      break;
    }
    case Phase::kKept:
      if (elapsed < kKeepNs) break;
      // Both tried again, the other one first.
      tried_both_ = false;
      StartTrial(now_ns, current_ == StepChoice::kStepMs ? StepChoice::kBubbleSized : StepChoice::kStepMs);
      break;
  }
  return current_;
}

void StepTargetChooser::Record(double units) {
  if (phase_ == Phase::kTrial && counting_ && units > 0) counted_units_ += units;
}

}  // namespace freeride::tasks
