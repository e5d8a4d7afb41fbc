// End-to-end tests on CPU lanes: the real daemon, the real shared-memory data
// plane, real side-task processes and a scripted training stage.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/files.h"
#include "base/paths.h"
#include "base/units.h"
#include "channel/lane_segment.h"
#include "client/client.h"
#include "daemon/daemon.h"
#include "daemon/metrics.h"
#include "report/event_log_reader.h"
#include "report/run_report.h"
#include "freeride/freeride.h"
#include "daemon_test_util.h"
#include "second_look_expectations.h"
#include "policy/overhead_guard.h"
#include "test_util.h"

extern char** environ;

namespace freeride {
namespace {

struct Bubble {
  Nanos begin, end, predicted_end;
  uint32_t slot;
  std::string ended_by;  // "mark": end_ns is the stage's own end mark
  uint64_t seq;
};

struct EventsByType {
  std::vector<Bubble> bubbles;
  std::vector<nlohmann::json> steps;
  std::vector<std::string> transitions_to;  // of task `task_id`
};

EventsByType ReadEvents(const std::string& state_dir, int64_t task_id) {
  EventsByType out;
  for (const auto& e : ReadJsonLines(state_dir + "/events.jsonl")) {
    if (e["type"] == "bubble")
      out.bubbles.push_back({e["begin_ns"], e["end_ns"], e["predicted_end_ns"], e["slot"],
                             e.value("ended_by", ""), e["seq"]});
    if (e["type"] == "step") out.steps.push_back(e);
    if (e["type"] == "transition" && e["task_id"] == task_id) out.transitions_to.push_back(e["to"]);
  }
  return out;
}

// The slot of the bubbles that let tasks start (WaitUntilResident).
constexpr uint32_t kWarmUpSlot = 1023;

class DaemonIntegration : public DaemonTest {
 protected:
  // Submits a count task of endless steps that sleep `step_us` and waits
  // until it is resident; its id, or 0 (with a test failure).
  int64_t SubmitSleepingCounter(int step_us) {
    v1::TaskInfo info;
    auto spec = MakeSpec("counter", {COUNT_TASK_BIN, "--total", "100000000", "--step-us",
                                     std::to_string(step_us), "--step-kind", "sleep"});
    if (!tasks()->Submit(spec, &info).ok()) {
      ADD_FAILURE() << "submit failed";
      return 0;
    }
    v1::TaskInfo resident = WaitUntilResident(info.id());
    if (resident.state() != "PAUSED") {
      ADD_FAILURE() << "not resident: " << resident.state() << " " << resident.message();
      return 0;
    }
    return info.id();
  }
  // Waits until the task is PAUSED, with bubbles in a slot of their own
  // (kWarmUpSlot) meanwhile: an iterative task runs only inside bubbles until it
  // attaches to the SDK.  Its last info.
  v1::TaskInfo WaitUntilResident(int64_t id) {
    ScriptedStage warm_up(options_.socket_path, {20 * kMillisecond}, 5 * kMillisecond,
                          {kWarmUpSlot});
    return WaitForState(tasks(), id, "PAUSED", kSideTaskGuard);
  }
};

TEST_F(DaemonIntegration, StepsRunOnlyInsideBubblesAndOnlyWhenTheyFit) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo info;
  // 150 steps of ~400 us each (a side task in SCHED_IDLE on a loaded machine
  // takes minutes for them).
  ASSERT_TRUE(tasks()
                  ->Submit(MakeSpec("counter", {COUNT_TASK_BIN, "--total", "150", "--step-us", "400"}),
                           &info)
                  .ok());
  // Slot 0: 6 ms, slot 1: 3 ms, slot 2: 0.25 ms (too short for any step).
  ScriptedStage stage(options_.socket_path,
                      {6 * kMillisecond, 3 * kMillisecond, 250 * kMicrosecond},
                      2 * kMillisecond);
  v1::TaskInfo done = WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard);
  stage.Stop();
  ASSERT_EQ(done.state(), "FINISHED") << done.message() << "\n" << done.stderr_tail();
  EXPECT_DOUBLE_EQ(done.progress(), 150.0) << "progress adds up";
  EXPECT_EQ(done.steps(), 150u);
  EXPECT_EQ(done.progress_unit(), "counts");
  daemon_->Shutdown();

  EventsByType events = ReadEvents(options_.state_dir, info.id());
  const auto& bubbles = events.bubbles;
  const auto& steps = events.steps;
  const auto& transitions = events.transitions_to;
  ASSERT_EQ(steps.size(), 150u);
  ASSERT_GT(bubbles.size(), 10u);
  int late_finishes = 0;
  size_t placed = 0;
  for (const auto& s : steps) {
    Nanos start = s["start_ns"], end = s["end_ns"];
    // Only a bubble closed by the stage's end mark has a known extent.  When
    // the lane thread falls behind the stage by more than one mark (a loaded
    // machine), it logs the bubble with its own time as the end, or not at
    // all while an armed task used it (docs/event-log.md); such steps cannot
    // be placed from the log, and may come from a bubble or two at most.
    const Bubble* home = nullptr;
    for (const Bubble& b : bubbles)
      if (b.ended_by == "mark" && start >= b.begin && start < b.end) home = &b;
    if (home == nullptr) {
      // Unplaced only where the lane did not log its bubble's end mark: a
      // step outside a bubble whose extent the log knows is a step outside
      // its bubble.
      const uint64_t seq = s["bubble_seq"].get<uint64_t>();
      for (const Bubble& b : bubbles)
        EXPECT_FALSE(b.seq == seq && b.ended_by == "mark")
            << "a step of bubble " << seq << " started outside that bubble's logged extent";
      continue;
    }
    ++placed;
    EXPECT_NE(home->slot, 2u) << "a 0.25 ms bubble cannot fit a 0.4 ms step";
    EXPECT_LE(start, home->predicted_end) << "no step starts after the predicted end";
    if (end > home->predicted_end + 200 * kMicrosecond) ++late_finishes;
  }
  // How many steps ended past the predicted end is not asserted: a side
  // task in SCHED_IDLE on a loaded machine is preempted inside its steps (31
  // of 300 ran late once under bench/loaded_tests.sh).  That steps start only
  // where they fit is: never in the 0.25 ms slot, never after the predicted
  // end (and on virtual time, lane_virtual_test.cc).
  // How many bubbles the lane logged without their end mark is the
  // machine's load, not the daemon's rule (4 of them under both cores busy):
  // not bounded, but some steps must be placed for the checks above to hold.
  RecordProperty("late_finishes", late_finishes);
  RecordProperty("unplaced_steps", static_cast<int>(steps.size() - placed));
  EXPECT_GT(placed, 0u) << "no step could be placed in a bubble of known extent";
  ASSERT_GE(transitions.size(), 5u);
  EXPECT_EQ(transitions[0], "SUBMITTED");
  EXPECT_EQ(transitions[1], "CREATED");
  EXPECT_EQ(transitions[2], "PAUSED");
  EXPECT_EQ(transitions[3], "RUNNING");
  EXPECT_EQ(transitions.back(), "FINISHED");
}

// PAUSED <-> RUNNING flips, twice a bubble, reach the event log at most once
// a second of the daemon's clock, whatever the number of bubbles between.
TEST_F(DaemonIntegration, BubbleFlipsAreLoggedAtMostOnceASecondOfTheDaemonsClock) {
  // The task at the normal policy: what is tested is the log's rate, not the
  // isolation.  In SCHED_IDLE on a loaded machine it once stopped at 593 of
  // 600 steps for 4 minutes, the likely cause: its 0.2 ms steps, delayed for
  // a core, were judged too long for the 2 ms bubbles, and on the daemon's
  // frozen fake clock that estimate never ages (bench/results/loaded_tests.md).
  options_.cpu_task_priority = CpuTaskPriority::kNormal;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(&fake_env_));
  int64_t id = SubmitSleepingCounter(200);
  ASSERT_GT(id, 0);
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  // Steps in many bubbles, each a pair of flips.
  auto run_steps = [&](uint64_t more) {
    v1::TaskInfo now;
    tasks()->Get(id, "", &now);
    const uint64_t target = now.steps() + more;
    v1::TaskInfo after = WaitForTask(
        tasks(), id, [&](const v1::TaskInfo& info) { return info.steps() >= target; },
        kSideTaskGuard);
    ASSERT_GE(after.steps(), target) << after.state() << " " << after.message();
  };
  // The flips in the event log so far, by their time on the daemon's clock.
  auto flips = [&] {
    std::map<Nanos, int> flips_at;
    for (const auto& e : ReadJsonLines(options_.state_dir + "/events.jsonl")) {
      if (e["type"] != "transition" || e["task_id"] != id) continue;
      const std::string from = e.value("from", ""), to = e["to"];
      if ((from == "PAUSED" && to == "RUNNING") || (from == "RUNNING" && to == "PAUSED"))
        ++flips_at[e["ts_ns"].get<Nanos>()];
    }
    return flips_at;
  };
  const Nanos start = fake_env_.Now();
  ASSERT_NO_FATAL_FAILURE(run_steps(200));
  fake_env_.Advance(kSecond);
  ASSERT_NO_FATAL_FAILURE(run_steps(200));
  // Steps counted may have been made before the clock moved (a loaded lane
  // drains them late): the clock moves on only once this second's flip is in
  // the log.
  ASSERT_TRUE(WaitUntil([&] { return flips().count(start + kSecond) != 0; }, kSideTaskGuard))
      << "no flip logged in the daemon's second second";
  fake_env_.Advance(kSecond - kMillisecond);
  ASSERT_NO_FATAL_FAILURE(run_steps(200));
  stage.Stop();
  daemon_->Shutdown();
  EXPECT_EQ(flips(), (std::map<Nanos, int>{{start, 1}, {start + kSecond, 1}}));
}

// The status's uptime is the daemon's clock.
TEST_F(DaemonIntegration, UptimeIsOnTheDaemonsClock) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(&fake_env_));
  v1::StatsReply stats;
  daemon_->FillStats(&stats);
  EXPECT_EQ(stats.uptime_ns(), 0);
  fake_env_.Advance(90 * kSecond);
  stats.Clear();
  daemon_->FillStats(&stats);
  EXPECT_EQ(stats.uptime_ns(), 90 * kSecond);
}

// A lane whose armed task serves itself does not see bubbles begin; its
// statistics still say what runs now, read from shared memory.
TEST_F(DaemonIntegration, LaneStatsShowTheArmedTaskRunningInTheOpenBubble) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const int64_t id = SubmitSleepingCounter(1000);
  ASSERT_NE(id, 0);
  std::string error;
  auto stub = ConnectToDaemon(options_.socket_path, &error);
  ASSERT_TRUE(stub) << error;
  auto lane_stats = [&] {
    grpc::ClientContext context;
    SetDeadline(&context, std::chrono::seconds(5));
    v1::StatsReply reply;
    EXPECT_TRUE(stub->GetStats(&context, v1::StatsRequest(), &reply).ok());
    return reply.lanes_size() > 0 ? reply.lanes(0) : v1::LaneStats();
  };
  bool seen_running = false;
  {
    // 300 ms bubbles: the lane sleeps through most of each one.
    ScriptedStage stage(options_.socket_path, {300 * kMillisecond}, 5 * kMillisecond);
    for (Nanos deadline = MonotonicNow() + kSideTaskGuard; MonotonicNow() < deadline && !seen_running;) {
      v1::LaneStats lane = lane_stats();
      seen_running = lane.in_bubble() && lane.running_task() == id &&
                     lane.current_bubble_predicted_ns() > 100 * kMillisecond;
      usleep(20 * 1000);
    }
  }
  EXPECT_TRUE(seen_running) << "never saw the armed task running in an open bubble";
  v1::LaneStats after = lane_stats();
  EXPECT_FALSE(after.in_bubble()) << "the stage stopped between bubbles";
  EXPECT_EQ(after.running_task(), 0);
}

