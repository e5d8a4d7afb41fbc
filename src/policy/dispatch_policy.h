// Which side task runs in a bubble, and whether its next step fits.
//
// Pure policy: no threads, no clocks of its own, no I/O.  The daemon's lanes
// and the simulator call the same code with their own notion of "now".
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "base/clock.h"

namespace freeride {

struct DispatchConfig {
  // A step fits when now + margin * estimate <= predicted end.
  double step_margin = 1.10;
  // Assumed step time of a task that has never stepped and declared none.
  Nanos unknown_step_estimate = 1 * kMillisecond;
  // An imperative task (or a task still starting up) is continued only when
  // enough of the bubble remains, since stopping and continuing a process is
  // not free: min_imperative_slice, or, in bubbles forecast shorter than
  // min_imperative_slice / imperative_slice_share (4 ms), that share of the
  // forecast length, never less than imperative_slice_floor.  Without the
  // share a lane whose bubbles are all short would never run such a task (a
  // new submission would never start).
  Nanos min_imperative_slice = 2 * kMillisecond;
  double imperative_slice_share = 0.5;
  Nanos imperative_slice_floor = 250 * kMicrosecond;
};

struct DispatchCandidate {
  int64_t task_id = 0;
  int priority = 0;           // higher runs first
  uint64_t submit_order = 0;  // lower was submitted first
  uint64_t memory_bytes = 0;  // declared need
  Nanos step_estimate = 0;    // 0: unknown
  bool imperative = false;
  // Over its overrun budget (policy/overrun_budget.h): chosen after every
  // task that is not, and only where twice its step estimate fits.
  bool demoted = false;
  // Held to bubbles until it attaches to the SDK: its start-up.  Chosen
  // before the tasks that have started, whatever their priority, so that a
  // new submission never waits for good behind a busy lane (its start-up is
  // short, runs only inside bubbles, and ends once it attaches).
  bool starting = false;
};

struct BubbleView {
  Nanos now = 0;
  Nanos predicted_end = 0;
  uint64_t free_memory_bytes = UINT64_MAX;  // UINT64_MAX: unknown, no limit
  double fit_factor = 1.0;  // the overhead guard's: step estimates are multiplied by it
  // The bubble's whole forecast length, begin to predicted end; 0: unknown
  // (an imperative task then needs the full min_imperative_slice).
  Nanos forecast_length = 0;
};

enum class DispatchVerdict { kRun, kNoCandidates, kNoMemoryFit, kNoTimeFit };

struct DispatchDecision {
  DispatchVerdict verdict = DispatchVerdict::kNoCandidates;
  int index = -1;  // into the candidate list, when verdict == kRun
};

const char* VerdictName(DispatchVerdict verdict);

class DispatchPolicy {
 public:
  explicit DispatchPolicy(DispatchConfig config = {}) : config_(config) {}

  // Picks among candidates by, in order: memory fit (declared memory <= the
  // stage's free memory), time fit (the task's step fits the rest of the
  // bubble), not demoted, starting, higher priority, earlier submission.
  DispatchDecision Choose(std::span<const DispatchCandidate> candidates,
                          const BubbleView& bubble) const;

  // The least of a bubble that `other` could run in after `first` declined
  // the bubble or handed it back; kNeverUsable when it never could.  `first`
  // stops only when its own next step no longer fits, or when it needs more
  // memory than is free, so a stepping task with no shorter step and no
  // smaller memory never fits what is left.
  // `fit_factor` is the overhead guard's, as in BubbleView.
  // An imperative `other` needs the least slice of any bubble
  // (ImperativeSlice's floor), since the caller judges bubbles to come.
  Nanos LeftoverNeeded(const DispatchCandidate& first, const DispatchCandidate& other,
                       double fit_factor = 1.0) const;
  // The least of a bubble that `other` could run in whatever handed it back
  // (a task that found nothing to do, or finished, leaves all of the rest):
  // its step to fit with the margin, or an imperative task's least slice.
  Nanos LeastUsable(const DispatchCandidate& other, double fit_factor = 1.0) const;
  static constexpr Nanos kNeverUsable = INT64_MAX;

  // True when a step of the estimated length (0: unknown, the configured
  // default), times the overhead guard's `fit_factor`, started now, ends
  // before the predicted end of the bubble (with the safety margin).
  bool StepFits(Nanos now, Nanos predicted_end, Nanos step_estimate,
                double fit_factor = 1.0) const;
  // The longest step that, started now, StepFits: what a task whose work
  // divides finely may plan for the rest of its grant, never longer than
  // that rest.  0 when the bubble is predicted over.
  Nanos LongestFittingStep(Nanos now, Nanos predicted_end, double fit_factor = 1.0) const;

  // How much of a bubble forecast `forecast_length` long (0: unknown) must
  // remain for an imperative or starting task to be continued in it.
  Nanos ImperativeSlice(Nanos forecast_length) const;

  const DispatchConfig& config() const { return config_; }

 private:
  bool TimeFits(const DispatchCandidate& c, const BubbleView& bubble) const;
  // The step time `c` must fit: its estimate (or the unknown-step default),
  // doubled when demoted.
  Nanos StepToFit(const DispatchCandidate& c) const;
  DispatchConfig config_;
};

}  // namespace freeride
