// When an SDK task under a daemon saves its next checkpoint.
//
// A save blocks the task: it takes no bubble until Save returns, and a large
// model's state (VGG-19 with its optimizer, over a gigabyte) takes over a second
// to write.  Saves every few seconds would then cost a good share of the
// bubbles.  So saves are spaced by what they cost: the next is due `base`
// after the last one ended, or kCostRatio times that save's length,
// whichever is later (but no more than kLongestSpacing, so that a task whose
// saves are very slow still keeps a recent one).  Saving then takes at most
// about 1 / kCostRatio of the task's time for saves up to kLongestSpacing /
// kCostRatio (12 s); slower ones take more.  A failed save is spaced the same
// way, so that a full disk is not retried after every bubble.
#pragma once
#include <algorithm>

#include "base/clock.h"

namespace freeride {

class CheckpointSchedule {
 public:
  static constexpr Nanos kCostRatio = 50;
  static constexpr Nanos kLongestSpacing = 10 * 60 * kSecond;

  // The first save is due `base` after `now`.
  CheckpointSchedule(Nanos base, Nanos now) : base_(std::max<Nanos>(base, 0)), due_(now + base_) {}

  // Whether a save is due at `now`.
  bool Due(Nanos now) const { return now >= due_; }

  // A save (successful or not) ran from `started` to `ended`.
  void Attempted(Nanos started, Nanos ended) {
    const Nanos cost_spacing =
        std::min(kLongestSpacing, kCostRatio * std::clamp<Nanos>(ended - started, 0, kLongestSpacing));
    due_ = ended + std::max(base_, cost_spacing);
  }

  Nanos due() const { return due_; }

 private:
  Nanos base_;
  Nanos due_;
};

}  // namespace freeride