// A slot whose bubbles are sometimes over in microseconds and sometimes
// long: the lane takes the second look for an imperative task (never armed),
// which runs in the long bubbles and not in the short ones.  Whether it runs
// is the lane's decision to continue it, not its CPU share, so a busy
// machine does not change the count.  (For iterative tasks, the same on
// virtual time: lane_virtual_test.cc.)
TEST_F(DaemonIntegration, TheLaneTakesTheSecondLookForAnImperativeTask) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskSpec spec = MakeSpec("loop", {IMPERATIVE_TASK_BIN, "--seconds-of-work", "1000"});
  spec.set_kind(v1::TASK_KIND_IMPERATIVE);
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ASSERT_EQ(WaitForState(tasks(), info.id(), "PAUSED", kSideTaskGuard).state(), "PAUSED");
  {
    ScriptedStage stage(options_.socket_path, freeride::testing::kShortAndLongBubbles,
                        2 * kMillisecond, {0, 0, 0, 0, 0});
    while (stage.bubbles() < 16 + 100) usleep(50 * 1000);
  }
  daemon_->Shutdown();
  std::string error;
  auto events = report::ReadEventLog(options_.state_dir + "/events.jsonl", &error);
  ASSERT_TRUE(events) << error;
  freeride::testing::ExpectLongBubblesUsedAndShortOnesNot(*events, info.id());
}

TEST_F(DaemonIntegration, ABadMetricsAddressStopsTheStartWithNothingListening) {
  options_.metrics_address = "no-port-here";
  Daemon daemon(options_);
  std::string error;
  EXPECT_FALSE(daemon.Start(&error));
  EXPECT_NE(error.find("is not HOST:PORT"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(options_.socket_path)) << "the control socket was made";
  daemon.Shutdown();
}

TEST_F(DaemonIntegration, MetricsAndTheReportAgreeWithTheDaemonsOwnCounts) {
  options_.metrics_address = "127.0.0.1:0";
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_GT(daemon_->metrics_port(), 0);
  v1::TaskSpec spec = MakeSpec("counter", {COUNT_TASK_BIN, "--total", "200", "--step-us", "300"});
  spec.set_alone_rate_per_s(2000);
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond, 2 * kMillisecond}, 2 * kMillisecond);
  v1::TaskInfo done = WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard);
  stage.Stop();
  ASSERT_EQ(done.state(), "FINISHED") << done.message();

  httplib::Client client("127.0.0.1", daemon_->metrics_port());
  auto response = client.Get("/metrics");
  ASSERT_TRUE(response) << "no answer from /metrics";
  EXPECT_EQ(response->status, 200);
  const std::string& text = response->body;
  EXPECT_NE(text.find("# TYPE freeride_lane_bubbles_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("freeride_tasks{state=\"FINISHED\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("freeride_task_progress{id=\"1\",name=\"counter\",lane=\"0\",unit=\"counts\"} 200\n"),
            std::string::npos) << text;
  const std::string bubbles_sample = "freeride_lane_bubbles_total{lane=\"0\",device=\"cpu:0\"} ";
  size_t at = text.find(bubbles_sample);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(at + bubbles_sample.size())), 10);

  daemon_->Shutdown();
  // The lane credits a step's time to its task when the bubble closes, which
  // can come after the task has finished: compare once every lane has stopped.
  v1::TaskInfo final_info;
  ASSERT_TRUE(tasks()->Get(info.id(), "", &final_info).ok());
  std::string error;
  auto log = report::ReadEventLog(options_.state_dir + "/events.jsonl", &error);
  ASSERT_TRUE(log) << error;
  EXPECT_EQ(log->skipped_lines, 0u);
  report::RunReport r = report::ComputeRunReport(*log, nullptr, {});
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_DOUBLE_EQ(r.tasks[0].units, 200);
  EXPECT_EQ(r.tasks[0].unit, "counts");
  EXPECT_EQ(r.tasks[0].state, "FINISHED");
  EXPECT_NEAR(r.work_gpu_s, 200.0 / 2000, 1e-12);  // the rate logged at submission
  EXPECT_EQ(final_info.harvested_ns(), r.total.harvested_ns);
  EXPECT_GE(final_info.harvested_ns(), done.harvested_ns());
  EXPECT_GT(r.total.iteration_ms, 8);  // 2 + 5 + 2 + 2 ms of sleeps per iteration
}

// An imperative program is let run in bubbles; that time is not work done,
// so it is accounted as allowed, never as harvested: in the task, the lane,
// the event log and the report.
TEST_F(DaemonIntegration, TimeAnImperativeTaskIsLetRunIsAllowedNotHarvested) {
  options_.metrics_address = "127.0.0.1:0";
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskSpec spec = MakeSpec("spin", {"/bin/sh", "-c", "while :; do :; done"});
  spec.set_kind(v1::TASK_KIND_IMPERATIVE);
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  {
    // 40 bubbles, and as many more as it takes a loaded machine to launch
    // the task and let it run in one (a count of bubbles alone is a time).
    ScriptedStage stage(options_.socket_path, {20 * kMillisecond}, 2 * kMillisecond);
    auto let_run = [&] {
      v1::TaskInfo now;
      return tasks()->Get(info.id(), "", &now).ok() && now.allowed_ns() > 0;
    };
    for (Nanos end = MonotonicNow() + kSideTaskGuard; MonotonicNow() < end && (stage.bubbles() < 40 || !let_run());)
      usleep(20 * 1000);
  }
  httplib::Client client("127.0.0.1", daemon_->metrics_port());
  auto response = client.Get("/metrics");
  ASSERT_TRUE(response) << "no answer from /metrics";
  EXPECT_NE(response->body.find("# TYPE freeride_lane_allowed_seconds_total counter"), std::string::npos);
  EXPECT_NE(response->body.find("freeride_task_allowed_seconds_total{id=\"1\""), std::string::npos);
  daemon_->Shutdown();
  v1::TaskInfo final_info;
  ASSERT_TRUE(tasks()->Get(info.id(), "", &final_info).ok());
  EXPECT_EQ(final_info.harvested_ns(), 0) << "a process let run did no known work";
  EXPECT_GT(final_info.allowed_ns(), 0) << "40 bubbles of 20 ms";
  std::string error;
  auto log = report::ReadEventLog(options_.state_dir + "/events.jsonl", &error);
  ASSERT_TRUE(log) << error;
  ASSERT_FALSE(log->steps.empty());
  for (const report::StepRecord& s : log->steps) EXPECT_TRUE(s.allowed) << "run " << s.start_ns;
  report::RunReport r = report::ComputeRunReport(*log, nullptr, {});
  EXPECT_EQ(r.total.harvested_ns, 0);
  EXPECT_EQ(r.total.allowed_ns, final_info.allowed_ns());
  EXPECT_NE(report::FormatRunReport(r).find("let run, not counted"), std::string::npos);
}

TEST_F(DaemonIntegration, ProgressIsExactEvenWhenABubbleHoldsThousandsOfSteps) {
  // The task at the normal policy: in SCHED_IDLE on a loaded machine its
  // steps came too slowly to overflow the ring, and the test then tested
  // nothing of it.
  options_.cpu_task_priority = CpuTaskPriority::kNormal;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo info;
  // Thousands of tiny steps fit in one 60 ms bubble: more than the
  // 4,096-record ring holds between two reads of the lane.
  ASSERT_TRUE(tasks()
                  ->Submit(MakeSpec("tiny", {COUNT_TASK_BIN, "--total", "20000", "--step-us", "2"}),
                           &info)
                  .ok());
  ScriptedStage stage(options_.socket_path, {60 * kMillisecond}, 5 * kMillisecond);
  v1::TaskInfo done = WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard);
  stage.Stop();
  ASSERT_EQ(done.state(), "FINISHED") << done.message();
  EXPECT_DOUBLE_EQ(done.progress(), 20000.0);
  EXPECT_EQ(done.steps(), 20000u);
  daemon_->Shutdown();
  uint64_t lost = 0;
  for (const auto& e : ReadJsonLines(options_.state_dir + "/events.jsonl"))
    if (e["type"] == "bubble") lost += e["step_records_lost"].get<uint64_t>();
  EXPECT_GT(lost, 0u) << "the ring never overflowed: the test no longer tests that";
}

TEST_F(DaemonIntegration, ImperativeTasksAreStoppedOutsideBubbles) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskSpec spec = MakeSpec("loop", {IMPERATIVE_TASK_BIN, "--seconds-of-work", "0.15"});
  spec.set_kind(v1::TASK_KIND_IMPERATIVE);
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ScriptedStage stage(options_.socket_path, {10 * kMillisecond}, 10 * kMillisecond);
  v1::TaskInfo done = WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard);
  stage.Stop();
  ASSERT_EQ(done.state(), "FINISHED") << done.message() << "\n" << done.stderr_tail();
  EXPECT_GE(done.progress(), 150.0);
  daemon_->Shutdown();
  EventsByType events = ReadEvents(options_.state_dir, info.id());
  const auto& bubbles = events.bubbles;
  ASSERT_FALSE(events.steps.empty());
  // What holds however loaded the machine is: each slice is continued only
  // once its bubble has begun, in a bubble of its own (the task was stopped
  // before the lane served the next one), and slices never overlap.  How
  // soon after a bubble's end the stop comes is the machine's speed (on two
  // loaded cores a slice of a 10 ms bubble ran up to 70 ms): a benchmark's
  // figure, not this test's.
  std::map<uint64_t, Nanos> begin_by_seq;
  for (const Bubble& b : bubbles) begin_by_seq[b.seq] = b.begin;
  std::set<uint64_t> served;
  Nanos previous_end = 0;
  for (const auto& e : events.steps) {
    const uint64_t seq = e["bubble_seq"];
    const Nanos start = e["start_ns"], end = e["end_ns"];
    ASSERT_TRUE(begin_by_seq.count(seq)) << "a slice in bubble " << seq << ", which the log does not have";
    EXPECT_GE(start, begin_by_seq[seq]) << "slice " << start << ".." << end << " began before its bubble";
    EXPECT_TRUE(served.insert(seq).second) << "bubble " << seq << " continued the task twice";
    EXPECT_GE(start, previous_end) << "slice " << start << ".." << end << " overlaps the one before";
    previous_end = end;
  }
  // Left running, it would have done its 150 ms of work in one slice.
  EXPECT_GE(served.size(), 2u) << "the task was never stopped between bubbles";
  // The task counts a unit per millisecond it runs, so stopped between slices
  // it can have done no more than its slices' time, plus the unit each stop
  // cuts short; run on through the gaps, it does more than that.
  Nanos allowed = 0;
  for (const auto& e : events.steps) allowed += e["end_ns"].get<Nanos>() - e["start_ns"].get<Nanos>();
  EXPECT_LE(done.progress() * kMillisecond, allowed + static_cast<Nanos>(served.size()) * kMillisecond)
      << "units of 1 ms done beyond the time the task was let run";
}

