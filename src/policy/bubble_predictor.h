// Online learning of bubble lengths, one history per schedule slot.
//
// A slot is a bubble's position in the iteration (e.g. "the gap after
// forward 2").  Bubbles in the same slot repeat every iteration with similar
// lengths, so a low quantile of the slot's recent lengths is a safe forecast:
// the dispatcher would rather waste a little of a bubble than overrun it.
#pragma once
#include <cstdint>
#include <vector>

#include "base/clock.h"

namespace freeride {

struct BubblePredictorConfig {
  int window = 16;          // recent observations kept per slot
  double quantile = 0.10;   // forecast = this quantile of the window
  int max_slots = 1024;     // slots at or above this share one history
};

class BubblePredictor {
 public:
  explicit BubblePredictor(BubblePredictorConfig config = {});

  // Forecast length of the next bubble in `slot`.  With no history for the
  // slot, returns `hint` (the stage's own estimate; 0 means "unknown", and
  // then nothing is dispatched into the bubble).  Never allocates.
  Nanos Predict(uint32_t slot, Nanos hint) const;

  // Records the measured length of a bubble in `slot`.  Never allocates.
  void Observe(uint32_t slot, Nanos length);

  // Number of observations held for `slot` (at most window).
  int Count(uint32_t slot) const;

 private:
  struct History {
    int count = 0;
    int next = 0;
  };
  size_t Index(uint32_t slot) const;

  BubblePredictorConfig config_;
  std::vector<History> histories_;
  std::vector<Nanos> samples_;  // max_slots x window ring buffers
};

}  // namespace freeride
