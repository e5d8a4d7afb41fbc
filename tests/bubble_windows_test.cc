// The step time a built-in task aims at behind a GPU gate: learned from the
// bubble windows the daemon publishes in the lane's gate page.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/bubble_windows.h"
#include "common/step_sizer.h"
#include "common/step_target_chooser.h"
#include "gate/gate_page.h"
#include "test_util.h"

namespace freeride::tasks {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kNow = 5'000'000'000;  // one instant: the chooser's trials are tested on their own

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

constexpr int64_t kSecond = 1'000'000'000;

// Runs `chooser` from `*now` for `ns` in steps of 1 ms, a bubble every
// 2 ms (`*bubble` counts them; none while `marks` is false), each step doing
// `units_per_ms[choice]` units; returns the last choice.
StepChoice RunSteps(StepTargetChooser& chooser, int64_t* now, uint32_t* bubble, int64_t ns,
                    const double units_per_ms[2], bool marks = true) {
  StepChoice choice = StepChoice::kStepMs;
  for (const int64_t end = *now + ns; *now < end; *now += kMs) {
    if (marks && (*now / kMs) % 2 == 0) ++*bubble;
    choice = chooser.Choose(*now, *bubble, true);
    chooser.Record(marks ? units_per_ms[static_cast<int>(choice)] : 0);
  }
  return choice;
}

TEST(StepTargetChooser, TriesTheBubbleSizedTargetThenStepMsAndKeepsTheOneThatDidMore) {
  for (const bool bubble_sized_wins : {true, false}) {
    StepTargetChooser chooser;
    int64_t now = 7 * kSecond;
    uint32_t bubble = 0xfffffff0u;  // the sequence wraps within the trial
    const double units[2] = {bubble_sized_wins ? 100.0 : 300.0, bubble_sized_wins ? 250.0 : 120.0};
    EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kBubbleSized);  // its trial first
    RunSteps(chooser, &now, &bubble, StepTargetChooser::kTrialNs + kMs, units);
    EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kStepMs);  // then --step-ms's
    EXPECT_FALSE(chooser.TakeDecision());
    RunSteps(chooser, &now, &bubble, StepTargetChooser::kTrialNs + kMs, units);
    const StepChoice kept = bubble_sized_wins ? StepChoice::kBubbleSized : StepChoice::kStepMs;
    EXPECT_EQ(chooser.Choose(now, bubble, true), kept);
    EXPECT_TRUE(chooser.TakeDecision());
    EXPECT_FALSE(chooser.TakeDecision());  // said once
    // Work a bubble: two steps a bubble.
    EXPECT_NEAR(chooser.step_ms_work(), 2 * units[0], 2 * units[0] * 0.01);
    EXPECT_NEAR(chooser.bubble_sized_work(), 2 * units[1], 2 * units[1] * 0.01);
    // Kept until kKeepNs has passed...
    EXPECT_EQ(RunSteps(chooser, &now, &bubble, StepTargetChooser::kKeepNs - 2 * kMs, units), kept);
    // ...then both are tried again, the other first.
    now += 2 * kMs;
    EXPECT_NE(chooser.Choose(now, bubble, true), kept);
  }
}

TEST(StepTargetChooser, APauseOfTheMarksCountsAgainstNeither) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint32_t bubble = 0;
  const double units[2] = {100, 150};  // bubble-sized does more a bubble
  chooser.Choose(now, bubble, true);
  // Its trial: half of it a pause of the marks (no bubbles, no work)...
  RunSteps(chooser, &now, &bubble, StepTargetChooser::kTrialNs / 2, units);
  RunSteps(chooser, &now, &bubble, StepTargetChooser::kTrialNs, units, /*marks=*/false);
  RunSteps(chooser, &now, &bubble, StepTargetChooser::kTrialNs / 2, units);
  // ...and --step-ms's with none: bubble-sized still did more a bubble.
  RunSteps(chooser, &now, &bubble, StepTargetChooser::kTrialNs + kMs, units);
  EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kBubbleSized);
  EXPECT_NEAR(chooser.bubble_sized_work(), 300, 3);
}