TEST_F(DaemonIntegration, BadRequestsGetClearErrorsAndTheDaemonStaysUp) {
  options_ = CpuOptions(dir_, 2);
  options_.lanes[0].capacity_bytes = 1ULL << 30;
  options_.lanes[1].capacity_bytes = 2ULL << 30;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  std::string error;
  auto stub = ConnectToDaemon(options_.socket_path, &error);
  ASSERT_NE(stub, nullptr) << error;
  auto submit = [&](v1::TaskSpec spec) {
    grpc::ClientContext context;
    v1::SubmitRequest request;
    *request.mutable_spec() = spec;
    v1::SubmitReply reply;
    return stub->Submit(&context, request, &reply);
  };
  grpc::Status s = submit(MakeSpec("nope", {"/definitely/not/here"}));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("does not exist"), std::string::npos);
  s = submit(MakeSpec("nope2", {"no-such-command-anywhere"}));
  EXPECT_NE(s.error_message().find("not found on PATH"), std::string::npos);
  v1::TaskSpec big = MakeSpec("big", {COUNT_TASK_BIN});
  big.set_memory_bytes(3ULL << 30);
  s = submit(big);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("largest lane"), std::string::npos) << s.error_message();
  v1::TaskSpec lane = MakeSpec("lane", {COUNT_TASK_BIN});
  lane.set_lane(7);
  EXPECT_NE(submit(lane).error_message().find("lane 7 does not exist"), std::string::npos);
  v1::TaskSpec fits = MakeSpec("fits", {COUNT_TASK_BIN});
  fits.set_memory_bytes(1536ULL << 20);
  ASSERT_TRUE(submit(fits).ok());
  EXPECT_EQ(submit(fits).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  v1::TaskSpec empty = MakeSpec("", {COUNT_TASK_BIN});
  EXPECT_EQ(submit(empty).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::TaskSpec nocmd = MakeSpec("nocmd", {});
  EXPECT_EQ(submit(nocmd).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext context;
  v1::GetTaskRequest get;
  get.set_name("fits");
  v1::TaskInfo info;
  ASSERT_TRUE(stub->GetTask(&context, get, &info).ok()) << "the daemon still answers";
  EXPECT_EQ(info.lane(), 1) << "only lane 1 has room for 1.5 GiB";
  grpc::ClientContext cancel_context;
  v1::CancelRequest cancel;
  cancel.set_id(999);
  v1::CancelReply reply;
  EXPECT_EQ(stub->Cancel(&cancel_context, cancel, &reply).error_code(),
            grpc::StatusCode::NOT_FOUND);
  auto all = tasks()->List(true);
  ASSERT_EQ(all.size(), 1u) << "rejected submissions leave no trace in the journal";
}

TEST_F(DaemonIntegration, FailuresKeepExitStatusAndStderrAndAreRetried) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(&fake_env_));
  v1::TaskSpec spec = MakeSpec("boom", {"/bin/sh", "-c", "echo kaboom-$FREERIDE_TASK_ID >&2; exit 3"});
  spec.set_kind(v1::TASK_KIND_IMPERATIVE);
  spec.set_max_retries(2);
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  // Each retry waits out its back-off, doubled per attempt, on the daemon's
  // clock: the task is relaunched only once the test moves that clock on.
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const Nanos backoff = options_.retry_backoff << (attempt - 1);
    v1::TaskInfo waiting = WaitForRetry(tasks(), info.id(), attempt, kSideTaskGuard);
    ASSERT_EQ(waiting.state(), "SUBMITTED") << waiting.message();
    EXPECT_NE(waiting.message().find(fmt::format("retrying in {} (attempt {} of 3)",
                                                 FormatDuration(backoff), attempt + 1)),
              std::string::npos)
        << waiting.message();
    fake_env_.Advance(backoff);
  }
  v1::TaskInfo failed = WaitForState(tasks(), info.id(), "FAILED", kSideTaskGuard);
  ASSERT_EQ(failed.state(), "FAILED");
  EXPECT_EQ(failed.exit_code(), 3);
  EXPECT_EQ(failed.attempts(), 3) << "one run and two retries";
  EXPECT_NE(failed.stderr_tail().find("kaboom-" + std::to_string(info.id())), std::string::npos);
  EXPECT_NE(failed.message().find("exited with status 3"), std::string::npos);

  // A task killed by a signal: FAILED with the signal, and the lane goes on.
  v1::TaskSpec crash = MakeSpec("segv", {"/bin/sh", "-c", "kill -SEGV $$"});
  crash.set_kind(v1::TASK_KIND_IMPERATIVE);
  ASSERT_TRUE(tasks()->Submit(crash, &info).ok());
  failed = WaitForState(tasks(), info.id(), "FAILED", kSideTaskGuard);
  EXPECT_EQ(failed.term_signal(), SIGSEGV);
  v1::TaskSpec next = MakeSpec("next", {COUNT_TASK_BIN, "--total", "20", "--step-us", "100"});
  ASSERT_TRUE(tasks()->Submit(next, &info).ok());
  EXPECT_EQ(WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard).state(), "FINISHED");
}

// A task whose steps have a heavy tail its estimate does not expect keeps
// overrunning its bubbles: it is demoted, then killed for good (no retries),
// and the lane goes on with the next task.
// A step's units are the task's own figure; its time is the training's.
// Steps that report units below 0 or not a number (a NaN loss returned as
// units) were dropped whole: their time counted as neither harvest nor
// overrun, so the overrun budget never saw a task that overran.
TEST_F(DaemonIntegration, StepsWithUnitsBelowZeroOrNotANumberAreStillJudgedByTheirTime) {
  options_.cpu_overrun_budget = {.max_fraction = 0.05, .window = 16, .min_bubbles = 4,
                                 .min_overrun = 10 * kMillisecond, .warmup_bubbles = 2, .hang = 0};
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  for (const char* units : {"nan", "-5"}) {
    v1::TaskSpec spec = MakeSpec(std::string("wrong-units-") + (units[0] == '-' ? "negative" : "nan"),
                                 {BAD_TASK_BIN, "--units", units, "--step-us", "300", "--slow-every", "10",
                                  "--slow-us", "8000"});
    v1::TaskInfo info;
    ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
    v1::TaskInfo failed = WaitForState(tasks(), info.id(), "FAILED", kSideTaskGuard);
    ASSERT_EQ(failed.state(), "FAILED") << units << ": " << failed.message();
    EXPECT_NE(failed.message().find("killed: overran its last"), std::string::npos) << failed.message();
    EXPECT_GT(failed.harvested_ns(), 0) << units << ": its steps inside bubbles count as harvest time";
  }
}

// A task's unit is text it writes into its own segment; the daemon puts it
// into every TaskInfo, and a protobuf string that is not UTF-8 fails the
// whole reply: one task could break status, show and cancel for everyone.
TEST_F(DaemonIntegration, AUnitThatIsNotUtf8IsRepairedAndStatusStillAnswers) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  v1::TaskSpec spec = MakeSpec("bad-unit", {BAD_TASK_BIN, "--unit-hex", "6162ff", "--step-us", "100"});
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  WaitForTask(tasks(), info.id(), [](const v1::TaskInfo& t) { return t.progress() > 0; }, kSideTaskGuard);
  auto channel = grpc::CreateChannel("unix:" + options_.socket_path, grpc::InsecureChannelCredentials());
  auto stub = v1::FreeRide::NewStub(channel);
  v1::TaskInfo shown = GetTask(*stub, info.id());
  EXPECT_EQ(shown.id(), info.id()) << "the reply carrying the task's unit failed";
  EXPECT_EQ(shown.progress_unit(), "ab\xef\xbf\xbd");  // the bad byte as U+FFFD
  // Ended first: sharing the lane with it, the next task got a bubble now and then (157 s).
  v1::TaskInfo cancelled;
  ASSERT_TRUE(tasks()->Cancel(info.id(), "", &cancelled).ok());

  // Its stderr's tail, cut at a byte count: a bar of 3-byte characters (tqdm's) is cut inside one.
  v1::TaskSpec bar = MakeSpec("bar", {"/bin/sh", "-c", "for i in $(seq 2000); do printf '\\342\\226\\210' >&2; done"});
  bar.set_kind(v1::TASK_KIND_IMPERATIVE);
  ASSERT_TRUE(tasks()->Submit(bar, &info).ok());
  ASSERT_EQ(WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard).state(), "FINISHED");
  shown = GetTask(*stub, info.id());
  EXPECT_EQ(shown.id(), info.id()) << "the reply carrying the task's stderr tail failed";
  EXPECT_FALSE(shown.stderr_tail().empty());
  EXPECT_EQ(shown.stderr_tail().substr(0, 3), "\xe2\x96\x88") << "starts on a whole character";
}

TEST_F(DaemonIntegration, ATaskThatKeepsOverrunningIsDemotedThenKilled) {
  // CPU lanes have no budget by default; this test gives its lane the GPU default's share.
  options_.cpu_overrun_budget = {.max_fraction = 0.05, .window = 16, .min_bubbles = 4,
                                 .min_overrun = 10 * kMillisecond, .warmup_bubbles = 2, .hang = 0};
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  // Every 10th step takes 8 ms, longer than the 5 ms bubbles: it always overruns.
  v1::TaskSpec spec = MakeSpec("overrunner", {BAD_TASK_BIN, "--step-us", "300", "--slow-every",
                                              "10", "--slow-us", "8000"});
  spec.set_max_retries(3);
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  v1::TaskInfo failed = WaitForState(tasks(), info.id(), "FAILED", kSideTaskGuard);
  ASSERT_EQ(failed.state(), "FAILED") << failed.message();
  EXPECT_NE(failed.message().find("killed: overran its last"), std::string::npos)
      << failed.message();
  EXPECT_NE(failed.message().find("after demotion"), std::string::npos) << failed.message();
  EXPECT_EQ(failed.attempts(), 1) << "a policy kill is not retried";
  EXPECT_EQ(failed.term_signal(), SIGKILL);

  v1::TaskSpec next = MakeSpec("next", {COUNT_TASK_BIN, "--total", "20", "--step-us", "100"});
  ASSERT_TRUE(tasks()->Submit(next, &info).ok());
  EXPECT_EQ(WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard).state(), "FINISHED");
  stage.Stop();
  daemon_->Shutdown();
  std::vector<std::string> verdicts;
  for (const auto& e : ReadJsonLines(options_.state_dir + "/events.jsonl"))
    if (e["type"] == "overrun_budget") verdicts.push_back(e["verdict"]);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0], "demote");
  EXPECT_EQ(verdicts[1], "kill");
}

