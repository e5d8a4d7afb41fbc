#include "policy/overhead_guard.h"

#include <algorithm>

namespace freeride {

const char* GuardLevelName(GuardLevel level) {
  switch (level) {
    case GuardLevel::kNormal: return "normal";
    case GuardLevel::kWiderMargins: return "wider-margins";
    case GuardLevel::kFewerGrants: return "fewer-grants";
    case GuardLevel::kDemoted: return "demoted";
    case GuardLevel::kPaused: return "paused";
  }
  return "unknown";
}

GuardRestrictions RestrictionsFor(GuardLevel level) {
  switch (level) {
    case GuardLevel::kNormal: return {};
    case GuardLevel::kWiderMargins: return {1.5, 1, false};
    case GuardLevel::kFewerGrants: return {1.5, 2, false};
    case GuardLevel::kDemoted: return {2.0, 2, false};
    case GuardLevel::kPaused: return {2.0, 2, true};
  }
  return {};
}

OverheadGuard::OverheadGuard(OverheadGuardConfig config) : config_(config) {
  hold_[static_cast<int>(GuardLevel::kPaused)] = config_.hold_cycles;
}

void OverheadGuard::MoveTo(GuardLevel level) {
  const bool up = level > level_;
  int& hold_of_target = hold_[static_cast<int>(level)];
  if (up && trying_) {
    hold_of_target = std::min(std::max(2 * hold_of_target, config_.hold_cycles),
                              config_.max_hold_cycles);
  } else if (!up && trying_) {
    // The level tried last held: the one above it may be left at once next time.
    hold_[static_cast<int>(level_) + 1] = level_ == GuardLevel::kDemoted ? config_.hold_cycles : 0;
  }
  trying_ = !up;
  level_ = level;
  cycles_at_level_ = 0;
}

bool OverheadGuard::Judge(const OverheadEstimate& estimate) {
  if (config_.budget <= 0) return false;
  ++cycles_at_level_;
  const bool held = cycles_at_level_ >= hold_[static_cast<int>(level_)];
  if (level_ == GuardLevel::kPaused) {
    // Nothing runs while paused, so there is nothing to judge: the pause
    // lasts its hold.
    if (!held) return false;
    MoveTo(GuardLevel::kDemoted);
    return true;
  }
  if (!estimate.known()) return false;
  if (estimate.low > config_.budget) {
    MoveTo(static_cast<GuardLevel>(static_cast<int>(level_) + 1));
    return true;
  }
  if (estimate.high < config_.budget && level_ != GuardLevel::kNormal && held) {
    MoveTo(static_cast<GuardLevel>(static_cast<int>(level_) - 1));
    return true;
  }
  return false;
}

}  // namespace freeride
