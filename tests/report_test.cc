// `freeride report` and `freeride timeline` against small event logs whose
// figures are computed by hand in the comments.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "daemon/event_log.h"
#include "report/event_log_reader.h"
#include "report/repeated_records.h"
#include "report/run_report.h"
#include "report/timeline.h"
#include "test_util.h"

namespace freeride::report {
namespace {

constexpr int64_t kMs = 1'000'000;

std::string Bubble(int lane, int slot, int64_t begin_ms, int64_t end_ms, int64_t harvested_ms,
                   int64_t overrun_ms, int steps) {
  return nlohmann::json({{"type", "bubble"}, {"lane", lane}, {"slot", slot}, {"seq", 1},
                         {"begin_ns", begin_ms * kMs}, {"end_ns", end_ms * kMs},
                         {"predicted_end_ns", end_ms * kMs}, {"free_memory_bytes", 1 << 30},
                         {"harvested_ns", harvested_ms * kMs}, {"overrun_ns", overrun_ms * kMs},
                         {"steps", steps}, {"ended_by", "mark"}, {"verdict", "no runnable task"}})
             .dump() + "\n";
}

std::string Step(int lane, int task, int64_t start_ms, int64_t end_ms, double units,
                 int64_t overrun_ms = 0) {
  return nlohmann::json({{"type", "step"}, {"lane", lane}, {"task_id", task}, {"bubble_seq", 1},
                         {"start_ns", start_ms * kMs}, {"end_ns", end_ms * kMs},
                         {"units", units}, {"overrun_ns", overrun_ms * kMs}})
             .dump() + "\n";
}

// Two lanes, three 100 ms iterations each with one 40 ms bubble (slot 0).
// Lane 0 runs task 1 ("pr", 1000 units/s alone): 3 steps of 10 ms, 10 units
// each, per bubble; the last bubble's last step runs 2 ms past its end.
std::string RunLog() {
  std::string log =
      R"({"type":"transition","task_id":1,"name":"pr","lane":0,"from":"","to":"SUBMITTED","reason":"submitted","progress":0,"alone_rate_per_s":1000})"
      "\n";
  for (int i = 0; i < 3; ++i) {
    int64_t t = 100 * i;
    log += Step(0, 1, t + 5, t + 15, 10) + Step(0, 1, t + 15, t + 25, 10);
    log += i < 2 ? Step(0, 1, t + 25, t + 35, 10) : Step(0, 1, t + 32, t + 42, 10, 2);
    log += Bubble(0, 0, t, t + 40, i < 2 ? 30 : 28, i < 2 ? 0 : 2, 3);
    log += Bubble(1, 0, t, t + 40, 0, 0, 0);
  }
  log += R"({"type":"transition","task_id":1,"name":"pr","lane":0,"from":"RUNNING","to":"PAUSED","reason":"bubble ended","progress":90,"unit":"edges"})"
         "\n";
  return log;
}

// The same training without side tasks: 95 ms iterations.
std::string BaselineLog() {
  std::string log;
  for (int i = 0; i < 3; ++i) {
    log += Bubble(0, 0, 95 * i, 95 * i + 35, 0, 0, 0);
    log += Bubble(1, 0, 95 * i, 95 * i + 35, 0, 0, 0);
  }
  return log;
}

TEST(EventLogReader, ReadsTheEventsItNeedsAndCountsBadLines) {
  std::string text = RunLog() + "not json\n" +
                     R"({"type":"bubble","lane":0,"slot":1,"seq":3,"begin_ns":50,"end_ns":10})" "\n" +
                     R"({"type":"daemon","event":"stop"})" "\n" +
                     R"({"type":"step","lane":0,"task_id":1,"start_)";  // cut short by a SIGKILL
  EventLogData log = ParseEventLog(text, "events.jsonl");
  EXPECT_EQ(log.bubbles.size(), 6u);
  EXPECT_EQ(log.steps.size(), 9u);
  EXPECT_EQ(log.lines, 6u + 9u + 2u + 4u);
  EXPECT_EQ(log.skipped_lines, 3u);  // not JSON, end before begin, truncated
  EXPECT_EQ(log.first_skipped_line, 18u);
  ASSERT_EQ(log.tasks.count(1), 1u);
  EXPECT_EQ(log.tasks[1].name, "pr");
  EXPECT_EQ(log.tasks[1].unit, "edges");
  EXPECT_EQ(log.tasks[1].last_state, "PAUSED");
  EXPECT_DOUBLE_EQ(log.tasks[1].progress, 90);
  EXPECT_DOUBLE_EQ(log.tasks[1].alone_rate_per_s, 1000);
  EXPECT_EQ(log.steps[8].overrun_ns, 2 * kMs);
}

// Counts and rates no writer makes negative: a crafted line would give a
// harvest below 0, so it is skipped, and said so, as any other bad line.
TEST(EventLogReader, NegativeUnitsProgressRatesAndTimesAreBadLines) {
  const std::string lines[] = {
      R"({"type":"step","lane":0,"task_id":1,"start_ns":1,"end_ns":2,"units":-5})",
      R"({"type":"step","lane":0,"task_id":1,"start_ns":1,"end_ns":2,"units":1,"overrun_ns":-1})",
      R"({"type":"transition","task_id":1,"to":"PAUSED","progress":9,"alone_rate_per_s":-1000})",
      R"({"type":"bubble","lane":0,"slot":1,"seq":3,"begin_ns":1,"end_ns":10,"harvested_ns":-4})",
      R"({"type":"bubble","lane":0,"slot":1,"seq":3,"begin_ns":1,"end_ns":10,"allowed_ns":-4})",
      R"({"type":"bubble","lane":0,"slot":1,"seq":3,"begin_ns":1,"end_ns":10,"overrun_ns":-4})",
  };
  for (const std::string& line : lines) {
    EventLogData log = ParseEventLog(line + "\n", "events.jsonl");
    EXPECT_EQ(log.skipped_lines, 1u) << line;
    EXPECT_TRUE(log.steps.empty() && log.bubbles.empty() && log.tasks.empty()) << line;
  }
  EventLogData zero = ParseEventLog(
      R"({"type":"step","lane":0,"task_id":1,"start_ns":1,"end_ns":2,"units":0})" "\n", "events.jsonl");
  EXPECT_EQ(zero.skipped_lines, 0u) << "no work is a count";
  EXPECT_EQ(zero.steps.size(), 1u);
  // An older daemon's negative progress (a regex's capture of "3-100") reads
  // as none, keeping the line's states.
  EventLogData older = ParseEventLog(
      R"({"type":"transition","task_id":1,"name":"t","to":"FINISHED","progress":-100})" "\n", "events.jsonl");
  EXPECT_EQ(older.skipped_lines, 0u);
  ASSERT_EQ(older.tasks.count(1), 1u);
  EXPECT_EQ(older.tasks[1].last_state, "FINISHED");
  EXPECT_EQ(older.tasks[1].progress, 0);
}

// A daemon killed mid-write leaves a cut last line; the next daemon's first
// event must not be glued to it.
TEST(EventLogReader, AnEventAfterACutLineStartsALineOfItsOwn) {
  TempDir dir;
  const std::string path = dir.path() + "/events.jsonl";
  std::string whole = Bubble(0, 0, 0, 1, 0, 0, 0);
  std::ofstream(path) << whole << whole.substr(0, whole.size() / 2);  // cut by a SIGKILL
  EventLog log;
  std::string error;
  ASSERT_TRUE(log.Open(path, &error)) << error;
  std::string line = Bubble(0, 0, 2, 3, 0, 0, 0);
  line.pop_back();
  log.EmitLine(std::move(line));
  log.Close();
  auto read = ReadEventLog(path, &error);
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(read->bubbles.size(), 2u);  // the whole first one and the new one
  EXPECT_EQ(read->skipped_lines, 1u);   // only the cut one
}

// The daemon's log rotates by size; what is kept is whole lines, the newest
// ones, and the reader reads the files in the order they were written.
TEST(EventLogReader, ReadsARotatedLogOldestFileFirst) {
  TempDir dir;
  const std::string path = dir.path() + "/events.jsonl";
  EventLog log;
  std::string error;
  ASSERT_TRUE(log.Open(path, &error, {.max_bytes = 4096, .keep = 2})) << error;
  const std::string one = Bubble(0, 0, 0, 1, 0, 0, 0);
  for (int i = 0; i < 200; ++i) {
    std::string line = Bubble(0, 0, i, i + 1, 0, 0, 0);
    line.pop_back();  // EmitLine ends the line itself
    log.EmitLine(std::move(line));
    if (i % 10 == 9) log.Flush();  // batches of 10 lines, as the writer gathers them
  }
  log.Close();
  namespace fs = std::filesystem;
  ASSERT_TRUE(fs::exists(path + ".1"));
  ASSERT_TRUE(fs::exists(path + ".2"));
  EXPECT_FALSE(fs::exists(path + ".3")) << "only 2 older files are kept";
  for (const std::string& rotated : {path + ".1", path + ".2"}) {
    EXPECT_GE(fs::file_size(rotated), 4096u);
    EXPECT_LT(fs::file_size(rotated), 4096u + 10 * one.size()) << "rotated after the batch";
  }
  auto read = ReadEventLog(path, &error);
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(read->skipped_lines, 0u) << "a line was split: " << read->first_skip_reason;
  ASSERT_GT(read->bubbles.size(), 20u);
  EXPECT_LT(read->bubbles.size(), 200u) << "the oldest file was deleted";
  for (size_t i = 1; i < read->bubbles.size(); ++i)
    ASSERT_EQ(read->bubbles[i].begin_ns, read->bubbles[i - 1].begin_ns + kMs) << "at " << i;
  EXPECT_EQ(read->bubbles.back().begin_ns, 199 * kMs);
  // A rotated file named by itself is read alone.
  auto older = ReadEventLog(path + ".1", &error);
  ASSERT_TRUE(older) << error;
  EXPECT_LT(older->bubbles.size(), read->bubbles.size());
  EXPECT_GT(older->bubbles.front().begin_ns, read->bubbles.front().begin_ns);
}

// A bubble written twice (a log with its lines pasted in again) or a record
// overlapping another on its lane is one bubble, and a step written twice one
// step: counting both read as more idle time and work than the run had.
TEST(EventLogReader, CountsARepeatedOrOverlappingBubbleOnce) {
  EventLogData once = ParseEventLog(RunLog(), "once");
  EXPECT_EQ(once.dropped_bubbles, 0u);
  EXPECT_EQ(once.dropped_steps, 0u);
  EXPECT_EQ(DroppedRecordsMessage(once), "");
  EventLogData twice = ParseEventLog(RunLog() + RunLog(), "twice");
  EXPECT_EQ(twice.bubbles.size(), once.bubbles.size());
  EXPECT_EQ(twice.steps.size(), once.steps.size());
  EXPECT_EQ(twice.dropped_bubbles, 6u);
  EXPECT_EQ(twice.dropped_steps, 9u);
  EXPECT_EQ(twice.first_dropped_bubble.lane, 0);
  EXPECT_EQ(twice.first_dropped_bubble.begin_ns, 0);
  RunReport r = ComputeRunReport(twice, nullptr, {});
  EXPECT_EQ(r.total.bubble_ns, 240 * kMs);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 0.5) << "not 100%";
  EXPECT_EQ(r.lanes[0].harvested_ns, 88 * kMs);
  EXPECT_EQ(r.lanes[0].steps, 9u);
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_DOUBLE_EQ(r.tasks[0].units, 90) << "the work, not twice it";
  EXPECT_EQ(r.tasks[0].overrun_ns, 2 * kMs);
  EXPECT_EQ(r.dropped_bubble_records, 6u);
  EXPECT_EQ(r.dropped_step_records, 9u);
  EXPECT_NE(FormatRunReport(r).find(
                "twice: left out 6 bubble record(s) that repeat or overlap in time another on the same "
                "lane (the first: lane 0, slot 0, seq 1, begin_ns 0) and 9 step record(s) identical to "
                "another (the first: task 1, lane 0, start_ns 5000000), as a log with lines in it twice "
                "has: each is counted once"),
            std::string::npos) << FormatRunReport(r);
  EXPECT_EQ(nlohmann::json::parse(RunReportToJson(r))["dropped_bubble_records"], 6);
  EXPECT_EQ(nlohmann::json::parse(RunReportToJson(r))["dropped_step_records"], 9);
  EXPECT_EQ(nlohmann::json::parse(RunReportToJson(ComputeRunReport(once, nullptr, {})))
                ["dropped_bubble_records"], 0);

