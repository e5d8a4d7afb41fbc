#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "policy/bubble_predictor.h"
#include "policy/next_bubble.h"
#include "policy/dispatch_policy.h"
#include "policy/overrun_budget.h"
#include "policy/quantile.h"
#include "policy/step_estimator.h"

namespace freeride {
namespace {

TEST(Quantile, NearestRankAgreesForWindowsAndVectors) {
  std::vector<Nanos> values = {50, 10, 40, 20, 30};
  EXPECT_EQ(NearestRankIndex(5, 0.0), 0u);
  EXPECT_EQ(NearestRankIndex(5, 0.5), 2u);   // ceil(2.5) = 3rd value
  EXPECT_EQ(NearestRankIndex(5, 0.99), 4u);
  EXPECT_EQ(NearestRankIndex(100, 0.99), 98u);  // the 99th of 100
  for (double q : {0.0, 0.2, 0.5, 0.9, 1.0})
    EXPECT_EQ(QuantileOf(values, q), QuantileOf(values.data(), 5, q)) << q;
  EXPECT_EQ(QuantileOf(values, 0.5), 30);
  EXPECT_EQ(QuantileOf(std::vector<Nanos>{}, 0.5), 0);
}

TEST(BubblePredictor, UsesHintUntilTheSlotHasHistory) {
  BubblePredictor p;
  EXPECT_EQ(p.Predict(3, 0), 0);
  EXPECT_EQ(p.Predict(3, 5 * kMillisecond), 5 * kMillisecond);
  p.Observe(3, 8 * kMillisecond);
  EXPECT_EQ(p.Predict(3, 5 * kMillisecond), 8 * kMillisecond);
  EXPECT_EQ(p.Predict(4, 0), 0) << "slots learn independently";
}

TEST(BubblePredictor, ForecastsALowQuantileOfTheWindow) {
  BubblePredictor p(BubblePredictorConfig{.window = 10, .quantile = 0.1});
  for (int i = 1; i <= 10; ++i) p.Observe(0, i * kMillisecond);
  EXPECT_EQ(p.Predict(0, 0), 1 * kMillisecond);
  // Old samples age out of the window.
  for (int i = 0; i < 10; ++i) p.Observe(0, 20 * kMillisecond);
  EXPECT_EQ(p.Predict(0, 0), 20 * kMillisecond);
  EXPECT_EQ(p.Count(0), 10);
}

TEST(BubblePredictor, ResetForgetsEverySlotAndItsSecondLook) {
  BubblePredictor p;
  for (int i = 0; i < 16; ++i)
    p.Observe(0, i % 3 == 0 ? 50 * kMicrosecond : 40 * kMillisecond);
  p.Observe(7, 9 * kMillisecond);
  ASSERT_TRUE(p.SecondLookFor(0).exists());
  p.Reset();
  EXPECT_EQ(p.Count(0), 0);
  EXPECT_EQ(p.Predict(0, 3 * kMillisecond), 3 * kMillisecond) << "back to the hint";
  EXPECT_EQ(p.Predict(7, 0), 0);
  EXPECT_FALSE(p.SecondLookFor(0).exists());
  // Learns again from its first observation, with nothing of the old window.
  p.Observe(0, 12 * kMillisecond);
  EXPECT_EQ(p.Predict(0, 0), 12 * kMillisecond);
  EXPECT_EQ(p.Count(0), 1);
}

TEST(BubblePredictor, SlotsBeyondTheLimitShareOneHistory) {
  BubblePredictor p(BubblePredictorConfig{.max_slots = 4});
  p.Observe(100, 7 * kMillisecond);
  EXPECT_EQ(p.Predict(3, 0), 7 * kMillisecond);
  EXPECT_EQ(p.Predict(999, 0), 7 * kMillisecond);
}

TEST(BubblePredictor, ASlotOfShortAndLongBubblesGetsASecondLook) {
  BubblePredictor p;  // window 16, p10
  // 6 of 16 bubbles end after 45-60 us (the neighbour's data was there),
  // the other 10 last 41-54 ms.
  for (int i = 0; i < 16; ++i)
    p.Observe(0, i % 3 == 0 ? (45 + i) * kMicrosecond : (40 + i) * kMillisecond);
  EXPECT_LT(p.Predict(0, 0), 100 * kMicrosecond) << "the first look sees the short kind";
  SecondLook look = p.SecondLookFor(0);
  ASSERT_TRUE(look.exists());
  // Past the longest short one (60 us) with room, far before the long ones.
  EXPECT_GE(look.after, 120 * kMicrosecond);
  EXPECT_LE(look.after, 1 * kMillisecond);
  // The shortest of the 10 long ones.
  EXPECT_EQ(look.length, 41 * kMillisecond);
  EXPECT_EQ(p.PredictOpenFor(0, 0, 10 * kMicrosecond), p.Predict(0, 0));
  EXPECT_EQ(p.PredictOpenFor(0, 0, look.after), 41 * kMillisecond);
}

TEST(BubblePredictor, ASlotWhoseShortKindLastsMillisecondsGetsASecondLookSoonAfterIt) {
  // A last stage's first wait: the pipeline's drain and fill (40-42 ms), but
  // one iteration in five, when the ranks lined up at the iteration's end,
  // the fill alone (12-13 ms).  Twice the short kind (25 ms) would be too
  // late to be worth it; a little after it, most of the long bubble is left.
  BubblePredictor p;
  for (int i = 0; i < 16; ++i)
    p.Observe(0, i % 5 == 2 ? (12 * kMillisecond + i * 50 * kMicrosecond) : (40 * kMillisecond + i * 100 * kMicrosecond));
  const Nanos first = p.Predict(0, 0);
  ASSERT_LT(first, 13 * kMillisecond) << "the first look sees the short kind";
  SecondLook look = p.SecondLookFor(0);
  ASSERT_TRUE(look.exists());
  const Nanos longest_short = 12 * kMillisecond + 12 * 50 * kMicrosecond;
  EXPECT_GT(look.after, longest_short);
  EXPECT_LE(look.after, longest_short * 5 / 4);
  EXPECT_EQ(look.length, 40 * kMillisecond) << "the shortest of the long ones";
}

TEST(BubblePredictor, TheSecondLookWaitsOutTheShortKindsSpread) {
  // The short kind varies from 1.0 to 1.225 ms, so a short one may well
  // outlast a quarter past its longest (1.53 ms); the long kind is 20 ms.
  // The second look comes twice the spread past the longest short one.
  BubblePredictor p;
  for (int i = 0; i < 16; ++i)
    p.Observe(0, i % 4 == 0 ? (1000 + 75 * (i / 4)) * kMicrosecond : 20 * kMillisecond);
  SecondLook look = p.SecondLookFor(0);
  ASSERT_TRUE(look.exists());
  EXPECT_GE(look.after, (1225 + 2 * 225) * kMicrosecond);
  EXPECT_LE(look.after, 3 * kMillisecond);
}

TEST(BubblePredictor, NoSecondLookForOneKindOfBubbleOrTooFewLongOnes) {
  BubblePredictor spread;
  for (int i = 0; i < 16; ++i) spread.Observe(0, (10 + i) * kMillisecond);
  EXPECT_FALSE(spread.SecondLookFor(0).exists()) << "10-25 ms: the p10 serves them all";
  BubblePredictor rare;
  for (int i = 0; i < 16; ++i) rare.Observe(0, i < 14 ? 50 * kMicrosecond : 40 * kMillisecond);
  EXPECT_FALSE(rare.SecondLookFor(0).exists()) << "2 long ones are too few to forecast from";
  rare.Observe(0, 40 * kMillisecond);  // in place of the oldest short one
  EXPECT_TRUE(rare.SecondLookFor(0).exists()) << "3 are enough";
  BubblePredictor young;
  for (int i = 0; i < 3; ++i) young.Observe(0, 40 * kMillisecond);
  EXPECT_FALSE(young.SecondLookFor(0).exists());
  EXPECT_FALSE(young.SecondLookFor(7).exists()) << "no history";
}

TEST(StepEstimator, PriorThenP90OfRecentSteps) {
  StepEstimator e(2 * kMillisecond);
  EXPECT_EQ(e.Estimate(), 2 * kMillisecond);
  for (int i = 1; i <= 10; ++i) e.Observe(i * 100 * kMicrosecond);
  EXPECT_EQ(e.Estimate(), 900 * kMicrosecond);
}

TEST(StepEstimator, BubblesPassedOverForgetTheSlowestSamplesWithBackoff) {
  StepEstimator e(3 * kMillisecond);
  for (int i = 0; i < 28; ++i) e.Observe(1 * kMillisecond);
  for (int i = 0; i < 4; ++i) e.Observe(20 * kMillisecond);  // a preempted burst
  ASSERT_EQ(e.Estimate(), 20 * kMillisecond);
  e.PassedOver(StepEstimator::kPassesBeforeForgetting - 1);
  EXPECT_EQ(e.Estimate(), 20 * kMillisecond) << "not yet";
  e.PassedOver(1);
  EXPECT_EQ(e.count(), 31);
  EXPECT_EQ(e.Estimate(), 1 * kMillisecond) << "one slow sample fewer: the p90 is a fast step";
  // The next forgetting needs twice as many bubbles.
  e.PassedOver(2 * StepEstimator::kPassesBeforeForgetting - 1);
  EXPECT_EQ(e.count(), 31);
  e.PassedOver(1);
  EXPECT_EQ(e.count(), 30);
  // A step resets the count of bubbles passed over.  A slow one (longer than
  // the estimate it ran on) keeps the backing off...
  e.PassedOver(4 * StepEstimator::kPassesBeforeForgetting - 1);
  e.Observe(25 * kMillisecond);
  e.PassedOver(1);
  EXPECT_EQ(e.count(), 31);
  e.PassedOver(4 * StepEstimator::kPassesBeforeForgetting - 2);
  EXPECT_EQ(e.count(), 31) << "still four times the first wait";
  e.PassedOver(1);
  EXPECT_EQ(e.count(), 30);
  // ...and so does a single step within its estimate (a task whose steps
  // only sometimes fit would otherwise retry, and overrun, every 16
  // bubbles)...
  e.Observe(1 * kMillisecond);
  e.PassedOver(StepEstimator::kPassesBeforeForgetting);
  EXPECT_EQ(e.count(), 31) << "still the long wait after one lucky step";
  // ...but steps within their estimate, kStepsToTrustAgain in a row, restore
  // the first wait, so a task whose estimate a burst of load lengthened again
  // and again is not passed over for ever longer (1024 bubbles per sample).
  for (int i = 1; i < StepEstimator::kStepsToTrustAgain; ++i) e.Observe(1 * kMillisecond);
  const int samples = e.count();
  e.PassedOver(StepEstimator::kPassesBeforeForgetting - 1);
  EXPECT_EQ(e.count(), samples);
  e.PassedOver(1);
  EXPECT_EQ(e.count(), samples - 1);
  // A single slow first step (lazy initialisation) is forgotten too; then the
  // prior stands until the next step.
  StepEstimator first(3 * kMillisecond);
  first.Observe(500 * kMillisecond);
  first.PassedOver(StepEstimator::kPassesBeforeForgetting);
  EXPECT_EQ(first.count(), 0);
  EXPECT_EQ(first.Estimate(), 3 * kMillisecond);
  first.PassedOver(1000);
  EXPECT_EQ(first.Estimate(), 3 * kMillisecond) << "nothing left to forget";
}

// The estimator keeps its samples sorted as they come and go; its estimate
// must stay the nearest-rank p90 of exactly the samples a plain list holds.
TEST(StepEstimator, IncrementalOrderMatchesAPlainQuantileOfTheWindow) {
  StepEstimator estimator(777);
  std::vector<Nanos> window;  // oldest first, as the estimator keeps them
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (int i = 0; i < 5000; ++i) {
    if (next() % 7 == 0) {
      // Enough passes to forget one sample, as PassedOver does after its backoff.
      int before = estimator.count();
      estimator.PassedOver(StepEstimator::kMaxPassesBeforeForgetting);
      if (estimator.count() < before) {
        auto slowest = std::max_element(window.begin(), window.end());
        window.erase(slowest);
      }
    } else {
      Nanos step = static_cast<Nanos>(next() % 50);  // many ties on purpose
      estimator.Observe(step);
      window.push_back(step);
      if (window.size() > StepEstimator::kWindow) window.erase(window.begin());
    }
    ASSERT_EQ(estimator.count(), static_cast<int>(window.size()));
    Nanos expected = window.empty() ? 777 : QuantileOf(window, 0.9);
    ASSERT_EQ(estimator.Estimate(), expected) << "after " << i << " updates";
  }
}

TEST(StepEstimator, TheWindowKeepsTheNewestSteps) {
  StepEstimator e;
  for (int i = 0; i < StepEstimator::kWindow; ++i) e.Observe(50 * kMillisecond);
  for (int i = 0; i < StepEstimator::kWindow; ++i) e.Observe(1 * kMillisecond);
  EXPECT_EQ(e.count(), StepEstimator::kWindow);
  EXPECT_EQ(e.Estimate(), 1 * kMillisecond);
}

TEST(DispatchPolicy, StepFitsHonoursTheMargin) {
  DispatchPolicy policy(DispatchConfig{.step_margin = 1.5});
  EXPECT_TRUE(policy.StepFits(0, 15, 10));
  EXPECT_FALSE(policy.StepFits(0, 14, 10));
  EXPECT_FALSE(policy.StepFits(20, 10, 1)) << "past the end nothing fits";
  EXPECT_TRUE(policy.StepFits(0, 30, 10, 2.0)) << "the guard's fit factor widens the step";
  EXPECT_FALSE(policy.StepFits(0, 29, 10, 2.0));
}

// The longest fitting step is the one StepFits accepts and a nanosecond
// longer it refuses, with the margin and the guard's factor alike.
TEST(DispatchPolicy, TheLongestFittingStepIsTheInverseOfStepFits) {
  DispatchPolicy policy(DispatchConfig{.step_margin = 1.1});  // the default: not exact in binary
  for (double factor : {1.0, 1.5, 2.0}) {
    for (Nanos rest : {Nanos{11}, Nanos{15}, 3 * kMillisecond, 22 * kMillisecond + 7}) {
      const Nanos longest = policy.LongestFittingStep(1000, 1000 + rest, factor);
      EXPECT_TRUE(policy.StepFits(1000, 1000 + rest, longest, factor)) << rest << " x" << factor;
      EXPECT_FALSE(policy.StepFits(1000, 1000 + rest, longest + 1, factor)) << rest << " x" << factor;
    }
  }
  EXPECT_EQ(policy.LongestFittingStep(20, 10), 0) << "past the end nothing fits";
  EXPECT_EQ(policy.LongestFittingStep(10, 10), 0);
  EXPECT_EQ(policy.LongestFittingStep(0, 1000, std::nan("")), 0) << "a corrupt factor fits nothing";
}

DispatchCandidate Task(int64_t id, int priority, uint64_t order, uint64_t memory, Nanos step) {
  DispatchCandidate c;
  c.task_id = id;
  c.priority = priority;
  c.submit_order = order;
  c.memory_bytes = memory;
  c.step_estimate = step;
  return c;
}

TEST(DispatchPolicy, OrdersByMemoryThenTimeThenPriorityThenFifo) {
  DispatchPolicy policy;
  BubbleView bubble{.now = 0, .predicted_end = 10 * kMillisecond, .free_memory_bytes = 1000};
  std::vector<DispatchCandidate> c = {
      Task(1, 9, 1, 2000, 1 * kMillisecond),   // does not fit memory
      Task(2, 9, 2, 100, 20 * kMillisecond),   // does not fit time
      Task(3, 1, 3, 100, 1 * kMillisecond),
      Task(4, 5, 5, 100, 1 * kMillisecond),    // highest fitting priority
      Task(5, 5, 4, 100, 1 * kMillisecond),    // same priority, earlier: wins
  };
  DispatchDecision d = policy.Choose(c, bubble);
  ASSERT_EQ(d.verdict, DispatchVerdict::kRun);
  EXPECT_EQ(c[d.index].task_id, 5);
}

TEST(DispatchPolicy, DemotedTasksGoLastAndMustFitTwiceTheirStep) {
  DispatchPolicy policy;
  BubbleView bubble{.now = 0, .predicted_end = 10 * kMillisecond, .free_memory_bytes = 1000};
  DispatchCandidate demoted = Task(1, 9, 1, 100, 1 * kMillisecond);
  demoted.demoted = true;
  std::vector<DispatchCandidate> c = {demoted, Task(2, 0, 2, 100, 1 * kMillisecond)};
  DispatchDecision d = policy.Choose(c, bubble);
  ASSERT_EQ(d.verdict, DispatchVerdict::kRun);
  EXPECT_EQ(c[d.index].task_id, 2) << "after any task not demoted, whatever its priority";
  c[0].step_estimate = 4 * kMillisecond;  // 2 x 4 ms x 1.1 margin > 8 ms left
  bubble.now = 2 * kMillisecond;
  EXPECT_EQ(policy.Choose(std::span(c).first(1), bubble).verdict, DispatchVerdict::kNoTimeFit);
  c[0].demoted = false;
  EXPECT_EQ(policy.Choose(std::span(c).first(1), bubble).verdict, DispatchVerdict::kRun);
}

// A task still starting (held until it attaches to the SDK) goes before the
// started ones whatever their priority: behind an armed task of higher
// priority that leaves each bubble under the 2 ms an imperative slice needs,
// a new submission would otherwise never start.
TEST(DispatchPolicy, AStartingTaskGoesBeforeStartedOnesOfHigherPriority) {
  DispatchPolicy policy;
  BubbleView bubble{.now = 0, .predicted_end = 20 * kMillisecond, .free_memory_bytes = 1000};
  DispatchCandidate busy = Task(1, 5, 1, 100, 3 * kMillisecond);
  DispatchCandidate starting = Task(2, 0, 2, 100, 0);
  starting.imperative = true;  // held: continued and stopped like an imperative task
  std::vector<DispatchCandidate> c = {busy, starting};
  EXPECT_EQ(c[policy.Choose(c, bubble).index].task_id, 1) << "not starting: priority decides";
  c[1].starting = true;
  DispatchDecision d = policy.Choose(c, bubble);
  ASSERT_EQ(d.verdict, DispatchVerdict::kRun);
  EXPECT_EQ(c[d.index].task_id, 2);
  c[0].demoted = true;
  c[1].demoted = true;
  EXPECT_EQ(c[policy.Choose(c, bubble).index].task_id, 2) << "among demoted ones too";
}

TEST(DispatchPolicy, OnlyShorterStepsOrSmallerMemoryCanUseWhatATaskLeaves) {
  DispatchPolicy policy;  // 1.1 margin, 1 ms for an unknown step, 2 ms imperative slices
  constexpr Nanos kNever = DispatchPolicy::kNeverUsable;
  DispatchCandidate first = Task(1, 0, 1, 100, 2 * kMillisecond);
  EXPECT_EQ(policy.LeftoverNeeded(first, Task(2, 0, 2, 100, 2 * kMillisecond)), kNever);
  EXPECT_EQ(policy.LeftoverNeeded(first, Task(2, 0, 2, 500, 3 * kMillisecond)), kNever);
  EXPECT_EQ(policy.LeftoverNeeded(first, Task(2, 0, 2, 100, 1 * kMillisecond)), 1100 * kMicrosecond);
  EXPECT_EQ(policy.LeftoverNeeded(first, Task(2, 0, 2, 50, 2 * kMillisecond)), 2200 * kMicrosecond)
      << "needs less memory: may fit where `first` did not, for memory";
  EXPECT_EQ(policy.LeftoverNeeded(first, Task(2, 0, 2, 100, 0)), 1100 * kMicrosecond)
      << "unknown step: the 1 ms probe is shorter than 2 ms";
  DispatchCandidate demoted = Task(2, 0, 2, 100, 1500 * kMicrosecond);
  demoted.demoted = true;
  EXPECT_EQ(policy.LeftoverNeeded(first, demoted), kNever) << "must fit 3 ms";
  DispatchCandidate imperative = Task(2, 0, 2, 100, 5 * kMillisecond);
  imperative.imperative = true;
  EXPECT_EQ(policy.LeftoverNeeded(first, imperative), 250 * kMicrosecond)
      << "the least slice, that of the shortest bubbles";
  // Under the guard's wider margins, the least leftover the step fits, as
  // StepFits (and so Choose) judges it.
  const Nanos wide = policy.LeftoverNeeded(first, Task(2, 0, 2, 100, 1 * kMillisecond), 1.5);
  EXPECT_NEAR(wide, 1650 * kMicrosecond, 1);
  EXPECT_TRUE(policy.StepFits(0, wide, 1 * kMillisecond, 1.5));
  EXPECT_FALSE(policy.StepFits(0, wide - 1, 1 * kMillisecond, 1.5));
  EXPECT_EQ(policy.LeftoverNeeded(first, imperative, 1.5), 250 * kMicrosecond)
      << "a slice is a slice";

  // Against Choose itself: whenever `first` cannot run in what is left of a
  // bubble and that is less than LeftoverNeeded, `other` cannot run there.
  const Nanos steps[] = {0, 300 * kMicrosecond, 1 * kMillisecond, 2 * kMillisecond, 5 * kMillisecond};
  const uint64_t memories[] = {0, 100, 200};
  int judged = 0;
  for (Nanos first_step : steps)
    for (Nanos other_step : steps)
      for (uint64_t first_memory : memories)
        for (uint64_t other_memory : memories)
          for (bool other_demoted : {false, true})
            for (Nanos left = 0; left <= 8 * kMillisecond; left += 100 * kMicrosecond)
              for (uint64_t free_memory : {uint64_t{50}, uint64_t{150}, uint64_t{250}}) {
                DispatchCandidate a = Task(1, 0, 1, first_memory, first_step);
                DispatchCandidate b = Task(2, 0, 2, other_memory, other_step);
                b.demoted = other_demoted;
                BubbleView view{.now = 0, .predicted_end = left, .free_memory_bytes = free_memory};
                if (policy.Choose(std::span(&a, 1), view).verdict == DispatchVerdict::kRun) continue;
                bool b_runs = policy.Choose(std::span(&b, 1), view).verdict == DispatchVerdict::kRun;
                if (left >= policy.LeftoverNeeded(a, b)) continue;
                ++judged;
                EXPECT_FALSE(b_runs) << "first step " << first_step << ", other step " << other_step
                                     << ", left " << left << ", memories " << first_memory << "/"
                                     << other_memory << " of " << free_memory;
              }
  EXPECT_GT(judged, 1000);
}

// What a task can use of a bubble that another handed back idle: its own
// need, whatever the other's step.  Against Choose: with less left than
// LeastUsable the task never runs; with that much (and the memory) it does.
TEST(DispatchPolicy, LeastUsableIsWhatATaskNeedsOfABubbleLeftWhole) {
  DispatchPolicy policy;
  EXPECT_EQ(policy.LeastUsable(Task(2, 0, 2, 100, 2 * kMillisecond)), 2200 * kMicrosecond);
  DispatchCandidate demoted = Task(2, 0, 2, 100, 1 * kMillisecond);
  demoted.demoted = true;
  EXPECT_EQ(policy.LeastUsable(demoted), 2200 * kMicrosecond) << "twice its step";
  DispatchCandidate imperative = Task(2, 0, 2, 100, 0);
  imperative.imperative = true;
  EXPECT_EQ(policy.LeastUsable(imperative), 250 * kMicrosecond);
  for (Nanos step : {Nanos{0}, 300 * kMicrosecond, 2 * kMillisecond, 5 * kMillisecond})
    for (bool is_demoted : {false, true}) {
      DispatchCandidate c = Task(2, 0, 2, 0, step);
      c.demoted = is_demoted;
      const Nanos need = policy.LeastUsable(c);
      auto runs = [&](Nanos left) {
        BubbleView view{.now = 0, .predicted_end = left, .free_memory_bytes = 10};
        return policy.Choose(std::span(&c, 1), view).verdict == DispatchVerdict::kRun;
      };
      EXPECT_FALSE(runs(need - 1)) << step << (is_demoted ? " demoted" : "");
      EXPECT_TRUE(runs(need)) << step << (is_demoted ? " demoted" : "");
    }
}

TEST(DispatchPolicy, SaysWhyNothingRuns) {
  DispatchPolicy policy;
  BubbleView bubble{.now = 0, .predicted_end = 1 * kMillisecond, .free_memory_bytes = 10};
  std::vector<DispatchCandidate> none;
  EXPECT_EQ(policy.Choose(none, bubble).verdict, DispatchVerdict::kNoCandidates);
  std::vector<DispatchCandidate> big = {Task(1, 0, 1, 11, 1)};
  EXPECT_EQ(policy.Choose(big, bubble).verdict, DispatchVerdict::kNoMemoryFit);
  std::vector<DispatchCandidate> slow = {Task(1, 0, 1, 1, 5 * kMillisecond)};
  EXPECT_EQ(policy.Choose(slow, bubble).verdict, DispatchVerdict::kNoTimeFit);
}

TEST(DispatchPolicy, UnknownStepTimeUsesTheConfiguredProbe) {
  DispatchPolicy policy(DispatchConfig{.step_margin = 1.0, .unknown_step_estimate = 3});
  std::vector<DispatchCandidate> c = {Task(1, 0, 1, 0, 0)};
  EXPECT_EQ(policy.Choose(c, {.now = 0, .predicted_end = 2}).verdict, DispatchVerdict::kNoTimeFit);
  EXPECT_EQ(policy.Choose(c, {.now = 0, .predicted_end = 3}).verdict, DispatchVerdict::kRun);
}

TEST(DispatchPolicy, ImperativeTasksNeedAMinimumSlice) {
  DispatchPolicy policy(DispatchConfig{.min_imperative_slice = 2 * kMillisecond});
  DispatchCandidate c = Task(1, 0, 1, 0, 0);
  c.imperative = true;
  std::vector<DispatchCandidate> list = {c};
  EXPECT_EQ(policy.Choose(list, {.now = 0, .predicted_end = kMillisecond}).verdict,
            DispatchVerdict::kNoTimeFit);
  EXPECT_EQ(policy.Choose(list, {.now = 0, .predicted_end = 3 * kMillisecond}).verdict,
            DispatchVerdict::kRun);
}

// A lane whose bubbles are all shorter than the minimum slice still runs an
// imperative task, or a task starting up (held to bubbles until it attaches):
// in the first half of each bubble.  Without this, a submission to such a
// lane never started (multinode_ray hung on a stage with 0.5 ms bubbles).
TEST(DispatchPolicy, ImperativeSliceShrinksWithShortBubbles) {
  DispatchPolicy policy(DispatchConfig{.min_imperative_slice = 2 * kMillisecond,
                                       .imperative_slice_share = 0.5,
                                       .imperative_slice_floor = 250 * kMicrosecond});
  DispatchCandidate c = Task(1, 0, 1, 0, 0);
  c.imperative = true;
  c.starting = true;
  std::vector<DispatchCandidate> list = {c};
  auto verdict = [&](Nanos now, Nanos length) {
    return policy.Choose(list, {.now = now, .predicted_end = length, .forecast_length = length})
        .verdict;
  };
  const Nanos short_bubble = 600 * kMicrosecond;
  EXPECT_EQ(verdict(0, short_bubble), DispatchVerdict::kRun) << "its start";
  EXPECT_EQ(verdict(300 * kMicrosecond, short_bubble), DispatchVerdict::kRun) << "half left";
  EXPECT_EQ(verdict(300 * kMicrosecond + 1, short_bubble), DispatchVerdict::kNoTimeFit);
  // Never below the floor, however short the bubble.
  EXPECT_EQ(verdict(0, 249 * kMicrosecond), DispatchVerdict::kNoTimeFit);
  EXPECT_EQ(verdict(0, 250 * kMicrosecond), DispatchVerdict::kRun);
  // Long bubbles keep the full slice: 2 ms must remain.
  EXPECT_EQ(verdict(8 * kMillisecond, 10 * kMillisecond), DispatchVerdict::kRun);
  EXPECT_EQ(verdict(8 * kMillisecond + 1, 10 * kMillisecond), DispatchVerdict::kNoTimeFit);
  EXPECT_EQ(policy.ImperativeSlice(3 * kMillisecond), 1500 * kMicrosecond);
  EXPECT_EQ(policy.ImperativeSlice(0), 2 * kMillisecond) << "length unknown";
}

TEST(OverrunBudget, OverrunsBeyondTheShareOfBubbleTimeDemoteThenKill) {
  OverrunBudget budget({.max_fraction = 0.1, .window = 8, .min_bubbles = 3, .min_overrun = 0,
                        .warmup_bubbles = 2, .hang = 0});
  auto verdict = [&](Nanos overrun, Nanos bubble) { return budget.Record(overrun, bubble).verdict; };
  // Warm-up: the first bubbles are not judged, however long they overran.
  EXPECT_EQ(verdict(9000, 1000), OverrunVerdict::kWithin);
  EXPECT_EQ(verdict(9000, 1000), OverrunVerdict::kWithin);
  // 5% of the bubble time overrun, bubble after bubble: within budget forever.
  for (int i = 0; i < 50; ++i) EXPECT_EQ(verdict(50, 1000), OverrunVerdict::kWithin);
  EXPECT_FALSE(budget.demoted());
  // One big overrun: judged at once (the window holds enough bubbles).
  OverrunJudgement demoted = budget.Record(5000, 1000);
  EXPECT_EQ(demoted.verdict, OverrunVerdict::kDemote);
  EXPECT_EQ(demoted.bubbles, 8);
  EXPECT_EQ(demoted.overrun, 7 * 50 + 5000);
  EXPECT_EQ(demoted.bubble_time, 8000);
  EXPECT_TRUE(budget.demoted());
  EXPECT_EQ(budget.window_count(), 0) << "the demoted task starts a fresh window";
  // Not judged before min_bubbles, then within budget again: 900 of 10000, 9%.
  EXPECT_EQ(verdict(900, 1000), OverrunVerdict::kWithin);
  EXPECT_EQ(verdict(0, 1000), OverrunVerdict::kWithin);
  EXPECT_EQ(verdict(0, 8000), OverrunVerdict::kWithin);
  // The old overrun leaves the sliding window; a new one tips it over: killed,
  // with the figures of the window that was judged.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(verdict(0, 1000), OverrunVerdict::kWithin);
  OverrunJudgement killed = budget.Record(2000, 1000);
  EXPECT_EQ(killed.verdict, OverrunVerdict::kKill);
  EXPECT_EQ(killed.bubbles, 8);
  EXPECT_EQ(killed.overrun, 2000);
  EXPECT_EQ(killed.bubble_time, 8000);
}

TEST(OverrunBudget, ADemotedTaskThatKeepsWithinIsRestoredAFewTimesAtMost) {
  OverrunBudget budget({.max_fraction = 0.1, .window = 8, .min_bubbles = 3, .min_overrun = 0,
                        .warmup_bubbles = 0, .hang = 0, .restore_after = 5, .max_restores = 1});
  auto verdict = [&](Nanos overrun) { return budget.Record(overrun, 1000).verdict; };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(verdict(0), OverrunVerdict::kWithin);
  EXPECT_EQ(verdict(5000), OverrunVerdict::kDemote) << "one slow step";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(verdict(0), OverrunVerdict::kWithin);
  EXPECT_TRUE(budget.demoted());
  EXPECT_EQ(verdict(0), OverrunVerdict::kRestore) << "five bubbles in a row within budget";
  EXPECT_FALSE(budget.demoted());
  // Over budget again once restored: demoted again, not killed.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(verdict(0), OverrunVerdict::kWithin);
  EXPECT_EQ(verdict(5000), OverrunVerdict::kDemote);
  // Restored as often as allowed: it stays demoted, however long it keeps within...
  for (int i = 0; i < 20; ++i) EXPECT_EQ(verdict(0), OverrunVerdict::kWithin);
  EXPECT_TRUE(budget.demoted());
  // ...and over budget while demoted, it is killed.
  EXPECT_EQ(verdict(5000), OverrunVerdict::kKill);
}

TEST(OverrunBudget, ZeroDisablesTheBudgetAndSmallTotalsStayUnderTheFloor) {
  OverrunBudget off({.max_fraction = 0, .window = 2, .min_bubbles = 1, .min_overrun = 0,
                     .warmup_bubbles = 0, .hang = 0});
  for (int i = 0; i < 10; ++i) EXPECT_EQ(off.Record(1 << 30, 1).verdict, OverrunVerdict::kWithin);
  EXPECT_FALSE(off.demoted());
  // Small overruns, however large a share, stay under the absolute floor.
  OverrunBudget floor({.max_fraction = 0.05, .window = 32, .min_bubbles = 1, .min_overrun = 25000,
                       .warmup_bubbles = 0, .hang = 0});
  for (int i = 0; i < 18; ++i) EXPECT_EQ(floor.Record(400, 1000).verdict, OverrunVerdict::kWithin);
  EXPECT_EQ(floor.Record(20000, 1000).verdict, OverrunVerdict::kDemote)
      << "27.2 us in all: over the floor";
}

}  // namespace
}  // namespace freeride

