// How the daemon's lane and its tasks share bubbles, on virtual time (see
// virtual_lane.h): the same each run, and unaffected by a busy machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "gate/gate_page.h"
#include "policy/step_estimator.h"
#include "second_look_expectations.h"
#include "virtual_lane.h"

namespace freeride::testing {
namespace {

DaemonOptions QuietOptions() {
  DaemonOptions options;
  options.probe.period_iterations = 0;  // no withheld windows
  return options;
}

// The slot's pattern of bubble lengths, `count` bubbles of it.
std::vector<VirtualBubble> ShortAndLongBubbles(int count) {
  std::vector<VirtualBubble> bubbles;
  for (int i = 0; i < count; ++i)
    bubbles.push_back({0, kShortAndLongBubbles[i % kShortAndLongBubbles.size()], 2 * kMillisecond});
  return bubbles;
}

// A slot whose bubbles are sometimes over in microseconds and sometimes
// long: the first forecast is the short kind, and the armed task still
// steps in the long ones (its second look), never in the short ones.
TEST(LaneOnVirtualTime, TheArmedTaskUsesTheLongBubblesOfASlotWithShortOnesToo) {
  VirtualLaneRun run = RunVirtualLane({{0, {kMillisecond}, kMillisecond}},
                                      ShortAndLongBubbles(16 + 100), QuietOptions());
  ExpectLongBubblesUsedAndShortOnesNot(run.events, run.task_ids[0]);
}

// A slot whose short kind is itself milliseconds long (a last stage's first
// wait: the drain and the fill, 40 ms, but one time in five the fill alone,
// 12 ms): the armed task serves its long bubbles well past the first
// forecast, by the second look a little after the short kind.
TEST(LaneOnVirtualTime, TheArmedTaskTakesTheSecondLookWhereTheShortKindIsMilliseconds) {
  std::vector<VirtualBubble> bubbles;
  for (int i = 0; i < 16 + 100; ++i)
    bubbles.push_back({0, i % 5 == 2 ? 12 * kMillisecond : 40 * kMillisecond, 5 * kMillisecond});
  VirtualLaneRun run = RunVirtualLane({{0, {kMillisecond}, kMillisecond}}, bubbles, QuietOptions());
  int seen = 0, long_ones = 0;
  Nanos long_harvested = 0;
  for (const auto& b : run.events.bubbles) {
    if (b.ended_by != events::BubbleEnd::kMark || ++seen <= 16) continue;
    if (b.end_ns - b.begin_ns < 30 * kMillisecond) continue;
    ++long_ones;
    long_harvested += b.harvested_ns;
  }
  ASSERT_GE(long_ones, 60);
  EXPECT_GE(long_harvested / long_ones, 30 * kMillisecond)
      << "the first forecast alone serves 12 ms of each 40 ms bubble";
}

// The armed task takes each bubble by itself while its lane sleeps, but
// what it leaves is not wasted: it wakes the lane when a task with shorter
// steps could use the rest, and that task gets it, inside the bubble.
TEST(LaneOnVirtualTime, WhatTheArmedTaskLeavesGoesToATaskWithShorterSteps) {
  // 8 ms bubbles: the big task, armed for its priority, fits two steps of
  // 3 ms (3.3 with the margin) and hands back about 1.7 ms, where the small
  // one fits several.
  std::vector<VirtualBubble> bubbles(200, {0, 8 * kMillisecond, 2 * kMillisecond});
  VirtualLaneRun run = RunVirtualLane({{5, {3 * kMillisecond}, 3 * kMillisecond},
                                       {0, {300 * kMicrosecond}, 300 * kMicrosecond}},
                                      bubbles, QuietOptions());
  const int64_t big = run.task_ids[0], small = run.task_ids[1];
  std::map<uint64_t, std::pair<Nanos, Nanos>> extent;
  for (const auto& b : run.events.bubbles) extent[b.seq] = {b.begin_ns, b.end_ns};
  std::map<uint64_t, std::set<int64_t>> tasks_by_bubble;
  int small_steps = 0, small_outside = 0;
  for (const auto& s : run.events.steps) {
    tasks_by_bubble[s.bubble_seq].insert(s.task_id);
    if (s.task_id != small) continue;
    ++small_steps;
    auto b = extent.find(s.bubble_seq);
    if (b == extent.end() || s.start_ns < b->second.first || s.end_ns > b->second.second)
      ++small_outside;
  }
  int shared = 0, big_bubbles = 0;
  for (const auto& [seq, ids] : tasks_by_bubble) {
    if (!ids.count(big)) continue;
    ++big_bubbles;
    shared += ids.count(small) > 0;
  }
  ASSERT_GE(big_bubbles, 150);
  EXPECT_GE(shared, big_bubbles * 9 / 10)
      << "the small task ran in only " << shared << " of the " << big_bubbles
      << " bubbles the big one stepped in";
  EXPECT_EQ(small_outside, 0) << "of " << small_steps << " small steps";
}

// A server task with nothing to do (freeride.ray's runner between Ray
// calls) is armed for its priority, but its idle steps record nothing and
// hand each bubble back at once: the worker below it still steps in nearly
// every bubble, inside it.  (The lane offers an armed task's leftover only
// to tasks whose steps are shorter than the armed one's estimate, here the
// 1 ms assumed before any step: a worker with 1 ms steps would get none.)
TEST(LaneOnVirtualTime, AnIdleTaskHandsEachBubbleBackToTheOthers) {
  std::vector<VirtualBubble> bubbles(200, {0, 8 * kMillisecond, 2 * kMillisecond});
  VirtualTask idle_server{.priority = 5, .steps = {kMillisecond}, .idle = true};
  VirtualTask worker{.priority = 0, .steps = {300 * kMicrosecond}, .prior = 300 * kMicrosecond};
  VirtualLaneRun run = RunVirtualLane({idle_server, worker}, bubbles, QuietOptions());
  const int64_t idle = run.task_ids[0], busy = run.task_ids[1];
  std::map<uint64_t, std::pair<Nanos, Nanos>> extent;
  for (const auto& b : run.events.bubbles) extent[b.seq] = {b.begin_ns, b.end_ns};
  std::set<uint64_t> worked_in;
  int idle_steps = 0, outside = 0;
  for (const auto& s : run.events.steps) {
    if (s.task_id == idle) ++idle_steps;
    if (s.task_id != busy) continue;
    worked_in.insert(s.bubble_seq);
    auto b = extent.find(s.bubble_seq);
    if (b == extent.end() || s.start_ns < b->second.first || s.end_ns > b->second.second) ++outside;
  }
  EXPECT_EQ(idle_steps, 0) << "idle steps are not recorded";
  EXPECT_GE(worked_in.size(), 180u) << "the worker stepped in " << worked_in.size() << " of "
                                    << run.events.bubbles.size() << " bubbles";
  EXPECT_EQ(outside, 0);
}

// The same when the idle task's steps are the shorter ones: a task that hands
// a bubble back because it has nothing to do leaves all of it, so the lane
// must wake for any task that fits the rest, not only for one whose step is
// shorter than the idle task's (which is all a task that stopped because
// its next step did not fit could leave room for).
TEST(LaneOnVirtualTime, AnIdleTaskWithShortStepsHandsEachBubbleBackToATaskWithLongOnes) {
  std::vector<VirtualBubble> bubbles(200, {0, 8 * kMillisecond, 2 * kMillisecond});
  VirtualTask idle_server{.priority = 5, .steps = {300 * kMicrosecond},
                          .prior = 300 * kMicrosecond, .idle = true};
  VirtualTask worker{.priority = 0, .steps = {2 * kMillisecond}, .prior = 2 * kMillisecond};
  VirtualLaneRun run = RunVirtualLane({idle_server, worker}, bubbles, QuietOptions());
  const int64_t busy = run.task_ids[1];
  std::set<uint64_t> worked_in;
  for (const auto& s : run.events.steps)
    if (s.task_id == busy) worked_in.insert(s.bubble_seq);
  EXPECT_GE(worked_in.size(), 180u) << "the worker stepped in " << worked_in.size() << " of "
                                    << run.events.bubbles.size() << " bubbles";
}

// A new training process may run another schedule: its slot 0 is 12 ms where
// the last process's was 6 ms, too little longer for a second look to pay.
// The lane forgets the old forecasts as soon as it sees the new process
// attached, so two 4 ms steps fit its bubbles from a few on (with an armed
// task the lane closes bubbles in batches, a little behind).  Kept, the old
// forecast would hold until the 6 ms bubbles had left the quantile's window:
// for 15 bubbles and more.
TEST(LaneOnVirtualTime, ANewTrainingProcessIsForecastFromItsOwnBubbles) {
  const int64_t next_trainer = getpid() + 100000;
  std::vector<VirtualBubble> bubbles(30, {0, 6 * kMillisecond, 8 * kMillisecond});
  for (int i = 0; i < 40; ++i) bubbles.push_back({0, 12 * kMillisecond, 8 * kMillisecond, next_trainer});
  VirtualLaneRun run = RunVirtualLane({{0, {4 * kMillisecond}, 4 * kMillisecond}}, bubbles, QuietOptions());
  std::map<uint64_t, int> steps_in;
  for (const auto& s : run.events.steps) ++steps_in[s.bubble_seq];
  std::vector<uint64_t> longer;
  for (const auto& b : run.events.bubbles)
    if (b.end_ns - b.begin_ns >= 10 * kMillisecond) longer.push_back(b.seq);
  ASSERT_EQ(longer.size(), 40u);
  int filled = 0;
  std::string counts;
  for (uint64_t seq : longer) {
    filled += steps_in[seq] >= 2;
    counts += std::to_string(steps_in[seq]) + " ";
  }
  EXPECT_GE(filled, 30) << "12 ms bubbles with two steps; steps in each: " << counts;
}

// The other way: the new process's slot 0 is 5 ms where the last one's was
// 20 ms.  Until the lane has forgotten the old forecasts, the armed task
// reads none (the segment says they follow another process), so no 4 ms
// step is started on the old 20 ms forecast to run past a 5 ms bubble.
TEST(LaneOnVirtualTime, ANewTrainingProcessIsNotServedOnTheLastOnesForecasts) {
  const int64_t next_trainer = getpid() + 100000;
  std::vector<VirtualBubble> bubbles(30, {0, 20 * kMillisecond, 8 * kMillisecond});
  for (int i = 0; i < 40; ++i) bubbles.push_back({0, 5 * kMillisecond, 8 * kMillisecond, next_trainer});
  VirtualLaneRun run = RunVirtualLane({{0, {4 * kMillisecond}, 4 * kMillisecond}}, bubbles, QuietOptions());
  std::map<uint64_t, std::pair<Nanos, Nanos>> shorter;
  for (const auto& b : run.events.bubbles)
    if (b.end_ns - b.begin_ns < 10 * kMillisecond) shorter[b.seq] = {b.begin_ns, b.end_ns};
  ASSERT_EQ(shorter.size(), 40u);
  int overran = 0, stepped = 0;
  std::set<uint64_t> used;
  for (const auto& s : run.events.steps) {
    auto b = shorter.find(s.bubble_seq);
    if (b == shorter.end()) continue;
    ++stepped;
    used.insert(s.bubble_seq);
    overran += s.end_ns > b->second.second;
  }
  EXPECT_EQ(overran, 0) << "steps past the end of the new process's 5 ms bubbles, of " << stepped;
  EXPECT_GE(used.size(), 30u) << "the 5 ms bubbles are served once learned";
}

// A step far slower than the rest (its process was preempted) makes the
// estimate too long for every bubble.  The armed task forgets it after
// StepEstimator::kPassesBeforeForgetting bubbles passed over, counted as they
// begin, and steps again: it is not kept out until its wait for a grant
// times out (a second, here a hundred bubbles).
TEST(LaneOnVirtualTime, TheArmedTaskForgetsASlowStepAfterTheBubblesItPassedOver) {
  std::vector<Nanos> steps(64, kMillisecond);
  steps[3] = 50 * kMillisecond;  // the 4th step: the p90 of four samples
  std::vector<VirtualBubble> bubbles(300, {0, 8 * kMillisecond, 2 * kMillisecond});
  VirtualLaneRun run = RunVirtualLane({{0, steps, kMillisecond}}, bubbles, QuietOptions());

  std::vector<report::StepRecord> ordered = run.events.steps;
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  auto slow = std::find_if(ordered.begin(), ordered.end(), [](const report::StepRecord& s) {
    return s.end_ns - s.start_ns >= 40 * kMillisecond;
  });
  ASSERT_NE(slow, ordered.end()) << "the slow step was not logged";
  ASSERT_NE(slow + 1, ordered.end()) << "the task never stepped again after its slow step";
  const Nanos resumed = (slow + 1)->start_ns;
  int passed_over = 0;
  for (const auto& b : run.events.bubbles)
    passed_over += b.begin_ns > slow->end_ns && b.begin_ns < resumed;
  EXPECT_GE(passed_over, StepEstimator::kPassesBeforeForgetting - 1);
  EXPECT_LE(passed_over, StepEstimator::kPassesBeforeForgetting + 2);
}

// A task whose work divides into 1 ms parts and that plans its step to
// StepBudgetNs() fills a long bubble with one or two steps (one wait for the
// device each, on a GPU) instead of one per part, and since the lane learns
// the length of a part, it still gets the short bubbles that fit one.
TEST(LaneOnVirtualTime, ATaskThatSizesItsStepsToTheBudgetFillsLongBubblesInFewSteps) {
  std::vector<VirtualBubble> bubbles;
  for (int i = 0; i < 200; ++i)
    bubbles.push_back({static_cast<uint32_t>(i % 2), i % 2 ? 3 * kMillisecond : 20 * kMillisecond,
                       2 * kMillisecond});
  VirtualLaneRun run = RunVirtualLane({{0, {kMillisecond}, kMillisecond, /*sized_to_budget=*/true}},
                                      bubbles, QuietOptions());
  struct Use {
    Nanos length = 0, stepped = 0;
    int steps = 0;
  };
  std::map<uint64_t, Use> by_bubble;
  std::map<uint64_t, uint32_t> slot_of;
  for (const auto& b : run.events.bubbles) {
    by_bubble[b.seq].length = b.end_ns - b.begin_ns;
    slot_of[b.seq] = b.slot;
  }
  int outside = 0;
  for (const auto& s : run.events.steps) {
    Use& use = by_bubble[s.bubble_seq];
    ++use.steps;
    use.stepped += s.end_ns - s.start_ns;
    outside += s.overrun_ns > 0;
  }
  // After the first 20 bubbles, when each slot's forecast has settled.
  Nanos long_time = 0, long_stepped = 0;
  int long_bubbles = 0, long_steps = 0, short_bubbles = 0, short_used = 0;
  int seen = 0;
  for (const auto& [seq, use] : by_bubble) {
    if (++seen <= 20) continue;
    if (slot_of[seq] == 0) {
      ++long_bubbles;
      long_time += use.length;
      long_stepped += use.stepped;
      long_steps += use.steps;
    } else {
      ++short_bubbles;
      short_used += use.steps > 0;
    }
  }
  ASSERT_GE(long_bubbles, 80);
  EXPECT_GE(static_cast<double>(long_stepped) / static_cast<double>(long_time), 0.8)
      << "of the long bubbles' time";
  EXPECT_LE(static_cast<double>(long_steps) / long_bubbles, 2.0) << "steps per long bubble";
  EXPECT_GE(short_used, short_bubbles * 9 / 10) << "short bubbles with a step, of " << short_bubbles;
  EXPECT_EQ(outside, 0) << "steps that overran their bubble";
}

// Demoted, the same task is granted by the lane (never armed), whose grant
// ends a step estimate early: a step planned to the budget leaves about a
// part more of each bubble unused than the task leaves when not demoted,
// and still fills most of it.
TEST(LaneOnVirtualTime, ADemotedTaskThatSizesItsStepsToTheBudgetEndsAPartEarly) {
  // The mean time from each used bubble's last step end to its end, and the
  // share of the used bubbles' time stepped, once warm.
  auto serve = [](bool demoted) {
    VirtualTask task{0, {kMillisecond}, kMillisecond, /*sized_to_budget=*/true};
    task.demoted = demoted;
    VirtualLaneRun run = RunVirtualLane(
        {task}, std::vector<VirtualBubble>(120, {0, 20 * kMillisecond, 2 * kMillisecond}),
        QuietOptions());
    std::map<uint64_t, std::pair<Nanos, Nanos>> extent;
    for (const auto& b : run.events.bubbles) extent[b.seq] = {b.begin_ns, b.end_ns};
    std::map<uint64_t, Nanos> last_end;
    Nanos stepped = 0;
    for (const auto& s : run.events.steps) {
      auto b = extent.find(s.bubble_seq);
      if (b == extent.end() || b->second.first - run.started_ns < 20 * 22 * kMillisecond) continue;
      last_end[s.bubble_seq] = std::max(last_end[s.bubble_seq], s.end_ns);
      stepped += s.end_ns - s.start_ns;
    }
    Nanos slack = 0, time = 0;
    for (const auto& [seq, end] : last_end) {
      slack += extent[seq].second - end;
      time += extent[seq].second - extent[seq].first;
    }
    EXPECT_GE(last_end.size(), 80u) << (demoted ? "demoted" : "not demoted");
    const double n = std::max<double>(1, static_cast<double>(last_end.size()));
    return std::pair{static_cast<double>(slack) / n, static_cast<double>(stepped) / std::max<double>(1, time)};
  };
  const auto [normal_slack, normal_fill] = serve(false);
  const auto [demoted_slack, demoted_fill] = serve(true);
  // A part of 1 ms, less the 10% margin the budget keeps on it.
  EXPECT_GE(demoted_slack - normal_slack, 0.8 * kMillisecond)
      << "slack " << demoted_slack / kMillisecond << " ms demoted, " << normal_slack / kMillisecond
      << " ms not";
  EXPECT_GE(demoted_fill, 0.7) << "(not demoted: " << normal_fill << ")";
}

// --- the GPU gate's closer --------------------------------------------------

namespace {

std::vector<VirtualBubble> SteadyBubbles(int count, Nanos length) {
  return std::vector<VirtualBubble>(count, VirtualBubble{0, length, 5 * kMillisecond});
}

// A gated lane closing 2 ms before the forecast end (plus the tasks' work).
DaemonOptions GateOptions() {
  DaemonOptions options = QuietOptions();
  options.gate_margin = 2 * kMillisecond;
  return options;
}

// A gated lane whose stage writes the gate word at each mark, as its stream would.
VirtualGate StageDrivenGate() {
  VirtualGate gate;
  gate.on = true;
  gate.stage_drives = true;
  return gate;
}

// Iterations of two bubbles: slot 0 for 10 ms, then 3 ms of busy time;
// slot 1 for 6 ms, then 7 ms.
std::vector<VirtualBubble> TwoSlotIterations(int iterations) {
  std::vector<VirtualBubble> bubbles;
  for (int i = 0; i < iterations; ++i) {
    bubbles.push_back({0, 10 * kMillisecond, 3 * kMillisecond});
    bubbles.push_back({1, 6 * kMillisecond, 7 * kMillisecond});
  }
  return bubbles;
}

}  // namespace

TEST(GateOnVirtualTime, EachBubblesAdmissionEndsAMarginBeforeItsForecastEnd) {
  DaemonOptions options = GateOptions();
  VirtualGate gate = StageDrivenGate();
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(40, 10 * kMillisecond), options, gate);
  // Every bubble's admission ends before its end mark: at once while the
  // slot has no forecast, 2 ms before the 10 ms forecast after that.
  EXPECT_EQ(run.gate_early_closes, 40u);
  EXPECT_LE(run.gate_open_ns, 40 * 8 * kMillisecond);
  EXPECT_GE(run.gate_open_ns, 35 * 8 * kMillisecond);
  EXPECT_EQ(run.gate_forced_closes, 0u);
  // The deadline is published in the gate page for the interposers, and the
  // word is left to the stage: a piece already queued is never held behind a
  // shut gate through the busy time.
  ASSERT_EQ(run.gate_admission_ns.size(), 40u);
  EXPECT_EQ(run.gate_admission_ns.front(), 0);  // no forecast yet: admits nothing
  EXPECT_EQ(run.gate_admission_ns.back(), 8 * kMillisecond);
  EXPECT_EQ(run.gate_shut_before_end, 0u);
  EXPECT_FALSE(GateIsOpen(run.gate_word_at_end));
}

// The next bubble is forecast as each one ends (policy/next_bubble.h), so
// that interposers may queue work a lead before its begin: its begin from
// the busy time that followed the same slot, its deadline from its slot's
// forecast less the margin.  An iteration's first bubble is only watched
// through its lead: a trainer may pause between iterations, and a wait
// queued for it would stay pending.
TEST(GateOnVirtualTime, EachBubbleIsForecastOnceItsSlotIsLearnedAnIterationsFirstWatchedOnly) {
  DaemonOptions options = GateOptions();
  VirtualGate gate = StageDrivenGate();
  const std::vector<VirtualBubble> bubbles = TwoSlotIterations(20);
  VirtualLaneRun run = RunVirtualLane({}, bubbles, options, gate);
  ASSERT_EQ(run.gate_ahead.size(), bubbles.size());
  // The first bubble follows none; a forecast needs three busy times after
  // the slot that ended, agreeing on the slot that follows (bubbles 1, 3
  // and 5 after slot 0).
  for (size_t i = 0; i < 7; ++i) EXPECT_FALSE(run.gate_ahead[i].published) << "bubble " << i;
  for (size_t i = 7; i < bubbles.size(); ++i) {
    const VirtualAhead& ahead = run.gate_ahead[i];
    ASSERT_TRUE(ahead.published) << "bubble " << i;
    EXPECT_EQ(ahead.begin_error, 0) << "bubble " << i;
    EXPECT_EQ(ahead.lead, options.gate_lead) << "bubble " << i;
    EXPECT_EQ(ahead.watch_only, bubbles[i].slot == 0)
        << "bubble " << i << (bubbles[i].slot == 0 ? " begins an iteration: only watched" : " is queued for");
    EXPECT_EQ(ahead.window, bubbles[i].length - options.gate_margin) << "bubble " << i;
  }
}

// For a stage that marks from the host alone the lane opens and closes the
// word itself, at the marks: the forecast carries the number the lane will
// open next.
TEST(GateOnVirtualTime, AHostMarkingStagesBubblesAreForecastUnderTheNumbersTheLaneOpens) {
  VirtualGate gate;
  gate.on = true;
  gate.stage_drives = false;
  const std::vector<VirtualBubble> bubbles = TwoSlotIterations(10);
  VirtualLaneRun run = RunVirtualLane({}, bubbles, GateOptions(), gate);
  ASSERT_EQ(run.gate_ahead.size(), bubbles.size());
  for (size_t i = 7; i < bubbles.size(); ++i) {
    EXPECT_TRUE(run.gate_ahead[i].published) << "bubble " << i;
    EXPECT_EQ(run.gate_ahead[i].begin_error, 0) << "bubble " << i;
  }
}

// A new training process may have another schedule: its busy times are
// learned afresh, so its first bubbles are not forecast from the old one's.
TEST(GateOnVirtualTime, ANewStageProcessIsForecastOnlyFromItsOwnBubbles) {
  VirtualGate gate = StageDrivenGate();
  std::vector<VirtualBubble> bubbles = TwoSlotIterations(10);
  for (VirtualBubble b : TwoSlotIterations(10)) {
    b.stage_pid = 4242;  // another process takes over the lane
    b.busy_after *= 2;
    bubbles.push_back(b);
  }
  VirtualLaneRun run = RunVirtualLane({}, bubbles, GateOptions(), gate);
  ASSERT_EQ(run.gate_ahead.size(), 40u);
  EXPECT_TRUE(run.gate_ahead[19].published);  // the first process's last slot-1 bubble
  // Bubble 20 was forecast as the first process's bubble 19 ended, before the
  // new one marked anything: an iteration's first, so nothing was queued
  // ahead for it (and the new process numbers its gate's bubbles afresh).
  EXPECT_TRUE(run.gate_ahead[20].watch_only);
  for (size_t i = 21; i < 27; ++i) EXPECT_FALSE(run.gate_ahead[i].published) << "bubble " << i;
  for (size_t i = 27; i < 40; i += 2) {
    ASSERT_TRUE(run.gate_ahead[i].published) << "bubble " << i;
    EXPECT_EQ(run.gate_ahead[i].begin_error, 0) << "bubble " << i << ": from the new busy times";
  }
}

TEST(GateOnVirtualTime, NothingIsForecastAheadWithoutAGatedTaskOrWithNoLead) {
  VirtualGate gate = StageDrivenGate();
  gate.gated_task = false;
  VirtualLaneRun run = RunVirtualLane({}, TwoSlotIterations(6), GateOptions(), gate);
  ASSERT_EQ(run.gate_ahead.size(), 12u);
  for (const VirtualAhead& ahead : run.gate_ahead) EXPECT_FALSE(ahead.published);

  gate.gated_task = true;
  DaemonOptions no_lead = GateOptions();
  no_lead.gate_lead = 0;
  run = RunVirtualLane({}, TwoSlotIterations(6), no_lead, gate);
  ASSERT_EQ(run.gate_ahead.size(), 12u);
  for (const VirtualAhead& ahead : run.gate_ahead) EXPECT_FALSE(ahead.published);

  // The control: the same with the default lead forecasts the iterations' second bubbles.
  run = RunVirtualLane({}, TwoSlotIterations(6), GateOptions(), gate);
  ASSERT_EQ(run.gate_ahead.size(), 12u);
  EXPECT_TRUE(run.gate_ahead.back().published);
}

// A slot of two kinds: its forecast is the short kind, so each bubble's
// admission ends at once; a bubble still open at the second look's point is
// of the long kind, and its deadline is published again, a margin before the
// long forecast, so gated work uses the long bubbles too.
TEST(GateOnVirtualTime, ASlotsLongBubblesAreAdmittedToTheLongForecastAfterItsSecondLook) {
  DaemonOptions options = GateOptions();
  VirtualGate gate = StageDrivenGate();
  const std::vector<VirtualBubble> bubbles = ShortAndLongBubbles(16 + 40);
  VirtualLaneRun run = RunVirtualLane({}, bubbles, options, gate);
  ASSERT_EQ(run.gate_admission_ns.size(), bubbles.size());
  int long_ones = 0;
  for (size_t i = 16; i < bubbles.size(); ++i) {
    if (bubbles[i].length == 20 * kMillisecond) {
      ++long_ones;
      EXPECT_EQ(run.gate_admission_ns[i], 20 * kMillisecond - options.gate_margin) << "bubble " << i;
    } else {
      EXPECT_EQ(run.gate_admission_ns[i], 0) << "bubble " << i << ": the short kind admits nothing";
    }
  }
  EXPECT_EQ(long_ones, 24);
  EXPECT_EQ(run.gate_shut_before_end, 0u);
  // Each bubble's gate_bubble event says so: the long ones were looked at
  // again and admitted work until the long deadline, from the look's point.
  ASSERT_EQ(run.gate_bubbles.size(), bubbles.size());
  for (size_t i = 16; i < bubbles.size(); ++i) {
    const nlohmann::json& e = run.gate_bubbles[i];
    const bool is_long = bubbles[i].length == 20 * kMillisecond;
    EXPECT_EQ(e["second_look"].get<bool>(), is_long) << "bubble " << i;
    EXPECT_EQ(e["deadline_ns"].get<int64_t>(), is_long ? 20 * kMillisecond - options.gate_margin : 0)
        << "bubble " << i;
    if (is_long) {
      EXPECT_GT(e["admitted_ns"].get<int64_t>(), 0) << "bubble " << i;
      EXPECT_LT(e["admitted_ns"].get<int64_t>(), 20 * kMillisecond - options.gate_margin)
          << "bubble " << i << ": nothing was admitted between the begin and the second look";
    } else {
      EXPECT_EQ(e["admitted_ns"].get<int64_t>(), 0) << "bubble " << i;
    }
  }
}

// A lane stopped cleanly removes its segment and keeps its gate page, which
// a daemon restarted on the same socket reopens (a stage whose page is
// removed moves to a new one, on host marks meanwhile).
TEST(GateOnVirtualTime, AStoppedLaneRemovesItsSegmentAndKeepsItsGatePage) {
  VirtualGate gate = StageDrivenGate();
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(4, 10 * kMillisecond), GateOptions(), gate);
  ASSERT_EQ(run.files_made.size(), 2u) << "the segment and the gate page";
  ASSERT_EQ(run.files_left.size(), 1u);
  EXPECT_EQ(run.files_left[0], run.files_made[1]) << "the gate page";
}

