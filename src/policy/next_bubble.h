// Forecast of a lane's next bubble, made as one ends: which slot it will be
// and when it will begin.
//
// Side work held on the host until the daemon sees a bubble begin starts
// hundreds of microseconds into it.  With the next bubble's begin forecast,
// each task may queue its first pieces behind the shut GPU gate a short lead
// before that begin, so that the GPU starts them when the stage's stream
// opens the gate (gate/piece_admission.h).  A stage's schedule repeats each
// iteration: after a bubble in slot s, the same slot follows after a busy
// time of similar length.  So the forecast is learned per slot that ended:
// the slot that followed it (when the last few agree) and the median of the
// busy times between them.  A median, not a low quantile: a forecast early
// by d leaves a wait pending for d longer, one late by d costs d of the
// bubble; neither is the safe side.
//
// The first bubble of an iteration (slot 0, as the lane's overhead probe
// counts iterations) is forecast, but flagged: nothing may be queued ahead
// of it.  Trainers pause between iterations: evaluation, a checkpoint,
// marks turned off.  A wait queued for a bubble that does not come stays
// pending on the GPU until the next one does, and a pending wait slows the
// training (gate/piece_admission.h): on two H200s, a trainer alternating its
// marks off for 5 iterations at a time ran its marks-off iterations 0.70%
// slower than with no side process, against -0.05% with nothing queued
// ahead (bench/results/gate_ahead.md).  Its forecast only lets a piece be
// queued once the gate is open, before the daemon has seen the begin.
// Within an iteration the next bubble is the schedule's.  Pure; no clock.
#pragma once
#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "policy/bubble_predictor.h"

namespace freeride {

struct NextBubbleConfig {
  int window = 16;       // busy times kept per slot
  double quantile = 0.5;
  int min_samples = 3;   // a forecast needs this many busy times, and as many agreeing next slots
  int max_slots = 1024;  // slots at or above this share one history
};

struct NextBubbleForecast {
  bool known = false;
  uint32_t slot = 0;
  Nanos begin_ns = 0;
  bool iteration_first = false;  // slot 0: nothing may be queued ahead of it
};

class NextBubblePredictor {
 public:
  explicit NextBubblePredictor(NextBubbleConfig config = {});

  // A bubble in `slot` began at `begin_ns`; the bubble before it was in
  // `previous_slot` and ended at `previous_end_ns`.  A begin before that end
  // (a clock or mark out of order) is not learned from.  Never allocates.
  void Observe(uint32_t previous_slot, Nanos previous_end_ns, uint32_t slot, Nanos begin_ns);

  // The bubble that will follow one in `slot` that ended at `end_ns`:
  // unknown until `min_samples` bubbles have followed that slot, the last
  // `min_samples` of them in the same slot; flagged iteration_first when
  // that is slot 0 (see above).  Never allocates.
  NextBubbleForecast Forecast(uint32_t slot, Nanos end_ns) const;

  // Forgets everything (a new stage process).  Never allocates.
  void Reset();

 private:
  size_t Index(uint32_t slot) const;

  NextBubbleConfig config_;
  BubblePredictor busy_;           // per slot that ended: the busy time until the next begin
  std::vector<uint32_t> next_slot_;  // per slot that ended: the slot that followed it last
  std::vector<int> agreeing_;        // how many times in a row that slot followed
};

}  // namespace freeride
