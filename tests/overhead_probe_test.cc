// The live overhead estimate and the guard, on simulated training runs.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "policy/overhead_guard.h"
#include "policy/overhead_probe.h"

namespace freeride {
namespace {

constexpr Nanos kIteration = 100 * kMillisecond;

// A trainer whose iterations last kIteration with Gaussian noise of `cv`,
// `slowdown` longer while side work is served.  Feeds `iterations` of them
// to the estimator; calls `on_cycle` after each closed cycle.
struct SimulatedTrainer {
  ProbeSchedule schedule = ProbeSchedule::ForIteration(kIteration, ProbeConfig{});
  std::mt19937_64 random{42};
  double cv = 0.005;
  Nanos now = 7 * kSecond;

  template <typename Slowdown, typename OnCycle>
  void Run(OverheadEstimator& estimator, int iterations, Slowdown slowdown, OnCycle on_cycle) {
    std::normal_distribution<double> noise(1.0, cv);
    for (int i = 0; i < iterations; ++i) {
      const double factor = schedule.Withheld(now) ? 1.0 : 1.0 + slowdown();
      const Nanos length = static_cast<Nanos>(static_cast<double>(kIteration) * noise(random) * factor);
      if (estimator.ObserveIteration(now, now + length, schedule)) on_cycle();
      now += length;
    }
  }
};

// The estimate after `iterations` of a trainer slowed by `slowdown` outside
// the withheld windows.
OverheadEstimate EstimateAfter(int iterations, double slowdown) {
  OverheadEstimator estimator;
  SimulatedTrainer trainer;
  trainer.Run(estimator, iterations, [&] { return slowdown; }, [] {});
  return estimator.Estimate();
}

TEST(ProbeSchedule, WindowsLieInsideTheirCycleAndHoldTheWithheldIterations) {
  ProbeSchedule schedule = ProbeSchedule::ForIteration(kIteration, ProbeConfig{});
  ASSERT_TRUE(schedule.enabled());
  EXPECT_EQ(schedule.period(), 100 * kIteration);
  EXPECT_EQ(schedule.window_length(), 6 * kIteration);
  std::set<Nanos> offsets;
  for (int64_t cycle = 0; cycle < 50; ++cycle) {
    TimeWindow window = schedule.WindowOf(cycle);
    EXPECT_GE(window.start, cycle * schedule.period() + schedule.window_length());
    EXPECT_LE(window.end, (cycle + 1) * schedule.period() - schedule.window_length());
    EXPECT_TRUE(schedule.Withheld(window.start));
    EXPECT_FALSE(schedule.Withheld(window.end));
    EXPECT_FALSE(schedule.Withheld(window.start - 1));
    EXPECT_EQ(schedule.NextWindow(window.start - kSecond).start, window.start);
    EXPECT_EQ(schedule.NextWindow(window.end).start, schedule.WindowOf(cycle + 1).start);
    offsets.insert(window.start - cycle * schedule.period());
  }
  EXPECT_GT(offsets.size(), 40u) << "the window moves within the cycle from cycle to cycle";
}

TEST(ProbeSchedule, ShortIterationsGetLongerCyclesWithTheSameShareWithheld) {
  ProbeSchedule schedule = ProbeSchedule::ForIteration(2 * kMillisecond, ProbeConfig{});
  ASSERT_TRUE(schedule.enabled());
  EXPECT_EQ(schedule.period(), ProbeConfig{}.min_period);
  EXPECT_EQ(schedule.window_length() * 100, schedule.period() * 6);
}

TEST(ProbeSchedule, ADegenerateConfigurationWithholdsNothing) {
  EXPECT_FALSE(ProbeSchedule::ForIteration(0, ProbeConfig{}).enabled());
  ProbeConfig too_dense;
  too_dense.period_iterations = 10;
  too_dense.withheld_iterations = 5;
  ProbeSchedule schedule = ProbeSchedule::ForIteration(kIteration, too_dense);
  EXPECT_FALSE(schedule.enabled());
  EXPECT_FALSE(schedule.Withheld(123 * kSecond));
}

TEST(OverheadEstimator, SaysItHasNoEstimateBeforeEnoughCycles) {
  OverheadEstimate estimate = EstimateAfter(150, 0.01);
  EXPECT_FALSE(estimate.known());
  EXPECT_LT(estimate.cycles, 3);
  EXPECT_EQ(estimate.min_cycles, 3);
}

TEST(OverheadEstimator, FindsAOnePercentSlowdownWithAnIntervalThatHoldsIt) {
  OverheadEstimate estimate = EstimateAfter(2500, 0.01);
  ASSERT_TRUE(estimate.known());
  EXPECT_GE(estimate.cycles, 20);
  EXPECT_NEAR(estimate.mean, 0.01, 0.002);
  EXPECT_LT(estimate.low, 0.01);
  EXPECT_GT(estimate.high, 0.01);
  EXPECT_GT(estimate.low, 0.005) << "the interval is tight enough to judge a 0.5% budget";
  EXPECT_GE(estimate.withheld_iterations, 20 * 4);
}

TEST(OverheadEstimator, CountsTheCyclesThatGaveARatioPastItsWindow) {
  OverheadEstimator estimator;
  SimulatedTrainer trainer;
  int closed = 0;
  trainer.Run(estimator, 4000, [] { return 0.01; }, [&] { ++closed; });
  OverheadEstimate estimate = estimator.Estimate();
  EXPECT_EQ(estimate.cycles, OverheadEstimatorConfig{}.window_cycles) << "the window is full";
  EXPECT_GT(estimator.ratios_added(), estimate.cycles) << "counted past the window";
  EXPECT_LE(estimator.ratios_added(), closed);
  const int64_t before = estimator.ratios_added();
  estimator.Reset();
  EXPECT_EQ(estimator.ratios_added(), before) << "Reset forgets the ratios, not the count";
  // A cycle with no withheld iteration (the schedule disabled) adds nothing.
  ProbeSchedule none = ProbeSchedule::ForIteration(0, ProbeConfig{});
  for (int i = 0; i < 500; ++i) estimator.ObserveIteration(i * kIteration, (i + 1) * kIteration, none);
  EXPECT_EQ(estimator.ratios_added(), before);
}

TEST(OverheadEstimator, NoSlowdownGivesAnIntervalAroundZero) {
  OverheadEstimate estimate = EstimateAfter(2500, 0.0);
  ASSERT_TRUE(estimate.known());
  EXPECT_LT(estimate.low, 0.0);
  EXPECT_GT(estimate.high, 0.0);
  EXPECT_LT(estimate.high, 0.003);
}

TEST(OverheadEstimator, DriftInTheTrainerDoesNotReadAsOverhead) {
  // Iterations that lengthen by 30% over the run, with no side-work cost:
  // comparing within each cycle cancels it.
  OverheadEstimator estimator;
  SimulatedTrainer trainer;
  int i = 0;
  std::normal_distribution<double> noise(1.0, 0.003);
  for (; i < 2500; ++i) {
    const double drift = 1.0 + 0.3 * i / 2500.0;
    const Nanos length = static_cast<Nanos>(kIteration * drift * noise(trainer.random));
    estimator.ObserveIteration(trainer.now, trainer.now + length, trainer.schedule);
    trainer.now += length;
  }
  OverheadEstimate estimate = estimator.Estimate();
  ASSERT_TRUE(estimate.known());
  EXPECT_NEAR(estimate.mean, 0.0, 0.002);
}

TEST(OverheadEstimator, ResetForgetsTheCycles) {
  OverheadEstimator estimator;
  SimulatedTrainer trainer;
  trainer.Run(estimator, 800, [] { return 0.02; }, [] {});
  ASSERT_TRUE(estimator.Estimate().known());
  estimator.Reset();
  EXPECT_FALSE(estimator.Estimate().known());
  EXPECT_EQ(estimator.Estimate().cycles, 0);
}

TEST(OverheadGuard, BacksOffStepByStepWhileOverBudgetAndRecoversWhenTheCostGoes) {
  // The cost of side work at each level: 3% unrestricted, less as the guard
  // restricts it, none when paused.
  const double cost_at[kGuardLevels] = {0.03, 0.02, 0.012, 0.003, 0.0};
  OverheadEstimator estimator;
  OverheadGuard guard;
  SimulatedTrainer trainer;
  std::vector<GuardLevel> levels{guard.level()};
  int cycles_at[kGuardLevels] = {};
  bool cost_gone = false;
  auto slowdown = [&] { return cost_gone ? 0.0 : cost_at[static_cast<int>(guard.level())]; };
  auto on_cycle = [&] {
    ++cycles_at[static_cast<int>(guard.level())];
    if (guard.Judge(estimator.Estimate())) {
      estimator.Reset();
      levels.push_back(guard.level());
    }
  };
  trainer.Run(estimator, 8000, slowdown, on_cycle);
  // Over budget until demoted, whose 0.3% is within it.
  ASSERT_GE(levels.size(), 4u);
  EXPECT_EQ(std::vector<GuardLevel>(levels.begin(), levels.begin() + 4),
            (std::vector<GuardLevel>{GuardLevel::kNormal, GuardLevel::kWiderMargins,
                                     GuardLevel::kFewerGrants, GuardLevel::kDemoted}));
  EXPECT_EQ(cycles_at[static_cast<int>(GuardLevel::kPaused)], 0);
  // It tries the level above now and then, ever more rarely: most cycles
  // after the first descent are demoted ones.
  const int demoted = cycles_at[static_cast<int>(GuardLevel::kDemoted)];
  const int fewer = cycles_at[static_cast<int>(GuardLevel::kFewerGrants)];
  EXPECT_GT(demoted, 3 * fewer) << demoted << " demoted cycles, " << fewer << " with fewer grants";
  EXPECT_LE(levels.size(), 12u) << "the tries become rarer";
  // The side task stops stealing: the guard gives the levels back.
  cost_gone = true;
  trainer.Run(estimator, 8000, slowdown, on_cycle);
  EXPECT_EQ(guard.level(), GuardLevel::kNormal);
}

TEST(OverheadGuard, PausesWhenEveryLevelCostsTooMuchAndTriesAgainLessOftenEachTime) {
  OverheadEstimator estimator;
  OverheadGuard guard;
  SimulatedTrainer trainer;
  std::vector<int> pause_lengths;  // cycles spent in each pause
  int cycles_paused = 0;
  auto slowdown = [&] { return guard.level() == GuardLevel::kPaused ? 0.0 : 0.03; };
  auto on_cycle = [&] {
    if (guard.level() == GuardLevel::kPaused) ++cycles_paused;
    GuardLevel before = guard.level();
    if (guard.Judge(estimator.Estimate())) {
      estimator.Reset();
      if (before == GuardLevel::kPaused) {
        pause_lengths.push_back(cycles_paused);
        cycles_paused = 0;
      }
    }
  };
  trainer.Run(estimator, 12000, slowdown, on_cycle);
  ASSERT_GE(pause_lengths.size(), 3u);
  EXPECT_EQ(pause_lengths[0], 5);
  EXPECT_EQ(pause_lengths[1], 10);
  EXPECT_EQ(pause_lengths[2], 20);
}

TEST(OverheadGuard, ABudgetOfZeroNeverActs) {
  OverheadGuardConfig config;
  config.budget = 0;
  OverheadGuard guard(config);
  OverheadEstimate high;
  high.cycles = high.min_cycles = 3;
  high.mean = high.low = high.high = 0.5;
  EXPECT_FALSE(guard.Judge(high));
  EXPECT_EQ(guard.level(), GuardLevel::kNormal);
}

TEST(OverheadGuard, AnUnknownEstimateChangesNothing) {
  OverheadGuard guard;
  OverheadEstimate unknown;
  unknown.cycles = 1;
  unknown.min_cycles = 3;
  unknown.low = unknown.mean = unknown.high = 0.5;
  EXPECT_FALSE(guard.Judge(unknown));
  EXPECT_EQ(guard.level(), GuardLevel::kNormal);
}

}  // namespace
}  // namespace freeride
