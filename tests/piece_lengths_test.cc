// The kinds of piece the gate learns lengths for (gate/piece_key.h) and the
// table it learns them in (gate/piece_lengths.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "gate/piece_key.h"
#include "gate/piece_lengths.h"

namespace freeride::gate {
namespace {

void* const kKernel = reinterpret_cast<void*>(0x7f0000001000);
void* const kOtherKernel = reinterpret_cast<void*>(0x7f0000002000);
CuStream const kStream = reinterpret_cast<CuStream>(0x1000);

uint64_t Launch(void* f, unsigned gx, unsigned bx = 128, unsigned shm = 0) {
  return PieceKeyOf<GatedFunction::kLaunchKernel>(f, gx, 1u, 1u, bx, 1u, 1u, shm, kStream,
                                                  static_cast<void**>(nullptr), static_cast<void**>(nullptr));
}

TEST(PieceKey, AKernelIsOfOneKindPerFunctionAndLaunchShape) {
  EXPECT_EQ(Launch(kKernel, 64), Launch(kKernel, 64));
  std::set<uint64_t> kinds = {Launch(kKernel, 64), Launch(kKernel, 65), Launch(kKernel, 64, 256),
                              Launch(kKernel, 64, 128, 4096), Launch(kOtherKernel, 64)};
  EXPECT_EQ(kinds.size(), 5u);
  EXPECT_EQ(kinds.count(0), 0u);
}

TEST(PieceKey, TheSameLaunchThroughAnyKernelEntryPointIsOfTheSameKind) {
  LaunchConfigHead config{{64, 1, 1}, {128, 1, 1}, 0, kStream};
  EXPECT_EQ(PieceKeyOf<GatedFunction::kLaunchKernelEx>(&config, kKernel, static_cast<void**>(nullptr),
                                                        static_cast<void**>(nullptr)),
            Launch(kKernel, 64));
  EXPECT_EQ(PieceKeyOf<GatedFunction::kLaunchCooperativeKernel>(kKernel, 64u, 1u, 1u, 128u, 1u, 1u, 0u, kStream,
                                                                 static_cast<void**>(nullptr)),
            Launch(kKernel, 64));
  const LaunchConfigHead* none = nullptr;
  EXPECT_EQ(PieceKeyOf<GatedFunction::kLaunchKernelEx>(none, kKernel, static_cast<void**>(nullptr),
                                                        static_cast<void**>(nullptr)),
            0u);
}

TEST(PieceKey, AGraphIsOfItsExecutablesKindACopyOrFillOfItsSizesAndOtherWorkOfNone) {
  void* exec = reinterpret_cast<void*>(0x5000);
  const uint64_t graph = PieceKeyOf<GatedFunction::kGraphLaunch>(exec, kStream);
  EXPECT_EQ(graph, PieceKeyOf<GatedFunction::kGraphLaunch>(exec, kStream));
  EXPECT_NE(graph, PieceKeyOf<GatedFunction::kGraphLaunch>(reinterpret_cast<void*>(0x6000), kStream));
  const CuDevicePtr a = 0x10000, b = 0x20000;
  const uint64_t copy = PieceKeyOf<GatedFunction::kMemcpyAsync>(a, b, size_t{4096}, kStream);
  EXPECT_EQ(copy, PieceKeyOf<GatedFunction::kMemcpyAsync>(b, a, size_t{4096}, kStream));  // the size, not where
  EXPECT_NE(copy, PieceKeyOf<GatedFunction::kMemcpyAsync>(a, b, size_t{8192}, kStream));
  EXPECT_NE(copy, PieceKeyOf<GatedFunction::kMemcpyDtoDAsync>(a, b, size_t{4096}, kStream));
  EXPECT_NE(copy, PieceKeyOf<GatedFunction::kMemsetD32Async>(a, 0u, size_t{4096}, kStream));
  EXPECT_NE(PieceKeyOf<GatedFunction::kMemcpyPeerAsync>(a, nullptr, b, nullptr, size_t{4096}, kStream), 0u);
  const void* descriptor = &a;
  EXPECT_EQ(PieceKeyOf<GatedFunction::kMemcpy2DAsync>(descriptor, kStream), 0u);
}

TEST(PieceLengths, AKindIsPredictedByTheLongestOfItsLastFourLengths) {
  PieceLengths lengths;
  const uint64_t kind = Launch(kKernel, 64);
  EXPECT_EQ(lengths.Estimate(kind), 0);
  EXPECT_EQ(lengths.Count(kind), 0u);
  lengths.Add(kind, 300);
  EXPECT_EQ(lengths.Estimate(kind), 300);
  lengths.Add(kind, 900);
  lengths.Add(kind, 100);
  lengths.Add(kind, 200);
  EXPECT_EQ(lengths.Estimate(kind), 900);
  EXPECT_EQ(lengths.Count(kind), PieceLengths::kRecent);
  lengths.Add(kind, 150);  // the 300 goes
  EXPECT_EQ(lengths.Estimate(kind), 900);
  lengths.Add(kind, 150);  // the 900 goes
  EXPECT_EQ(lengths.Estimate(kind), 200);
  EXPECT_EQ(lengths.Estimate(Launch(kKernel, 65)), 0) << "another shape is another kind";
}

TEST(PieceLengths, WorkOfNoKindAndNegativeLengthsAreNotLearned) {
  PieceLengths lengths;
  lengths.Add(0, 500);
  EXPECT_EQ(lengths.Estimate(0), 0);
  EXPECT_EQ(lengths.kinds(), 0u);
  const uint64_t kind = Launch(kKernel, 64);
  lengths.Add(kind, -5);
  EXPECT_EQ(lengths.Estimate(kind), 0);
  EXPECT_EQ(lengths.NoteTiming(0), 0u);
  EXPECT_EQ(lengths.kinds(), 0u);
}

TEST(PieceLengths, TimingsOfAKindAreCountedBeforeTheirLengthsComeBack) {
  PieceLengths lengths;
  const uint64_t kind = Launch(kKernel, 64);
  EXPECT_EQ(lengths.NoteTiming(kind), 0u);
  EXPECT_EQ(lengths.NoteTiming(kind), 1u);
  EXPECT_EQ(lengths.Estimate(kind), 0) << "noted, not learned";
  lengths.Add(kind, 700);
  EXPECT_EQ(lengths.Estimate(kind), 700);
  EXPECT_EQ(lengths.NoteTiming(kind), 2u);
  EXPECT_EQ(lengths.kinds(), 1u);
}

TEST(PieceLengths, AFullTableIsEmptiedAndTheKindsStillInUseAreLearnedAgain) {
  PieceLengths lengths;
  for (unsigned i = 0; i < PieceLengths::kCapacity; ++i) lengths.Add(Launch(kKernel, i + 1), 1000 + i);
  EXPECT_EQ(lengths.kinds(), PieceLengths::kCapacity);
  EXPECT_EQ(lengths.clears(), 0u);
  for (unsigned i = 0; i < PieceLengths::kCapacity; ++i)
    ASSERT_EQ(lengths.Estimate(Launch(kKernel, i + 1)), 1000 + i) << i;
  const uint64_t another = Launch(kOtherKernel, 1);
  lengths.Add(another, 5);
  EXPECT_EQ(lengths.clears(), 1u);
  EXPECT_EQ(lengths.kinds(), 1u);
  EXPECT_EQ(lengths.Estimate(another), 5);
  EXPECT_EQ(lengths.Estimate(Launch(kKernel, 1)), 0);
}

// Forgetting a kind empties its lengths and timings but counts the
// forgetting, until a piece of it fits at a learned length again; a kind
// never forgotten, or not kept, counts none.
TEST(PieceLengths, AKindsForgettingsInARowAreCountedUntilItFitsAgain) {
  PieceLengths lengths;
  lengths.Add(7, 10'000);
  EXPECT_EQ(lengths.Forgets(7), 0u);
  lengths.Forget(7);
  EXPECT_EQ(lengths.Estimate(7), 0);
  EXPECT_EQ(lengths.NoteTiming(7), 0u) << "its timings start afresh";
  EXPECT_EQ(lengths.Forgets(7), 1u);
  lengths.Add(7, 10'000);
  lengths.Forget(7);
  EXPECT_EQ(lengths.Forgets(7), 2u);
  lengths.Add(7, 10'000);
  lengths.NoteFitted(7);
  EXPECT_EQ(lengths.Forgets(7), 0u);
  EXPECT_EQ(lengths.Estimate(7), 10'000) << "fitting keeps what was learned";
  EXPECT_EQ(lengths.Forgets(8), 0u);
  EXPECT_EQ(lengths.Forgets(0), 0u);
  lengths.NoteFitted(8);  // not kept: nothing to do
  EXPECT_EQ(lengths.kinds(), 1u);
}

}  // namespace
}  // namespace freeride::gate
