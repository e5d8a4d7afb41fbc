// A live estimate of what side work costs the trainer.
//
// The daemon withholds side work in short windows at regular cycles and
// compares the training iterations inside each window with the ones served
// around it in the same cycle.  Comparing within a cycle cancels drift (a
// warming GPU, a changing sequence length); the spread of the per-cycle
// ratios gives the interval.  An iteration is the time between successive
// begin marks of the stage's first slot, as each rank sees it.
//
// Pure policy: the windows are a function of time, and every lane of a node
// shares one schedule, so that all of them withhold at once and the withheld
// iterations are free of every lane's side work.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "base/clock.h"

namespace freeride {

struct ProbeConfig {
  // One cycle lasts this many typical iterations; side work is withheld for
  // `withheld_iterations` of them (5 in 100 loses 5% of the side work).
  int period_iterations = 100;
  int withheld_iterations = 5;
  // Iterations seen before the typical length, and so the schedule, is set.
  int warmup_iterations = 20;
  // Short iterations get longer cycles and windows (the same share
  // withheld), so that a window is published to the tasks well before it
  // starts by a lane that accounts for bubbles in batches.
  Nanos min_period = 4 * kSecond;
  // A period of at least 4 x (withheld + 1) iterations, so that each cycle's
  // window lies inside it with served iterations on both sides.  A period of
  // 0 (no probe) is not valid either; the caller says whether that is wanted.
  bool Valid() const {
    return period_iterations > 0 && withheld_iterations > 0 &&
           4 * (withheld_iterations + 1) <= period_iterations;
  }
};

// A span of CLOCK_MONOTONIC time, [start, end).
struct TimeWindow {
  Nanos start = 0;
  Nanos end = 0;
  bool Contains(Nanos t) const { return t >= start && t < end; }
  bool Overlaps(Nanos from, Nanos to) const { return from < end && to > start; }
};

// Where the withheld windows lie.  Cycle c is [c * period, (c + 1) * period)
// of CLOCK_MONOTONIC time, which every process of a host shares; its window
// starts at an offset that varies from cycle to cycle (a hash of c), so that
// no periodic event of the training (an evaluation every N iterations) keeps
// falling into, or out of, the windows.  Immutable; safe to copy and share.
class ProbeSchedule {
 public:
  ProbeSchedule() = default;  // disabled: nothing is withheld
  // A schedule for iterations of about `iteration` length.  The window holds
  // one iteration more than `config.withheld_iterations`, since it opens
  // mid-iteration.  Disabled when the period is under four windows.
  static ProbeSchedule ForIteration(Nanos iteration, const ProbeConfig& config);

  bool enabled() const { return period_ > 0; }
  Nanos period() const { return period_; }
  Nanos window_length() const { return window_; }
  int64_t CycleOf(Nanos t) const { return period_ > 0 ? t / period_ : 0; }
  TimeWindow WindowOf(int64_t cycle) const;
  // Whether side work is withheld at `t`.
  bool Withheld(Nanos t) const;
  // The first window that ends after `t` (the one holding `t`, if any).
  TimeWindow NextWindow(Nanos t) const;

 private:
  Nanos period_ = 0;
  Nanos window_ = 0;
};

// The running estimate: how much longer the served iterations are than the
// withheld ones, as a share of the withheld ones (0.004 is +0.4%).
struct OverheadEstimate {
  int cycles = 0;       // cycles that gave a ratio (in the window)
  int min_cycles = 0;   // needed before there is an estimate
  bool known() const { return cycles >= min_cycles && min_cycles > 0; }
  double mean = 0;      // meaningful only when known()
  double low = 0;       // 95% interval over the cycles
  double high = 0;
  int64_t withheld_iterations = 0;  // counted towards the cycles in the window
  int64_t served_iterations = 0;
};

struct OverheadEstimatorConfig {
  int window_cycles = 20;  // the estimate is over the newest this many cycles
  int min_cycles = 3;      // fewer: no estimate
  // A cycle counts only with this many clean iterations of each kind.
  int min_withheld = 2;
  int min_served = 5;
};

// Not thread-safe: one lane's thread feeds it; others read copies of
// Estimate() that the owner publishes.
class OverheadEstimator {
 public:
  explicit OverheadEstimator(OverheadEstimatorConfig config = {});

  // One iteration of the trainer, [begin, end).  It is withheld when it lies
  // wholly inside its cycle's window, served when it does not touch it, and
  // ignored otherwise.  Iterations must come in order of `begin`.  Returns
  // true when the iteration closed a cycle (a new estimate may exist).
  bool ObserveIteration(Nanos begin, Nanos end, const ProbeSchedule& schedule);
  OverheadEstimate Estimate() const;
  // Forgets every cycle: what side work may do has changed, so older cycles
  // no longer say what it costs.
  void Reset();
  // Cycles that gave a ratio since construction, Reset included: a closed
  // cycle that left it unchanged left the estimate unchanged too.
  int64_t ratios_added() const { return ratios_added_; }

 private:
  void CloseCycle();

  OverheadEstimatorConfig config_;
  int64_t cycle_ = -1;  // the cycle being filled
  std::vector<Nanos> withheld_, served_;
  std::vector<double> ratios_;  // the newest window_cycles, oldest first
  std::vector<int64_t> ratio_withheld_, ratio_served_;  // iterations behind each ratio
  int64_t ratios_added_ = 0;
};

// The two-sided 95% Student t quantile for `degrees_of_freedom` (>= 1).
double StudentT95(int degrees_of_freedom);

}  // namespace freeride
