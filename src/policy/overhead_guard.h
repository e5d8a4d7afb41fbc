// Keeps the trainer's slowdown within a budget, from the live estimate.
//
// When the estimate's whole 95% interval lies above the budget, side work is
// cut back one level; when the whole interval lies below it, side work gets
// one level back.  After each change the estimate starts afresh (the old
// cycles measured another level), so every decision rests on cycles measured
// at the level it judges.  A level given back that proves over budget again
// is held twice as long before the next try (up to a bound), so a trainer
// whose cost sits near the budget is not swung back and forth.  Pausing is
// the last level: with no side work there is nothing to estimate, so a pause
// lasts its hold and then the level below is tried.
//
// Pure policy: the lane feeds it estimates and applies the level.  It never
// touches the trainer: every level only restricts what side tasks may do.
#pragma once
#include <cstdint>

#include "policy/overhead_probe.h"

namespace freeride {

enum class GuardLevel : int {
  kNormal = 0,
  kWiderMargins = 1,  // steps must fit with a wider margin
  kFewerGrants = 2,   // and only every other bubble is served
  kDemoted = 3,       // every task runs as if demoted: twice its step must fit
  kPaused = 4,        // no side work at all
};
constexpr int kGuardLevels = 5;
const char* GuardLevelName(GuardLevel level);

// What a level means for serving a bubble; the lane publishes it to the
// tasks, which apply it in their own fit checks.
struct GuardRestrictions {
  double fit_factor = 1.0;  // a step's estimate is multiplied by this
  uint32_t serve_every = 1;  // serve bubbles whose seq / 2 is a multiple of it
  bool paused = false;
};
GuardRestrictions RestrictionsFor(GuardLevel level);

struct OverheadGuardConfig {
  double budget = 0.005;  // the slowdown allowed, 0.005 = 0.5%; <= 0 disables
  // Cycles a level is held before a less restrictive one is tried again,
  // once a try has failed (and a pause, always); doubling with each failed
  // try, up to max_hold_cycles.
  int hold_cycles = 5;
  int max_hold_cycles = 80;
};

class OverheadGuard {
 public:
  explicit OverheadGuard(OverheadGuardConfig config = {});

  // Judges the newest estimate, once per closed probe cycle.  Returns true
  // when the level changed (the caller then resets its estimator).  Thread:
  // the lane's.
  bool Judge(const OverheadEstimate& estimate);
  GuardLevel level() const { return level_; }
  const OverheadGuardConfig& config() const { return config_; }

 private:
  OverheadGuardConfig config_;
  void MoveTo(GuardLevel level);

  GuardLevel level_ = GuardLevel::kNormal;
  int cycles_at_level_ = 0;  // cycles judged since the level was entered
  // Cycles each level is held before the level below it is tried.
  int hold_[kGuardLevels] = {};
  // The level was entered from above: a try, which fails if it goes back up.
  bool trying_ = false;
};

}  // namespace freeride