TEST(GateOnVirtualTime, ATasksPieceLengthIsLeftToItsInterposerAndShownAsTheMargin) {
  DaemonOptions options = GateOptions();
  VirtualGate gate = StageDrivenGate();
  gate.task_work_p95 = 3 * kMillisecond;  // its pieces take 3 ms
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(40, 10 * kMillisecond), options, gate);
  // The deadline stays 2 ms before the forecast end: the interposer keeps
  // back a 3 ms piece from the last 3 ms before it (gate/piece_admission.h),
  // while a task of shorter pieces beside it may still use them.
  ASSERT_EQ(run.gate_admission_ns.size(), 40u);
  EXPECT_EQ(run.gate_admission_ns.back(), 8 * kMillisecond);
  EXPECT_EQ(run.gate_margin_ns, 5 * kMillisecond);
  EXPECT_EQ(run.gate_shut_before_end, 0u);
}

TEST(GateOnVirtualTime, TheLateWorkATasksInterposerPublishesIsShownOnceInTheLanesStatus) {
  VirtualGate gate = StageDrivenGate();
  gate.task_late = 7 * kMillisecond;  // published before this lane ran: not counted again
  gate.task_late_bubbles = 4;
  gate.task_late_during = 3 * kMillisecond;  // then 3 ms more in 2 stretches, after bubble 2
  gate.task_late_bubbles_during = 2;
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(6, 10 * kMillisecond), GateOptions(), gate);
  // Collected at each begin and end mark; counted once, not once per look.
  EXPECT_EQ(run.gate_late_ns, 3 * kMillisecond);
  EXPECT_EQ(run.gate_late_bubbles, 2u);
  VirtualLaneRun none = RunVirtualLane({}, SteadyBubbles(6, 10 * kMillisecond), GateOptions(), StageDrivenGate());
  EXPECT_EQ(none.gate_late_ns, 0);
}

