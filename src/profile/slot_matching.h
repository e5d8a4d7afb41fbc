// Matches one rank's idle gaps across iterations into slots: the same gap of
// the schedule in every iteration, whatever type it was given in each (a
// gap's type depends on marks that move from one iteration to the next).
// Pure functions, tested on made-up iterations.
#pragma once
#include <cstddef>
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
  // Gaps of a minority of iterations that split or merged a slot most
  // iterations have, or lie past the median iteration's end: in no slot
  // (slot -1), still idle time.
  int left_out_gaps = 0;
  double left_out_ms = 0;
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
// one-off pause, that only some iterations have).  Two slots conflict when
// they overlap where they typically lie (median start to median end) and a
// gap of one lies where the other has a gap in an iteration that lacks the
// first (a gap split in two in some iterations, or gaps that move by more
// than their length): no list of slots describes both.  When one is
// had by fewer than half the iterations and the other by more than half,
// the minority's gaps are left out of the slots (counted in left_out_*);
// any other conflict is the result's `conflict`.
//
// The slots describe the median iteration (of `lengths`, the iterations'
// lengths in ms): a slot's start is the median of its starts, moved later
// where jitter would make it begin before the previous slot's median end,
// and earlier where it would end past the median iteration (a drain of
// iterations of different lengths), so that slots never overlap and end
// within the iteration.  A slot of fewer than half the iterations that lies
// past that end (the tail of a longer iteration) is left out.  Sets each
// gap's `slot`.
//
// Lining up an iteration costs a table of its gaps times the slots so far:
// past kMaxAlignCells (512 MiB) the result is a `conflict` that says so.
constexpr size_t kMaxAlignCells = size_t{1} << 25;
SlotMatch MatchSlots(std::vector<std::vector<Gap>>& gaps, const std::vector<int>& steps,
                     const std::vector<double>& lengths);

}  // namespace freeride::profile