  // Overlapping (10..50 ms against 0..40 ms) on one lane: the earlier one is
  // kept.  The same times on another lane, and bubbles that only touch, are
  // bubbles of their own.
  EventLogData overlap = ParseEventLog(Bubble(0, 0, 10, 50, 0, 0, 0) + Bubble(0, 0, 0, 40, 0, 0, 0) +
                                           Bubble(1, 0, 0, 40, 0, 0, 0) + Bubble(0, 1, 50, 60, 0, 0, 0) +
                                           Bubble(0, 1, 40, 40, 0, 0, 0) + Bubble(0, 1, 40, 40, 0, 0, 0),
                                       "overlap");
  EXPECT_EQ(overlap.dropped_bubbles, 2u) << "10..50 and the second 40..40";
  ASSERT_EQ(overlap.bubbles.size(), 4u);
  EXPECT_EQ(overlap.bubbles[0].begin_ns, 0) << "file order is kept";
  EXPECT_EQ(overlap.first_dropped_bubble.begin_ns, 10 * kMs);

  // Bubbles a lane missed are closed back to back at one instant (length 0,
  // each its own seq), and the next one may begin then too: all distinct.
  auto numbered = [](uint64_t seq, int64_t begin_ms, int64_t end_ms, int64_t harvested_ms) {
    nlohmann::json b = nlohmann::json::parse(Bubble(0, 0, begin_ms, end_ms, harvested_ms, 0, 0));
    b["seq"] = seq;
    return b.dump() + "\n";
  };
  EventLogData same_instant =
      ParseEventLog(numbered(11, 5, 5, 0) + numbered(13, 5, 5, 0) + numbered(15, 5, 9, 3), "same instant");
  EXPECT_EQ(same_instant.dropped_bubbles, 0u);
  EXPECT_EQ(ComputeRunReport(same_instant, nullptr, {}).lanes[0].harvested_ns, 3 * kMs);
  EXPECT_EQ(ParseEventLog(numbered(15, 5, 9, 3) + numbered(15, 5, 9, 3), "copy").dropped_bubbles, 1u);

