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

TEST(BubbleWindows, TheLowerMedianOfTheLastWindows) {
  BubbleWindows windows;
  EXPECT_EQ(windows.MedianNs(), 0);
  windows.Record(3 * kMs);
  EXPECT_EQ(windows.count(), 1);
  EXPECT_EQ(windows.MedianNs(), 3 * kMs);
  windows.Record(1 * kMs);
  EXPECT_EQ(windows.MedianNs(), 1 * kMs);  // of two, the shorter
  windows.Record(0);                       // admits nothing: not a window
  windows.Record(-5);
  EXPECT_EQ(windows.count(), 2);
  windows.Record(2 * kMs);
  EXPECT_EQ(windows.MedianNs(), 2 * kMs);
  windows.Record(4 * kMs);
  EXPECT_EQ(windows.MedianNs(), 2 * kMs);  // of four, the lower middle one
  // Only the last kKept count: long bubbles that follow push the short ones out.
  for (int b = 0; b < BubbleWindows::kKept; ++b) windows.Record(40 * kMs);
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
// 2 ms (`*bubbles` counts them; none while `marks` is false), each step doing
// `units_per_ms[choice]` units; returns the last choice.
StepChoice RunSteps(StepTargetChooser& chooser, int64_t* now, uint64_t* bubbles, int64_t ns,
                    const double units_per_ms[2], bool marks = true, bool differ = true) {
  StepChoice choice = StepChoice::kStepMs;
  for (const int64_t end = *now + ns; *now < end; *now += kMs) {
    if (marks && (*now / kMs) % 2 == 0) ++*bubbles;
    choice = chooser.Choose(*now, *bubbles, differ);
    chooser.Record(marks ? units_per_ms[static_cast<int>(choice)] : 0);
  }
  return choice;
}

TEST(StepTargetChooser, TriesTheBubbleSizedTargetThenStepMsAndKeepsTheOneThatDidMore) {
  for (const bool bubble_sized_wins : {true, false}) {
    StepTargetChooser chooser;
    int64_t now = 7 * kSecond;
    uint64_t bubbles = 1000;
    const double units[2] = {bubble_sized_wins ? 100.0 : 300.0, bubble_sized_wins ? 250.0 : 120.0};
    EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kBubbleSized);  // its trial first
    RunSteps(chooser, &now, &bubbles, StepTargetChooser::kTrialNs + kMs, units);
    EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kStepMs);  // then --step-ms's
    EXPECT_FALSE(chooser.TakeDecision());
    RunSteps(chooser, &now, &bubbles, StepTargetChooser::kTrialNs + kMs, units);
    const StepChoice kept = bubble_sized_wins ? StepChoice::kBubbleSized : StepChoice::kStepMs;
    EXPECT_EQ(chooser.Choose(now, bubbles, true), kept);
    EXPECT_TRUE(chooser.TakeDecision());
    EXPECT_FALSE(chooser.TakeDecision());  // said once
    // Work a bubble: two steps a bubble.
    EXPECT_NEAR(chooser.step_ms_work(), 2 * units[0], 2 * units[0] * 0.01);
    EXPECT_NEAR(chooser.bubble_sized_work(), 2 * units[1], 2 * units[1] * 0.01);
    // Kept until kKeepNs has passed...
    EXPECT_EQ(RunSteps(chooser, &now, &bubbles, StepTargetChooser::kKeepNs - 2 * kMs, units), kept);
    // ...then both are tried again, the other first.
    now += 2 * kMs;
    EXPECT_NE(chooser.Choose(now, bubbles, true), kept);
    // The same outcome again is not said again, and stands twice as long.
    EXPECT_EQ(chooser.keep_ns(), StepTargetChooser::kKeepNs);
    RunSteps(chooser, &now, &bubbles, 2 * StepTargetChooser::kTrialNs + 4 * kMs, units);
    EXPECT_EQ(chooser.Choose(now, bubbles, true), kept);
    EXPECT_FALSE(chooser.TakeDecision());
    EXPECT_EQ(chooser.keep_ns(), 2 * StepTargetChooser::kKeepNs);
    EXPECT_EQ(RunSteps(chooser, &now, &bubbles, 2 * StepTargetChooser::kKeepNs - 10 * kMs, units), kept);
    // Chosen again and again: at most kLongestKeepNs.
    for (int pair = 0; pair < 8; ++pair) {
      now += chooser.keep_ns();
      RunSteps(chooser, &now, &bubbles, 2 * StepTargetChooser::kTrialNs + 4 * kMs, units);
    }
    EXPECT_EQ(chooser.keep_ns(), StepTargetChooser::kLongestKeepNs);
  }
}

