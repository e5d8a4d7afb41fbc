#include "policy/bubble_predictor.h"

#include <algorithm>
#include <array>

#include "policy/quantile.h"

namespace freeride {

BubblePredictor::BubblePredictor(BubblePredictorConfig config) : config_(config) {
  config_.window = std::clamp(config_.window, 1, kMaxQuantileWindow);
  config_.max_slots = std::max(config_.max_slots, 1);
  histories_.resize(static_cast<size_t>(config_.max_slots));
  samples_.resize(static_cast<size_t>(config_.max_slots) * config_.window);
}

size_t BubblePredictor::Index(uint32_t slot) const {
  return std::min<size_t>(slot, histories_.size() - 1);
}

Nanos BubblePredictor::Predict(uint32_t slot, Nanos hint) const {
  size_t index = Index(slot);
  const History& h = histories_[index];
  if (h.count == 0) return std::max<Nanos>(hint, 0);
  return QuantileOf(&samples_[index * config_.window], h.count, config_.quantile);
}

void BubblePredictor::Observe(uint32_t slot, Nanos length) {
  if (length < 0) return;
  size_t index = Index(slot);
  History& h = histories_[index];
  samples_[index * config_.window + h.next] = length;
  h.next = (h.next + 1) % config_.window;
  h.count = std::min(h.count + 1, config_.window);
}

int BubblePredictor::Count(uint32_t slot) const { return histories_[Index(slot)].count; }

}  // namespace freeride