namespace freeride {
namespace {

TEST(NextBubble, TheNextBeginIsTheMedianBusyTimeAfterTheSlotThatEnded) {
  NextBubblePredictor next;
  EXPECT_FALSE(next.Forecast(0, 0).known);  // nothing learned
  // After slot 0 comes slot 1, after busy times of 3, 5 and 4 ms.
  next.Observe(0, 10 * kMillisecond, 1, 13 * kMillisecond);
  next.Observe(0, 30 * kMillisecond, 1, 35 * kMillisecond);
  EXPECT_FALSE(next.Forecast(0, 50 * kMillisecond).known);  // two are too few
  next.Observe(0, 50 * kMillisecond, 1, 54 * kMillisecond);
  NextBubbleForecast forecast = next.Forecast(0, 70 * kMillisecond);
  ASSERT_TRUE(forecast.known);
  EXPECT_EQ(forecast.slot, 1u);
  EXPECT_EQ(forecast.begin_ns, 74 * kMillisecond);
  EXPECT_FALSE(next.Forecast(1, 70 * kMillisecond).known);  // slot 1's follower is not known
}

TEST(NextBubble, ASlotWhoseFollowerChangesIsNotForecastUntilItIsSteadyAgain) {
  NextBubblePredictor next;
  for (int i = 0; i < 4; ++i) next.Observe(2, 0, 3, kMillisecond);
  ASSERT_TRUE(next.Forecast(2, 0).known);
  next.Observe(2, 0, 5, kMillisecond);  // slot 5 followed this time
  EXPECT_FALSE(next.Forecast(2, 0).known);
  next.Observe(2, 0, 5, kMillisecond);
  next.Observe(2, 0, 5, kMillisecond);
  NextBubbleForecast forecast = next.Forecast(2, 0);
  ASSERT_TRUE(forecast.known);
  EXPECT_EQ(forecast.slot, 5u);
}

TEST(NextBubble, AnIterationsFirstBubbleIsForecastFlaggedSoThatNothingIsQueuedAheadOfIt) {
  NextBubblePredictor next;
  for (int i = 0; i < 4; ++i) {
    next.Observe(7, 0, 0, 2 * kMillisecond);  // slot 0 follows the iteration's last slot, 7
    next.Observe(0, 0, 1, kMillisecond);      // and slot 1 follows slot 0
  }
  NextBubbleForecast first = next.Forecast(7, 0);
  ASSERT_TRUE(first.known);
  EXPECT_EQ(first.slot, 0u);
  EXPECT_EQ(first.begin_ns, 2 * kMillisecond);
  EXPECT_TRUE(first.iteration_first);
  NextBubbleForecast second = next.Forecast(0, 0);
  ASSERT_TRUE(second.known) << "the same history forecasts slot 1";
  EXPECT_FALSE(second.iteration_first);
}

TEST(NextBubble, ABeginBeforeTheLastEndIsNotLearnedAndResetForgetsAll) {
  NextBubblePredictor next;
  for (int i = 0; i < 3; ++i) next.Observe(0, 5 * kMillisecond, 1, 4 * kMillisecond);
  EXPECT_FALSE(next.Forecast(0, 0).known);
  for (int i = 0; i < 3; ++i) next.Observe(0, 0, 1, 2 * kMillisecond);
  ASSERT_TRUE(next.Forecast(0, 0).known);
  next.Reset();
  EXPECT_FALSE(next.Forecast(0, 0).known);
}

}  // namespace
}  // namespace freeride
