// The daemon's reading of what a task wrote into its segment: which step
// records to believe and how a step's time splits against its bubble.
//
// A side task is other people's code and its segment is writable by it, so
// every figure read from it is checked before it is used; a record that
// makes no sense is dropped, never trusted, and never crashes the daemon.
//
// Pure functions; any thread.
#pragma once
#include <cstdint>
#include <vector>

#include "channel/task_segment.h"

namespace freeride {

// True when a step record's times can be believed: it ends no earlier than
// it starts, and both times are positive.  Its time is then counted (as
// harvest or overrun) whatever its units say: a task's units are its own
// figures, its time is the training's.
bool PlausibleStep(const StepRecord& step);

// True when a step's units can be believed: finite and >= 0.  Others (a
// NaN loss returned as units, a delta below 0) count as 0 units.
bool PlausibleUnits(double units);

// How a step splits against a bubble [begin, end]: time inside it and time
// past its end.  Both are >= 0 and computed without overflow for any input.
struct StepShare {
  int64_t inside = 0;
  int64_t overrun = 0;
};
StepShare ShareOfStep(const StepRecord& step, int64_t begin, int64_t end);

// Appends records [*tail, head) of a ring of `ring_size` slots to *out, the
// newest ring_size at most (older ones were overwritten), and moves *tail to
// head.  A head behind *tail (a task rewinding its counter) yields nothing
// and leaves *tail.  `out` may be null: *tail still moves.  Returns how many
// records were overwritten before they could be read.
uint64_t CollectSteps(const StepRecord* ring, uint64_t ring_size, uint64_t head, uint64_t* tail,
                      std::vector<StepRecord>* out);

}  // namespace freeride
