#include "policy/next_bubble.h"

#include <algorithm>

namespace freeride {

namespace {

BubblePredictorConfig BusyTimes(const NextBubbleConfig& config) {
  BubblePredictorConfig busy;
  busy.window = config.window;
  busy.quantile = config.quantile;
  busy.max_slots = config.max_slots;
  return busy;
}

}  // namespace

NextBubblePredictor::NextBubblePredictor(NextBubbleConfig config)
    : config_(config),
      busy_(BusyTimes(config)),
      next_slot_(static_cast<size_t>(std::max(1, config.max_slots)), 0),
      agreeing_(static_cast<size_t>(std::max(1, config.max_slots)), 0) {}

size_t NextBubblePredictor::Index(uint32_t slot) const {
  return std::min<size_t>(slot, next_slot_.size() - 1);
}

void NextBubblePredictor::Observe(uint32_t previous_slot, Nanos previous_end_ns, uint32_t slot,
                                  Nanos begin_ns) {
  if (begin_ns < previous_end_ns) return;
  const size_t index = Index(previous_slot);
  if (agreeing_[index] > 0 && next_slot_[index] == slot) {
    agreeing_[index] = std::min(agreeing_[index] + 1, config_.window);
  } else {
    next_slot_[index] = slot;
    agreeing_[index] = 1;
  }
  busy_.Observe(previous_slot, begin_ns - previous_end_ns);
}

NextBubbleForecast NextBubblePredictor::Forecast(uint32_t slot, Nanos end_ns) const {
  NextBubbleForecast forecast;
  const size_t index = Index(slot);
  if (agreeing_[index] < config_.min_samples || busy_.Count(slot) < config_.min_samples)
    return forecast;
  forecast.iteration_first = next_slot_[index] == 0;
  forecast.known = true;
  forecast.slot = next_slot_[index];
  forecast.begin_ns = end_ns + busy_.Predict(slot, 0);
  return forecast;
}

void NextBubblePredictor::Reset() {
  busy_.Reset();
  std::fill(next_slot_.begin(), next_slot_.end(), 0);
  std::fill(agreeing_.begin(), agreeing_.end(), 0);
}

}  // namespace freeride
