// Online learning of bubble lengths, one history per schedule slot.
//
// A slot is a bubble's position in the iteration (e.g. "the gap after
// forward 2").  Bubbles in the same slot repeat every iteration with similar
// lengths, so a low quantile of the slot's recent lengths is a safe forecast:
// the dispatcher would rather waste a little of a bubble than overrun it.
//
// Some slots are of two kinds: most times the neighbour's data is already
// there and the bubble lasts microseconds, other times it lasts tens of
// milliseconds.  A low quantile then forecasts the short kind every time, and
// the long bubbles go unused.  The second look fixes that: a bubble still
// open a little after the short kind would have ended is one of the long
// kind, and is forecast from those alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/clock.h"

namespace freeride {

struct BubblePredictorConfig {
  int window = 16;          // recent observations kept per slot
  double quantile = 0.10;   // forecast = this quantile of the window
  int max_slots = 1024;     // slots at or above this share one history
  // A second look forecasts the shortest of the window's longer bubbles; it
  // needs at least this many of them...
  int second_look_min_samples = 3;
  // ...and, added to the first forecast (which serves every bubble up to
  // it), must promise this many times the first forecast's usable time, on
  // average over the window.  The short kind needs two bubbles at least.
  double second_look_min_gain = 1.5;
};

// If a bubble of the slot is still open `after` its begin, its length is
// forecast as `length`.  Both 0: no second look (the slot's bubbles are of
// one kind, or too few are long).
struct SecondLook {
  Nanos after = 0;
  Nanos length = 0;
  bool exists() const { return length > 0; }
};

class BubblePredictor {
 public:
  explicit BubblePredictor(BubblePredictorConfig config = {});

  // Forecast length of the next bubble in `slot`.  With no history for the
  // slot, returns `hint` (the stage's own estimate; 0 means "unknown", and
  // then nothing is dispatched into the bubble).  Never allocates.
  Nanos Predict(uint32_t slot, Nanos hint) const;

  // The second look for `slot` (see SecondLook), from the same window as
  // Predict.  Worked out when the slot's history changes (Observe), so that
  // asking before every served bubble costs a lookup.  Never allocates.
  SecondLook SecondLookFor(uint32_t slot) const;

  // The forecast for a bubble in `slot` that has been open for `elapsed`:
  // the second look's length once `elapsed` reaches its point, else Predict.
  Nanos PredictOpenFor(uint32_t slot, Nanos hint, Nanos elapsed) const;

  // Records the measured length of a bubble in `slot` and works out its
  // second look again (a sort of the window).  Never allocates.
  void Observe(uint32_t slot, Nanos length);

  // Number of observations held for `slot` (at most window).
  int Count(uint32_t slot) const;

  // Forgets every slot's history, as if constructed again: the next bubble
  // of each slot is forecast from its hint.  For a new training process,
  // whose schedule may put bubbles of other lengths in the same slots.
  // Never allocates.
  void Reset();

 private:
  struct History {
    int count = 0;
    int next = 0;
  };
  size_t Index(uint32_t slot) const;
  SecondLook ComputeSecondLook(size_t index) const;

  BubblePredictorConfig config_;
  std::vector<History> histories_;
  std::vector<Nanos> samples_;  // max_slots x window ring buffers
  std::vector<SecondLook> second_looks_;  // per history, as of its last Observe
};

}  // namespace freeride
