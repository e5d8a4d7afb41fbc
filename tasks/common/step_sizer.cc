#include "common/step_sizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "freeride/task.h"

namespace freeride::tasks {

SlowChunks SlowChunksFromEnvironment(bool on_gpu, bool runs_alone) {
  const char* page = std::getenv("FREERIDE_GATE_PAGE");
  const bool gated = page != nullptr && *page != '\0';
  return on_gpu && runs_alone && gated ? SlowChunks::kOutvoted : SlowChunks::kBelieved;
}

SlowChunks SlowChunksForThisStep(bool on_gpu) {
  return SlowChunksFromEnvironment(on_gpu, StepBudgetNs() == INT64_MAX);
}

StepSizer::StepSizer(int64_t target_ns, int64_t initial_items, int64_t min_items,
                     int64_t max_items, SlowChunks slow)
    : target_ns_(std::max<int64_t>(1, target_ns)),
      min_(std::max<int64_t>(1, min_items)),
      max_(std::max(std::max<int64_t>(1, min_items), max_items)),
      next_(std::clamp(initial_items, min_, max_)),
      slow_(slow) {}

void StepSizer::Record(int64_t items, int64_t elapsed_ns) {
  if (items <= 0 || elapsed_ns <= 0) return;
  double sample = static_cast<double>(elapsed_ns) / items;
  if (slow_ == SlowChunks::kOutvoted) {
    recent_[next_slot_] = sample;
    next_slot_ = (next_slot_ + 1) % kRecent;
    kept_ = std::min(kept_ + 1, kRecent);
    std::array<double, kRecent> sorted = recent_;
    // The lower median of what is kept: of two, the cheaper.
    const int median = (kept_ - 1) / 2;
    std::nth_element(sorted.begin(), sorted.begin() + median, sorted.begin() + kept_);
    ns_per_item_ = sorted[median];
  } else {
    // A slow chunk is believed at once (it overran the budget); a fast one
    // moves the estimate a quarter of the way, so noise does not grow chunks
    // into overruns.
    ns_per_item_ = ns_per_item_ == 0 || sample > ns_per_item_
                       ? sample
                       : 0.75 * ns_per_item_ + 0.25 * sample;
  }
  double items_for_target = target_ns_ / ns_per_item_;
  // Grow at most 2x per step while learning.
  double bounded = std::min(items_for_target, 2.0 * static_cast<double>(items));
  next_ = std::clamp(static_cast<int64_t>(std::floor(bounded)), min_, max_);
}

}  // namespace freeride::tasks
