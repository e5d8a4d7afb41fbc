// The daemon and `freeride simulate` serve bubbles by one algorithm: one
// trace of bubbles, served by the daemon's Lane with SDK task loops on
// virtual time (virtual_lane.h) and by the simulator's ServeGap, gives the
// same decisions, bubble by bubble: which tasks step, in what order, and
// how many steps each.
//
// The comparison starts once every slot's forecast window is full.  Before
// that the two learn at different times: the simulator learns each bubble's
// length as it ends, while the lane, when an armed task serves the bubbles
// by itself, learns them in batches (Lane::ServeQuietly), so its first
// forecasts come a few bubbles later (docs/simulate.md).
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <map>

#include "second_look_expectations.h"
#include "sim/serve_gap.h"
#include "virtual_lane.h"

namespace freeride::testing {
namespace {

// A bubble's steps, in order: (task index, its steps in a row).
using Decisions = std::vector<std::pair<size_t, int>>;

std::string Describe(const Decisions& d) {
  std::string out;
  for (const auto& [task, steps] : d) out += fmt::format("{}x{} ", task, steps);
  return out.empty() ? "-" : out;
}

void Append(Decisions* d, size_t task) {
  if (!d->empty() && d->back().first == task) ++d->back().second;
  else d->push_back({task, 1});
}

std::vector<Decisions> SimulatorDecisions(const std::vector<VirtualTask>& tasks,
                                          const std::vector<VirtualBubble>& bubbles,
                                          const DaemonOptions& options) {
  sim::GapLane lane{BubblePredictor(options.predictor), {}};
  std::vector<DispatchCandidate> scratch;
  for (const VirtualTask& t : tasks)
    lane.tasks.push_back({t.priority, 0, StepEstimator(t.prior), t.demoted});
  std::vector<size_t> next(tasks.size(), 0);
  auto next_length = [&](size_t task) {
    const std::vector<Nanos>& steps = tasks[task].steps;
    return static_cast<double>(steps[next[task]++ % steps.size()]);
  };
  DispatchPolicy policy(options.dispatch);
  std::vector<Decisions> out;
  double now = 0;
  for (const VirtualBubble& b : bubbles) {
    Decisions d;
    sim::Gap gap{b.slot, now, now + static_cast<double>(b.length), 0, UINT64_MAX};
    sim::ServeGap(policy, lane, gap, next_length,
                  [&](const sim::GapStep& s) { Append(&d, s.task); }, &scratch);
    out.push_back(d);
    now = gap.end + static_cast<double>(b.busy_after);
  }
  return out;
}

std::vector<Decisions> DaemonDecisions(const VirtualLaneRun& run, size_t bubbles) {
  std::map<uint64_t, size_t> index_of_seq;
  for (const auto& b : run.events.bubbles) {
    if (b.begin_ns < run.started_ns) continue;
    const size_t index = index_of_seq.size();
    index_of_seq[b.seq] = index;
  }
  std::vector<Decisions> out(bubbles);
  std::map<int64_t, size_t> task_of_id;
  for (size_t i = 0; i < run.task_ids.size(); ++i) task_of_id[run.task_ids[i]] = i;
  std::vector<const report::StepRecord*> steps;
  for (const auto& s : run.events.steps) steps.push_back(&s);
  std::stable_sort(steps.begin(), steps.end(),
                   [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  for (const auto* s : steps) {
    auto bubble = index_of_seq.find(s->bubble_seq);
    if (bubble == index_of_seq.end() || bubble->second >= bubbles) continue;
    Append(&out[bubble->second], task_of_id.at(s->task_id));
  }
  return out;
}

// Serves `bubbles` both ways and expects the same decisions in each.
void ExpectSameDecisions(const std::vector<VirtualTask>& tasks,
                         const std::vector<VirtualBubble>& bubbles) {
  DaemonOptions options;
  options.probe.period_iterations = 0;  // the simulator has no probe
  VirtualLaneRun run = RunVirtualLane(tasks, bubbles, options);
  const std::vector<Decisions> daemon = DaemonDecisions(run, bubbles.size());
  const std::vector<Decisions> simulated = SimulatorDecisions(tasks, bubbles, options);
  // Bubbles up to the one in which the last slot's window filled.
  std::map<uint32_t, int> seen;
  size_t first_compared = 0;
  for (size_t i = 0; i < bubbles.size(); ++i)
    if (++seen[bubbles[i].slot] == options.predictor.window) first_compared = i + 1;
  ASSERT_LT(first_compared + 100, bubbles.size()) << "too short a trace";
  int differ = 0, with_steps = 0;
  std::string listing;
  for (size_t i = first_compared; i < bubbles.size(); ++i) {
    with_steps += !simulated[i].empty();
    if (daemon[i] == simulated[i]) continue;
    if (++differ <= 10)
      listing += fmt::format("  bubble {} (slot {}, {} us): daemon {}, simulator {}\n", i,
                             bubbles[i].slot, bubbles[i].length / kMicrosecond,
                             Describe(daemon[i]), Describe(simulated[i]));
  }
  EXPECT_GT(with_steps, static_cast<int>(bubbles.size() - first_compared) / 2)
      << "a trace that tests little";
  EXPECT_EQ(differ, 0) << differ << " of " << bubbles.size() - first_compared
                       << " bubbles served differently; the first:\n"
                       << listing;
}

// An iteration of three gaps: 8 ms, 3 ms, and one of kShortAndLongBubbles in turn.
std::vector<VirtualBubble> ThreeSlotIterations(int iterations) {
  std::vector<VirtualBubble> out;
  for (int k = 0; k < iterations; ++k) {
    out.push_back({0, 8 * kMillisecond, 2 * kMillisecond});
    out.push_back({1, 3 * kMillisecond, 2 * kMillisecond});
    out.push_back({2, kShortAndLongBubbles[k % kShortAndLongBubbles.size()], 5 * kMillisecond});
  }
  return out;
}

TEST(ServingDifferential, OneTaskServingItselfWhileArmed) {
  ExpectSameDecisions({{0, {kMillisecond, 1200 * kMicrosecond, 900 * kMicrosecond}, kMillisecond}},
                      ThreeSlotIterations(100));
}

TEST(ServingDifferential, AnArmedTaskAndOneTheLaneGrantsWhatItLeaves) {
  ExpectSameDecisions({{5, {3 * kMillisecond}, 3 * kMillisecond},
                       {0, {280 * kMicrosecond, 320 * kMicrosecond, 300 * kMicrosecond},
                        300 * kMicrosecond}},
                      ThreeSlotIterations(100));
}

// The armed task's steps never fit; what it hands back goes to a task whose
// steps fit only the slot's second look.
TEST(ServingDifferential, TheLaneTakesTheSecondLookForATaskItGrants) {
  ExpectSameDecisions({{5, {30 * kMillisecond}, 30 * kMillisecond},
                       {0, {kMillisecond}, kMillisecond}},
                      ThreeSlotIterations(100));
}

// A demoted task is never armed: the lane grants it each bubble, only where
// twice its step fits, and ends its grant a step early; beside a task that
// is not demoted it goes last.
TEST(ServingDifferential, ADemotedTaskIsGrantedOnlyWhereTwiceItsStepFits) {
  VirtualTask demoted{0, {2 * kMillisecond, 1800 * kMicrosecond}, 2 * kMillisecond};
  demoted.demoted = true;
  ExpectSameDecisions({demoted}, ThreeSlotIterations(100));
  ExpectSameDecisions({demoted, {0, {600 * kMicrosecond}, 600 * kMicrosecond}},
                      ThreeSlotIterations(100));
}

}  // namespace
}  // namespace freeride::testing
