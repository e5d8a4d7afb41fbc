// Matches one rank's idle gaps across iterations into slots: the same gap of
// the schedule in every iteration, whatever type it was given in each (a
// gap's type depends on marks that move from one iteration to the next).
// Pure functions, tested on made-up iterations.
#pragma once
#include <string>
#include <vector>

#include "schedule/pipeline_schedule.h"

namespace freeride::profile {

struct Gap {
  double start_ms = 0;  // from the iteration window's start
  double duration_ms = 0;
  BubbleType type = BubbleType::kSteady;
  int slot = -1;  // index into the rank's slots once matched; -1 when they could not be
};

// One bubble slot summarised over the iterations that had it.
struct SlotSummary {
  BubbleType type = BubbleType::kSteady;  // the type most of its gaps had
  int iterations = 0;                     // how many iterations had this slot
  double start_ms = 0;                    // median (see MatchSlots)
  double median_ms = 0, p10_ms = 0, min_ms = 0, max_ms = 0;
};

struct SlotMatch {
  std::vector<SlotSummary> slots;  // by start; empty when `conflict` is set
  // Why the iterations' gaps do not line up into one list of slots, naming
  // the steps and times; empty when they do.
  std::string conflict;
};

// `gaps[i]` are iteration i's gaps by start and `steps[i]` its step number
// (for messages).  Gaps of different iterations are the same slot when they
// lie at about the same time from their windows' starts (they overlap, or
// are apart by less than the shorter one's length: windows drift against
// the work).  Starting from the iteration with the most gaps, each
// iteration is aligned to the slots found so far by the order-keeping
// matching that pairs the most gaps, and of those the closest pairs; a gap
// left over starts a slot of its own (a gap near --min-bubble-ms, or a
// one-off pause, that only some iterations have).  The result conflicts
// when a gap of one iteration overlaps where another iteration has a
// different slot that the first one lacks (a gap split in two in one
// iteration, or gaps that move by more than their length): no list of
// slots describes both.
//
// Sets each gap's `slot`.  A slot's start is the median of its starts, moved
// later where jitter would make it begin before the previous slot's median
// end, so that slots never overlap.
SlotMatch MatchSlots(std::vector<std::vector<Gap>>& gaps, const std::vector<int>& steps);

}  // namespace freeride::profile
