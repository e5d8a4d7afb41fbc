#include "second_look_expectations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace freeride::testing {

void ExpectLongBubblesUsedAndShortOnesNot(const report::EventLogData& events, int64_t task_id) {
  // The earliest start of the task's steps (or runs) in each bubble.
  std::map<uint64_t, Nanos> first_start;
  for (const auto& s : events.steps) {
    if (s.task_id != task_id) continue;
    auto [it, fresh] = first_start.emplace(s.bubble_seq, s.start_ns);
    if (!fresh) it->second = std::min(it->second, s.start_ns);
  }
  // A bubble is long or short by what the stage meant, not by how long it
  // lasted: on a loaded machine a 50 us bubble may last milliseconds.  The
  // stage plays kShortAndLongBubbles in turn from its first bubble, and each
  // bubble moves the sequence on by 2 (begin, end).
  uint64_t first_seq = UINT64_MAX;
  for (const auto& b : events.bubbles) first_seq = std::min(first_seq, b.seq);
  int seen = 0, long_ones = 0, long_used = 0, short_ones = 0;
  std::vector<Nanos> short_lengths;
  std::vector<std::pair<Nanos, Nanos>> short_used;  // (how long it had lasted at the run, its length)
  for (const auto& b : events.bubbles) {
    if (b.ended_by != events::BubbleEnd::kMark || ++seen <= 16) continue;
    auto used = first_start.find(b.seq);
    const Nanos meant = kShortAndLongBubbles[(b.seq - first_seq) / 2 % kShortAndLongBubbles.size()];
    if (meant > 10 * kMillisecond) {
      ++long_ones;
      long_used += used != first_start.end();
    } else {
      ++short_ones;
      short_lengths.push_back(b.end_ns - b.begin_ns);
      if (used != first_start.end()) short_used.push_back({used->second - b.begin_ns, b.end_ns - b.begin_ns});
    }
  }
  ASSERT_GE(long_ones, 40);
  ASSERT_GE(short_ones, 25);
  EXPECT_GE(long_used, long_ones * 3 / 4)
      << "the task ran in " << long_used << " of " << long_ones << " long bubbles";
  // A short bubble may still be used, by the second look, when it lasts
  // longer than the short kind (a loaded machine stretches some to
  // milliseconds), but only once it has outlasted the short kind: the second
  // look comes after the longest short bubble of the slot's window
  // (BubblePredictor::ComputeSecondLook).  A run that starts before even a
  // quarter of the short bubbles had ended was let into a bubble forecast
  // short.
  const size_t quarter = short_lengths.size() / 4;
  std::nth_element(short_lengths.begin(), short_lengths.begin() + quarter, short_lengths.end());
  const Nanos typical_short = short_lengths[quarter];
  int early = 0;
  for (const auto& [at, length] : short_used) early += at < typical_short;
  EXPECT_LE(early, short_ones / 10) << "the task ran in " << short_used.size() << " of " << short_ones
                                    << " short bubbles, " << early << " of them before the bubble had "
                                    << "outlasted a quarter of the short ones (" << typical_short << " ns)";
}

}  // namespace freeride::testing