// The gate's misses are the task's overruns: each bubble, every gated task
// gets one record, zero included, with the late work its processes
// published since the last, so that its overrun budget judges them as it
// does a step's.
TEST(GateOnVirtualTime, ATasksLateWorkIsRecordedAsItsOverrunInEachBubbleZeroIncluded) {
  for (bool child : {false, true}) {
    VirtualGate gate = StageDrivenGate();
    gate.task_late = 7 * kMillisecond;  // history from before this lane: not judged
    gate.task_late_during = 3 * kMillisecond;  // after bubble 2's end
    gate.task_late_bubbles_during = 2;
    gate.task_slot_is_child = child;
    VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(6, 10 * kMillisecond), GateOptions(), gate);
    ASSERT_EQ(run.overruns.size(), 6u) << "one record a bubble; child " << child;
    Nanos total = 0;
    int nonzero = 0;
    for (const VirtualOverrun& o : run.overruns) {
      EXPECT_EQ(o.task_id, 1000);
      EXPECT_EQ(o.bubble, 10 * kMillisecond);
      total += o.overrun;
      nonzero += o.overrun > 0;
    }
    EXPECT_EQ(total, 3 * kMillisecond) << "child " << child;
    EXPECT_EQ(nonzero, 1);
    EXPECT_EQ(run.gate_slot_demoted, 0u);
  }
}