  // A bubble closed as stale ends at the dispatcher's time, which the next
  // bubble's begin can precede: not a repeat.
  nlohmann::json stale = nlohmann::json::parse(Bubble(0, 0, 0, 40, 0, 0, 0));
  stale["ended_by"] = "stale";
  EventLogData after_stale = ParseEventLog(stale.dump() + "\n" + Bubble(0, 0, 30, 70, 0, 0, 0), "stale");
  EXPECT_EQ(after_stale.dropped_bubbles, 0u);
  EXPECT_EQ(ParseEventLog(stale.dump() + "\n" + stale.dump() + "\n", "stale").dropped_bubbles, 1u);

  // A state directory outlives a reboot, and CLOCK_MONOTONIC starts again:
  // the same monotonic times a boot later (unix_ns - ts_ns an hour apart)
  // are other bubbles.
  auto at_boot = [](int64_t boot_unix_ns, int64_t begin_ms) {
    nlohmann::json b = nlohmann::json::parse(Bubble(0, 0, begin_ms, begin_ms + 40, 0, 0, 0));
    b["ts_ns"] = (begin_ms + 40) * kMs;
    b["unix_ns"] = boot_unix_ns + (begin_ms + 40) * kMs + 5 * kMs;  // accounted 5 ms after its end
    return b.dump() + "\n";
  };
  constexpr int64_t kBoot = 1'700'000'000'000'000'000, kHour = 3'600'000 * kMs;
  EventLogData reboot = ParseEventLog(at_boot(kBoot, 0) + at_boot(kBoot + kHour, 0) +
                                          at_boot(kBoot + kHour, 20) + at_boot(kBoot, 0),
                                      "reboot");
  EXPECT_EQ(reboot.bubbles.size(), 2u);
  EXPECT_EQ(reboot.dropped_bubbles, 2u) << "one overlap in the second boot, one copy in the first";
}

