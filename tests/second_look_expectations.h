// A slot whose bubbles are sometimes over in microseconds and sometimes long
// (the neighbour's data was there already, or not), and what serving it well
// looks like: the tests of the second look, on virtual time and in real
// time, share both.
#pragma once
#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "report/event_log_reader.h"

namespace freeride::testing {

// One slot's bubble lengths, in turn: short in 2 of every 5, so the p10 of
// its window is short.
inline const std::vector<Nanos> kShortAndLongBubbles = {20 * kMillisecond, 50 * kMicrosecond,
                                                        20 * kMillisecond, 20 * kMillisecond,
                                                        50 * kMicrosecond};

// Of the bubbles ended by a mark after the first 16 (the predictor's window
// fills first), at least 3 in 4 of the long ones had a step (or an
// imperative run) of `task_id` in them, and at most 1 in 10 of the short ones
// had one that started before the bubble had outlasted a quarter of the short
// ones (a short bubble stretched by a loaded machine may be used by the second
// look, after the short kind); and there were at least 40 long and 25 short.
void ExpectLongBubblesUsedAndShortOnesNot(const report::EventLogData& events, int64_t task_id);

}  // namespace freeride::testing
