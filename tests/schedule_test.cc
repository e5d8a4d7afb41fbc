#include "schedule/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <sstream>

#include "test_util.h"

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
  EXPECT_EQ(Order(order[0]), "0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3");
  EXPECT_EQ(Order(order[1]), "1F0 1F1 1F2 1B0 1F3 1B1 1B2 1B3");
  EXPECT_EQ(Order(order[2]), "2F0 2F1 2B0 2F2 2B1 2F3 2B2 2B3");
  EXPECT_EQ(Order(order[3]), "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3");
}

TEST(PipelineSchedule, GPipeRunsAllForwardsFirst) {
  auto order = BuildActionOrder(ScheduleKind::kGPipe, 2, 3);
  EXPECT_EQ(Order(order[1]), "1F0 1F1 1F2 1B0 1B1 1B2");
}

// torch 2.13's Schedule1F1B.pipeline_order numbers the last rank's forwards
// from 1 (F1..FM, an off-by-one in its _get_pipeline_order); the schedule
// executes F0..F(M-1).  The model keeps the executed order.
std::string TorchLastRankOneFOneBFix(const std::string& torch_order) {
  std::stringstream in(torch_order);
  std::string item, out;
  while (in >> item) {
    size_t f = item.find('F');
    if (f != std::string::npos)
      item = item.substr(0, f + 1) + std::to_string(std::stoi(item.substr(f + 1)) - 1);
    out += (out.empty() ? "" : " ") + item;
  }
  return out;
}

// Every line of tests/data/torch_pipeline_orders.txt, printed by torch itself
// (tests/data/make_torch_orders.py), for all seven schedule kinds.
TEST(PipelineSchedule, ActionOrdersMatchTorchPipelineOrder) {
  std::ifstream file(TEST_DATA_DIR "/torch_pipeline_orders.txt");
  ASSERT_TRUE(file.good());
  std::string line;
  int checked = 0;
  std::set<std::string> kinds;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream in(line);
    std::string kind_name, rank_text;
    int p, m, v;
    in >> kind_name >> p >> m >> v >> rank_text;
    int rank = std::stoi(rank_text);
    std::string expected;
    std::getline(in, expected);
    expected = expected.substr(expected.find_first_not_of(' '));
    std::string error;
    auto kind = ParseScheduleKind(kind_name, &error);
    ASSERT_TRUE(kind.has_value()) << error;
    if (*kind == ScheduleKind::k1F1B && rank == p - 1) expected = TorchLastRankOneFOneBFix(expected);
    auto order = BuildActionOrder(*kind, p, m, v);
    EXPECT_EQ(Order(order[rank]), expected) << line;
    ++checked;
    kinds.insert(kind_name);
  }
  EXPECT_EQ(checked, 85);
  EXPECT_EQ(kinds.size(), 7u);
}

TEST(PipelineSchedule, InterleavingDividesTheBubbleByTheVirtualStages) {
  // Equal times per stage: the Megatron-LM ideal (P-1)/(V*M+P-1).
  for (auto [p, m, v] : {std::tuple{4, 8, 2}, {4, 4, 2}, {2, 6, 3}, {4, 12, 2}}) {
    ScheduleTimeline t =
        TimeSchedule(ScheduleKind::kInterleaved1F1B, p, m, StageTimes{1, 2, 0}, 1e-9, v);
    EXPECT_NEAR(t.bubble_fraction, double(p - 1) / (v * m + p - 1), 1e-9)
        << "P=" << p << " M=" << m << " V=" << v;
    EXPECT_LT(t.bubble_fraction, ClosedFormBubbleFraction(p, m));
  }
}