// Where an open gate's time went unused: each gated process's held time is
// summed by why into the lane's status (what it published before this lane
// ran is not counted again), and is never judged.
TEST(GateOnVirtualTime, HeldTimeWhileOpenIsShownByWhyInTheLanesStatusAndIsNoOverrun) {
  VirtualGate gate = StageDrivenGate();
  gate.task_held = {50 * kMillisecond, 60 * kMillisecond, 70 * kMillisecond};
  gate.task_held_during = {1 * kMillisecond, 2 * kMillisecond, 3 * kMillisecond};
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(6, 10 * kMillisecond), GateOptions(), gate);
  EXPECT_EQ(run.gate_held_ns, (std::array<Nanos, 3>{1 * kMillisecond, 2 * kMillisecond, 3 * kMillisecond}));
  EXPECT_EQ(run.gate_late_ns, 0);
  EXPECT_EQ(run.gate_pending_ns, 0);
  ASSERT_EQ(run.overruns.size(), 6u);
  for (const VirtualOverrun& o : run.overruns) EXPECT_EQ(o.overrun, 0);
}

// A pending wait runs nothing: its time is shown, and never judged.
TEST(GateOnVirtualTime, PendingTimeIsShownInTheLanesStatusAndIsNoOverrun) {
  VirtualGate gate = StageDrivenGate();
  gate.task_pending = 40 * kMillisecond;  // published before this lane ran: not counted again
  gate.task_pending_during = 25 * kMillisecond;  // after bubble 2's end
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(6, 10 * kMillisecond), GateOptions(), gate);
  EXPECT_EQ(run.gate_pending_ns, 25 * kMillisecond);
  EXPECT_EQ(run.gate_late_ns, 0);
  ASSERT_EQ(run.overruns.size(), 6u);
  for (const VirtualOverrun& o : run.overruns) EXPECT_EQ(o.overrun, 0);
  EXPECT_EQ(run.gate_slot_demoted, 0u);
}