TEST(StepTargetChooser, ATrialLastsUntilItHasCountedEnoughBubbles) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint32_t bubble = 0;
  const double units[2] = {100, 150};
  chooser.Choose(now, bubble, true);
  // Two trial lengths with no bubble at all: the first trial goes on.
  RunSteps(chooser, &now, &bubble, 2 * StepTargetChooser::kTrialNs, units, /*marks=*/false);
  EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kBubbleSized);
  // Enough bubbles: the trial of --step-ms follows.
  RunSteps(chooser, &now, &bubble, 2 * kMs * StepTargetChooser::kTrialBubbles + 2 * kMs, units);
  EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kStepMs);
}

TEST(StepTargetChooser, TheBubblesChangingTheirMindIsFollowed) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint32_t bubble = 0;
  const double first[2] = {100, 300};  // bubble-sized does more
  RunSteps(chooser, &now, &bubble, 2 * StepTargetChooser::kTrialNs + 4 * kMs, first);
  EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kBubbleSized);
  // The next trials find --step-ms doing more: it is kept.
  const double later[2] = {400, 50};
  RunSteps(chooser, &now, &bubble, StepTargetChooser::kKeepNs + 2 * StepTargetChooser::kTrialNs + 4 * kMs, later);
  EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kStepMs);
  // Targets too alike for a trial: --step-ms, no trial; trials start afresh when they differ again.
  EXPECT_EQ(chooser.Choose(now, bubble, false), StepChoice::kStepMs);
  EXPECT_EQ(chooser.Choose(now + kMs, bubble, true), StepChoice::kBubbleSized);
}

TEST(StepTargetChooser, WorkAtATrialsStartAndNoWorkAtAllCountNothing) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint32_t bubble = 0;
  chooser.Choose(now, bubble, true);  // the bubble-sized trial
  chooser.Record(1e9);               // in its settling start: not counted
  chooser.Choose(StepTargetChooser::kSettleNs, bubble, true);
  chooser.Record(-5);  // a negative count is no work
  bubble += StepTargetChooser::kTrialBubbles;
  now = StepTargetChooser::kTrialNs;
  chooser.Choose(now, bubble, true);  // --step-ms's trial: no steps at all (the gate held them)
  chooser.Choose(now + StepTargetChooser::kSettleNs, bubble, true);
  bubble += StepTargetChooser::kTrialBubbles;
  now += StepTargetChooser::kTrialNs;
  // Both read 0: the tie keeps --step-ms.
  EXPECT_EQ(chooser.Choose(now, bubble, true), StepChoice::kStepMs);
  EXPECT_EQ(chooser.bubble_sized_work(), 0);
  EXPECT_EQ(chooser.step_ms_work(), 0);
}

TEST(WorthATrial, AFifthShorterOrMore) {
  EXPECT_TRUE(WorthATrial(2 * kMs, 1'600'000));
  EXPECT_FALSE(WorthATrial(2 * kMs, 1'600'001));
  EXPECT_FALSE(WorthATrial(2 * kMs, 2 * kMs));
}

// Sets an environment variable for a scope.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~ScopedVariable() { unsetenv(name_); }

 private:
  const char* name_;
};

// A lane's gate page, as the daemon makes it, named by FREERIDE_GATE_PAGE.
struct GatePageFixture {
  GatePageFixture() {
    std::string error;
    if (!page.CreateOrOpen(dir.path() + "/gate", 0, &error)) ADD_FAILURE() << error;
  }
  TempDir dir;
  GatePage page;
  ScopedVariable variable{"FREERIDE_GATE_PAGE", dir.path() + "/gate"};
};