TEST(StepTargetChooser, APauseOfTheMarksCountsAgainstNeither) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint64_t bubbles = 0;
  const double units[2] = {100, 150};  // bubble-sized does more a bubble
  chooser.Choose(now, bubbles, true);
  // Its trial, counted from 0.25 s: a pause of the marks (no bubbles, no
  // work) from 0.3 to 0.8 s, then marks until it has counted enough...
  RunSteps(chooser, &now, &bubbles, 300 * kMs, units);
  RunSteps(chooser, &now, &bubbles, 500 * kMs, units, /*marks=*/false);
  RunSteps(chooser, &now, &bubbles, 200 * kMs + 2 * kMs, units);
  // ...then --step-ms's trial with no pause: bubble-sized still did more a bubble.
  EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kStepMs);
  RunSteps(chooser, &now, &bubbles, StepTargetChooser::kTrialNs + 2 * kMs, units);
  EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kBubbleSized);
  EXPECT_NEAR(chooser.bubble_sized_work(), 300, 3);
  EXPECT_NEAR(chooser.step_ms_work(), 200, 2);
}

TEST(StepTargetChooser, ATrialWaitsForEnoughBubblesAndGivesUpWithoutThem) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint64_t bubbles = 0;
  const double units[2] = {100, 150};
  chooser.Choose(now, bubbles, true);
  // Two trial lengths with no bubble at all: the first trial goes on.
  RunSteps(chooser, &now, &bubbles, 2 * StepTargetChooser::kTrialNs, units, /*marks=*/false);
  EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kBubbleSized);
  // Enough bubbles: the trial of --step-ms follows.
  RunSteps(chooser, &now, &bubbles, 2 * kMs * StepTargetChooser::kTrialBubbles + 2 * kMs, units);
  EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kStepMs);
  // The lane stops forecasting bubbles: --step-ms's trial gives up and
  // keeps --step-ms, unsaid, until trials are due again.
  StepTargetChooser stalled;
  now = 0;
  stalled.Choose(now, bubbles, true);
  RunSteps(stalled, &now, &bubbles, StepTargetChooser::kTrialLimitNs + 2 * kMs, units, /*marks=*/false);
  EXPECT_EQ(stalled.Choose(now, bubbles, true), StepChoice::kStepMs);
  EXPECT_FALSE(stalled.TakeDecision());
  EXPECT_EQ(RunSteps(stalled, &now, &bubbles, StepTargetChooser::kKeepNs - 2 * kMs, units), StepChoice::kStepMs);
  now += 2 * kMs;
  EXPECT_EQ(stalled.Choose(now, bubbles, true), StepChoice::kBubbleSized);
}

TEST(StepTargetChooser, TheBubblesChangingIsFollowedButAFlappingMedianRestartsNothing) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint64_t bubbles = 0;
  const double first[2] = {100, 300};  // bubble-sized does more
  RunSteps(chooser, &now, &bubbles, 2 * StepTargetChooser::kTrialNs + 4 * kMs, first);
  EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kBubbleSized);
  // The targets too alike for a trial now and then, while a choice is kept
  // or tried: nothing changes.
  EXPECT_EQ(chooser.Choose(now + kMs, bubbles, false), StepChoice::kBubbleSized);
  // The next trials find --step-ms doing more: it is kept.
  const double later[2] = {400, 50};
  RunSteps(chooser, &now, &bubbles, StepTargetChooser::kKeepNs + kSecond / 2, later);
  EXPECT_EQ(chooser.Choose(now, bubbles, false), StepChoice::kStepMs);  // mid-trial (the other first)
  // The pair of trials ends when it would have: the mid-trial call restarted nothing.
  RunSteps(chooser, &now, &bubbles, 3 * kSecond / 2 + 4 * kMs, later);
  EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kStepMs);
  EXPECT_TRUE(chooser.TakeDecision());
  EXPECT_EQ(chooser.keep_ns(), StepTargetChooser::kKeepNs);  // a change: tried again soon
  // Too alike when trials are due: --step-ms kept, no trial.
  RunSteps(chooser, &now, &bubbles, StepTargetChooser::kKeepNs, later, true, /*differ=*/false);
  EXPECT_EQ(chooser.Choose(now, bubbles, false), StepChoice::kStepMs);
}

