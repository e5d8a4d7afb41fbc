// The step time a built-in task that steps alone behind the lane's GPU gate
// aims at: a share of the lane's bubbles, learned from the gate page.
//
// Behind a gate a task is not granted its steps, so it does not learn the
// bubbles' lengths from its grants; but its GPU work is held until a bubble's
// forecast rest fits it, so a step longer than the bubbles is held through
// them, and 2 ms steps fill 1-3 ms bubbles badly (bench/results/
// gate_h100_sizer_and_ranks.md: SGD on ZBV harvested 0.36 at 2 ms steps, 0.68
// at 0.5 ms).  The daemon publishes each next bubble's forecast admission
// window in the gate page (gate/gate_page.h, ReadAheadAdmission); the task
// tries steps of a share of their median against --step-ms, and keeps the
// one that does more (common/step_target_chooser.h).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "base/clock.h"
#include "common/step_sizer.h"
#include "common/step_target_chooser.h"
#include "gate/gate_page.h"

namespace freeride::tasks {

// The admission windows of a lane's last bubbles (pure).
class BubbleWindows {
 public:
  static constexpr int kKept = 32;

  // Records one bubble's window: the time from its forecast begin to its
  // admission deadline.  A window of 0 or less (a bubble that admits
  // nothing) is not.
  void Record(int64_t window_ns);

  // The lower median of the recorded windows; 0 before the first.
  int64_t MedianNs() const;
  int count() const { return kept_; }

 private:
  std::array<int64_t, kKept> windows_{};
  int kept_ = 0, next_slot_ = 0;
};

// A step's share of the median window: a step of a third of it leaves on
// average a sixth of each window unfilled at its end, where the gate holds
// the step that would not fit.
constexpr int kStepsPerWindow = 3;
// The shortest step aimed at: 0.5 ms, the shortest measured behind the gate
// (SGD kept 97% of its 2 ms steps' rate alone; shorter steps pay each step's
// fixed cost more often).
constexpr int64_t kShortestStepNs = 500'000;

// The step time to aim at for `step_ns` (--step-ms) on bubbles whose median
// window is `median_window_ns` (0: none known, `step_ns` itself): the
// window's kStepsPerWindow-th share, within [min(kShortestStepNs, step_ns),
// step_ns].  Pure.
int64_t StepTargetForWindows(int64_t step_ns, int64_t median_window_ns);

// Most bubbles counted between two reads of the page; a larger step of the
// bubble numbers is a new stage process numbering from 1 again (one bubble).
constexpr uint32_t kMostBubblesBetweenReads = 65536;

// Whether a bubble-sized target of `target_ns` is worth a trial against
// `step_ns` (common/step_target_chooser.h): shorter by a fifth or more.
constexpr bool WorthATrial(int64_t step_ns, int64_t target_ns) { return target_ns * 5 <= step_ns * 4; }

// The mechanism: reads the gate page named by FREERIDE_GATE_PAGE (where the
// daemon launched the task on a gated lane) for each next bubble's window,
// and steps at --step-ms or at the bubble-sized target, whichever did more
// work in its last trial (StepTargetChooser).  One thread (the task's
// stepping thread).
class BubbleSizedSteps {
 public:
  // Steps of `step_ns` (--step-ms) until Start.
  explicit BubbleSizedSteps(int64_t step_ns) : step_ns_(step_ns) {}

  // At a task's first step, once it knows how it steps: only a task that
  // steps alone behind a gate (`slow` kOutvoted, common/step_sizer.h) and
  // was not told --fixed-steps (`fixed`) maps the gate page; a page that
  // cannot be opened is said on stderr (the reason kept in error()), and
  // the steps stay at `step_ns`.
  void Start(SlowChunks slow, bool fixed);

  // The step time to aim at now: `step_ns`, or StepTargetForWindows over
  // the windows the page has published so far (reads it once: a few atomic
  // loads), as the chooser says.  The first choice, and each change of it,
  // is said on stderr with the work a bubble each target did.
  int64_t TargetNs() { return TargetNsAt(MonotonicNow()); }
  // The step just run did `units` of work (StepResult::units).
  void Record(double units) { chooser_.Record(units); }

  // The same at a given time (tests).
  int64_t TargetNsAt(int64_t now_ns);

  bool watching() const { return page_.is_open(); }
  const std::string& error() const { return error_; }
  const BubbleWindows& windows() const { return windows_; }
  const StepTargetChooser& chooser() const { return chooser_; }
  uint64_t bubbles_seen() const { return bubbles_seen_; }

 private:
  int64_t step_ns_;
  GatePage page_;
  BubbleWindows windows_;
  StepTargetChooser chooser_;
  // Bubbles seen: the forecasts' bubble numbers (31 bits, numbered from 1
  // again by a new stage process) counted into a count that only grows.
  std::optional<uint32_t> latest_bubble_;
  uint64_t bubbles_seen_ = 0;
  std::string error_;
};

}  // namespace freeride::tasks