// Steps before a task's latest start are superseded by it (docs/report.md).
// Of a step written twice the copy after that start is the one kept, so a
// log pasted in twice, or with only its steps pasted in again, values the
// work done once.
TEST(EventLogReader, ARepeatedStepCountsOnceFromTheTasksLatestStart) {
  auto created = [](double progress, int steps) {
    return nlohmann::json({{"type", "transition"}, {"task_id", 1}, {"name", "pr"}, {"lane", 0},
                           {"from", "SUBMITTED"}, {"to", "CREATED"}, {"reason", "launched"},
                           {"progress", progress}, {"steps", steps}, {"alone_rate_per_s", 1000}})
               .dump() + "\n";
  };
  // Two steps of 10 units, a restart from the checkpoint after the first
  // (10 units), the second redone and one more: 30 units in 3 steps.
  const std::string log = created(0, 0) + Step(0, 1, 5, 15, 10) + Step(0, 1, 15, 25, 10) +
                          created(10, 1) + Step(0, 1, 105, 115, 10) + Step(0, 1, 115, 125, 10);
  auto task = [](const EventLogData& l) { return ComputeRunReport(l, nullptr, {}).tasks.at(0); };
  EventLogData once = ParseEventLog(log, "once");
  EXPECT_DOUBLE_EQ(task(once).units, 30);
  EXPECT_EQ(task(once).steps, 3u);
  EventLogData twice = ParseEventLog(log + log, "twice");
  EXPECT_EQ(twice.dropped_steps, 4u);
  EXPECT_EQ(twice.steps.size(), 4u);
  EXPECT_DOUBLE_EQ(task(twice).units, 30);
  EXPECT_EQ(task(twice).steps, 3u);
  EventLogData steps_again = ParseEventLog(log + Step(0, 1, 105, 115, 10) + Step(0, 1, 115, 125, 10), "again");
  EXPECT_EQ(steps_again.dropped_steps, 2u);
  EXPECT_DOUBLE_EQ(task(steps_again).units, 30);
  EXPECT_EQ(task(steps_again).steps, 3u);
  // Steps that differ are not copies, even at the same times.
  EXPECT_EQ(ParseEventLog(Step(0, 1, 5, 15, 10) + Step(0, 1, 5, 15, 11), "differ").dropped_steps, 0u);
}

