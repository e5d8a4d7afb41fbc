// The step time a built-in task aims at behind a GPU gate: learned from the
// bubble windows the daemon publishes in the lane's gate page.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/bubble_windows.h"
#include "common/step_sizer.h"
#include "gate/gate_page.h"
#include "test_util.h"

namespace freeride::tasks {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(BubbleWindows, TheLowerMedianOfTheLastWindowsEachBubbleOnce) {
  BubbleWindows windows;
  EXPECT_EQ(windows.MedianNs(), 0);
  windows.Record(1, 3 * kMs);
  windows.Record(1, 9 * kMs);  // the same bubble read again: not a second window
  EXPECT_EQ(windows.count(), 1);
  EXPECT_EQ(windows.MedianNs(), 3 * kMs);
  windows.Record(2, 1 * kMs);
  EXPECT_EQ(windows.MedianNs(), 1 * kMs);  // of two, the shorter
  windows.Record(3, 0);                    // admits nothing: not a window
  windows.Record(4, -5);
  EXPECT_EQ(windows.count(), 2);
  windows.Record(5, 2 * kMs);
  EXPECT_EQ(windows.MedianNs(), 2 * kMs);
  // Only the last kKept count: long bubbles that follow push the short ones out.
  for (uint32_t b = 10; b < 10 + BubbleWindows::kKept; ++b) windows.Record(b, 40 * kMs);
  EXPECT_EQ(windows.count(), BubbleWindows::kKept);
  EXPECT_EQ(windows.MedianNs(), 40 * kMs);
}

TEST(StepTargetForWindows, AThirdOfTheMedianWindowWithinTheShortestStepAndStepMs) {
  EXPECT_EQ(StepTargetForWindows(2 * kMs, 0), 2 * kMs);           // nothing known: --step-ms
  EXPECT_EQ(StepTargetForWindows(2 * kMs, 3 * kMs), 1 * kMs);     // a third of a 3 ms window
  EXPECT_EQ(StepTargetForWindows(2 * kMs, 30 * kMs), 2 * kMs);    // at most --step-ms
  EXPECT_EQ(StepTargetForWindows(2 * kMs, 600'000), kShortestStepNs);  // at least 0.5 ms
  EXPECT_EQ(StepTargetForWindows(200'000, 600'000), 200'000);     // a shorter --step-ms stays
  EXPECT_EQ(StepTargetForWindows(0, 3 * kMs), 1);                 // never 0
}

TEST(StepSizer, ANewTargetSizesTheNextChunkFromWhatWasLearned) {
  StepSizer sizer(2 * kMs, 1000, 1, 1'000'000, SlowChunks::kOutvoted);
  sizer.Record(1000, 1 * kMs);  // 1 µs an item
  EXPECT_EQ(sizer.next_items(), 2000);
  sizer.set_target_ns(500'000);
  EXPECT_EQ(sizer.target_ns(), 500'000);
  sizer.Record(2000, 2 * kMs);
  EXPECT_EQ(sizer.next_items(), 500);
}

// Sets an environment variable for a scope.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedVariable() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(BubbleSizedSteps, ReadsEachNextBubblesWindowFromTheGatePage) {
  TempDir dir;
  GatePage daemon_side;
  std::string error;
  const std::string path = dir.path() + "/gate";
  ASSERT_TRUE(daemon_side.CreateOrOpen(path, 0, &error)) << error;
  ScopedVariable page("FREERIDE_GATE_PAGE", path);

  BubbleSizedSteps steps(2 * kMs, /*fixed=*/false);
  ASSERT_TRUE(steps.watching()) << steps.error();
  EXPECT_EQ(steps.TargetNs(), 2 * kMs);  // nothing forecast yet
  // Bubbles of 1.5 ms windows: steps of 0.5 ms.
  for (uint32_t b = 1; b <= 5; ++b) {
    daemon_side.PublishAhead({b, 0, 10 * kMs * b, 10 * kMs * b + 1'500'000});
    steps.TargetNs();
    steps.TargetNs();  // read twice: still one window
  }
  EXPECT_EQ(steps.windows().count(), 5);
  EXPECT_EQ(steps.TargetNs(), kShortestStepNs);
  daemon_side.PublishAhead({});  // withdrawn: what was learned stays
  EXPECT_EQ(steps.TargetNs(), kShortestStepNs);
  // An iteration's first bubble (watch only) counts too; long ones take over.
  for (uint32_t b = 6; b <= 20; ++b) {
    AheadAdmission ahead{b, 0, 10 * kMs * b, 10 * kMs * b + 12 * kMs};
    ahead.watch_only = b == 6;
    daemon_side.PublishAhead(ahead);
    steps.TargetNs();
  }
  EXPECT_EQ(steps.TargetNs(), 2 * kMs);

  BubbleSizedSteps fixed(2 * kMs, /*fixed=*/true);
  EXPECT_FALSE(fixed.watching());
  EXPECT_EQ(fixed.TargetNs(), 2 * kMs);
}

TEST(BubbleSizedSteps, WithoutAGatePageStepMsAndABadPageSaysWhy) {
  {
    BubbleSizedSteps steps(2 * kMs, false);  // no FREERIDE_GATE_PAGE
    EXPECT_FALSE(steps.watching());
    EXPECT_TRUE(steps.error().empty());
    EXPECT_EQ(steps.TargetNs(), 2 * kMs);
  }
  TempDir dir;
  ScopedVariable page("FREERIDE_GATE_PAGE", dir.path() + "/missing");
  BubbleSizedSteps steps(2 * kMs, false);
  EXPECT_FALSE(steps.watching());
  EXPECT_FALSE(steps.error().empty());
  EXPECT_EQ(steps.TargetNs(), 2 * kMs);
}

}  // namespace
}  // namespace freeride::tasks
