// Learns a task's step time from its own recent steps.
#pragma once
#include <array>
#include <cstdint>

#include "base/clock.h"
#include "policy/quantile.h"

namespace freeride {

class StepEstimator {
 public:
  static constexpr int kWindow = 32;

  // `prior` is used until the first step is observed (e.g. a declared or
  // profiled step time); 0 means unknown.
  explicit StepEstimator(Nanos prior = 0) : prior_(prior) {}

  void Observe(Nanos duration);
  // A high quantile (p90) of recent steps, so that "fits" rarely overruns;
  // the prior before any step.
  Nanos Estimate() const;
  int count() const { return count_; }
  void set_prior(Nanos prior) { prior_ = prior; }

 private:
  std::array<Nanos, kWindow> samples_{};
  int count_ = 0;
  int next_ = 0;
  Nanos prior_;
};

}  // namespace freeride