// One daemon's log of two trainings: the pause between them is nobody's GPU time.
TEST(RunReport, TheSpanOfSeveralRunsLeavesOutThePausesBetweenThem) {
  std::vector<std::pair<int64_t, int64_t>> bubbles;
  for (int64_t run_start : {int64_t{0}, 60'000 * kMs})
    for (int i = 0; i < 3; ++i)
      bubbles.emplace_back(run_start + i * 100 * kMs, run_start + i * 100 * kMs + 40 * kMs);
  EXPECT_EQ(ActiveSpanNs(bubbles, 100 * kMs), 2 * 240 * kMs);
  EXPECT_EQ(ActiveSpanNs(bubbles, 0), 60'000 * kMs + 240 * kMs) << "no period known: first to last";
  EXPECT_EQ(ActiveSpanNs({}, 100 * kMs), 0);
}

TEST(RunReport, FiguresMatchTheHandComputedOnes) {
  EventLogData run = ParseEventLog(RunLog(), "run");
  EventLogData base = ParseEventLog(BaselineLog(), "base");
  ReportOptions options;
  options.gpu_hour_price = 3.6;
  RunReport r = ComputeRunReport(run, &base, options);
  ASSERT_EQ(r.lanes.size(), 2u);
  // Each lane: span 0..240 ms, 3 x 40 ms of bubbles.
  EXPECT_EQ(r.lanes[0].span_ns, 240 * kMs);
  EXPECT_EQ(r.lanes[0].bubble_ns, 120 * kMs);
  EXPECT_EQ(r.lanes[0].harvested_ns, 88 * kMs);
  EXPECT_EQ(r.lanes[0].overrun_ns, 2 * kMs);
  EXPECT_EQ(r.lanes[0].overrun_p99_ns, 2 * kMs);  // nearest rank 3 of {0, 0, 2}
  EXPECT_EQ(r.lanes[0].steps, 9u);
  EXPECT_DOUBLE_EQ(r.lanes[0].iteration_ms, 100);
  EXPECT_EQ(r.lanes[1].harvested_ns, 0);
  EXPECT_EQ(r.total.bubble_ns, 240 * kMs);
  EXPECT_EQ(r.total.overrun_p99_ns, 2 * kMs);  // nearest rank 6 of six bubbles
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 0.5);
  EXPECT_NEAR(r.harvest_ratio_time, 88.0 / 240.0, 1e-12);
  // Overhead: 100 ms against 95 ms.
  ASSERT_TRUE(r.overhead_pct.has_value());
  EXPECT_NEAR(*r.overhead_pct, 100.0 * 5 / 95, 1e-9);
  // Work: 90 units at 1000/s = 0.09 GPU-s.  Slowdown: 2 GPUs x 0.24 s x 5/100
  // = 0.024 GPU-s.  The training alone needs 2 x 0.24 x 0.95 = 0.456 GPU-s.
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_DOUBLE_EQ(r.tasks[0].units, 90);
  EXPECT_EQ(r.tasks[0].unit, "edges");
  EXPECT_NEAR(r.tasks[0].work_gpu_s, 0.09, 1e-12);
  EXPECT_NEAR(r.slowdown_gpu_s, 0.024, 1e-12);
  ASSERT_TRUE(r.cost_saving_pct.has_value());
  EXPECT_NEAR(*r.cost_saving_pct, 100 * (0.09 - 0.024) / 0.456, 1e-9);
  // Money: 0.066 GPU-s at 3.6 per GPU-hour, over 0.24 s of training.
  EXPECT_NEAR(*r.money_saved, 0.066 / 3600 * 3.6, 1e-12);
  EXPECT_NEAR(*r.money_saved_per_hour, 0.066 / 3600 * 3.6 / (0.24 / 3600), 1e-9);
  std::string text = FormatRunReport(r);
  EXPECT_NE(text.find("+5.26%"), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(RunReportToJson(r));
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 0.5);
  EXPECT_NEAR(j["cost_saving_pct"].get<double>(), *r.cost_saving_pct, 1e-9);
}

// A program without the SDK: its steps are spans it was let run (0 units);
// its progress, read from its output by the daemon, comes with its transitions.
TEST(RunReport, AProgramWithoutTheSdkDidTheProgressTheDaemonLoggedForIt) {
  std::string log =
      R"({"type":"transition","task_id":4,"name":"loop","lane":0,"from":"","to":"SUBMITTED","reason":"submitted","progress":0,"alone_rate_per_s":100})"
      "\n"
      R"({"type":"transition","task_id":4,"name":"loop","lane":0,"from":"SUBMITTED","to":"CREATED","reason":"launched","progress":0})"
      "\n";
  for (int i = 0; i < 3; ++i) log += Step(0, 4, 100 * i, 100 * i + 30, 0) + Bubble(0, 0, 100 * i, 100 * i + 40, 30, 0, 1);
  log += R"({"type":"transition","task_id":4,"name":"loop","lane":0,"from":"RUNNING","to":"CANCELLED","reason":"cancelled","progress":1268,"unit":"iterations"})"
         "\n";
  RunReport r = ComputeRunReport(ParseEventLog(log, "run"), nullptr, ReportOptions{});
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_DOUBLE_EQ(r.tasks[0].units, 1268);
  EXPECT_EQ(r.tasks[0].unit, "iterations");
  EXPECT_NEAR(r.tasks[0].work_gpu_s, 12.68, 1e-12);
  // An SDK task's steps and its logged progress agree: counted once.
  r = ComputeRunReport(ParseEventLog(RunLog(), "run"), nullptr, ReportOptions{});
  EXPECT_DOUBLE_EQ(r.tasks[0].units, 90);
  // A rotated log whose window begins mid-run: only the progress made in it.
  std::string rotated =
      R"({"type":"transition","task_id":4,"name":"loop","lane":0,"from":"PAUSED","to":"RUNNING","reason":"bubble","progress":1000})"
      "\n";
  rotated += Step(0, 4, 0, 30, 0) + Bubble(0, 0, 0, 40, 30, 0, 1);
  rotated += R"({"type":"transition","task_id":4,"name":"loop","lane":0,"from":"RUNNING","to":"CANCELLED","reason":"cancelled","progress":1268})"
             "\n";
  r = ComputeRunReport(ParseEventLog(rotated, "run"), nullptr, ReportOptions{});
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_DOUBLE_EQ(r.tasks[0].units, 268);
}

TEST(RunReport, WithoutBaselineOrRatesItSaysWhatIsMissing) {
  std::string log = RunLog();
  log.replace(log.find(R"(,"alone_rate_per_s":1000)"), 24, "");
  RunReport r = ComputeRunReport(ParseEventLog(log, "run"), nullptr, {});
  EXPECT_FALSE(r.overhead_pct.has_value());
  EXPECT_DOUBLE_EQ(r.work_gpu_s, 0);
  ASSERT_TRUE(r.cost_saving_pct.has_value());
  EXPECT_DOUBLE_EQ(*r.cost_saving_pct, 0);
  std::string notes;
  for (const auto& n : r.notes) notes += n + "\n";
  EXPECT_NE(notes.find("no alone rate for pr"), std::string::npos) << notes;
  EXPECT_NE(notes.find("no --baseline"), std::string::npos) << notes;
  // A rate from --alone-rates values the work.
  ReportOptions options;
  options.alone_rates["pr"] = 500;
  r = ComputeRunReport(ParseEventLog(log, "run"), nullptr, options);
  EXPECT_NEAR(r.work_gpu_s, 90.0 / 500, 1e-12);
}

TEST(RunReport, ShowsEachLanesNewestLiveEstimateAndNeverOneItDoesNotHave) {
  auto overhead = [](int lane, int cycles, const char* guard, bool changed, double slowdown) {
    nlohmann::json e = {{"type", "overhead"}, {"lane", lane}, {"cycles", cycles},
                        {"min_cycles", 3}, {"withheld_iterations", 4 * cycles}, {"guard", guard}};
    if (cycles >= 3) {
      e["slowdown"] = slowdown;
      e["slowdown_low"] = slowdown - 0.001;
      e["slowdown_high"] = slowdown + 0.001;
    }
    if (changed) e["guard_from"] = "normal";
    return e.dump() + "\n";
  };
  std::string log = Bubble(0, 0, 0, 40, 0, 0, 0) + overhead(0, 3, "normal", false, 0.02) +
                    overhead(0, 4, "wider-margins", true, 0.02) +
                    overhead(0, 5, "wider-margins", false, 0.003) + overhead(1, 1, "normal", false, 0);
  RunReport r = ComputeRunReport(ParseEventLog(log, "run"), nullptr, {});
  ASSERT_EQ(r.live_overhead.size(), 2u);
  EXPECT_EQ(r.live_overhead[0].cycles, 5);
  ASSERT_TRUE(r.live_overhead[0].slowdown);
  EXPECT_DOUBLE_EQ(*r.live_overhead[0].slowdown, 0.003);
  EXPECT_EQ(r.live_overhead[0].guard_changes, 1u);
  EXPECT_FALSE(r.live_overhead[1].slowdown) << "one cycle is no estimate";
  std::string text = FormatRunReport(r);
  EXPECT_NE(text.find("live estimate, lane 0:   +0.30% [+0.20%, +0.40%] over 5 probe cycles "
                      "(guard wider-margins, 1 change(s))"),
            std::string::npos) << text;
  EXPECT_NE(text.find("live estimate, lane 1:   none yet, 1 of 3 probe cycles"), std::string::npos)
      << text;
  nlohmann::json j = nlohmann::json::parse(RunReportToJson(r));
  EXPECT_TRUE(j["live_overhead"][1]["slowdown"].is_null());
  EXPECT_DOUBLE_EQ(j["live_overhead"][0]["slowdown_high"].get<double>(), 0.004);
}

TEST(RunReport, IterationTimeLeavesOutPausesBetweenRuns) {
  std::string log;
  for (int64_t begin : {0, 100, 200, 1200, 1300}) log += Bubble(0, 0, begin, begin + 10, 0, 0, 0);
  log += Bubble(0, 1, 50, 60, 0, 0, 0);  // other slots do not mark iterations
  uint64_t periods = 0;
  EXPECT_DOUBLE_EQ(IterationMs(ParseEventLog(log, "x"), &periods), 100);
  EXPECT_EQ(periods, 3u);
  EXPECT_DOUBLE_EQ(IterationMs(ParseEventLog(Bubble(0, 0, 0, 10, 0, 0, 0), "x")), 0);
  // A lane that missed most of its (very short) slot-0 bubbles: slot 1,
  // served every iteration, marks them instead.
  log.clear();
  for (int64_t begin : {0, 50, 100, 150, 200}) log += Bubble(2, 1, begin + 20, begin + 30, 0, 0, 0);
  log += Bubble(2, 0, 0, 1, 0, 0, 0) + Bubble(2, 0, 150, 151, 0, 0, 0);
  EXPECT_DOUBLE_EQ(IterationMs(ParseEventLog(log, "x"), &periods), 50);
  EXPECT_EQ(periods, 4u);
}

TEST(RunReport, AloneRatesFileIsCheckedAndNamesTheProblem) {
  TempDir dir;
  std::string path = dir.path() + "/rates.json";
  std::ofstream(path) << R"({"pr": 1e9, "sgd": {"rate_per_s": 2.5e8, "unit": "ratings"}})";
  std::string error;
  auto rates = ReadAloneRates(path, &error);
  ASSERT_TRUE(rates) << error;
  EXPECT_DOUBLE_EQ((*rates)["pr"], 1e9);
  EXPECT_DOUBLE_EQ((*rates)["sgd"], 2.5e8);
  std::ofstream(path) << R"({"pr": -3})";
  EXPECT_FALSE(ReadAloneRates(path, &error));
  EXPECT_NE(error.find("'pr' needs a positive rate"), std::string::npos) << error;
  std::ofstream(path) << "[1, 2";
  EXPECT_FALSE(ReadAloneRates(path, &error));
  EXPECT_NE(error.find("expected a JSON object"), std::string::npos) << error;
  EXPECT_FALSE(ReadAloneRates(dir.path() + "/missing.json", &error));
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
  // A directory opens as a stream, and its read throws: said, not aborted.
  EXPECT_FALSE(ReadAloneRates(dir.path(), &error));
  EXPECT_NE(error.find("it is a directory"), std::string::npos) << error;
}

// The Chrome trace-event format, as ui.perfetto.dev and chrome://tracing read
// it: a traceEvents array of objects with a phase; complete events ("X")
// need a name, numeric ts and dur >= 0, and integer pid and tid; metadata
// events ("M") name processes and threads through args.name / sort_index.
void ExpectValidChromeTrace(const nlohmann::json& trace, size_t* complete_events) {
  ASSERT_TRUE(trace.is_object());
  ASSERT_TRUE(trace.contains("traceEvents"));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  *complete_events = 0;
  const std::set<std::string> metadata = {"process_name", "thread_name", "process_sort_index",
                                          "thread_sort_index"};
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.is_object()) << e;
    ASSERT_TRUE(e["ph"].is_string()) << e;
    ASSERT_TRUE(e["pid"].is_number_integer()) << e;
    ASSERT_TRUE(e["tid"].is_number_integer()) << e;
    ASSERT_TRUE(e["name"].is_string() && !e["name"].get<std::string>().empty()) << e;
    std::string ph = e["ph"];
    if (ph == "M") {
      EXPECT_TRUE(metadata.count(e["name"].get<std::string>())) << e;
      ASSERT_TRUE(e["args"].is_object()) << e;
    } else {
      ASSERT_EQ(ph, "X") << e;
      ASSERT_TRUE(e["ts"].is_number()) << e;
      ASSERT_TRUE(e["dur"].is_number()) << e;
      EXPECT_GE(e["ts"].get<double>(), 0) << e;
      EXPECT_GE(e["dur"].get<double>(), 0) << e;
      if (e.contains("args")) {
        EXPECT_TRUE(e["args"].is_object()) << e;
      }
      ++*complete_events;
    }
  }
}

