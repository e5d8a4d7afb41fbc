#include "policy/bubble_serving.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace freeride {
namespace {

constexpr Nanos kMs = kMillisecond;

DispatchCandidate Task(int64_t id, Nanos step, int priority = 0) {
  DispatchCandidate c;
  c.task_id = id;
  c.priority = priority;
  c.submit_order = static_cast<uint64_t>(id);
  c.step_estimate = step;
  return c;
}

// The candidates a driver would pass: `all` without the excluded ones.
std::vector<DispatchCandidate> Remaining(const std::vector<DispatchCandidate>& all,
                                         const BubbleServing& serving) {
  std::vector<DispatchCandidate> left;
  for (const DispatchCandidate& c : all)
    if (std::find(serving.excluded().begin(), serving.excluded().end(), c.task_id) ==
        serving.excluded().end())
      left.push_back(c);
  return left;
}

BubbleServing::Bubble OpenBubble(Nanos predicted_end, SecondLook look = {}) {
  return {1, 0, predicted_end, look, UINT64_MAX};
}

TEST(BubbleServing, GrantsEachTaskOnceInRankOrderUntilNoneIsLeft) {
  DispatchPolicy policy;
  BubbleServing serving(policy, OpenBubble(20 * kMs));
  std::vector<DispatchCandidate> all = {Task(1, 2 * kMs), Task(2, 2 * kMs, /*priority=*/1)};
  AdmissionGate gate;
  ServingAction first = serving.Next(0, Remaining(all, serving), gate);
  ASSERT_EQ(first.kind, ServingActionKind::kGrant);
  EXPECT_EQ(first.task_id, 2) << "higher priority first";
  EXPECT_EQ(first.until, 20 * kMs);
  ServingAction second = serving.Next(5 * kMs, Remaining(all, serving), gate);
  ASSERT_EQ(second.kind, ServingActionKind::kGrant);
  EXPECT_EQ(second.task_id, 1);
  ServingAction done = serving.Next(9 * kMs, Remaining(all, serving), gate);
  EXPECT_EQ(done.kind, ServingActionKind::kDone);
  EXPECT_EQ(done.verdict, DispatchVerdict::kNoCandidates);
}

TEST(BubbleServing, ADemotedTaskIsGrantedUntilOneStepBeforeTheForecastEnd) {
  DispatchPolicy policy;
  BubbleServing serving(policy, OpenBubble(20 * kMs));
  DispatchCandidate demoted = Task(1, 3 * kMs);
  demoted.demoted = true;
  std::vector<DispatchCandidate> all = {demoted};
  ServingAction grant = serving.Next(0, all, AdmissionGate{});
  ASSERT_EQ(grant.kind, ServingActionKind::kGrant);
  EXPECT_EQ(grant.until, 17 * kMs);
}

TEST(BubbleServing, AnImperativeTaskIsStoppedAtAWithheldWindowsStart) {
  DispatchPolicy policy;
  DispatchCandidate imperative = Task(1, 0);
  imperative.imperative = true;
  std::vector<DispatchCandidate> all = {imperative};
  {
    BubbleServing serving(policy, OpenBubble(20 * kMs));
    ServingAction grant = serving.Next(0, all, AdmissionGate{});
    ASSERT_EQ(grant.kind, ServingActionKind::kGrant);
    EXPECT_EQ(grant.stop_at, 0) << "no window: it runs to the bubble's end";
  }
  BubbleServing serving(policy, OpenBubble(20 * kMs));
  AdmissionGate window;
  window.withhold_start_ns = 12 * kMs;
  window.withhold_end_ns = 40 * kMs;
  ServingAction grant = serving.Next(0, all, window);
  ASSERT_EQ(grant.kind, ServingActionKind::kGrant);
  EXPECT_EQ(grant.stop_at, 12 * kMs);
  EXPECT_EQ(grant.until, 12 * kMs);
}

// The serving judges an imperative task's slice against the bubble's own
// forecast length: a lane of 0.6 ms bubbles runs a task starting up in the
// first half of each one, though the full slice is 2 ms.
TEST(BubbleServing, AStartingTaskRunsInBubblesShorterThanTheFullSlice) {
  DispatchPolicy policy;
  DispatchCandidate starting = Task(1, 0);
  starting.imperative = true;
  starting.starting = true;
  std::vector<DispatchCandidate> all = {starting};
  const Nanos begin = 50 * kMs;
  const Nanos end = begin + 600 * kMicrosecond;
  {
    BubbleServing serving(policy, {1, begin, end, SecondLook{}, UINT64_MAX});
    ServingAction grant = serving.Next(begin + 10 * kMicrosecond, all, AdmissionGate{});
    ASSERT_EQ(grant.kind, ServingActionKind::kGrant);
    EXPECT_EQ(grant.task_id, 1);
  }
  BubbleServing late(policy, {1, begin, end, SecondLook{}, UINT64_MAX});
  ServingAction none = late.Next(begin + 400 * kMicrosecond, all, AdmissionGate{});
  EXPECT_EQ(none.kind, ServingActionKind::kDone);
  EXPECT_EQ(none.verdict, DispatchVerdict::kNoTimeFit) << "less than half of it is left";
}

TEST(BubbleServing, NothingIsGrantedWhileTheGuardPausesOrInsideAWithheldWindow) {
  DispatchPolicy policy;
  std::vector<DispatchCandidate> all = {Task(1, 1 * kMs)};
  AdmissionGate paused;
  paused.paused = true;
  BubbleServing first(policy, OpenBubble(20 * kMs));
  EXPECT_EQ(first.Next(0, all, paused).kind, ServingActionKind::kDone);
  AdmissionGate window;
  window.withhold_start_ns = 0;
  window.withhold_end_ns = 30 * kMs;
  BubbleServing second(policy, OpenBubble(20 * kMs));
  EXPECT_EQ(second.Next(5 * kMs, all, window).kind, ServingActionKind::kDone);
  EXPECT_TRUE(second.excluded().empty()) << "nothing granted";
}

TEST(BubbleServing, WhenNothingFitsItWaitsOnceForTheSecondLookThenOffersTheLongerForecast) {
  DispatchPolicy policy;
  BubbleServing serving(policy, OpenBubble(5 * kMs, SecondLook{4 * kMs, 20 * kMs}));
  std::vector<DispatchCandidate> all = {Task(1, 8 * kMs), Task(2, 30 * kMs)};
  AdmissionGate gate;
  ServingAction wait = serving.Next(0, Remaining(all, serving), gate);
  ASSERT_EQ(wait.kind, ServingActionKind::kWaitUntil);
  EXPECT_EQ(wait.until, 4 * kMs);
  EXPECT_EQ(wait.verdict, DispatchVerdict::kNoTimeFit);
  EXPECT_EQ(serving.predicted_end(), 5 * kMs) << "not the long kind until its point";
  // Woken early (another mark, a spurious wake-up): still waiting.
  ServingAction early = serving.Next(2 * kMs, Remaining(all, serving), gate);
  ASSERT_EQ(early.kind, ServingActionKind::kWaitUntil);
  EXPECT_EQ(early.until, 4 * kMs);
  ServingAction grant = serving.Next(4 * kMs, Remaining(all, serving), gate);
  ASSERT_EQ(grant.kind, ServingActionKind::kGrant);
  EXPECT_EQ(grant.task_id, 1);
  EXPECT_EQ(grant.until, 20 * kMs);
  EXPECT_EQ(serving.predicted_end(), 20 * kMs);
  // The 30 ms task fits neither forecast; there is no third.
  ServingAction done = serving.Next(13 * kMs, Remaining(all, serving), gate);
  EXPECT_EQ(done.kind, ServingActionKind::kDone);
  EXPECT_EQ(done.verdict, DispatchVerdict::kNoTimeFit);
}

TEST(BubbleServing, ASecondLookNoLongerThanTheForecastOrAlreadyPastIsNotWaitedFor) {
  DispatchPolicy policy;
  std::vector<DispatchCandidate> all = {Task(1, 9500 * kMicrosecond)};  // needs 10.45 ms
  BubbleServing shorter(policy, OpenBubble(10 * kMs, SecondLook{4 * kMs, 9 * kMs}));
  ServingAction done = shorter.Next(0, all, AdmissionGate{});
  EXPECT_EQ(done.kind, ServingActionKind::kDone);
  EXPECT_EQ(done.verdict, DispatchVerdict::kNoTimeFit);
  BubbleServing past(policy, OpenBubble(5 * kMs, SecondLook{4 * kMs, 20 * kMs}));
  ServingAction grant = past.Next(6 * kMs, all, AdmissionGate{});
  ASSERT_EQ(grant.kind, ServingActionKind::kGrant);
  EXPECT_EQ(grant.until, 20 * kMs);
}

TEST(BubbleServing, AnExcludedTaskIsNeverGrantedEvenAfterTheSecondLook) {
  DispatchPolicy policy;
  BubbleServing serving(policy, OpenBubble(5 * kMs, SecondLook{4 * kMs, 20 * kMs}));
  serving.Exclude(1);  // the armed task, which served itself
  std::vector<DispatchCandidate> all = {Task(1, 1 * kMs), Task(2, 8 * kMs)};
  ServingAction wait = serving.Next(0, Remaining(all, serving), AdmissionGate{});
  ASSERT_EQ(wait.kind, ServingActionKind::kWaitUntil);
  ServingAction grant = serving.Next(4 * kMs, Remaining(all, serving), AdmissionGate{});
  ASSERT_EQ(grant.kind, ServingActionKind::kGrant);
  EXPECT_EQ(grant.task_id, 2);
  EXPECT_EQ(serving.Next(14 * kMs, Remaining(all, serving), AdmissionGate{}).kind,
            ServingActionKind::kDone);
}

TEST(ChooseArmed, JudgesMemoryAndRankButNotTimeAndNeverArmsImperativeOrDemotedTasks) {
  DispatchPolicy policy;
  std::vector<DispatchCandidate> all = {Task(1, 1 * kMs), Task(2, 500 * kMs, /*priority=*/2)};
  EXPECT_EQ(ChooseArmed(policy, all, UINT64_MAX), 2) << "a long step is the task's own to judge";
  all[1].memory_bytes = 1000;
  EXPECT_EQ(ChooseArmed(policy, all, 999), 1) << "too big for the free memory";
  all[0].imperative = true;
  EXPECT_EQ(ChooseArmed(policy, all, 999), 0);
  all[0].imperative = false;
  all[0].demoted = true;
  EXPECT_EQ(ChooseArmed(policy, all, 999), 0);
  EXPECT_EQ(ChooseArmed(policy, {}, UINT64_MAX), 0);
}

TEST(ArmedSecondLook, ExtendsTheDeadlineOnlyWhenTheNextStepFitsTheLongerForecast) {
  DispatchPolicy policy;  // margin 1.1
  const SecondLook look{4 * kMs, 20 * kMs};
  AdmissionGate gate;
  EXPECT_EQ(ArmedSecondLook(policy, gate, 1, 0, look, 3 * kMs, 5 * kMs, 8 * kMs, 1.0), 20 * kMs);
  EXPECT_EQ(ArmedSecondLook(policy, gate, 1, 0, look, 3 * kMs, 5 * kMs, 15 * kMs, 1.0), 0)
      << "4 ms + 1.1 x 15 ms is past 20 ms";
  EXPECT_EQ(ArmedSecondLook(policy, gate, 1, 0, look, 3 * kMs, 5 * kMs, 8 * kMs, 2.0), 0)
      << "the guard's fit factor";
  EXPECT_EQ(ArmedSecondLook(policy, gate, 1, 0, {}, 3 * kMs, 5 * kMs, 1 * kMs, 1.0), 0);
  EXPECT_EQ(ArmedSecondLook(policy, gate, 1, 0, look, 3 * kMs, 20 * kMs, 1 * kMs, 1.0), 0)
      << "no longer than the deadline in force";
  AdmissionGate window;
  window.withhold_start_ns = 16 * kMs;
  window.withhold_end_ns = 50 * kMs;
  EXPECT_EQ(ArmedSecondLook(policy, window, 1, 0, look, 3 * kMs, 5 * kMs, 8 * kMs, 1.0), 16 * kMs)
      << "cut at the withheld window";
  AdmissionGate paused;
  paused.paused = true;
  EXPECT_EQ(ArmedSecondLook(policy, paused, 1, 0, look, 3 * kMs, 5 * kMs, 1 * kMs, 1.0), 0);
}

}  // namespace
// A hand-back is judged by the forecast's rest, or by the second look's
// longer forecast from its point on, whichever leaves more.
TEST(BubbleServing, AHandBackLeavesTheRestOfTheLongerOfTheForecastAndTheSecondLook) {
  const Nanos begin = 100 * kMillisecond;
  const SecondLook look{2 * kMillisecond, 20 * kMillisecond};
  // Before the point: the second look's forecast from its point on.
  EXPECT_EQ(HandBackLeftover(begin, begin + 500 * kMicrosecond, look, begin + 400 * kMicrosecond),
            18 * kMillisecond);
  // After it: the rest of the longer forecast.
  EXPECT_EQ(HandBackLeftover(begin, begin + 500 * kMicrosecond, look, begin + 5 * kMillisecond),
            15 * kMillisecond);
  // No second look, or none longer than the forecast: the forecast's rest.
  EXPECT_EQ(HandBackLeftover(begin, begin + 8 * kMillisecond, SecondLook{}, begin + 3 * kMillisecond),
            5 * kMillisecond);
  EXPECT_EQ(HandBackLeftover(begin, begin + 30 * kMillisecond, look, begin + 3 * kMillisecond),
            27 * kMillisecond);
}

}  // namespace freeride
