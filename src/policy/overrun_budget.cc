#include "policy/overrun_budget.h"

#include <algorithm>

namespace freeride {

const char* OverrunVerdictName(OverrunVerdict verdict) {
  switch (verdict) {
    case OverrunVerdict::kWithin: return "within";
    case OverrunVerdict::kDemote: return "demote";
    case OverrunVerdict::kKill: return "kill";
    case OverrunVerdict::kRestore: return "restore";
  }
  return "?";
}

OverrunBudget::OverrunBudget(OverrunBudgetConfig config) : config_(config) {
  config_.window = std::clamp(config_.window, 1, kMaxWindow);
  config_.min_bubbles = std::clamp(config_.min_bubbles, 1, config_.window);
}

OverrunJudgement OverrunBudget::Record(Nanos overrun, Nanos bubble) {
  overrun = std::max<Nanos>(overrun, 0);
  bubble = std::max<Nanos>(bubble, 0);
  if (config_.max_fraction <= 0 || ++seen_ <= config_.warmup_bubbles) return {};
  if (count_ == config_.window) {
    overrun_sum_ -= overruns_[next_];
    bubble_sum_ -= bubbles_[next_];
  } else {
    ++count_;
  }
  overruns_[next_] = overrun;
  bubbles_[next_] = bubble;
  overrun_sum_ += overrun;
  bubble_sum_ += bubble;
  next_ = (next_ + 1) % config_.window;
  if (count_ < config_.min_bubbles || overrun_sum_ < config_.min_overrun ||
      static_cast<double>(overrun_sum_) <= config_.max_fraction * static_cast<double>(bubble_sum_)) {
    if (!demoted_ || config_.restore_after <= 0 || restores_ >= config_.max_restores ||
        ++within_while_demoted_ < config_.restore_after)
      return {};
    demoted_ = false;
    ++restores_;
    within_while_demoted_ = 0;
    return {OverrunVerdict::kRestore};
  }
  OverrunJudgement judged{demoted_ ? OverrunVerdict::kKill : OverrunVerdict::kDemote, count_,
                          overrun_sum_, bubble_sum_};
  demoted_ = true;
  count_ = next_ = 0;
  overrun_sum_ = bubble_sum_ = 0;
  return judged;
}

}  // namespace freeride