TEST(Timeline, PerfettoTraceIsAValidTraceWithOneTrackGroupPerLane) {
  EventLogData log = ParseEventLog(RunLog(), "run");
  nlohmann::json trace = nlohmann::json::parse(RenderPerfettoTrace(log));
  size_t complete = 0;
  ExpectValidChromeTrace(trace, &complete);
  // 6 bubbles + 9 steps + 2 busy gaps per lane (between its 3 bubbles).
  EXPECT_EQ(complete, 6u + 9u + 4u);
  std::set<std::string> process_names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] == "process_name") process_names.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X" && e["cat"] == "side_task") {
      EXPECT_EQ(e["name"], "pr");
      EXPECT_EQ(e["tid"], 3);
    }
    if (e["ph"] == "X" && e["name"] == "training") {
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 60e3);  // 40 ms -> 100 ms, in microseconds
    }
  }
  EXPECT_EQ(process_names, (std::set<std::string>{"GPU lane 0", "GPU lane 1"}));
}

TEST(Timeline, SvgDrawsTheChosenIterations) {
  EventLogData log = ParseEventLog(RunLog(), "run");
  SvgWindow window;
  window.iterations = 1;
  window.first_iteration = 1;  // 100..200 ms
  std::string svg = RenderTimelineSvg(log, window);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t p = svg.find(what); p != std::string::npos; p = svg.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<title>pr:"), 3u);          // only the window's steps
  EXPECT_EQ(count("<title>overrun"), 0u);      // the overrun is in iteration 2
  EXPECT_EQ(count("<title>bubble slot 0"), 2u);
  window.first_iteration = 0;
  window.iterations = 2;  // 0..200 ms
  svg = RenderTimelineSvg(log, window);
  EXPECT_EQ(count("<title>pr:"), 6u);
  EXPECT_EQ(count("<title>overrun"), 0u);
  // By default the window is centred: 1 of the 2 complete iterations starts
  // at index (2 - 1) / 2 = 0, so 0..100 ms.
  window.first_iteration = -1;
  window.iterations = 1;
  svg = RenderTimelineSvg(log, window);
  EXPECT_EQ(count("<title>pr:"), 3u);
}