TEST(GateOnVirtualTime, ADemotedTasksInterposerIsToldThroughItsSlot) {
  VirtualGate gate = StageDrivenGate();
  gate.task_work_p95 = 100 * kMicrosecond;  // a gated process with a slot
  gate.task_slot_is_child = true;
  gate.task_demoted = true;
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(3, 10 * kMillisecond), GateOptions(), gate);
  EXPECT_EQ(run.gate_slot_demoted, 1u);
}

TEST(GateOnVirtualTime, AStageThatMarksOnlyFromTheHostHasTheLaneOpenTheGate) {
  DaemonOptions options = GateOptions();
  VirtualGate gate;
  gate.on = true;  // the stage never writes the word
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(40, 10 * kMillisecond), options, gate);
  EXPECT_GE(run.gate_open_ns, 35 * 8 * kMillisecond);
  EXPECT_LE(run.gate_open_ns, 40 * 8 * kMillisecond);
  EXPECT_FALSE(GateIsOpen(run.gate_word_at_end));
}

TEST(GateOnVirtualTime, WithOnlySdkTasksTheGateStaysOpenToTheEndMark) {
  VirtualGate gate = StageDrivenGate();
  gate.gated_task = false;  // SDK tasks fit their steps to the forecast themselves
  VirtualLaneRun run = RunVirtualLane({}, SteadyBubbles(20, 10 * kMillisecond), GateOptions(), gate);
  EXPECT_EQ(run.gate_early_closes, 0u);
  EXPECT_EQ(run.gate_open_ns, 20 * 10 * kMillisecond);
  ASSERT_EQ(run.gate_admission_ns.size(), 20u);
  EXPECT_EQ(run.gate_admission_ns.back(), INT64_MAX);
}

