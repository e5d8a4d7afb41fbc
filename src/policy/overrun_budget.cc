#include "policy/overrun_budget.h"

#include <algorithm>

namespace freeride {

const char* OverrunVerdictName(OverrunVerdict verdict) {
  switch (verdict) {
    case OverrunVerdict::kWithin: return "within";
    case OverrunVerdict::kDemote: return "demote";
    case OverrunVerdict::kKill: return "kill";
  }
  return "?";
}

OverrunBudget::OverrunBudget(OverrunBudgetConfig config) : config_(config) {
  config_.window = std::clamp(config_.window, 1, kMaxWindow);
  config_.min_bubbles = std::clamp(config_.min_bubbles, 1, config_.window);
}

double OverrunBudget::WindowFraction() const {
  return bubble_sum_ > 0 ? static_cast<double>(overrun_sum_) / static_cast<double>(bubble_sum_) : 0;
}

OverrunVerdict OverrunBudget::Record(Nanos overrun, Nanos bubble) {
  overrun = std::max<Nanos>(overrun, 0);
  bubble = std::max<Nanos>(bubble, 0);
  if (config_.hang > 0 && overrun >= config_.hang) return OverrunVerdict::kKill;
  if (config_.max_fraction <= 0 || ++seen_ <= config_.warmup_bubbles) return OverrunVerdict::kWithin;
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
      static_cast<double>(overrun_sum_) <= config_.max_fraction * static_cast<double>(bubble_sum_))
    return OverrunVerdict::kWithin;
  if (demoted_) return OverrunVerdict::kKill;
  demoted_ = true;
  count_ = next_ = 0;
  overrun_sum_ = bubble_sum_ = 0;
  return OverrunVerdict::kDemote;
}

}  // namespace freeride