TEST(PipelineSchedule, ZeroBubbleVLeavesFarLessIdleThan1F1B) {
  // F = I = W: ZB-V's design point.
  StageTimes equal{1, 2, 0, 1};
  ScheduleTimeline zbv = TimeSchedule(ScheduleKind::kZeroBubbleV, 4, 8, equal, 1e-9, 2);
  // The same work per rank on 1F1B: one stage per rank, twice as long.
  ScheduleTimeline one = TimeSchedule(ScheduleKind::k1F1B, 4, 8, StageTimes{2, 4, 0});
  EXPECT_LT(zbv.bubble_fraction, one.bubble_fraction / 3);
  for (const RankTimeline& r : zbv.ranks) EXPECT_DOUBLE_EQ(r.busy, 8 * 2 * 3.0);
  // Weight gradients never start before their input gradient.
  for (const RankTimeline& r : zbv.ranks) {
    for (const TimedAction& w : r.actions) {
      if (w.action.type != PipelineAction::kBackwardWeight) continue;
      for (const TimedAction& i : r.actions) {
        if (i.action.type == PipelineAction::kBackwardInput && i.action.stage == w.action.stage &&
            i.action.microbatch == w.action.microbatch) {
          EXPECT_LE(i.end, w.start);
        }
      }
    }
  }
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

// A training loop runs iterations back to back with no barrier between
// them: each rank's drain joins the next iteration's fill.
TEST(PipelineSchedule, TheSteadyStateJoinsEachRanksDrainToItsNextFill) {
  ScheduleTimeline alone = TimeSchedule(ScheduleKind::kGPipe, 4, 8, StageTimes{1, 2, 0});
  ScheduleTimeline loop = TimeSteadyState(ScheduleKind::kGPipe, 4, 8, StageTimes{1, 2, 0});
  EXPECT_DOUBLE_EQ(loop.iteration, alone.iteration);  // rank 0 starts first and ends last
  EXPECT_DOUBLE_EQ(loop.bubble_fraction, alone.bubble_fraction);
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    const RankTimeline& r = loop.ranks[rank];
    EXPECT_DOUBLE_EQ(r.busy, 8 * 3.0);
    double fill = 0, drain = 0;
    std::vector<double> inside, inside_loop;
    for (const IdleSlot& s : alone.ranks[rank].idle) {
      if (s.type == BubbleType::kFill) fill = s.duration;
      else if (s.type == BubbleType::kDrain) drain = s.duration;
      else inside.push_back(s.duration);
    }
    for (const IdleSlot& s : r.idle) {
      EXPECT_NE(s.type, BubbleType::kDrain);
      if (s.type != BubbleType::kFill) inside_loop.push_back(s.duration);
    }
    EXPECT_EQ(inside_loop, inside) << "the gaps between actions are the same";
    if (fill + drain > 0) {
      ASSERT_FALSE(r.idle.empty());
      EXPECT_EQ(r.idle.front().type, BubbleType::kFill);
      EXPECT_DOUBLE_EQ(r.idle.front().start, 0);
      EXPECT_DOUBLE_EQ(r.idle.front().duration, fill + drain);
    }
    EXPECT_DOUBLE_EQ(r.actions.back().end, loop.iteration) << "the window ends with the work";
  }
}

// ZB-V's first rank ends early, so in a loop its next iteration overlaps
// the others' tails: the 3-action fills and drains of one iteration alone
// vanish, as the CPU traces of ScheduleZBVZeroBubble show.
TEST(PipelineSchedule, ZeroBubbleVHasNoBubbleInItsSteadyState) {
  StageTimes equal{1, 2, 0, 1};
  ScheduleTimeline alone = TimeSchedule(ScheduleKind::kZeroBubbleV, 4, 8, equal, 1e-9, 2);
  ScheduleTimeline loop = TimeSteadyState(ScheduleKind::kZeroBubbleV, 4, 8, equal, 1e-9, 2);
  EXPECT_GT(alone.bubble_fraction, 0.05);
  EXPECT_NEAR(loop.bubble_fraction, 0, 1e-9);
  EXPECT_DOUBLE_EQ(loop.iteration, 8 * 2 * 3.0);
}

// torch computes no input gradient for the first stage (its input is data):
// there I takes nothing and W the whole backward.
TEST(PipelineSchedule, TheFirstStagesWeightGradientIsItsWholeBackward) {
  StageTimes t{1, 3, 0, 1};
  EXPECT_DOUBLE_EQ(t.ActionTime({PipelineAction::kBackwardInput, 0, 0}), 0);
  EXPECT_DOUBLE_EQ(t.ActionTime({PipelineAction::kBackwardWeight, 0, 0}), 3);
  EXPECT_DOUBLE_EQ(t.ActionTime({PipelineAction::kBackwardInput, 5, 0}), 2);
  EXPECT_DOUBLE_EQ(t.ActionTime({PipelineAction::kBackwardWeight, 5, 0}), 1);
  ScheduleTimeline zbv = TimeSchedule(ScheduleKind::kZeroBubbleV, 4, 8, t, 1e-9, 2);
  for (const TimedAction& a : zbv.ranks[0].actions) {
    if (a.action.stage == 0 && a.action.type == PipelineAction::kBackwardInput) {
      EXPECT_DOUBLE_EQ(a.end, a.start) << a.action.Label();
    }
  }
}

