#include "common/step_target_chooser.h"

#include <algorithm>

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

void StepTargetChooser::Keep(int64_t now_ns, StepChoice choice) {
  phase_ = Phase::kKept;
  current_ = choice;
  phase_start_ns_ = now_ns;
}

StepChoice StepTargetChooser::Choose(int64_t now_ns, uint64_t bubbles, bool differ) {
  const int64_t elapsed = now_ns - phase_start_ns_;
  switch (phase_) {
    case Phase::kNone:
      if (!differ) return current_;  // --step-ms, no trial
      // The bubble-sized target first: it is new.
      tried_both_ = false;
      StartTrial(now_ns, StepChoice::kBubbleSized);
      break;
    case Phase::kTrial: {
      if (!counting_) {
        if (elapsed >= kSettleNs) {
          counting_ = true;
          first_bubble_ = bubbles;
        }
        break;
      }
      const uint64_t counted = bubbles - first_bubble_;
      if (counted < kTrialBubbles && elapsed >= kTrialLimitNs) {
        Keep(now_ns, StepChoice::kStepMs);  // no bubbles to judge by
        keep_ns_ = kKeepNs;
        break;
      }
      if (elapsed < kTrialNs || counted < kTrialBubbles) break;
      work_[static_cast<int>(current_)] = counted_units_ / static_cast<double>(counted);
      if (!tried_both_) {
        tried_both_ = true;
        StartTrial(now_ns, current_ == StepChoice::kStepMs ? StepChoice::kBubbleSized : StepChoice::kStepMs);
        break;
      }
      // A tie keeps --step-ms: the user's own setting.
      Keep(now_ns, work_[1] > work_[0] ? StepChoice::kBubbleSized : StepChoice::kStepMs);
      if (!said_ || current_ != said_choice_) {
        decided_ = true;
        keep_ns_ = kKeepNs;
      } else {
        keep_ns_ = std::min(2 * keep_ns_, kLongestKeepNs);  // the same again: trials less often
      }
      said_ = true;
      said_choice_ = current_;
      break;
    }
    case Phase::kKept:
      if (elapsed < keep_ns_) break;
      if (!differ) {
        Keep(now_ns, StepChoice::kStepMs);
        keep_ns_ = kKeepNs;
        break;
      }
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
