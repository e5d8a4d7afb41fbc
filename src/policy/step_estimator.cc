#include "policy/step_estimator.h"

#include <algorithm>

namespace freeride {

void StepEstimator::Observe(Nanos duration) {
  if (duration < 0) return;
  passed_over_ = 0;
  if (count_ == kWindow) {
    std::move(samples_.begin() + 1, samples_.end(), samples_.begin());
    --count_;
  }
  samples_[count_++] = duration;
}

Nanos StepEstimator::Estimate() const {
  if (count_ == 0) return prior_;
  return QuantileOf(samples_.data(), count_, 0.9);
}

void StepEstimator::PassedOver(int bubbles) {
  if (bubbles <= 0 || count_ == 0) return;
  passed_over_ += bubbles;
  if (passed_over_ < passes_before_forgetting_) return;
  passed_over_ = 0;
  passes_before_forgetting_ = std::min(2 * passes_before_forgetting_, kMaxPassesBeforeForgetting);
  auto slowest = std::max_element(samples_.begin(), samples_.begin() + count_);
  std::move(slowest + 1, samples_.begin() + count_, slowest);
  --count_;
}

}  // namespace freeride
