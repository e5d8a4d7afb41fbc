#include "second_look_expectations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>

namespace freeride::testing {

void ExpectLongBubblesUsedAndShortOnesNot(const report::EventLogData& events, int64_t task_id) {
  std::set<uint64_t> used;
  for (const auto& s : events.steps)
    if (s.task_id == task_id) used.insert(s.bubble_seq);
  // A bubble is long or short by what the stage meant, not by how long it
  // lasted: on a loaded machine a 50 us bubble may last milliseconds.  The
  // stage plays kShortAndLongBubbles in turn from its first bubble, and each
  // bubble moves the sequence on by 2 (begin, end).
  uint64_t first_seq = UINT64_MAX;
  for (const auto& b : events.bubbles) first_seq = std::min(first_seq, b.seq);
  int seen = 0, long_ones = 0, long_used = 0, short_ones = 0, short_used = 0;
  for (const auto& b : events.bubbles) {
    if (b.ended_by != events::BubbleEnd::kMark || ++seen <= 16) continue;
    const bool with_step = used.count(b.seq) > 0;
    const Nanos meant = kShortAndLongBubbles[(b.seq - first_seq) / 2 % kShortAndLongBubbles.size()];
    if (meant > 10 * kMillisecond) {
      ++long_ones;
      long_used += with_step;
    } else {
      ++short_ones;
      short_used += with_step;
    }
  }
  ASSERT_GE(long_ones, 40);
  ASSERT_GE(short_ones, 25);
  EXPECT_GE(long_used, long_ones * 3 / 4)
      << "the task ran in " << long_used << " of " << long_ones << " long bubbles";
  EXPECT_LE(short_used, short_ones / 10)
      << "the task ran in " << short_used << " of " << short_ones << " short bubbles";
}

}  // namespace freeride::testing