TEST(BubbleSizedSteps, ReadsEachNextBubblesWindowFromTheGatePage) {
  GatePageFixture gate;
  GatePage& daemon_side = gate.page;

  BubbleSizedSteps steps(2 * kMs, /*fixed=*/false);
  ASSERT_TRUE(steps.watching()) << steps.error();
  EXPECT_EQ(steps.TargetNsAt(kNow), 2 * kMs);  // nothing forecast yet
  // Bubbles of 1.5 ms windows: steps of 0.5 ms.
  for (uint32_t b = 1; b <= 5; ++b) {
    daemon_side.PublishAhead({b, 0, 10 * kMs * b, 10 * kMs * b + 1'500'000});
    steps.TargetNsAt(kNow);
    steps.TargetNsAt(kNow);  // read twice: still one window
  }
  EXPECT_EQ(steps.windows().count(), 5);
  EXPECT_EQ(steps.TargetNsAt(kNow), kShortestStepNs);
  daemon_side.PublishAhead({});  // withdrawn: what was learned stays
  EXPECT_EQ(steps.TargetNsAt(kNow), kShortestStepNs);
  // An iteration's first bubble (watch only) counts too; long ones take over.
  for (uint32_t b = 6; b <= 20; ++b) {
    AheadAdmission ahead{b, 0, 10 * kMs * b, 10 * kMs * b + 12 * kMs};
    ahead.watch_only = b == 6;
    daemon_side.PublishAhead(ahead);
    steps.TargetNsAt(kNow);
  }
  EXPECT_EQ(steps.TargetNsAt(kNow), 2 * kMs);

  BubbleSizedSteps fixed(2 * kMs, /*fixed=*/true);
  EXPECT_FALSE(fixed.watching());
  EXPECT_EQ(fixed.TargetNsAt(kNow), 2 * kMs);
}

TEST(BubbleSizedSteps, KeepsTheTargetThatDidMoreWorkABubbleAndSaysSo) {
  GatePageFixture gate;
  GatePage& daemon_side = gate.page;
  BubbleSizedSteps steps(2 * kMs, /*fixed=*/false);
  ASSERT_TRUE(steps.watching()) << steps.error();
  // 1.5 ms windows, one bubble every 2 ms; steps of 1 ms.  Steps at the
  // bubble-sized target (0.5 ms) do 10 units, at --step-ms 30.
  int64_t now = kNow;
  uint32_t bubble = 1;
  testing::internal::CaptureStderr();
  for (int step = 0; step < 3000; ++step, now += kMs) {
    if (step % 2 == 0) {
      ++bubble;
      daemon_side.PublishAhead({bubble, 0, now, now + 1'500'000});
    }
    const int64_t target = steps.TargetNsAt(now);
    steps.Record(target == 2 * kMs ? 30 : 10);
  }
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(steps.TargetNsAt(now), 2 * kMs);
  EXPECT_NE(said.find("stepping at --step-ms"), std::string::npos) << said;
  EXPECT_NEAR(steps.chooser().step_ms_work(), 60, 1);
  EXPECT_NEAR(steps.chooser().bubble_sized_work(), 20, 1);
}

TEST(BubbleSizedSteps, WithoutAGatePageStepMsAndABadPageSaysWhy) {
  {
    BubbleSizedSteps steps(2 * kMs, false);  // no FREERIDE_GATE_PAGE
    EXPECT_FALSE(steps.watching());
    EXPECT_TRUE(steps.error().empty());
    EXPECT_EQ(steps.TargetNsAt(kNow), 2 * kMs);
  }
  TempDir dir;
  ScopedVariable page("FREERIDE_GATE_PAGE", dir.path() + "/missing");
  BubbleSizedSteps steps(2 * kMs, false);
  EXPECT_FALSE(steps.watching());
  EXPECT_FALSE(steps.error().empty());
  EXPECT_EQ(steps.TargetNsAt(kNow), 2 * kMs);
}

}  // namespace
}  // namespace freeride::tasks