// DualPipeV runs a forward and a backward of its two stages as one action
// and torch sends both outputs when the pair ends: the next stage's forward
// waits for the whole pair.
TEST(PipelineSchedule, AnOverlappedPairHandsItsForwardOnWhenThePairEnds) {
  ScheduleTimeline t = TimeSchedule(ScheduleKind::kDualPipeV, 4, 8, StageTimes{1, 2, 0, 1}, 1e-9, 2);
  std::map<std::string, const TimedAction*> by_label;
  for (const RankTimeline& r : t.ranks)
    for (const TimedAction& a : r.actions) by_label[a.action.Label()] = &a;
  int pairs = 0;
  for (const RankTimeline& r : t.ranks)
    for (size_t i = 0; i + 1 < r.actions.size(); ++i) {
      const PipelineAction& a = r.actions[i].action;
      if (!a.paired) continue;
      ++pairs;
      EXPECT_EQ(a.type, PipelineAction::kForward);
      EXPECT_EQ(r.actions[i + 1].action.type, PipelineAction::kBackward);
      // Stage s+1's forward of the same micro-batch, on another rank.
      auto next = by_label.find(std::to_string(a.stage + 1) + "F" + std::to_string(a.microbatch));
      if (next == by_label.end() || RankOfStage(ScheduleKind::kDualPipeV, 4, a.stage + 1) == r.rank)
        continue;
      EXPECT_GE(next->second->start, r.actions[i + 1].end) << a.Label();
    }
  EXPECT_GT(pairs, 10);
}

TEST(PipelineSchedule, BadInputIsRefusedClearly) {
  std::string error;
  EXPECT_FALSE(ParseScheduleKind("bogus", &error).has_value());
  EXPECT_NE(error.find("supported: gpipe, 1f1b, interleaved, loopedbfs, interleavedzb, zbv, "
                       "dualpipev"),
            std::string::npos);
  // torch's class names name the same kinds.
  EXPECT_EQ(ParseScheduleKind("ScheduleLoopedBFS", &error), ScheduleKind::kLoopedBFS);
  EXPECT_EQ(ParseScheduleKind("InterleavedZeroBubble", &error),
            ScheduleKind::kInterleavedZeroBubble);
  EXPECT_EQ(ParseScheduleKind("ScheduleZBVZeroBubble", &error), ScheduleKind::kZeroBubbleV);
  EXPECT_EQ(ParseScheduleKind("DUALPIPEV", &error), ScheduleKind::kDualPipeV);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::kDualPipeV, 4, 7, 2), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::kDualPipeV, 4, 8, 3), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::k1F1B, 0, 4), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::kGPipe, 4, 0), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::k1F1B, 4, 4, 2), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::kZeroBubbleV, 4, 4, 3), std::invalid_argument);
  // Too large to plan: refused before anything is allocated, and without an int overflow (2 x 2^30
  // stages), not thrown as bad_alloc or length_error.
  EXPECT_THROW(BuildActionOrder(ScheduleKind::kInterleaved1F1B, 2, 2, 1 << 30), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::k1F1B, kMostScheduleStages + 1, 1), std::invalid_argument);
  EXPECT_THROW(BuildActionOrder(ScheduleKind::kGPipe, 4, kMostScheduleStageMicrobatches / 4 + 1),
               std::invalid_argument);
  EXPECT_NO_THROW(BuildActionOrder(ScheduleKind::kGPipe, 4, 256));
  try {
    BuildActionOrder(ScheduleKind::kInterleaved1F1B, 4, 10, 2);  // rounds = 2, 10 % 2 == 0: fine
    BuildActionOrder(ScheduleKind::kInterleaved1F1B, 4, 9, 2);   // rounds = 2, 9 % 2 != 0
    ADD_FAILURE() << "accepted 9 micro-batches in rounds of 2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of the rounds"), std::string::npos);
  }
}

// The CLI's own checks: a latency and stages per rank that no schedule has,
// and times whose sum overflows, are refused (exit 2), never printed as a
// schedule of NaNs or of stages that start before their input arrives.
TEST(ScheduleCli, ImpossibleLatenciesStagesPerRankAndOverflowingTimesAreRefused) {
  TempDir dir;
  struct Case {
    std::string args, why;
  } cases[] = {
      {"--p2p -0.5", "--p2p -0.5: give a latency of 0 or more"},
      {"--p2p nan", "give a latency of 0 or more"},
      {"--p2p 1e309", "give a latency of 0 or more"},
      {"--virtual 0", "--virtual 0: give 1 or more stages per rank"},
      {"--schedule interleaved --virtual -5", "--virtual -5: give 1 or more"},
      {"--times 1e308,1e308", "the iteration's time overflows"},
  };
  for (const Case& c : cases) {
    ShellResult r = RunShell(std::string(FREERIDE_BIN) + " schedule --stages 2 --microbatches 2 " + c.args,
                             dir.path());
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
    EXPECT_NE(r.err.find(c.why), std::string::npos) << c.args << ": " << r.err;
  }
  ShellResult r = RunShell(std::string(FREERIDE_BIN) +
                               " schedule --schedule interleaved --stages 2 --microbatches 4 --virtual 3 --p2p 0",
                           dir.path());
  EXPECT_EQ(r.status, 0) << r.err;
}

}  // namespace
}  // namespace freeride