TEST(ReportCli, ErrorsAreClearAndTheReportPrints) {
  TempDir dir;
  std::string events = dir.path() + "/events.jsonl";
  std::ofstream(events) << RunLog();
  std::string base = dir.path() + "/base.jsonl";
  std::ofstream(base) << BaselineLog();
  ShellResult r = RunShell(std::string(FREERIDE_BIN) + " report " + dir.path() + " --baseline " +
                               base + " --json", dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["overhead_pct"].get<double>(), 100.0 * 5 / 95, 1e-9);
  // A log with its bubble lines in it twice: each bubble once, and said.
  std::ofstream(dir.path() + "/twice.jsonl") << RunLog() << RunLog();
  r = RunShell(std::string(FREERIDE_BIN) + " report " + dir.path() + "/twice.jsonl --json", dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), 0.5);
  EXPECT_EQ(j["dropped_bubble_records"], 6);
  EXPECT_EQ(j["dropped_step_records"], 9);
  EXPECT_NE(r.err.find("freeride report: warning: " + dir.path() +
                       "/twice.jsonl: left out 6 bubble record(s)"), std::string::npos) << r.err;
  r = RunShell(std::string(FREERIDE_BIN) + " report " + dir.path() + "/nope.jsonl", dir.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot read event log"), std::string::npos) << r.err;
  // Another kind of file (a profiler's trace) is not an empty run.
  std::ofstream(dir.path() + "/trace.json") << "{\n  \"traceEvents\": [\n  ]\n}\n";
  r = RunShell(std::string(FREERIDE_BIN) + " report " + dir.path() + "/trace.json", dir.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is not a FreeRide event log: none of its 4 line(s) is an event"), std::string::npos)
      << r.err;
  r = RunShell(std::string(FREERIDE_BIN) + " timeline " + events, dir.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--perfetto"), std::string::npos) << r.err;
  r = RunShell(std::string(FREERIDE_BIN) + " timeline " + events + " --perfetto " + dir.path() +
                   "/t.json --svg " + dir.path() + "/t.svg", dir.path());
  ASSERT_EQ(r.status, 0) << r.err;
  size_t complete = 0;
  ExpectValidChromeTrace(nlohmann::json::parse(FileText(dir.path() + "/t.json")), &complete);
  EXPECT_EQ(complete, 19u);
  EXPECT_NE(FileText(dir.path() + "/t.svg").find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace freeride::report