TEST(StepTargetChooser, WorkAtATrialsStartAndNoWorkAtAllCountNothing) {
  StepTargetChooser chooser;
  int64_t now = 0;
  uint64_t bubbles = 0;
  chooser.Choose(now, bubbles, true);  // the bubble-sized trial
  chooser.Record(1e9);                 // in its settling start: not counted
  chooser.Choose(StepTargetChooser::kSettleNs, bubbles, true);
  chooser.Record(-5);  // a negative count is no work
  bubbles += StepTargetChooser::kTrialBubbles;
  now = StepTargetChooser::kTrialNs;
  chooser.Choose(now, bubbles, true);  // --step-ms's trial: no steps at all (the gate held them)
  chooser.Choose(now + StepTargetChooser::kSettleNs, bubbles, true);
  bubbles += StepTargetChooser::kTrialBubbles;
  now += StepTargetChooser::kTrialNs;
  // Both read 0: the tie keeps --step-ms.
  EXPECT_EQ(chooser.Choose(now, bubbles, true), StepChoice::kStepMs);
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

  BubbleSizedSteps steps(2 * kMs);
  steps.Start(SlowChunks::kOutvoted, /*fixed=*/false);
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

  // --fixed-steps, or a task not stepping alone behind the gate (granted
  // its steps, or on the CPU), does not read the page.
  BubbleSizedSteps fixed(2 * kMs);
  fixed.Start(SlowChunks::kOutvoted, /*fixed=*/true);
  EXPECT_FALSE(fixed.watching());
  EXPECT_EQ(fixed.TargetNsAt(kNow), 2 * kMs);
  BubbleSizedSteps granted(2 * kMs);
  granted.Start(SlowChunks::kBelieved, /*fixed=*/false);
  EXPECT_FALSE(granted.watching());
  EXPECT_EQ(granted.TargetNsAt(kNow), 2 * kMs);
}

TEST(BubbleSizedSteps, KeepsTheTargetThatDidMoreWorkABubbleAndSaysSo) {
  GatePageFixture gate;
  GatePage& daemon_side = gate.page;
  BubbleSizedSteps steps(2 * kMs);
  steps.Start(SlowChunks::kOutvoted, /*fixed=*/false);
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

TEST(BubbleSizedSteps, CountsBubblesAcrossTheStagesWrapAndANewStageProcess) {
  GatePageFixture gate;
  BubbleSizedSteps steps(2 * kMs);
  steps.Start(SlowChunks::kOutvoted, /*fixed=*/false);
  ASSERT_TRUE(steps.watching()) << steps.error();
  auto forecast = [&](uint32_t bubble) {
    gate.page.PublishAhead({bubble, 0, kNow, kNow + 1'500'000});
    steps.TargetNsAt(kNow);
  };
  forecast(0x7ffffffeu);
  EXPECT_EQ(steps.bubbles_seen(), 0u);
  forecast(0x80000000u);  // two on (the stage numbers in 31 bits; the forecast is one past)
  EXPECT_EQ(steps.bubbles_seen(), 2u);
  forecast(2);  // past the wrap: the stage skips 0
  EXPECT_EQ(steps.bubbles_seen(), 4u);
  forecast(5);  // unread ones between reads are counted
  EXPECT_EQ(steps.bubbles_seen(), 7u);
  forecast(5);  // the same one read again
  EXPECT_EQ(steps.bubbles_seen(), 7u);
  forecast(1000);
  forecast(2);  // a new stage process numbers from 1 again: one bubble, not 2^31
  EXPECT_EQ(steps.bubbles_seen(), 7u + 995u + 1u);
}

TEST(BubbleSizedSteps, WithoutAGatePageStepMsAndABadPageSaysWhy) {
  {
    BubbleSizedSteps steps(2 * kMs);  // no FREERIDE_GATE_PAGE
    steps.Start(SlowChunks::kOutvoted, false);
    EXPECT_FALSE(steps.watching());
    EXPECT_TRUE(steps.error().empty());
    EXPECT_EQ(steps.TargetNsAt(kNow), 2 * kMs);
  }
  TempDir dir;
  ScopedVariable page("FREERIDE_GATE_PAGE", dir.path() + "/missing");
  BubbleSizedSteps steps(2 * kMs);
  steps.Start(SlowChunks::kOutvoted, false);
  EXPECT_FALSE(steps.watching());
  EXPECT_FALSE(steps.error().empty());
  EXPECT_EQ(steps.TargetNsAt(kNow), 2 * kMs);
}

}  // namespace
}  // namespace freeride::tasks
