#include "policy/step_estimator.h"

#include <algorithm>

namespace freeride {

void StepEstimator::Observe(Nanos duration) {
  if (duration < 0) return;
  samples_[next_] = duration;
  next_ = (next_ + 1) % kWindow;
  count_ = std::min(count_ + 1, kWindow);
}

Nanos StepEstimator::Estimate() const {
  if (count_ == 0) return prior_;
  return QuantileOf(samples_.data(), count_, 0.9);
}

}  // namespace freeride