// A side task that keeps the stage's device after handing its bubbles back
// (as a GPU kernel outlives the step that launched it; here the device is a
// lock the stage holds through its busy time) slows the training in a way no
// step record shows.  The live estimate sees it in the iterations; the guard
// backs side work off until the training is within budget again, and gives
// it back once the stealing stops.  The marks never wait for any of this.
TEST_F(DaemonIntegration, TheGuardBacksOffATaskThatSlowsTheTrainingAndRecoversAfterIt) {
  options_.probe = {.period_iterations = 16, .withheld_iterations = 3, .warmup_iterations = 10,
                    .min_period = 1 * kSecond};
  // CPU lanes have no guard by default.  CPU timing on a loaded machine is
  // noisy: without any theft the estimate's upper bound was seen at 0.13, so
  // the budget is 0.20; the theft below (20 ms of the device after each of 3
  // bubbles in a 36 ms iteration) costs far more, even when the thief, in
  // SCHED_IDLE, gets a core only a few milliseconds late.  The thief runs at
  // the normal policy: in SCHED_IDLE, on cores that other work kept busy, it
  // stole too little for the guard to see, and the test then tested nothing
  // of the guard (the dispatcher still runs it only inside bubbles).
  options_.cpu_task_priority = CpuTaskPriority::kNormal;
  const double budget = 0.20;
  options_.cpu_guard.budget = budget;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const std::string device = dir_.path() + "/device.lock";
  const std::string stop_stealing = dir_.path() + "/stop-stealing";
  v1::TaskSpec spec = MakeSpec("thief", {BAD_TASK_BIN, "--step-us", "300", "--steal-us", "20000",
                                         "--steal-until-file", stop_stealing, "--device-lock", device});
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ASSERT_EQ(WaitUntilResident(info.id()).state(), "PAUSED");
  pid_t stage = fork();
  ASSERT_GE(stage, 0);
  if (stage == 0) {
    execl(STAGE_REPLAY_BIN, STAGE_REPLAY_BIN, "--socket", options_.socket_path.c_str(),
          "--iterations", "100000000", "--busy", "sleep", "--busy-ms", "12", "--bubbles-ms",
          "8,8,8", "--device-lock", device.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto overhead_events = [&] {
    std::vector<nlohmann::json> out;
    for (const auto& e : ReadJsonLines(options_.state_dir + "/events.jsonl"))
      if (e["type"] == "overhead") out.push_back(e);
    return out;
  };
  // The guard backed off at least once and later came back to normal.
  auto recovered = [](const std::vector<nlohmann::json>& events) {
    bool backed_off = false;
    for (const auto& e : events) {
      if (e["guard"] != "normal") backed_off = true;
      if (backed_off && e.contains("guard_from") && e["guard"] == "normal") return true;
    }
    return false;
  };
  // The theft goes on until the guard has acted (or the wait gives up), so
  // however slow the machine, the guard acts while it goes on...
  std::vector<nlohmann::json> events;
  auto acted = [&] {
    events = overhead_events();
    for (const auto& e : events)
      if (e.contains("guard_from")) return true;
    return false;
  };
  const bool acted_during_theft = WaitUntil(acted, 120 * kSecond);
  const Nanos theft_ended = MonotonicNow();
  std::ofstream(stop_stealing) << "stop\n";
  // ...and recovers after it.
  if (acted_during_theft) WaitUntil([&] { return recovered(events = overhead_events()); }, 150 * kSecond);
  v1::StatsReply stats;
  daemon_->FillStats(&stats);
  kill(stage, SIGKILL);
  waitpid(stage, nullptr, 0);
  daemon_->Shutdown();
  ASSERT_FALSE(events.empty()) << "no probe cycle closed";
  // What the side task did, for a failure's message.
  std::map<std::string, int> verdicts;
  int steps = 0;
  for (const auto& e : ReadJsonLines(options_.state_dir + "/events.jsonl")) {
    if (e["type"] == "bubble") ++verdicts[e["verdict"].get<std::string>()];
    if (e["type"] == "step") ++steps;
  }
  std::string activity = fmt::format("{} steps; bubble verdicts:", steps);
  for (const auto& [verdict, count] : verdicts) activity += fmt::format(" {} x{}", verdict, count);
  SCOPED_TRACE(activity);

  // The first change: the theft's estimate, wholly above the budget, made the
  // guard back off by one level.
  std::vector<const nlohmann::json*> changes;
  for (const auto& e : events)
    if (e.contains("guard_from")) changes.push_back(&e);
  ASSERT_FALSE(changes.empty()) << "the guard never acted; last estimate " << events.back().dump();
  EXPECT_EQ((*changes[0])["guard_from"], "normal");
  EXPECT_EQ((*changes[0])["guard"], "wider-margins");
  EXPECT_GT((*changes[0])["slowdown_low"].get<double>(), budget) << changes[0]->dump();
  EXPECT_TRUE(acted_during_theft);
  // Levels move one at a time.
  for (const nlohmann::json* change : changes) {
    auto level = [](const nlohmann::json& name) {
      for (int i = 0; i < kGuardLevels; ++i)
        if (name == GuardLevelName(static_cast<GuardLevel>(i))) return i;
      return -1;
    };
    EXPECT_EQ(std::abs(level((*change)["guard"]) - level((*change)["guard_from"])), 1)
        << change->dump();
  }
  // It gave side work back once the theft stopped, on an estimate wholly
  // below the budget.
  ASSERT_TRUE(recovered(events)) << "still " << events.back().dump();
  EXPECT_EQ((*changes.back())["guard"], "normal");
  EXPECT_LT((*changes.back())["slowdown_high"].get<double>(), budget) << changes.back()->dump();
  EXPECT_GT((*changes.back())["ts_ns"].get<Nanos>(), theft_ended);
  // Status carries the live estimate.
  ASSERT_EQ(stats.lanes_size(), 1);
  const v1::OverheadEstimate& overhead = stats.lanes(0).overhead();
  EXPECT_TRUE(overhead.probing());
  EXPECT_EQ(overhead.guard_level(), "normal");
  EXPECT_EQ(overhead.guard(), v1::GUARD_LEVEL_NORMAL);
  EXPECT_DOUBLE_EQ(overhead.budget(), budget);
}

// The guard gauge is each lane's level by number, as the proto carries it.
TEST(Metrics, TheGuardGaugeIsEachLanesLevel) {
  v1::StatsReply stats;
  v1::LaneStats* fewer = stats.add_lanes();
  fewer->set_lane(0);
  fewer->set_device("gpu:0");
  fewer->mutable_overhead()->set_guard(v1::GUARD_LEVEL_FEWER_GRANTS);
  v1::LaneStats* paused = stats.add_lanes();
  paused->set_lane(1);
  paused->set_device("gpu:1");
  paused->mutable_overhead()->set_guard(v1::GUARD_LEVEL_PAUSED);
  const std::string text = RenderPrometheusMetrics(stats, {});
  EXPECT_NE(text.find("freeride_lane_guard_level{lane=\"0\",device=\"gpu:0\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("freeride_lane_guard_level{lane=\"1\",device=\"gpu:1\"} 4\n"), std::string::npos)
      << text;
}

// Free memory is shown where a stage gave it, and left out while unknown
// (the largest value, which a dashboard would plot as 18 EB).
TEST(Metrics, FreeMemoryIsShownOnlyWhereAStageGaveIt) {
  v1::StatsReply stats;
  v1::LaneStats* known = stats.add_lanes();
  known->set_lane(0);
  known->set_device("gpu:0");
  known->set_free_memory_bytes(4096);
  v1::LaneStats* unknown = stats.add_lanes();
  unknown->set_lane(1);
  unknown->set_device("cpu:0");
  unknown->set_free_memory_bytes(std::numeric_limits<uint64_t>::max());
  const std::string text = RenderPrometheusMetrics(stats, {});
  EXPECT_NE(text.find("freeride_lane_free_memory_bytes{lane=\"0\",device=\"gpu:0\"} 4096\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("freeride_lane_free_memory_bytes{lane=\"1\""), std::string::npos) << text;
}

// The gate's counters are each lane's, in seconds where the proto has
// nanoseconds; the held-open time carries why.
TEST(Metrics, TheGatesCountersAreEachLanesWithHeldTimeByWhy) {
  v1::StatsReply stats;
  v1::LaneStats* lane = stats.add_lanes();
  lane->set_lane(0);
  lane->set_device("gpu:0");
  lane->set_gate_open_ns(2'500'000'000);
  lane->set_gate_early_closes(7);
  lane->set_gate_late_ns(3'000'000);
  lane->set_gate_late_bubbles(4);
  lane->set_gate_pending_ns(125'000'000);
  lane->set_gate_held_unpublished_ns(1'000'000);
  lane->set_gate_held_drain_ns(20'000'000);
  lane->set_gate_held_fit_ns(500'000'000);
  const std::string text = RenderPrometheusMetrics(stats, {});
  for (const char* sample : {
           "freeride_lane_gate_open_seconds_total{lane=\"0\",device=\"gpu:0\"} 2.5\n",
           "freeride_lane_gate_early_closes_total{lane=\"0\",device=\"gpu:0\"} 7\n",
           "freeride_lane_gate_forced_closes_total{lane=\"0\",device=\"gpu:0\"} 0\n",
           "freeride_lane_gate_late_seconds_total{lane=\"0\",device=\"gpu:0\"} 0.003\n",
           "freeride_lane_gate_late_stretches_total{lane=\"0\",device=\"gpu:0\"} 4\n",
           "freeride_lane_gate_pending_seconds_total{lane=\"0\",device=\"gpu:0\"} 0.125\n",
           "freeride_lane_gate_held_open_seconds_total{lane=\"0\",device=\"gpu:0\",why=\"unpublished\"} 0.001\n",
           "freeride_lane_gate_held_open_seconds_total{lane=\"0\",device=\"gpu:0\",why=\"drain\"} 0.02\n",
           "freeride_lane_gate_held_open_seconds_total{lane=\"0\",device=\"gpu:0\",why=\"fit\"} 0.5\n"})
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
}

// A step that never returns is killed once it has run the hang timeout past
// its bubble's end; the lane is free again for the next task.
TEST_F(DaemonIntegration, AHungStepIsKilledAndTheLaneGoesOn) {
  options_.cpu_overrun_budget.hang = 300 * kMillisecond;
  // At the normal CPU policy, as the tests above: in SCHED_IDLE, with both cores kept busy by
  // two other processes, the task after the hung one got no core for more than the 300 ms hang
  // timeout and was failed as hung too (the hang is judged in wall time, starved or not).
  options_.cpu_task_priority = CpuTaskPriority::kNormal;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskSpec spec = MakeSpec("hangs", {BAD_TASK_BIN, "--step-us", "200", "--hang-after", "30"});
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ScriptedStage stage(options_.socket_path, {4 * kMillisecond}, 2 * kMillisecond);
  v1::TaskInfo failed = WaitForState(tasks(), info.id(), "FAILED", kSideTaskGuard);
  ASSERT_EQ(failed.state(), "FAILED") << failed.message();
  EXPECT_NE(failed.message().find("hung in a step"), std::string::npos) << failed.message();
  v1::TaskSpec next = MakeSpec("next", {COUNT_TASK_BIN, "--total", "20", "--step-us", "100"});
  ASSERT_TRUE(tasks()->Submit(next, &info).ok());
  EXPECT_EQ(WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard).state(), "FINISHED");
}

// The training stage dies inside a bubble: the lane sees its heartbeat go
// stale (its process gone) and ends the bubble, so the task is paused and
// steps no more, rather than running in a bubble that never ends.
TEST_F(DaemonIntegration, WhenTheStageDiesMidBubbleItsTasksArePaused) {
  options_.stage_timeout = 300 * kMillisecond;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()
                  ->Submit(MakeSpec("counter", {COUNT_TASK_BIN, "--total", "100000000", "--step-us", "200"}),
                           &info)
                  .ok());
  pid_t stage = fork();
  if (stage == 0) {
    execl(STAGE_REPLAY_BIN, STAGE_REPLAY_BIN, "--socket", options_.socket_path.c_str(),
          "--iterations", "100000", "--busy-ms", "2", "--bubbles-ms", "40", "--busy", "sleep",
          nullptr);
    _exit(127);
  }
  v1::TaskInfo running = WaitForState(tasks(), info.id(), "RUNNING", kSideTaskGuard);
  ASSERT_EQ(running.state(), "RUNNING");
  // The stage is stopped inside a bubble, then killed: the bubble it had open
  // can end only by its death (or its silence), never by a mark, however the
  // machine's load stretches its phases.
  LaneSegment lane;
  std::string error;
  ASSERT_TRUE(WaitUntil(
      [&] { return lane.Open(LaneSegmentPath(options_.socket_path, 0), /*writable=*/false, &error); }))
      << error;
  auto stopped = [&] {
    std::string stat = FileText("/proc/" + std::to_string(stage) + "/stat");
    size_t close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
  };
  ASSERT_TRUE(WaitUntil([&] {
    kill(stage, SIGSTOP);
    if (!WaitUntil(stopped)) return false;
    if (lane.layout()->bubble_seq.load() % 2 == 1) return true;  // a begin mark without its end
    kill(stage, SIGCONT);
    return false;
  })) << "never caught the stage inside a bubble";
  kill(stage, SIGKILL);
  waitpid(stage, nullptr, 0);
  v1::TaskInfo paused = WaitForState(tasks(), info.id(), "PAUSED", kHangGuard);
  ASSERT_EQ(paused.state(), "PAUSED") << "the bubble of a dead stage must end";
  uint64_t steps = paused.steps();
  usleep(500 * 1000);
  v1::TaskInfo later;
  tasks()->Get(info.id(), "", &later);
  EXPECT_EQ(later.state(), "PAUSED");
  EXPECT_LE(later.steps(), steps + 1) << "no steps without a live stage";
  daemon_->Shutdown();
  bool ended_without_mark = false;
  for (const auto& e : ReadJsonLines(options_.state_dir + "/events.jsonl"))
    if (e["type"] == "bubble" && e["ended_by"] != "mark") ended_without_mark = true;
  EXPECT_TRUE(ended_without_mark) << "the last bubble ended by the stage's death, not a mark";
}

// A task launched with the daemon's own environment (an empty spec env)
// must see this launch's channel, not stale FREERIDE_ variables the daemon
// inherited, e.g. because it was started from a shell inside another task.
TEST_F(DaemonIntegration, InheritedChannelVariablesDoNotReachTasks) {
  setenv("FREERIDE_STEP_HINT_NS", "424242", 1);
  setenv("FREERIDE_TASK_ID", "999", 1);
  StartDaemon();
  v1::TaskSpec spec = MakeSpec(
      "env", {"/bin/sh", "-c", "echo hint=$FREERIDE_STEP_HINT_NS id=$FREERIDE_TASK_ID >&2; exit 3"});
  spec.clear_env();
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  v1::TaskInfo failed = WaitForState(tasks(), info.id(), "FAILED", kSideTaskGuard);
  unsetenv("FREERIDE_STEP_HINT_NS");
  unsetenv("FREERIDE_TASK_ID");
  EXPECT_NE(failed.stderr_tail().find("hint= id=" + std::to_string(info.id())), std::string::npos)
      << failed.stderr_tail();
}


// Each built-in task is killed (SIGKILL) after it has checkpointed; its
// retry resumes from the checkpoint and ends with exactly the result of an
// uninterrupted run.
TEST_F(DaemonIntegration, BuiltInTasksResumeFromCheckpointsWithTheSameResult) {
  setenv("FREERIDE_CHECKPOINT_INTERVAL_MS", "50", 1);
  // The tasks at the normal policy: what is tested is the resumed result, not
  // the isolation.  In SCHED_IDLE, on cores that another process kept busy
  // 90% of the time, the three tasks' work outlasted ctest's 300 s
  // (bench/results/loaded_tests.md).
  options_.cpu_task_priority = CpuTaskPriority::kNormal;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(&fake_env_));
  ScriptedStage stage(options_.socket_path, {8 * kMillisecond}, 2 * kMillisecond);
  struct Case {
    std::string name;
    std::vector<std::string> command;
    std::string result;  // file whose content must match, under "{out}"
  };
  const std::string d = dir_.path();
  const std::vector<Case> cases = {
      {"pagerank",
       {PAGERANK_BIN, "--rmat-scale", "17", "--tolerance", "0", "--max-iterations", "300",
        "--device", "cpu", "--step-ms", "1", "--output", "{out}/top.tsv"},
       "top.tsv"},
      {"sgd",
       {SGD_BIN, "--generate-ratings", "200000", "--epochs", "80", "--device", "cpu", "--step-ms",
        "1"},
       "stdout"},
      {"image",
       {IMAGE_BIN, "--generate", "60", "--generate-size", "640x480", "--device", "cpu",
        "--step-ms", "1", "--output", "{out}/images"},
       "images/generated-00059.jpg"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto with_out = [&](const std::string& out) {
      std::vector<std::string> command;
      for (std::string arg : c.command) {
        if (size_t at = arg.find("{out}"); at != std::string::npos) arg.replace(at, 5, out);
        command.push_back(arg);
      }
      return command;
    };
    // The reference: the same command alone, uninterrupted.
    std::string ref = d + "/" + c.name + "-ref", run = d + "/" + c.name + "-run";
    std::filesystem::create_directories(ref);
    std::filesystem::create_directories(run);
    std::string line;
    for (const auto& arg : with_out(ref)) line += arg + " ";
    ASSERT_EQ(std::system((line + "--standalone > " + ref + "/stdout 2>/dev/null").c_str()), 0);

    v1::TaskSpec spec = MakeSpec(c.name, with_out(run));
    spec.set_max_retries(1);
    v1::TaskInfo info;
    ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
    std::string task_dir = options_.state_dir + "/tasks/" + std::to_string(info.id());
    v1::TaskInfo before = WaitForTask(
        tasks(), info.id(),
        [&](const v1::TaskInfo& t) {
          return t.progress() > 0 && std::filesystem::exists(task_dir + "/checkpoint/checkpoint");
        },
        kSideTaskGuard);
    ASSERT_TRUE(before.state() == "RUNNING" || before.state() == "PAUSED")
        << before.state() << ": it must still be live when killed";
    ASSERT_GT(before.pid(), 0);
    kill(static_cast<pid_t>(before.pid()), SIGKILL);
    // Its retry waits for the back-off to pass on the daemon's clock.
    ASSERT_EQ(WaitForRetry(tasks(), info.id(), 1, kSideTaskGuard).state(), "SUBMITTED");
    fake_env_.Advance(options_.retry_backoff);
    v1::TaskInfo after = WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard);
    std::string stderr_text = FileText(task_dir + "/stderr.log");
    ASSERT_EQ(after.state(), "FINISHED")
        << after.message() << "; steps " << after.steps() << ", estimate "
        << after.step_estimate_ns() << " ns; stderr tail:\n"
        << stderr_text.substr(stderr_text.size() > 600 ? stderr_text.size() - 600 : 0);
    EXPECT_EQ(after.attempts(), 2);
    EXPECT_NE(FileText(task_dir + "/stderr.log").find("resumed from checkpoint"), std::string::npos);
    std::string expected = FileText(ref + "/" + c.result);
    std::string got = c.result == "stdout" ? FileText(task_dir + "/stdout.log")
                                           : FileText(run + "/" + c.result);
    ASSERT_FALSE(expected.empty());
    if (c.result == "stdout") expected = expected.substr(0, expected.find('\n') + 1);
    EXPECT_NE(got.find(expected), std::string::npos) << "expected " << expected << "got " << got;
  }
  unsetenv("FREERIDE_CHECKPOINT_INTERVAL_MS");
}

// `freeride task-profile` records a task run alone; `submit --profile`
// turns that into the task's command, memory request, step-time hint and
// alone rate, and the daemon places by that memory.
TEST_F(DaemonIntegration, TaskProfilesDriveSubmitAndPlacement) {
  options_.lanes = {{0, "gpu:0", 4ULL << 30, -1}, {1, "gpu:1", 40ULL << 30, -1}};
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const std::string d = dir_.path(), cli = std::string(FREERIDE_BIN);
  std::string profile = d + "/sgd.profile.json";
  ASSERT_EQ(std::system((cli + " task-profile --seconds 0.5 -o " + profile + " -- " + SGD_BIN +
                         " --generate-ratings 100000 --device cpu --epochs 100000 --step-ms 1 "
                         "> " + d + "/tp.out 2> " + d + "/tp.err")
                            .c_str()),
            0)
      << FileText(d + "/tp.err");
  EXPECT_NE(FileText(d + "/tp.err").find("alone rate"), std::string::npos);
  nlohmann::json p = nlohmann::json::parse(FileText(profile));
  EXPECT_EQ(p["unit"], "ratings");
  EXPECT_GT(p["rate_per_s"].get<double>(), 1e5);
  EXPECT_GE(p["seconds"].get<double>(), 0.5);
  // Steps are sized to --step-ms 1 of work; on a loaded machine they take
  // longer, never less (no upper bound: it would measure the machine).
  double p99 = p["step_ms"]["p99"];
  EXPECT_GT(p99, 0.3);
  EXPECT_EQ(p["command"][0], SGD_BIN) << "without --standalone";
  EXPECT_EQ(p["command"].size(), 9u);

  // Submit with only the profile: its command, and p99 as the step hint.
  auto submit = [&](const std::string& args) {
    return RunShell(cli + " submit --socket " + options_.socket_path + " " + args, d);
  };
  ShellResult r = submit("--name profiled --json --profile " + profile);
  ASSERT_EQ(r.status, 0) << r.err;
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Get(0, "profiled", &info).ok());
  EXPECT_EQ(info.spec().command(0), SGD_BIN);
  EXPECT_EQ(info.spec().step_time_hint_ns(), static_cast<int64_t>(p99 * 1e6));
  EXPECT_DOUBLE_EQ(info.spec().alone_rate_per_s(), p["rate_per_s"].get<double>());
  EXPECT_EQ(info.spec().memory_bytes(), 0u) << "a CPU run uses no device memory";
  tasks()->Cancel(info.id(), "", &info);

  // A GPU profile of 10 GiB: placed on the lane that has room for it, with
  // a 10% margin; one of 50 GiB is refused with the reason.
  p["process_gpu_bytes"] = 10ULL << 30;
  std::ofstream(d + "/big.json") << p.dump();
  r = submit("--name big --profile " + d + "/big.json");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(tasks()->Get(0, "big", &info).ok());
  EXPECT_EQ(info.lane(), 1);
  EXPECT_EQ(info.spec().memory_bytes(), 11ULL << 30);
  tasks()->Cancel(info.id(), "", &info);
  p["process_gpu_bytes"] = 50ULL << 30;
  std::ofstream(d + "/huge.json") << p.dump();
  r = submit("--name huge --profile " + d + "/huge.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("55.00 GiB"), std::string::npos) << r.err;

  // Bad profiles are named and explained.
  std::ofstream(d + "/bad.json") << "{\"freeride_task_profile\": 1, \"command\": [\"x\"]}";
  r = submit("--profile " + d + "/bad.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.json: missing \"unit\""), std::string::npos) << r.err;
  r = submit("--profile " + d + "/tp.out");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a FreeRide task profile"), std::string::npos) << r.err;
  // A command that is not an SDK task gives no profile.
  r = RunShell(cli + " task-profile --seconds 0.2 -o " + d + "/x.json -- /bin/true", d);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no standalone result line"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(d + "/x.json"));
}

TEST_F(DaemonIntegration, CancelStopsARunningTaskAndAQueuedOne) {
  options_.max_resident_per_lane = 1;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo running, queued, out;
  ASSERT_TRUE(tasks()
                  ->Submit(MakeSpec("long", {COUNT_TASK_BIN, "--total", "100000000"}), &running)
                  .ok());
  ASSERT_TRUE(tasks()->Submit(MakeSpec("waiting", {COUNT_TASK_BIN}), &queued).ok());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  ASSERT_EQ(WaitForState(tasks(), running.id(), "PAUSED", kSideTaskGuard).state(), "PAUSED");
  ASSERT_TRUE(tasks()->Cancel(0, "waiting", &out).ok());
  EXPECT_EQ(out.state(), "CANCELLED") << "never launched: cancelled at once";
  ASSERT_TRUE(tasks()->Cancel(running.id(), "", &out).ok());
  v1::TaskInfo cancelled = WaitForState(tasks(), running.id(), "CANCELLED", kSideTaskGuard);
  EXPECT_EQ(cancelled.state(), "CANCELLED");
  EXPECT_EQ(tasks()->Cancel(running.id(), "", &out).code, ErrorCode::kFailedPrecondition);
}

TEST_F(DaemonIntegration, NamesFindTheLiveTaskElseTheNewestEnded) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo first, second, third, found;
  ASSERT_TRUE(tasks()->Submit(MakeSpec("same", {COUNT_TASK_BIN}), &first).ok());
  ASSERT_TRUE(tasks()->Cancel(first.id(), "", &found).ok());
  // A launched task ends after its process does; the name is free then.
  ASSERT_EQ(WaitForState(tasks(), first.id(), "CANCELLED", kSideTaskGuard).state(), "CANCELLED");
  ASSERT_TRUE(tasks()->Submit(MakeSpec("same", {COUNT_TASK_BIN}), &second).ok());
  ASSERT_TRUE(tasks()->Cancel(second.id(), "", &found).ok());
  ASSERT_EQ(WaitForState(tasks(), second.id(), "CANCELLED", kSideTaskGuard).state(), "CANCELLED");
  ASSERT_TRUE(tasks()->Get(0, "same", &found).ok());
  EXPECT_EQ(found.id(), second.id()) << "all ended: the newest";
  ASSERT_TRUE(tasks()->Submit(MakeSpec("same", {COUNT_TASK_BIN}), &third).ok());
  ASSERT_TRUE(tasks()->Get(0, "same", &found).ok());
  EXPECT_EQ(found.id(), third.id()) << "the one still in flight";
}

