#include "policy/dispatch_policy.h"

#include <algorithm>
#include <cmath>

namespace freeride {

const char* VerdictName(DispatchVerdict verdict) {
  switch (verdict) {
    case DispatchVerdict::kRun: return "run";
    case DispatchVerdict::kNoCandidates: return "no runnable task";
    case DispatchVerdict::kNoMemoryFit: return "no task fits the free memory";
    case DispatchVerdict::kNoTimeFit: return "no task's step fits the rest of the bubble";
  }
  return "?";
}

bool DispatchPolicy::StepFits(Nanos now, Nanos predicted_end, Nanos step_estimate,
                              double fit_factor) const {
  if (step_estimate <= 0) step_estimate = config_.unknown_step_estimate;
  double needed = config_.step_margin * fit_factor * static_cast<double>(step_estimate);
  return static_cast<double>(predicted_end - now) >= needed;
}

Nanos DispatchPolicy::LongestFittingStep(Nanos now, Nanos predicted_end, double fit_factor) const {
  if (predicted_end <= now) return 0;
  const double longest = static_cast<double>(predicted_end - now) / (config_.step_margin * fit_factor);
  if (!(longest >= 1)) return 0;  // also a NaN from a corrupt factor
  if (longest >= static_cast<double>(predicted_end - now)) return predicted_end - now;  // factor < 1
  // The division may round up by a nanosecond; StepFits has the last word.
  const Nanos step = static_cast<Nanos>(longest);
  return StepFits(now, predicted_end, step, fit_factor) ? step : step - 1;
}

bool DispatchPolicy::TimeFits(const DispatchCandidate& c, const BubbleView& bubble) const {
  if (c.imperative) return bubble.predicted_end - bubble.now >= ImperativeSlice(bubble.forecast_length);
  return StepFits(bubble.now, bubble.predicted_end, StepToFit(c), bubble.fit_factor);
}

Nanos DispatchPolicy::ImperativeSlice(Nanos forecast_length) const {
  const Nanos least = std::min(config_.min_imperative_slice, config_.imperative_slice_floor);
  if (forecast_length <= 0) return config_.min_imperative_slice;
  const double share = config_.imperative_slice_share * static_cast<double>(forecast_length);
  if (!(share < static_cast<double>(config_.min_imperative_slice)))  // also a NaN
    return config_.min_imperative_slice;
  return std::max(least, static_cast<Nanos>(std::ceil(share)));
}

Nanos DispatchPolicy::StepToFit(const DispatchCandidate& c) const {
  // A demoted task must fit twice its estimate.
  Nanos estimate = c.step_estimate > 0 ? c.step_estimate : config_.unknown_step_estimate;
  return c.demoted ? 2 * estimate : estimate;
}

Nanos DispatchPolicy::LeftoverNeeded(const DispatchCandidate& first,
                                     const DispatchCandidate& other, double fit_factor) const {
  if (other.imperative) return LeastUsable(other, fit_factor);
  bool could_fit_where_first_did_not = first.imperative || StepToFit(other) < StepToFit(first) ||
                                       other.memory_bytes < first.memory_bytes;
  if (!could_fit_where_first_did_not) return kNeverUsable;
  return LeastUsable(other, fit_factor);
}

Nanos DispatchPolicy::LeastUsable(const DispatchCandidate& other, double fit_factor) const {
  if (other.imperative) return std::min(config_.min_imperative_slice, config_.imperative_slice_floor);
  // Rounded up, so that anything shorter fails StepFits for `other`.
  return static_cast<Nanos>(
      std::ceil(config_.step_margin * fit_factor * static_cast<double>(StepToFit(other))));
}

namespace {

// True when `a` goes before `b`: not demoted first, then starting, then
// higher priority, then earlier submission.
bool Ranks(const DispatchCandidate& a, const DispatchCandidate& b) {
  if (a.demoted != b.demoted) return !a.demoted;
  if (a.starting != b.starting) return a.starting;
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.submit_order < b.submit_order;
}

}  // namespace

DispatchDecision DispatchPolicy::Choose(std::span<const DispatchCandidate> candidates,
                                        const BubbleView& bubble) const {
  DispatchDecision decision;
  if (candidates.empty()) return decision;
  bool any_memory_fit = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const DispatchCandidate& c = candidates[i];
    if (c.memory_bytes > bubble.free_memory_bytes) continue;
    any_memory_fit = true;
    if (!TimeFits(c, bubble)) continue;
    if (decision.index < 0 || Ranks(c, candidates[decision.index])) decision.index = static_cast<int>(i);
  }
  if (decision.index >= 0) {
    decision.verdict = DispatchVerdict::kRun;
  } else {
    decision.verdict = any_memory_fit ? DispatchVerdict::kNoTimeFit : DispatchVerdict::kNoMemoryFit;
  }
  return decision;
}

}  // namespace freeride
