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
}

Nanos OverrunBudget::WindowMean() const { return count_ == 0 ? 0 : sum_ / count_; }

OverrunVerdict OverrunBudget::Record(Nanos overrun) {
  overrun = std::max<Nanos>(overrun, 0);
  if (config_.hang > 0 && overrun >= config_.hang) return OverrunVerdict::kKill;
  if (config_.mean_per_bubble <= 0) return OverrunVerdict::kWithin;
  if (count_ == config_.window) {
    sum_ -= overruns_[next_];
  } else {
    ++count_;
  }
  overruns_[next_] = overrun;
  sum_ += overrun;
  next_ = (next_ + 1) % config_.window;
  // Judged on a full window only: one unlucky bubble is not a pattern.
  if (count_ < config_.window || sum_ <= config_.mean_per_bubble * count_)
    return OverrunVerdict::kWithin;
  if (demoted_) return OverrunVerdict::kKill;
  demoted_ = true;
  count_ = next_ = 0;
  sum_ = 0;
  return OverrunVerdict::kDemote;
}

}  // namespace freeride