TEST_F(DaemonIntegration, SocketIsPrivateAndASecondDaemonIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  struct stat st;
  ASSERT_EQ(stat(options_.socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, getuid());
  Daemon second(options_);
  std::string error;
  EXPECT_FALSE(second.Start(&error));
  EXPECT_NE(error.find(fmt::format("in use by another daemon (pid {})", getpid())), std::string::npos)
      << error;
  DaemonOptions other = CpuOptions(dir_);
  other.state_dir = dir_.path() + "/state2";
  Daemon third(other);
  EXPECT_FALSE(third.Start(&error));
  EXPECT_NE(error.find("another daemon is listening"), std::string::npos) << error;
}

// `freeride env`: what a trainer needs to join this daemon, for a shell to
// eval (freeride-slurm run uses it): the socket, and the MPS server its GPU
// lanes' tasks run under, only when there is one.
TEST_F(DaemonIntegration, EnvNamesTheSocketAndTheMpsPipe) {
  options_.mps_pipe_dir = dir_.path() + "/mps pipe's dir";  // quoting is the point
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const std::string cli = std::string(FREERIDE_BIN);
  ShellResult r = RunShell(cli + " env --socket " + options_.socket_path, dir_.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, fmt::format("export FREERIDE_SOCKET='{}'\nexport CUDA_MPS_PIPE_DIRECTORY='{}/mps "
                               "pipe'\\''s dir'\n",
                               options_.socket_path, dir_.path()));
  // Evaluated by a shell, it gives back the paths as they are.
  ShellResult shell = RunShell("eval \"$(" + cli + " env --socket " + options_.socket_path +
                                   ")\" && printf '%s|%s' \"$FREERIDE_SOCKET\" \"$CUDA_MPS_PIPE_DIRECTORY\"",
                               dir_.path());
  EXPECT_EQ(shell.out, options_.socket_path + "|" + options_.mps_pipe_dir);
  // No daemon there: it fails, saying so, and prints nothing to eval.
  ShellResult none = RunShell(cli + " env --socket " + dir_.path() + "/none.sock", dir_.path());
  EXPECT_NE(none.status, 0);
  EXPECT_EQ(none.out, "");
  EXPECT_NE(none.err.find("freeride env:"), std::string::npos) << none.err;
}

// ---------------------------------------------------------------------------
// TCP: only with a token, which every TCP request must carry.

TEST(DaemonTcp, RequestsWithoutTheTokenAreRefusedAndTheSocketNeedsNone) {
  TempDir dir;
  DaemonOptions options = CpuOptions(dir);
  options.listen_address = "127.0.0.1:0";
  std::string error;
  {
    Daemon tokenless(options);
    EXPECT_FALSE(tokenless.Start(&error)) << "TCP without a token must not start";
    EXPECT_NE(error.find("token"), std::string::npos) << error;
  }
  options.token = "0123456789abcdef0123456789abcdef";
  Daemon daemon(options);
  ASSERT_TRUE(daemon.Start(&error)) << error;
  ASSERT_GT(daemon.tcp_port(), 0);

  auto stats_with = [&](const std::string& token, bool over_tcp) {
    DaemonEndpoint endpoint;
    endpoint.socket_path = options.socket_path;
    if (over_tcp) endpoint.server = "127.0.0.1:" + std::to_string(daemon.tcp_port());
    endpoint.token = token;
    return StatsCode(endpoint);
  };
  EXPECT_EQ(stats_with(options.token, true), grpc::StatusCode::OK);
  EXPECT_EQ(stats_with("", true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stats_with("0123456789abcdef0123456789abcdeX", true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stats_with("short", true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stats_with("", false), grpc::StatusCode::OK) << "the 0600 socket is the owner's";

  // A refused Submit changes nothing.
  DaemonEndpoint intruder;
  intruder.server = "127.0.0.1:" + std::to_string(daemon.tcp_port());
  auto stub = ConnectToDaemon(intruder, &error);
  grpc::ClientContext context;
  v1::SubmitRequest request;
  *request.mutable_spec() = MakeSpec("intruder", {"/bin/true"});
  v1::SubmitReply reply;
  EXPECT_EQ(stub->Submit(&context, request, &reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(daemon.tasks()->List(/*include_ended=*/true).empty());
  daemon.Shutdown();
}

// A read-only token reads (stats, the task list, one task) and nothing
// more: a monitor or the cluster view never holds a token that submits.
TEST(DaemonTcp, AReadOnlyTokenReadsButNeverSubmitsOrCancels) {
  TempDir dir;
  DaemonOptions options = CpuOptions(dir);
  options.listen_address = "127.0.0.1:0";
  options.token = "0123456789abcdef0123456789abcdef";
  options.read_token = options.token;
  std::string error;
  {
    Daemon same(options);
    EXPECT_FALSE(same.Start(&error)) << "one token for both rights must be refused";
    EXPECT_NE(error.find("read-only token is the full token"), std::string::npos) << error;
  }
  options.read_token = "fedcba9876543210fedcba9876543210";
  Daemon daemon(options);
  ASSERT_TRUE(daemon.Start(&error)) << error;
  v1::TaskInfo queued;
  // A task that cannot end by itself, so that the writer's Cancel below
  // finds it live: a launched task runs from its exec until the daemon's
  // SIGSTOP, and /bin/true sometimes ended in that window (then FAILED, as
  // an iterative program that exits without the SDK).
  ASSERT_TRUE(daemon.tasks()->Submit(MakeSpec("queued", {"/bin/sleep", "3600"}), &queued).ok());

  DaemonEndpoint reader;
  reader.server = "127.0.0.1:" + std::to_string(daemon.tcp_port());
  reader.token = options.read_token;
  EXPECT_EQ(StatsCode(reader), grpc::StatusCode::OK);
  auto stub = ConnectToDaemon(reader, &error);
  ASSERT_TRUE(stub) << error;
  v1::ListTasksReply list;
  EXPECT_TRUE(ListAllTasks(*stub, reader, true, std::chrono::seconds(10), &list).ok());
  EXPECT_EQ(list.tasks_size(), 1);
  {
    grpc::ClientContext context;
    PrepareContext(&context, reader, std::chrono::seconds(10));
    v1::GetTaskRequest request;
    request.set_id(queued.id());
    v1::TaskInfo info;
    EXPECT_TRUE(stub->GetTask(&context, request, &info).ok());
    EXPECT_TRUE(info.spec().env().empty()) << "environments are never sent over TCP";
  }
  {
    grpc::ClientContext context;
    PrepareContext(&context, reader, std::chrono::seconds(10));
    v1::SubmitRequest request;
    *request.mutable_spec() = MakeSpec("by-a-reader", {"/bin/true"});
    v1::SubmitReply reply;
    grpc::Status status = stub->Submit(&context, request, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(status.error_message().find("may only read"), std::string::npos) << status.error_message();
  }
  {
    grpc::ClientContext context;
    PrepareContext(&context, reader, std::chrono::seconds(10));
    v1::CancelRequest request;
    request.set_id(queued.id());
    v1::CancelReply reply;
    EXPECT_EQ(stub->Cancel(&context, request, &reply).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext context;
    PrepareContext(&context, reader, std::chrono::seconds(10));
    v1::AttachStageRequest request;
    v1::AttachStageReply reply;
    EXPECT_EQ(stub->AttachStage(&context, request, &reply).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  std::vector<v1::TaskInfo> after = daemon.tasks()->List(/*include_ended=*/true);
  ASSERT_EQ(after.size(), 1u) << "the reader's Submit added nothing";
  EXPECT_NE(after[0].state(), "CANCELLED") << "the reader's Cancel changed nothing";

  // The full token still does everything; a wrong one nothing.
  DaemonEndpoint writer = reader;
  writer.token = options.token;
  auto writer_stub = ConnectToDaemon(writer, &error);
  grpc::ClientContext context;
  PrepareContext(&context, writer, std::chrono::seconds(10));
  v1::CancelRequest cancel;
  cancel.set_id(queued.id());
  v1::CancelReply cancelled;
  grpc::Status cancel_status = writer_stub->Cancel(&context, cancel, &cancelled);
  EXPECT_TRUE(cancel_status.ok()) << cancel_status.error_message();
  reader.token = "fedcba9876543210fedcba987654321X";
  EXPECT_EQ(StatsCode(reader), grpc::StatusCode::UNAUTHENTICATED);
  daemon.Shutdown();
}

// TLS through gRPC's credentials: a client that trusts the daemon's CA gets
// through (with the token); one that connects in plain text gets nothing.
TEST(DaemonTcp, TlsCarriesTheTokenAndPlainTextIsNotServed) {
  TempDir dir;
  std::string key = dir.path() + "/key.pem", cert = dir.path() + "/cert.pem";
  ShellResult made = RunShell(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + key + " -out " + cert,
      dir.path());
  ASSERT_EQ(made.status, 0) << "openssl (scripts/install-deps.sh installs it) could not make a "
                                "certificate: " << made.err;
  DaemonOptions options = CpuOptions(dir);
  options.listen_address = "127.0.0.1:0";
  options.token = "0123456789abcdef0123456789abcdef";
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  Daemon daemon(options);
  std::string error;
  ASSERT_TRUE(daemon.Start(&error)) << error;
  auto stats = [&](const std::string& ca) {
    DaemonEndpoint endpoint;
    endpoint.server = "127.0.0.1:" + std::to_string(daemon.tcp_port());
    endpoint.token = options.token;
    endpoint.tls_ca_file = ca;
    return StatsCode(endpoint);
  };
  EXPECT_EQ(stats(cert), grpc::StatusCode::OK);
  EXPECT_NE(stats(""), grpc::StatusCode::OK) << "plain text to a TLS port";
  daemon.Shutdown();

  options.tls_key_file = dir.path() + "/missing.pem";
  Daemon broken(options);
  EXPECT_FALSE(broken.Start(&error));
  EXPECT_NE(error.find("cannot read the TLS certificate"), std::string::npos) << error;
}

// Paths in a spec cannot make the daemon write outside its state
// directory: its files are named by task id, and the channel variables it
// sets win over copies in the spec's environment.
TEST_F(DaemonIntegration, HostileSpecPathsStayInTheStateDirectory) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  std::string outside = dir_.path() + "/outside";
  v1::TaskSpec spec = MakeSpec("../../outside/x", {COUNT_TASK_BIN, "--total", "40", "--step-us", "100"});
  (*spec.mutable_env())["FREERIDE_CHECKPOINT_DIR"] = outside;
  (*spec.mutable_env())["FREERIDE_TASK_SEGMENT"] = outside + "/segment";
  v1::TaskInfo info;
  ASSERT_TRUE(tasks()->Submit(spec, &info).ok());
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  v1::TaskInfo done = WaitForState(tasks(), info.id(), "FINISHED", kSideTaskGuard);
  stage.Stop();
  ASSERT_EQ(done.state(), "FINISHED") << done.message() << done.stderr_tail();
  EXPECT_FALSE(std::filesystem::exists(outside)) << "nothing written where the spec pointed";
  EXPECT_TRUE(std::filesystem::exists(tasks()->task_dir(info.id()) + "/stderr.log"));
  EXPECT_EQ(tasks()->task_dir(info.id()).rfind(options_.state_dir + "/tasks/", 0), 0u);
}

// As root the daemon refuses to start unless told; as anyone else it starts
// without being told.  Whoever runs the test, one of the two is checked.
TEST(DaemonRoot, ARootDaemonNeedsToBeToldSoItsTasksNeverRunAsRootByAccident) {
  TempDir dir;
  std::string cli = std::string(FREERIDE_BIN) + " daemon --cpu-lanes 1 --socket " + dir.path() +
                    "/d.sock --state-dir " + dir.path() + "/state";
  if (geteuid() == 0) {
    ShellResult refused = RunShell("env -u FREERIDE_ALLOW_ROOT " + cli, dir.path());
    EXPECT_EQ(refused.status, 2);
    EXPECT_NE(refused.err.find("every side task would run as root"), std::string::npos) << refused.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/d.sock")) << "nothing was started";
    return;
  }
  // Started in the background, seen to make its socket, then stopped.
  ShellResult started = RunShell(
      "env -u FREERIDE_ALLOW_ROOT " + cli + " & pid=$!; for i in $(seq 100); do "
      "[ -S " + dir.path() + "/d.sock ] && break; sleep 0.05; done; "
      "[ -S " + dir.path() + "/d.sock ]; up=$?; kill $pid; wait $pid; exit $up",
      dir.path());
  EXPECT_EQ(started.status, 0) << started.err;
  EXPECT_EQ(started.err.find("would run as root"), std::string::npos) << started.err;
}

// --lane-cores pins each CPU lane's tasks to the core named for it, and
// refuses a list that does not name one core of this machine per lane.
TEST(DaemonLaneCores, EachLaneGetsTheCoreNamedForItAndBadListsAreRefused) {
  TempDir dir;
  std::string cli = std::string(FREERIDE_BIN) + " daemon --allow-root --cpu-lanes 2 --socket " +
                    dir.path() + "/d.sock --state-dir " + dir.path() + "/state";
  ShellResult short_list = RunShell(cli + " --lane-cores 0", dir.path());
  EXPECT_EQ(short_list.status, 2);
  EXPECT_NE(short_list.err.find("--lane-cores lists 1 core(s) for 2 CPU lane(s)"), std::string::npos)
      << short_list.err;
  ShellResult no_such = RunShell(cli + " --lane-cores 0,100000", dir.path());
  EXPECT_EQ(no_such.status, 2);
  EXPECT_NE(no_such.err.find("'100000' is not a core of this machine"), std::string::npos) << no_such.err;
  ShellResult with_gpus = RunShell(std::string(FREERIDE_BIN) + " daemon --allow-root --gpus 0 "
                                   "--lane-cores 0 --socket " + dir.path() + "/g.sock", dir.path());
  EXPECT_EQ(with_gpus.status, 2);

  // Both lanes on core 0, as the status the daemon reports says.
  ShellResult started = RunShell(
      cli + " --lane-cores 0,0 >/dev/null & pid=$!; for i in $(seq 100); do [ -S " + dir.path() +
          "/d.sock ] && break; sleep 0.05; done; " + FREERIDE_BIN + " status --json --socket " +
          dir.path() + "/d.sock > " + dir.path() + "/status.json; kill $pid; wait $pid",
      dir.path());
  nlohmann::json status = nlohmann::json::parse(FileText(dir.path() + "/status.json"), nullptr, false);
  ASSERT_TRUE(status.is_object()) << FileText(dir.path() + "/status.json") << started.err;
  auto lanes = status["stats"]["lanes"];
  ASSERT_EQ(lanes.size(), 2u) << status.dump();
  for (const auto& lane : lanes) {
    EXPECT_EQ(lane.value("cpu_core", -1), 0) << lane.dump();
    EXPECT_EQ(lane.value("isolation", ""), "ISOLATION_CPU_SCHED_IDLE") << lane.dump();
  }
}

TEST(TokenFile, OnlyPrivateFilesWithLongTokensAreAccepted) {
  TempDir dir;
  std::string path = dir.path() + "/token";
  std::string error;
  EXPECT_FALSE(ReadTokenFile(path, &error));
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;
  WriteFileAtomically(path, "  0123456789abcdef0123  \n");
  chmod(path.c_str(), 0600);
  auto token = ReadTokenFile(path, &error);
  ASSERT_TRUE(token) << error;
  EXPECT_EQ(*token, "0123456789abcdef0123");
  chmod(path.c_str(), 0640);
  EXPECT_FALSE(ReadTokenFile(path, &error));
  EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
  WriteFileAtomically(path, "short\n");
  chmod(path.c_str(), 0600);
  EXPECT_FALSE(ReadTokenFile(path, &error));
  EXPECT_NE(error.find("at least 16"), std::string::npos) << error;
}

// ---------------------------------------------------------------------------
// Crash test: the daemon runs as its own process and is SIGKILLed mid-run.

// Submits over the socket; the call's status, the task in *reply.
grpc::Status SubmitOver(v1::FreeRide::Stub& stub, const v1::TaskSpec& spec, v1::SubmitReply* reply) {
  grpc::ClientContext context;
  SetDeadline(&context, std::chrono::seconds(20));
  v1::SubmitRequest request;
  *request.mutable_spec() = spec;
  return stub.Submit(&context, request, reply);
}

// Waits (up to kSideTaskGuard) until task `id` has made `progress` and saved
// a checkpoint; the task as it was then.
v1::TaskInfo WaitForCheckpoint(v1::FreeRide::Stub& stub, int64_t id, const std::string& checkpoint,
                               double progress) {
  v1::TaskInfo info;
  WaitUntil(
      [&] {
        info = GetTask(stub, id);
        return info.progress() >= progress && std::filesystem::exists(checkpoint);
      },
      kSideTaskGuard);
  return info;
}

// Waits (up to kSideTaskGuard) until task `id` has finished; the task as it
// was last seen.
v1::TaskInfo WaitForFinished(v1::FreeRide::Stub& stub, int64_t id) {
  v1::TaskInfo info;
  WaitUntil(
      [&] {
        info = GetTask(stub, id);
        return info.state() == "FINISHED";
      },
      kSideTaskGuard);
  return info;
}

// (Re)starts the daemon process on `options` with one resident task per
// lane, and connects *stub to it; the caller SIGKILLs it as the test needs.
::testing::AssertionResult StartAndConnect(const DaemonOptions& options, pid_t* daemon,
                                           std::unique_ptr<v1::FreeRide::Stub>* stub) {
  *daemon = StartDaemonProcess(options, {"--max-resident", "1"});
  std::string error;
  *stub = ConnectToDaemon(options.socket_path, &error);
  if (!*stub) return ::testing::AssertionFailure() << "no daemon to connect to: " << error;
  return ::testing::AssertionSuccess();
}

TEST(DaemonCrash, SigkilledDaemonRecoversItsQueueAndResumesFromCheckpoints) {
  TempDir dir;
  DaemonOptions options = CpuOptions(dir);
  setenv("FREERIDE_CHECKPOINT_INTERVAL_MS", "50", 1);
  pid_t daemon;
  std::unique_ptr<v1::FreeRide::Stub> stub;
  ASSERT_TRUE(StartAndConnect(options, &daemon, &stub));
  auto submit = [&](const v1::TaskSpec& spec) {
    v1::SubmitReply reply;
    EXPECT_TRUE(SubmitOver(*stub, spec, &reply).ok());
    return reply.task().id();
  };
  int64_t counter = submit(MakeSpec("counter", {COUNT_TASK_BIN, "--total", "600", "--step-us", "300"}));
  int64_t queued = submit(MakeSpec("queued", {COUNT_TASK_BIN, "--total", "5", "--step-us", "100"}));
  ScriptedStage stage(options.socket_path, {8 * kMillisecond}, 2 * kMillisecond);

  // Let it make progress and checkpoint at least once.
  std::string checkpoint = options.state_dir + "/tasks/" + std::to_string(counter) + "/checkpoint/checkpoint";
  v1::TaskInfo before = WaitForCheckpoint(*stub, counter, checkpoint, 100);
  ASSERT_TRUE(std::filesystem::exists(checkpoint)) << "state " << before.state();
  ASSERT_EQ(GetTask(*stub, queued).state(), "SUBMITTED") << "one resident task per lane";
  int task_pid = static_cast<int>(before.pid());
  ASSERT_GT(task_pid, 0);

  kill(daemon, SIGKILL);
  waitpid(daemon, nullptr, 0);
  // The task dies with its daemon (PR_SET_PDEATHSIG) rather than running on
  // unsupervised.
  WaitUntil([&] { return !ProcessAlive(task_pid); });
  EXPECT_FALSE(ProcessAlive(task_pid));

  ASSERT_TRUE(StartAndConnect(options, &daemon, &stub));
  v1::TaskInfo recovered = GetTask(*stub, counter);
  EXPECT_NE(recovered.state(), "") << "the task is known after the restart";
  EXPECT_GE(recovered.attempts(), 1);
  EXPECT_EQ(GetTask(*stub, queued).spec().name(), "queued") << "the queue is back";

  v1::TaskInfo finished = WaitForFinished(*stub, counter);
  ASSERT_EQ(finished.state(), "FINISHED") << finished.message();
  EXPECT_EQ(finished.attempts(), 2) << "relaunched once";
  std::string task_dir = options.state_dir + "/tasks/" + std::to_string(counter);
  std::string text = FileText(task_dir + "/stderr.log");
  EXPECT_NE(text.find("resumed from checkpoint"), std::string::npos) << text;
  // Steps done before the crash are not redone: the counter resumed, so the
  // second attempt needed fewer than all 600 steps.
  EXPECT_NE(FileText(task_dir + "/stdout.log").find("counted to 600"), std::string::npos);
  EXPECT_LT(finished.progress(), 600 + before.progress() + 1);

  EXPECT_EQ(WaitForFinished(*stub, queued).state(), "FINISHED");
  stage.Stop();
  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "clean shutdown on SIGTERM";
  unsetenv("FREERIDE_CHECKPOINT_INTERVAL_MS");
}


// ---------------------------------------------------------------------------
// The journal under hostile conditions (issue 23, items 2, 3, 4 and 10): a
// full or read-only disk, a damaged journal, a lost one.

// A small file system mounted over `dir` (a tmpfs), when this process may
// mount; unmounted on destruction.
class SmallFilesystem {
 public:
  SmallFilesystem(std::string dir, const std::string& options) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~SmallFilesystem() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Fills the file system of `dir` with a file, leaving about `leave` bytes.
void FillFilesystem(const std::string& dir, uint64_t leave) {
  struct statvfs fs;
  ASSERT_EQ(statvfs(dir.c_str(), &fs), 0);
  uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  ASSERT_GT(free_bytes, leave);
  std::ofstream filler(dir + "/filler", std::ios::binary);
  std::string block(4096, 'f');
  for (uint64_t written = 0; written + leave < free_bytes; written += block.size())
    filler.write(block.data(), static_cast<std::streamsize>(block.size()));
}

v1::TaskSpec QueuedCounterSpec(const std::string& name, size_t padding = 0) {
  v1::TaskSpec spec = MakeSpec(name, {COUNT_TASK_BIN, "--total", "100000000"});
  if (padding) (*spec.mutable_env())["PAD"] = std::string(padding, 'x');
  return spec;
}

// Item 2: an error of the journal's database fails the submission, with the
// reason; the task is not acknowledged and does not come back later.
TEST_F(DaemonIntegration, ASubmissionTheJournalCannotStoreIsNotAcknowledged) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo kept, refused;
  ASSERT_TRUE(tasks()->Submit(QueuedCounterSpec("kept"), &kept).ok());
  std::string journal = options_.state_dir + "/journal.db";
  ExecSql(journal,
          "CREATE TRIGGER refuse BEFORE INSERT ON tasks WHEN NEW.name = 'refused' "
          "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;");
  Status status = tasks()->Submit(QueuedCounterSpec("refused"), &refused);
  EXPECT_FALSE(status.ok()) << "acknowledged, yet not stored";
  EXPECT_NE(status.message.find("injected failure"), std::string::npos) << status.message;
  EXPECT_NE(status.message.find("not submitted"), std::string::npos) << status.message;
  v1::TaskInfo found;
  EXPECT_EQ(tasks()->Get(0, "refused", &found).code, ErrorCode::kNotFound);
  ExecSql(journal, "DROP TRIGGER refuse;");
  daemon_->Shutdown();
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  EXPECT_TRUE(tasks()->Get(kept.id(), "", &found).ok());
  EXPECT_EQ(tasks()->Get(0, "refused", &found).code, ErrorCode::kNotFound);
  v1::TaskInfo next;
  ASSERT_TRUE(tasks()->Submit(QueuedCounterSpec("next"), &next).ok());
  EXPECT_GT(next.id(), kept.id());
}

// Item 2: the state directory on a small file system that fills up (a 2 MiB
// tmpfs where mounting is allowed, else a file size limit on the daemon).
// Submissions are refused with the reason once the journal cannot grow, and
// after a SIGKILL every acknowledged one is there.
TEST(DaemonJournal, AFullDiskRefusesSubmissionsAndEveryAcknowledgedOneSurvivesASigkill) {
  TempDir dir;
  DaemonOptions options = CpuOptions(dir);
  SmallFilesystem small(options.state_dir, "size=2m,mode=0700");
  pid_t daemon = StartDaemonProcess(options, {"--max-resident", "1"}, 0, small.mounted() ? 0 : 1 << 20);
  if (small.mounted()) {
    ASSERT_NO_FATAL_FAILURE(FillFilesystem(options.state_dir, 192 << 10));
  }
  std::string error;
  auto stub = ConnectToDaemon(options.socket_path, &error);
  ASSERT_NE(stub, nullptr) << error;
  std::vector<int64_t> acknowledged;
  std::string refusal;
  for (int i = 0; i < 2000 && refusal.empty(); ++i) {
    v1::SubmitReply reply;
    grpc::Status status = SubmitOver(*stub, QueuedCounterSpec("t" + std::to_string(i), 2048), &reply);
    if (status.ok()) acknowledged.push_back(reply.task().id());
    else refusal = status.error_message();
  }
  ASSERT_FALSE(refusal.empty()) << acknowledged.size() << " submissions acknowledged on a full disk";
  EXPECT_NE(refusal.find("not submitted"), std::string::npos) << refusal;
  if (small.mounted()) {
    EXPECT_TRUE(refusal.find("full") != std::string::npos ||
                refusal.find("No space left") != std::string::npos)
        << refusal;
  }
  kill(daemon, SIGKILL);
  waitpid(daemon, nullptr, 0);
  std::filesystem::remove(options.state_dir + "/filler");

  daemon = StartDaemonProcess(options, {"--max-resident", "1"});
  ASSERT_TRUE(ProcessAlive(daemon)) << FileText(options.state_dir + ".log");
  stub = ConnectToDaemon(options.socket_path, &error);
  ASSERT_NE(stub, nullptr) << error;
  for (int64_t id : acknowledged) EXPECT_EQ(GetTask(*stub, id).id(), id) << "task " << id << " lost";
  grpc::ClientContext context;
  SetDeadline(&context, std::chrono::seconds(20));
  v1::ListTasksRequest list;
  list.set_include_ended(true);
  v1::ListTasksReply listed;
  ASSERT_TRUE(stub->ListTasks(&context, list, &listed).ok());
  EXPECT_EQ(static_cast<size_t>(listed.tasks_size()), acknowledged.size())
      << "only the acknowledged tasks exist";
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
}

// Items 2 and 10: a read-only state directory is named as such, not taken
// for one held by another daemon.  A read-only bind mount where mounting is
// allowed (root ignores permission bits), else mode 0500.
TEST(DaemonJournal, AReadOnlyStateDirectoryIsReportedAsSuch) {
  TempDir dir;
  DaemonOptions options = CpuOptions(dir);
  {
    Daemon daemon(options);
    std::string error;
    ASSERT_TRUE(daemon.Start(&error)) << error;
    v1::TaskInfo info;
    ASSERT_TRUE(daemon.tasks()->Submit(QueuedCounterSpec("before"), &info).ok());
    daemon.Shutdown();
  }
  bool mounted = mount(options.state_dir.c_str(), options.state_dir.c_str(), nullptr, MS_BIND,
                       nullptr) == 0;
  if (mounted) {
    ASSERT_EQ(mount(nullptr, options.state_dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY,
                    nullptr), 0) << std::strerror(errno);
  } else {
    ASSERT_NE(geteuid(), 0u) << "root that cannot mount cannot make a directory read-only";
    chmod(options.state_dir.c_str(), 0500);
  }
  Daemon daemon(options);
  std::string error;
  EXPECT_FALSE(daemon.Start(&error));
  EXPECT_EQ(error.find("another daemon"), std::string::npos) << error;
  EXPECT_NE(error.find(mounted ? "Read-only file system" : "Permission denied"), std::string::npos)
      << error;
  if (mounted) umount2(options.state_dir.c_str(), MNT_DETACH);
  else chmod(options.state_dir.c_str(), 0700);
}

// Item 3: bytes overwritten in the middle of journal.db stop the start with
// the damage named; told to go on, the daemon keeps what it can read and
// gives no id, and no directory, a second time.
TEST_F(DaemonIntegration, AJournalDamagedMidFileStopsTheStartAndNoIdIsReused) {
  options_.max_resident_per_lane = 1;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    v1::TaskInfo info;
    ASSERT_TRUE(tasks()->Submit(QueuedCounterSpec("t" + std::to_string(i), 6000), &info).ok());
    ids.push_back(info.id());
  }
  ASSERT_EQ(WaitUntilResident(ids[0]).state(), "PAUSED");
  daemon_->Shutdown();
  daemon_.reset();
  std::string journal = options_.state_dir + "/journal.db";
  uint64_t size = std::filesystem::file_size(journal);
  ASSERT_NO_FATAL_FAILURE(OverwriteBytes(journal, size / 2 / 4096 * 4096, 4096));

  Daemon refused(options_);
  std::string error;
  EXPECT_FALSE(refused.Start(&error)) << "started over a damaged journal";
  EXPECT_NE(error.find("damaged"), std::string::npos) << error;
  EXPECT_NE(error.find("--accept-journal-loss"), std::string::npos) << error;
  refused.Shutdown();

  options_.accept_journal_loss = true;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo fresh, found;
  ASSERT_TRUE(tasks()->Submit(QueuedCounterSpec("fresh"), &fresh).ok());
  EXPECT_GT(fresh.id(), ids.back()) << "an id given before the damage is given again";
  ASSERT_TRUE(tasks()->Get(fresh.id(), "", &found).ok());
  EXPECT_EQ(found.spec().name(), "fresh");
  for (int64_t id : ids) {
    if (tasks()->Get(id, "", &found).ok()) continue;
    EXPECT_TRUE(std::filesystem::exists(tasks()->task_dir(id) + "/orphaned"))
        << "the directory of lost task " << id << " is marked";
  }
}

// Item 4: a journal deleted or emptied while the task directories stay is
// not started over silently; told to go on, the daemon gives new tasks new
// ids, and no new task resumes an old task's checkpoint.
TEST_F(DaemonIntegration, ALostJournalIsNotStartedOverAndNoCheckpointIsReused) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  int64_t old_id = SubmitSleepingCounter(300);
  ASSERT_GT(old_id, 0);
  {
    // One step in a bubble: the lane has then let the task go (an attached
    // task is held to bubbles until the end of the bubble it attached in, and
    // a held task is terminated at shutdown, not asked to checkpoint).
    ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
    v1::TaskInfo stepped = WaitForTask(
        tasks(), old_id, [](const v1::TaskInfo& info) { return info.steps() > 0; }, kSideTaskGuard);
    ASSERT_GT(stepped.steps(), 0u) << stepped.state() << " " << stepped.message();
  }
  daemon_->Shutdown();  // the task checkpoints as it stops
  daemon_.reset();
  std::string checkpoint = options_.state_dir + "/tasks/" + std::to_string(old_id) + "/checkpoint/checkpoint";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  std::string journal = options_.state_dir + "/journal.db";
  for (bool emptied : {false, true}) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(journal + suffix);
    if (emptied) std::ofstream(journal).close();
    Daemon refused(options_);
    std::string error;
    EXPECT_FALSE(refused.Start(&error)) << "started over a lost journal (emptied: " << emptied << ")";
    EXPECT_NE(error.find("--accept-journal-loss"), std::string::npos) << error;
    refused.Shutdown();
  }
  options_.accept_journal_loss = true;
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  int64_t new_id = SubmitSleepingCounter(300);
  EXPECT_GT(new_id, old_id);
  EXPECT_EQ(FileText(tasks()->task_dir(new_id) + "/stderr.log").find("resumed from checkpoint"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(checkpoint)) << "the old task's files are kept";
  EXPECT_TRUE(std::filesystem::exists(tasks()->task_dir(old_id) + "/orphaned"));
}

// Item 4: after a SIGKILL, the last commits are in journal.db-wal; a deleted
// or damaged write-ahead log loses them, and the next start says so.
TEST(DaemonJournal, ALostOrDamagedWriteAheadLogStopsTheStart) {
  for (bool deleted : {true, false}) {
    TempDir dir;
    DaemonOptions options = CpuOptions(dir);
    pid_t daemon = StartDaemonProcess(options, {"--max-resident", "1"});
    std::string error;
    auto stub = ConnectToDaemon(options.socket_path, &error);
    ASSERT_NE(stub, nullptr) << error;
    for (int i = 0; i < 5; ++i) {
      v1::SubmitReply reply;
      ASSERT_TRUE(SubmitOver(*stub, QueuedCounterSpec("t" + std::to_string(i)), &reply).ok());
    }
    kill(daemon, SIGKILL);
    waitpid(daemon, nullptr, 0);
    std::string wal = options.state_dir + "/journal.db-wal";
    uint64_t size = std::filesystem::file_size(wal);
    ASSERT_GT(size, 8192u);
    if (deleted) std::filesystem::remove(wal);
    else ASSERT_NO_FATAL_FAILURE(OverwriteBytes(wal, size / 2, 64));
    Daemon refused(options);
    EXPECT_FALSE(refused.Start(&error)) << "started over a " << (deleted ? "deleted" : "damaged")
                                        << " write-ahead log";
    EXPECT_NE(error.find("--accept-journal-loss"), std::string::npos) << error;
    refused.Shutdown();
  }
}


// Item 10: a lane whose /dev/shm segment is deleted (systemd's RemoveIPC)
// makes it again; the stage and the task map it anew and work goes on.
TEST_F(DaemonIntegration, ADeletedLaneSegmentIsMadeAgainAndTheLaneGoesOn) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  int64_t id = SubmitSleepingCounter(200);
  ASSERT_GT(id, 0);
  ScriptedStage stage(options_.socket_path, {5 * kMillisecond}, 2 * kMillisecond);
  v1::TaskInfo info;
  auto progress = [&] {
    tasks()->Get(id, "", &info);
    return info.progress();
  };
  WaitUntil([&] { return progress() >= 5; }, kSideTaskGuard);
  ASSERT_GE(progress(), 5) << "the task runs before the deletion";
  std::string segment = LaneSegmentPath(options_.socket_path, 0);
  ASSERT_EQ(unlink(segment.c_str()), 0);
  // The lane, the stage and the task each look once a second.  The lane
  // makes the segment again; the stage has moved to it once marks appear
  // there.  From then on the old mapping gets no marks, so the task
  // progresses only if it and the lane serve bubbles on the new segment.
  // The file appears before the lane has written its header: open once it is whole.
  LaneSegment remade;
  std::string error;
  WaitUntil([&] { return remade.Open(segment, /*writable=*/false, &error); });
  ASSERT_TRUE(remade.is_open()) << "the lane did not make its segment again: " << error;
  const uint32_t first_seq = remade.layout()->bubble_seq.load();
  WaitUntil([&] { return remade.layout()->bubble_seq.load() != first_seq; });
  ASSERT_NE(remade.layout()->bubble_seq.load(), first_seq) << "the stage did not move to the new segment";
  // A step that began on the old mapping may still end: progress must go
  // beyond it.
  const double before = progress() + 1;
  WaitUntil([&] { return progress() > before; }, kSideTaskGuard);
  EXPECT_GT(progress(), before) << "the lane went silent after its segment was deleted";
  stage.Stop();
  bool logged = false;
  for (const auto& e : ReadJsonLines(options_.state_dir + "/events.jsonl"))
    logged |= e["type"] == "lane_segment" && e["event"] == "remade";
  EXPECT_TRUE(logged) << "the deletion is logged";
}

// Item 10: a clean shutdown removes the segments of tasks it had to kill.
TEST_F(DaemonIntegration, ACleanShutdownLeavesNoTaskSegmentBehind) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  v1::TaskInfo info;
  // Never reads its segment, so it ignores the stop command and is killed.
  ASSERT_TRUE(tasks()->Submit(MakeSpec("deaf", {"/bin/sleep", "1000"}), &info).ok());
  std::string segment = TaskSegmentPath(options_.socket_path, info.id());
  WaitUntil([&] {
    tasks()->Get(info.id(), "", &info);
    return info.pid() != 0 && std::filesystem::exists(segment);
  });
  ASSERT_GT(info.pid(), 0);
  ASSERT_TRUE(std::filesystem::exists(segment));
  daemon_->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(segment)) << segment << " left behind";
}

// Item 9: after a SIGKILL, a task resumed from its checkpoint restarts from
// the checkpoint's progress; the steps it redoes count once, so its status,
// its final count and the report agree with the work there is.
TEST(DaemonCrash, ProgressRestartsFromTheCheckpointAndRedoneWorkCountsOnce) {
  TempDir dir;
  DaemonOptions options = CpuOptions(dir);
  setenv("FREERIDE_CHECKPOINT_INTERVAL_MS", "50", 1);
  pid_t daemon;
  std::unique_ptr<v1::FreeRide::Stub> stub;
  ASSERT_TRUE(StartAndConnect(options, &daemon, &stub));
  v1::SubmitReply reply;
  ASSERT_TRUE(SubmitOver(*stub, MakeSpec("counter", {COUNT_TASK_BIN, "--total", "600", "--step-us", "300"}),
                         &reply).ok());
  int64_t id = reply.task().id();
  ScriptedStage stage(options.socket_path, {8 * kMillisecond}, 2 * kMillisecond);
  std::string checkpoint = options.state_dir + "/tasks/" + std::to_string(id) + "/checkpoint/checkpoint";
  WaitForCheckpoint(*stub, id, checkpoint, 200);
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  kill(daemon, SIGKILL);
  waitpid(daemon, nullptr, 0);
  double at_checkpoint = std::stod(FileText(checkpoint));

  ASSERT_TRUE(StartAndConnect(options, &daemon, &stub));
  EXPECT_GE(GetTask(*stub, id).progress(), at_checkpoint)
      << "after the restart, the task shows at least the work its checkpoint holds";
  v1::TaskInfo finished = WaitForFinished(*stub, id);
  stage.Stop();
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  unsetenv("FREERIDE_CHECKPOINT_INTERVAL_MS");
  ASSERT_EQ(finished.state(), "FINISHED") << finished.message();
  EXPECT_DOUBLE_EQ(finished.progress(), 600) << "the final count is the task's 600";
  EXPECT_EQ(finished.steps(), 600u);
  ShellResult report = RunShell(std::string(FREERIDE_BIN) + " report --json " + options.state_dir,
                                dir.path());
  ASSERT_EQ(report.status, 0) << report.err;
  auto json = nlohmann::json::parse(report.out);
  bool found = false;
  for (const auto& task : json["tasks"]) {
    if (task["id"] != id) continue;
    found = true;
    EXPECT_DOUBLE_EQ(task["units"].get<double>(), 600) << "the report counts redone work once";
  }
  EXPECT_TRUE(found) << report.out;
}

}  // namespace
}  // namespace freeride