// A gated lane whose stage (driving the word) goes silent after `bubbles`
// bubbles of 10 ms, in the way `silence` sets up; stage timeout 100 ms.
VirtualLaneRun SilentStage(int bubbles, void (*silence)(VirtualGate*)) {
  DaemonOptions options = GateOptions();
  options.stage_timeout = 100 * kMillisecond;
  VirtualGate gate = StageDrivenGate();
  silence(&gate);
  return RunVirtualLane({}, SteadyBubbles(bubbles, 10 * kMillisecond), options, gate);
}

TEST(GateOnVirtualTime, AStageThatFallsSilentPastTheAdmissionDeadlineHasItsGateForcedShut) {
  // Its 10 ms slot's deadline passes at 8 ms; the stage never ends the bubble.
  VirtualLaneRun run = SilentStage(20, [](VirtualGate* gate) { gate->silent_in_bubble = kSecond; });
  EXPECT_EQ(run.gate_forced_closes, 1u);
  EXPECT_FALSE(GateIsOpen(run.gate_word_at_end));
}

TEST(GateOnVirtualTime, AGateLeftOpenByAStageThatWentSilentIsForcedShut) {
  // The stream opens the gate with no begin mark at all.
  VirtualLaneRun run = SilentStage(5, [](VirtualGate* gate) { gate->abandoned_open = kSecond; });
  EXPECT_EQ(run.gate_forced_closes, 1u);
  EXPECT_FALSE(GateIsOpen(run.gate_word_at_end));
}

}  // namespace
}  // namespace freeride::testing
