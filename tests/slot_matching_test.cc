// MatchSlots on made-up iterations: the same gap across iterations whatever
// its type, gaps only some iterations have, jitter, and gaps that fit no list.
#include "profile/slot_matching.h"

#include <gtest/gtest.h>

namespace freeride::profile {
namespace {

Gap G(double start, double length, BubbleType type = BubbleType::kSteady) {
  return {start, length, type};
}

std::vector<int> Steps(size_t n) {
  std::vector<int> steps;
  for (size_t i = 0; i < n; ++i) steps.push_back(static_cast<int>(i) + 1);
  return steps;
}

// Iterations of 1 s: longer than any gap here, except where a test says.
std::vector<double> Lengths(size_t n) { return std::vector<double>(n, 1000.0); }

// How many iterations had each slot, in order.
std::vector<int> IterationsOf(const SlotMatch& m) {
  std::vector<int> out;
  for (const SlotSummary& s : m.slots) out.push_back(s.iterations);
  return out;
}

// No two slots overlap, as stage_replay_gpu.py and the simulator require.
void ExpectOrderedAndApart(const SlotMatch& m) {
  for (size_t i = 1; i < m.slots.size(); ++i)
    EXPECT_GE(m.slots[i].start_ms, m.slots[i - 1].start_ms + m.slots[i - 1].median_ms)
        << "slot " << i;
}

// Gaps of microseconds (--min-bubble-ms 0) by the thousand: lining them up
// would need a table of gaps x slots (24 GB for a 34 MB trace).  Past the
// bound the answer is no slots, saying why, not the machine's memory.
TEST(SlotMatching, TooManyGapsToLineUpAreAConflictThatSaysSo) {
  const size_t per_iteration = 6000;  // 6000 x 6000 pairs > kMaxAlignCells
  static_assert(per_iteration * per_iteration > kMaxAlignCells);
  std::vector<std::vector<Gap>> gaps(2);
  for (auto& iteration : gaps)
    for (size_t g = 0; g < per_iteration; ++g) iteration.push_back(G(0.1 * g, 0.05));
  SlotMatch m = MatchSlots(gaps, {7, 8}, Lengths(2));
  EXPECT_TRUE(m.slots.empty());
  EXPECT_NE(m.conflict.find("step 8 has 6000 gaps, and the iterations before it 6000 slots: too many to "
                            "line up"),
            std::string::npos)
      << m.conflict;
  EXPECT_NE(m.conflict.find("Raise --min-bubble-ms"), std::string::npos) << m.conflict;
  for (const auto& iteration : gaps)
    for (const Gap& g : iteration) EXPECT_EQ(g.slot, -1);

  // Half as many line up as before.
  std::vector<std::vector<Gap>> fewer(2);
  for (auto& iteration : fewer)
    for (size_t g = 0; g < per_iteration / 2; ++g) iteration.push_back(G(0.1 * g, 0.05));
  SlotMatch lined_up = MatchSlots(fewer, {7, 8}, Lengths(2));
  EXPECT_TRUE(lined_up.conflict.empty()) << lined_up.conflict;
  EXPECT_EQ(lined_up.slots.size(), per_iteration / 2);
}

TEST(SlotMatching, TheSameGapIsOneSlotWhateverItsType) {
  std::vector<std::vector<Gap>> gaps = {
      {G(0, 10, BubbleType::kFill), G(56.81, 49.50, BubbleType::kSteady)},
      {G(0, 11, BubbleType::kFill), G(56.41, 49.47, BubbleType::kDrain)},
      {G(0, 10, BubbleType::kFill), G(56.50, 49.40, BubbleType::kDrain)}};
  SlotMatch m = MatchSlots(gaps, Steps(3), Lengths(3));
  ASSERT_TRUE(m.conflict.empty()) << m.conflict;
  ASSERT_EQ(m.slots.size(), 2u);
  EXPECT_EQ(m.slots[1].iterations, 3);
  EXPECT_EQ(m.slots[1].type, BubbleType::kDrain);
  EXPECT_DOUBLE_EQ(m.slots[1].start_ms, 56.50);
  EXPECT_DOUBLE_EQ(m.slots[1].median_ms, 49.47);
  EXPECT_DOUBLE_EQ(m.slots[1].min_ms, 49.40);
  EXPECT_DOUBLE_EQ(m.slots[1].max_ms, 49.50);
  EXPECT_EQ(m.slots[0].median_ms, 10);
  for (const auto& it : gaps) {
    EXPECT_EQ(it[0].slot, 0);
    EXPECT_EQ(it[1].slot, 1);
  }
}

TEST(SlotMatching, AGapOnlySomeIterationsHaveIsASlotOfItsOwn) {
  // Step 2 has a short gap at 30 ms, inside what the others spend busy.
  std::vector<std::vector<Gap>> gaps = {
      {G(10, 5), G(50, 20)}, {G(10, 5), G(30, 1.2), G(50, 20)}, {G(11, 5), G(50, 21)}};
  SlotMatch m = MatchSlots(gaps, Steps(3), Lengths(3));
  ASSERT_TRUE(m.conflict.empty()) << m.conflict;
  EXPECT_EQ(IterationsOf(m), (std::vector<int>{3, 1, 3}));
  EXPECT_DOUBLE_EQ(m.slots.at(1).start_ms, 30);
  EXPECT_EQ(gaps[1][2].slot, 2);
  ExpectOrderedAndApart(m);
}

// A CPU run of DualPipeV (rank 2): the windows drift against the work, so
// the last gaps of step 1 lie 50 ms later than step 3's and no longer
// overlap them; step 3 also has a gap the others had below the threshold.
TEST(SlotMatching, GapsThatDriftByLessThanTheirLengthStayOneSlot) {
  std::vector<std::vector<Gap>> gaps = {
      {G(0, 114.9), G(1843.4, 48.4), G(2262.9, 56.7), G(2481.1, 57.7)},
      {G(0, 112.5), G(853.0, 51.0), G(1795.2, 49.1), G(2210.8, 53.7), G(2420.9, 56.4)}};
  SlotMatch m = MatchSlots(gaps, Steps(2), Lengths(2));
  ASSERT_TRUE(m.conflict.empty()) << m.conflict;
  EXPECT_EQ(IterationsOf(m), (std::vector<int>{2, 1, 2, 2, 2}));
  EXPECT_EQ(gaps[0][3].slot, 4);
  ExpectOrderedAndApart(m);
  // Gaps further apart than their length are different places.
  std::vector<std::vector<Gap>> apart = {{G(100, 10)}, {G(130, 10)}};
  SlotMatch two = MatchSlots(apart, Steps(2), Lengths(2));
  EXPECT_TRUE(two.conflict.empty());
  EXPECT_EQ(two.slots.size(), 2u);
}

TEST(SlotMatching, JitterNeverMakesSlotsOverlap) {
  // Two gaps 0.5 ms apart that wander by more than that between iterations:
  // their medians would overlap; the later slot starts at the earlier's end.
  std::vector<std::vector<Gap>> gaps = {
      {G(10, 10), G(20.3, 5)}, {G(12, 8), G(20.2, 6)}, {G(10.5, 11), G(22, 5)}};
  SlotMatch m = MatchSlots(gaps, Steps(3), Lengths(3));
  ASSERT_TRUE(m.conflict.empty()) << m.conflict;
  ASSERT_EQ(m.slots.size(), 2u);
  EXPECT_DOUBLE_EQ(m.slots[0].start_ms, 10.5);
  EXPECT_DOUBLE_EQ(m.slots[0].median_ms, 10);
  EXPECT_DOUBLE_EQ(m.slots[1].start_ms, 20.5);  // its median start is 20.3
  EXPECT_DOUBLE_EQ(m.slots[1].median_ms, 5);
  ExpectOrderedAndApart(m);
}

// With no majority to follow (one iteration of two, or a split in two of
// three), a split or merged gap leaves no list of slots.
TEST(SlotMatching, GapsThatSplitOrMergeFitNoList) {
  std::vector<std::vector<Gap>> split = {{G(10, 10)}, {G(9, 3), G(13, 8)}};
  SlotMatch m = MatchSlots(split, {7, 8}, Lengths(2));
  EXPECT_TRUE(m.slots.empty());
  EXPECT_NE(m.conflict.find("step 7"), std::string::npos) << m.conflict;
  EXPECT_NE(m.conflict.find("step 8"), std::string::npos) << m.conflict;
  // Merged in one iteration of two: the same.
  std::vector<std::vector<Gap>> merged = {{G(9, 3), G(13, 8)}, {G(10, 10)}};
  EXPECT_FALSE(MatchSlots(merged, Steps(2), Lengths(2)).conflict.empty());
}

// One iteration whose gap swallows where the others have another (a long
// first wait): the slots describe the others, and do not overlap.
TEST(SlotMatching, AnOutlierIterationsLongGapDoesNotUndoTheSlots) {
  std::vector<std::vector<Gap>> gaps = {
      {G(0, 806)}, {G(0, 480), G(542, 3), G(700, 20)}, {G(0, 478), G(540, 3), G(702, 20)}};
  SlotMatch m = MatchSlots(gaps, Steps(3), Lengths(3));
  ASSERT_TRUE(m.conflict.empty()) << m.conflict;
  EXPECT_EQ(IterationsOf(m), (std::vector<int>{3, 2, 2}));
  EXPECT_DOUBLE_EQ(m.slots.at(0).median_ms, 480);
  EXPECT_DOUBLE_EQ(m.slots.at(0).max_ms, 806);
  ExpectOrderedAndApart(m);
}

// A gap split in a minority of iterations (a small kernel or operator in the
// middle of it, once) keeps the slot most iterations have; the piece left
// over is idle time in no slot, and is counted.
TEST(SlotMatching, AGapSplitInAMinorityOfIterationsKeepsTheSlotMostHave) {
  std::vector<std::vector<Gap>> gaps = {{G(10, 10)}, {G(9, 3), G(13, 8)}, {G(10, 10)}};
  SlotMatch m = MatchSlots(gaps, Steps(3), Lengths(3));
  ASSERT_TRUE(m.conflict.empty()) << m.conflict;
  ASSERT_EQ(m.slots.size(), 1u);
  EXPECT_EQ(m.slots[0].iterations, 3);
  EXPECT_DOUBLE_EQ(m.slots[0].median_ms, 10);
  EXPECT_DOUBLE_EQ(m.slots[0].min_ms, 8);
  EXPECT_EQ(m.left_out_gaps, 1);
  EXPECT_DOUBLE_EQ(m.left_out_ms, 3);
  EXPECT_EQ(gaps[1][0].slot, -1);
  EXPECT_EQ(gaps[1][1].slot, 0);
}

// The slots describe the median iteration and end within it: a drain of
// iterations of different lengths ends with the median one, and a gap only
// the longest iteration has past that end is left out.
TEST(SlotMatching, SlotsEndWithinTheMedianIteration) {
  std::vector<std::vector<Gap>> gaps = {
      {G(40, 5), G(90, 10)}, {G(40, 5), G(95, 9), G(104.5, 2)}, {G(41, 5), G(91, 10)}};
  SlotMatch m = MatchSlots(gaps, Steps(3), {100, 107, 101});
  ASSERT_TRUE(m.conflict.empty()) << m.conflict;
  ASSERT_EQ(m.slots.size(), 2u);
  EXPECT_DOUBLE_EQ(m.slots[1].median_ms, 10);
  EXPECT_DOUBLE_EQ(m.slots[1].start_ms, 91);  // its median start 91 + 10 ends at the median 101
  EXPECT_EQ(m.left_out_gaps, 1);
  EXPECT_DOUBLE_EQ(m.left_out_ms, 2);
  EXPECT_EQ(gaps[1][2].slot, -1);
  std::vector<std::vector<Gap>> late = {{G(90, 10)}, {G(96, 10)}, {G(95, 9)}};
  SlotMatch drain = MatchSlots(late, Steps(3), {100, 106, 104});
  ASSERT_EQ(drain.slots.size(), 1u);
  EXPECT_DOUBLE_EQ(drain.slots[0].start_ms, 94);  // median start 95, moved to end at 104
  ExpectOrderedAndApart(drain);
}

TEST(SlotMatching, NoGapsNoSlots) {
  std::vector<std::vector<Gap>> none = {{}, {}};
  SlotMatch m = MatchSlots(none, Steps(2), Lengths(2));
  EXPECT_TRUE(m.slots.empty());
  EXPECT_TRUE(m.conflict.empty());
}

}  // namespace
}  // namespace freeride::profile
