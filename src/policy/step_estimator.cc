#include "policy/step_estimator.h"

#include <algorithm>

namespace freeride {

void StepEstimator::Observe(Nanos duration) {
  if (duration < 0) return;
  passed_over_ = 0;
  steps_within_estimate_ = duration <= Estimate() ? steps_within_estimate_ + 1 : 0;
  if (steps_within_estimate_ >= kStepsToTrustAgain) passes_before_forgetting_ = kPassesBeforeForgetting;
  if (count_ == kWindow) {
    RemoveSorted(samples_[0]);
    std::move(samples_.begin() + 1, samples_.end(), samples_.begin());
    --count_;
  }
  samples_[count_] = duration;
  auto at = std::upper_bound(sorted_.begin(), sorted_.begin() + count_, duration);
  std::move_backward(at, sorted_.begin() + count_, sorted_.begin() + count_ + 1);
  *at = duration;
  ++count_;
}

void StepEstimator::RemoveSorted(Nanos value) {
  auto at = std::lower_bound(sorted_.begin(), sorted_.begin() + count_, value);
  std::move(at + 1, sorted_.begin() + count_, at);
}

void StepEstimator::PassedOver(int bubbles) {
  if (bubbles <= 0 || count_ == 0) return;
  passed_over_ += bubbles;
  if (passed_over_ < passes_before_forgetting_) return;
  passed_over_ = 0;
  passes_before_forgetting_ = std::min(2 * passes_before_forgetting_, kMaxPassesBeforeForgetting);
  auto slowest = std::max_element(samples_.begin(), samples_.begin() + count_);
  RemoveSorted(*slowest);
  std::move(slowest + 1, samples_.begin() + count_, slowest);
  --count_;
}

}  // namespace freeride
