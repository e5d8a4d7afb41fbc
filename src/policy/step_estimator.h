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

  // Bubbles a task may be passed over, with no step, before its slowest
  // sample is forgotten; each further forgetting needs twice as many, up to
  // kMaxPassesBeforeForgetting.
  static constexpr int kPassesBeforeForgetting = 16;
  static constexpr int kMaxPassesBeforeForgetting = 1024;

  void Observe(Nanos duration);
  // A high quantile (p90) of recent steps, so that "fits" rarely overruns;
  // the prior before any step (or once every sample is forgotten).
  Nanos Estimate() const {
    return count_ == 0 ? prior_ : sorted_[NearestRankIndex(static_cast<size_t>(count_), 0.9)];
  }
  // The task's lane served `bubbles` more bubbles in which the task ran no
  // step.  Only steps change the samples, so an estimate made too long by a
  // burst of slow steps (a preempted process, lazy initialisation) would
  // keep the task out of every bubble for good.  After enough bubbles
  // without a step the slowest sample is dropped; the backing off makes a
  // task whose steps really are too long for the bubbles retry ever more
  // rarely.  kStepsToTrustAgain steps in a row that end within the estimate
  // they were granted on show the estimate was too long, not the steps, and
  // reset the backing off; a single lucky step of a task whose steps only
  // sometimes fit does not.
  void PassedOver(int bubbles);
  static constexpr int kStepsToTrustAgain = 8;
  int count() const { return count_; }
  void set_prior(Nanos prior) { prior_ = prior; }

 private:
  std::array<Nanos, kWindow> samples_{};  // the newest count_ of them, oldest first
  // The same samples in ascending order, kept up to date step by step: the
  // dispatcher asks for the estimate before every step, and the simulator
  // for millions of steps.
  std::array<Nanos, kWindow> sorted_{};
  int count_ = 0;
  Nanos prior_;
  int passed_over_ = 0;
  int passes_before_forgetting_ = kPassesBeforeForgetting;
  int steps_within_estimate_ = 0;  // in a row

  // Removes one sample equal to `value` from sorted_[0..count_).
  void RemoveSorted(Nanos value);
};

}  // namespace freeride
