#include "schedule/pipeline_schedule.h"

#include <gtest/gtest.h>

namespace freeride {
namespace {

std::string Order(const std::vector<PipelineAction>& actions) {
  std::string out;
  for (const auto& a : actions) out += (out.empty() ? "" : " ") + a.Label();
  return out;
}

TEST(PipelineSchedule, OneFOneBMatchesTorchPipelineOrderOn4x4) {
  // As printed by Schedule1F1B(4 stages, 4 micro-batches).pipeline_order.
  auto order = BuildActionOrder(ScheduleKind::k1F1B, 4, 4);
  EXPECT_EQ(Order(order[0]), "F0 F1 F2 F3 B0 B1 B2 B3");
  EXPECT_EQ(Order(order[1]), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(Order(order[2]), "F0 F1 B0 F2 B1 F3 B2 B3");
  EXPECT_EQ(Order(order[3]), "F0 B0 F1 B1 F2 B2 F3 B3");
}

TEST(PipelineSchedule, GPipeRunsAllForwardsFirst) {
  auto order = BuildActionOrder(ScheduleKind::kGPipe, 2, 3);
  EXPECT_EQ(Order(order[1]), "F0 F1 F2 B0 B1 B2");
}

TEST(PipelineSchedule, EqualStageTimesGiveTheClosedForm) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (int p : {1, 2, 4, 8}) {
      for (int m : {1, 4, 8, 32}) {
        ScheduleTimeline t = TimeSchedule(kind, p, m, StageTimes{1.0, 2.0, 0});
        EXPECT_NEAR(t.bubble_fraction, ClosedFormBubbleFraction(p, m), 1e-9)
            << ScheduleKindName(kind) << " P=" << p << " M=" << m;
        EXPECT_NEAR(t.iteration, (m + p - 1) * 3.0, 1e-9);
      }
    }
  }
}

TEST(PipelineSchedule, IdleSlotsAreTypedLikeThePrototype) {
  ScheduleTimeline t = TimeSchedule(ScheduleKind::k1F1B, 4, 4, StageTimes{1.0, 2.0, 0});
  // Rank 0 never waits to start: no fill.  It waits after its 4 warm-up
  // forwards for the first gradient, then drains nothing (it ends last).
  const RankTimeline& r0 = t.ranks[0];
  ASSERT_FALSE(r0.idle.empty());
  EXPECT_EQ(r0.idle[0].type, BubbleType::kWarmupWait);
  EXPECT_DOUBLE_EQ(r0.idle[0].start, 4.0);
  EXPECT_DOUBLE_EQ(r0.idle[0].duration, 6.0);  // 3 more forwards + 3 backwards downstream
  // The last rank fills while the first micro-batch travels, then drains.
  const RankTimeline& r3 = t.ranks[3];
  EXPECT_EQ(r3.idle.front().type, BubbleType::kFill);
  EXPECT_DOUBLE_EQ(r3.idle.front().duration, 3.0);
  EXPECT_EQ(r3.idle.back().type, BubbleType::kDrain);
  EXPECT_EQ(BubbleTypeLetter(BubbleType::kSteady), 'D');
  double idle = 0;
  for (const auto& s : r3.idle) idle += s.duration;
  EXPECT_NEAR(idle, t.iteration - r3.busy, 1e-9) << "slots account for all idle time";
}

TEST(PipelineSchedule, LatencyBetweenStagesWidensTheBubble) {
  ScheduleTimeline fast = TimeSchedule(ScheduleKind::k1F1B, 4, 8, StageTimes{1, 2, 0});
  ScheduleTimeline slow = TimeSchedule(ScheduleKind::k1F1B, 4, 8, StageTimes{1, 2, 0.5});
  EXPECT_GT(slow.bubble_fraction, fast.bubble_fraction);
}

TEST(PipelineSchedule, BadInputIsRefusedClearly) {
  std::string error;
  EXPECT_FALSE(ParseScheduleKind("bogus", &error).has_value());
  EXPECT_NE(error.find("supported: gpipe, 1f1b"), std::string::npos);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::k1F1B, 0, 4), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::kGPipe, 4, 0), std::invalid_argument);
}

}  // namespace
}  // namespace freeride
