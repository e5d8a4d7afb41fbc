#include "policy/bubble_predictor.h"

#include <algorithm>
#include <array>

#include "policy/quantile.h"

namespace freeride {

BubblePredictor::BubblePredictor(BubblePredictorConfig config) : config_(config) {
  config_.window = std::clamp(config_.window, 1, kMaxQuantileWindow);
  config_.max_slots = std::max(config_.max_slots, 1);
  histories_.resize(static_cast<size_t>(config_.max_slots));
  second_looks_.resize(static_cast<size_t>(config_.max_slots));
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

SecondLook BubblePredictor::SecondLookFor(uint32_t slot) const {
  return second_looks_[Index(slot)];
}

SecondLook BubblePredictor::ComputeSecondLook(size_t index) const {
  const int n = histories_[index].count;
  const int min_long = std::max(config_.second_look_min_samples, 1);
  if (n <= min_long) return {};
  std::array<Nanos, kMaxQuantileWindow> sorted;
  std::copy_n(&samples_[index * config_.window], n, sorted.begin());
  std::sort(sorted.begin(), sorted.begin() + n);
  const Nanos first = sorted[NearestRankIndex(static_cast<size_t>(n), config_.quantile)];
  // The second look adds to the first forecast: every bubble is served up
  // to `first`, and the ones still open at `after` (the longer kind) from
  // `after` on to `length` as well.  It must add, per bubble on average over
  // the window, (min_gain - 1) times the first forecast's usable time.
  SecondLook best;
  double best_value = (config_.second_look_min_gain - 1.0) * static_cast<double>(first);
  // At least two of the short kind, so that its spread is seen.
  for (int shorter = 2; n - shorter >= min_long; ++shorter) {
    const Nanos short_end = sorted[shorter - 1], long_start = sorted[shorter];
    if (long_start <= short_end) continue;
    // Late enough that a short bubble a little longer than any seen is over
    // (a quarter longer, twice the short kind's spread past its longest, at
    // least 100 us more: bubbles of microseconds vary by their size again,
    // ones of milliseconds by a few percent), early enough to be well before
    // the long ones end.  A multiple of the short kind would waste most of a
    // long bubble whose short kind is itself milliseconds long, e.g. a last
    // stage's wait that is, one iteration in a few, the pipeline's fill
    // alone.
    const Nanos margin =
        std::max({short_end / 4, 2 * (short_end - sorted[0]), 100 * kMicrosecond});
    const Nanos after = std::min(short_end + margin, short_end + (long_start - short_end) / 2);
    // The shortest of the longer ones, not a quantile: a short bubble taken
    // for a long one costs a whole step of overrun, not a little of one.
    const int longer = n - shorter;
    const Nanos length = long_start;
    const double value =
        static_cast<double>(longer) / n * static_cast<double>(length - std::max(after, first));
    if (value > best_value) {
      best_value = value;
      best = {after, length};
    }
  }
  return best;
}

Nanos BubblePredictor::PredictOpenFor(uint32_t slot, Nanos hint, Nanos elapsed) const {
  SecondLook look = SecondLookFor(slot);
  if (look.exists() && elapsed >= look.after) return look.length;
  return Predict(slot, hint);
}

void BubblePredictor::Observe(uint32_t slot, Nanos length) {
  if (length < 0) return;
  size_t index = Index(slot);
  History& h = histories_[index];
  samples_[index * config_.window + h.next] = length;
  h.next = (h.next + 1) % config_.window;
  h.count = std::min(h.count + 1, config_.window);
  second_looks_[index] = ComputeSecondLook(index);
}

int BubblePredictor::Count(uint32_t slot) const { return histories_[Index(slot)].count; }

void BubblePredictor::Reset() {
  std::fill(histories_.begin(), histories_.end(), History{});
  std::fill(second_looks_.begin(), second_looks_.end(), SecondLook{});
}

}  // namespace freeride
