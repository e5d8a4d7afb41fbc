// The bubble profiler: the real 4xH200 traces in ../shared, made-up traces
// with known gaps, the streaming reader, and bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "profile/bubble_profile.h"
#include "profile/kineto_trace.h"
#include "profile/profile_report.h"
#include "test_util.h"

namespace freeride::profile {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The project's shared data: FREERIDE_SHARED_DIR when set, else the shared/
// folder beside the source tree.
std::string SharedDir() {
  const char* env = std::getenv("FREERIDE_SHARED_DIR");
  return env && *env ? env : FREERIDE_SHARED_DIR;
}

const std::string kTraceDir = SharedDir() + "/traces/torch-1f1b-4xh200";

std::string TracePath(int rank) {
  return kTraceDir + "/trace_1f1b_r" + std::to_string(rank) + ".json.gz";
}

std::vector<double> LargestGaps(const RankProfile& r, size_t n) {
  std::vector<double> d;
  for (const SlotSummary& s : r.slots) d.push_back(s.median_ms);
  std::sort(d.rbegin(), d.rend());
  d.resize(std::min(n, d.size()));
  return d;
}

class RealTraces : public ::testing::Test {
 protected:
  // Missing traces fail the test: only a user who asked for it
  // (FREERIDE_SKIP_SHARED_DATA=1, never in CI) skips them.
  void SetUp() override {
    if (fs::exists(TracePath(0))) return;
    const char* skip = std::getenv("FREERIDE_SKIP_SHARED_DATA");
    const char* ci = std::getenv("CI");
    bool in_ci = ci && *ci && std::string(ci) != "false" && std::string(ci) != "0";
    if (skip && std::string(skip) == "1" && !in_ci)
      GTEST_SKIP() << "FREERIDE_SKIP_SHARED_DATA=1: no traces at " << kTraceDir;
    FAIL() << "no traces at " << kTraceDir << ": put the project's shared/ folder beside the "
           << "source tree or set FREERIDE_SHARED_DIR to it (FREERIDE_SKIP_SHARED_DATA=1 skips "
           << "these tests outside CI)";
  }
};

// The figures of ../shared/README.md, measured on the compute stream.
TEST_F(RealTraces, IdleFractionAndLargestGapsMatchTheMeasuredFigures) {
  const std::vector<std::vector<double>> expected_gaps = {
      {33.5, 7.4, 5.7, 5.7}, {22.3, 16.9, 5.7, 5.7}, {33.9, 11.3, 5.6}, {51.0}};
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    KinetoTrace trace = LoadKinetoTrace(TracePath(rank));
    RankProfile p = AnalyzeRank(trace, -1);
    EXPECT_EQ(p.rank, rank);
    EXPECT_EQ(p.world_size, 4);
    EXPECT_EQ(p.iterations.size(), 3u);
    EXPECT_NEAR(p.iteration_ms, 123, 3);
    // "about 44-45%", to within one percentage point.
    EXPECT_GE(p.idle_fraction, 0.43);
    EXPECT_LE(p.idle_fraction, 0.46);
    std::vector<double> gaps = LargestGaps(p, expected_gaps[rank].size());
    ASSERT_EQ(gaps.size(), expected_gaps[rank].size());
    for (size_t i = 0; i < gaps.size(); ++i) EXPECT_NEAR(gaps[i], expected_gaps[rank][i], 1.0);
    // H200: ~140 GiB; the stages reserved 4-9 GiB.
    EXPECT_EQ(p.total_memory_bytes, 150109880320u);
    EXPECT_GT(p.peak_reserved_bytes, uint64_t{4} << 30);
    EXPECT_EQ(p.free_memory_bytes,
              static_cast<int64_t>(p.total_memory_bytes - p.peak_reserved_bytes));
    EXPECT_EQ(p.compute_stream, 7);
  }
}

TEST_F(RealTraces, BubbleTypesFollowThe1F1BStructure) {
  auto types_of = [](int rank) {
    RankProfile p = AnalyzeRank(LoadKinetoTrace(TracePath(rank)), -1);
    std::map<std::string, double> largest;
    for (const SlotSummary& s : p.slots)
      largest[BubbleTypeName(s.type)] = std::max(largest[BubbleTypeName(s.type)], s.median_ms);
    return largest;
  };
  // Rank 0 starts at once and waits ~33 ms for its first gradient.
  auto r0 = types_of(0);
  EXPECT_EQ(r0.count("fill"), 0u);
  EXPECT_NEAR(r0["warmup_wait"], 33.4, 1);
  // Middle ranks wait for their first input, then for the first gradient.
  auto r1 = types_of(1);
  EXPECT_NEAR(r1["fill"], 16.9, 1);
  EXPECT_NEAR(r1["warmup_wait"], 22.2, 1);
  // The last stage has no warm-up: its one bubble is drain and fill joined.
  auto r3 = types_of(3);
  EXPECT_NEAR(r3["fill"], 51.0, 1);
  EXPECT_EQ(r3.count("warmup_wait"), 0u);
}

TEST_F(RealTraces, StreamingAndOneShotDecompressionAgree) {
  TraceStreamOptions streaming;
  streaming.one_shot_gunzip_limit = 0;
  KinetoTrace a = LoadKinetoTrace(TracePath(1));
  KinetoTrace b = LoadKinetoTrace(TracePath(1), streaming);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.json_bytes, b.json_bytes);
  ASSERT_EQ(a.gpu_ops.size(), b.gpu_ops.size());
  EXPECT_EQ(a.gpu_ops.back().start_us, b.gpu_ops.back().start_us);
  EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes);
}

TEST_F(RealTraces, JsonOutputKeepsTheStableKeys) {
  std::vector<RankProfile> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(AnalyzeRank(LoadKinetoTrace(TracePath(r)), -1));
  json out = ProfileToJson(ranks, 1.0);
  ASSERT_EQ(out["ranks"].size(), 4u);
  for (const json& r : out["ranks"]) {
    EXPECT_TRUE(r["rank"].is_number_integer());
    EXPECT_GT(r["iteration_ms"].get<double>(), 100);
    EXPECT_GT(r["idle_fraction"].get<double>(), 0.4);
    EXPECT_LT(r["idle_fraction"].get<double>(), 0.5);
    EXPECT_GT(r["free_memory_bytes"].get<int64_t>(), int64_t{100} << 30);
    ASSERT_FALSE(r["bubbles"].empty());
    for (const json& b : r["bubbles"]) {
      EXPECT_TRUE(b["start_ms"].is_number());
      EXPECT_GE(b["duration_ms"].get<double>(), 1.0);
      EXPECT_TRUE(b["type"].is_string());
    }
  }
  std::string svg = RenderProfileSvg(ranks);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("<title>fill 5"), std::string::npos);  // rank 3: ~51 ms
  std::string csv = ProfileToCsv(ranks);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 4 + 5 + 3 + 1);
}

// ---- made-up traces -------------------------------------------------------

json Kernel(double ts, double dur, int stream, const std::string& name = "gemm", int device = 0) {
  return {{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"ts", ts}, {"dur", dur},
          {"args", {{"device", device}, {"stream", stream}}}};
}
json Step(const std::string& cat, int n, double ts, double dur) {
  return {{"ph", "X"}, {"cat", cat}, {"name", "ProfilerStep#" + std::to_string(n)},
          {"ts", ts}, {"dur", dur}};
}
json Memory(double ts, uint64_t reserved) {
  return {{"ph", "i"}, {"cat", "cpu_instant_event"}, {"name", "[memory]"}, {"ts", ts},
          {"args", {{"Total Reserved", reserved}, {"Device Id", 0}, {"Device Type", 1}}}};
}
json Memory(double ts, json reserved, json device) {
  return {{"ph", "i"}, {"cat", "cpu_instant_event"}, {"name", "[memory]"}, {"ts", ts},
          {"args", {{"Total Reserved", reserved}, {"Device Id", device}, {"Device Type", 1}}}};
}
json Trace(json events, int rank = 0, int world = 2) {
  return {{"schemaVersion", 1},
          {"deviceProperties", {{{"id", 0}, {"name", "Test GPU"}, {"totalGlobalMem", 1000000}}}},
          {"distributedInfo", {{"rank", rank}, {"world_size", world}}},
          {"baseTimeNanoseconds", 1000},
          {"traceEvents", events}};
}

class MadeUpTraces : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string Write(const std::string& name, const json& trace) {
    return Write(name, trace.dump());
  }
  TempDir dir_;
};

// Memory figures no allocator writes: a negative or vast reserve or device
// memory, or a device id past an int, were cast to unsigned counts or an
// int (undefined), giving free memory above the device's or below 0.
TEST_F(MadeUpTraces, MemoryFiguresThatAreNoByteCountsAreMalformedAndAReservePastTheDeviceLeavesNoneFree) {
  json base = {Step("user_annotation", 1, 0, 100000), Kernel(10000, 20000, 7)};
  for (const json& bad : {Memory(5, json(-400000), json(0)), Memory(5, json(1e300), json(0)),
                          Memory(5, json(400000), json(1e12))}) {
    json events = base;
    events.push_back(bad);
    try {
      LoadKinetoTrace(Write("bad.json", Trace(events)));
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find("is malformed"), std::string::npos) << e.what();
    }
  }
  json no_memory = Trace(base);
  no_memory["deviceProperties"][0]["totalGlobalMem"] = -1000000;
  try {
    LoadKinetoTrace(Write("bad.json", no_memory));
    ADD_FAILURE() << "accepted a negative totalGlobalMem";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("top-level 'deviceProperties' is malformed"), std::string::npos)
        << e.what();
  }
  // The CPU allocator's events name device -1 (Device Type 0): not malformed, and not the GPU's.
  json cpu = Memory(5, json(900000), json(-1));
  cpu["args"]["Device Type"] = 0;
  json with_cpu = base;
  with_cpu.push_back(cpu);
  with_cpu.push_back(Memory(6, 400000));
  EXPECT_EQ(AnalyzeRank(LoadKinetoTrace(Write("cpu.json", Trace(with_cpu))), -1).free_memory_bytes, 600000);
  json events = base;
  events.push_back(Memory(5, 3000000));  // three times the device's 1,000,000 bytes
  RankProfile p = AnalyzeRank(LoadKinetoTrace(Write("over.json", Trace(events))), -1);
  EXPECT_EQ(p.free_memory_bytes, 0);
}

TEST_F(MadeUpTraces, GapsAreTypedByPositionAndNcclWaitingIsIdle) {
  // One iteration, 0..100 ms.  Work on stream 7 at 10-30, 40-60, 65-90 ms;
  // an NCCL kernel spins on stream 7 from 30 to 40: that is idle time.
  json events = {Step("user_annotation", 1, 0, 100000), Step("gpu_user_annotation", 1, 10000, 80000),
                 Kernel(10000, 20000, 7), Kernel(30000, 10000, 7, "ncclDevKernel_SendRecv"),
                 Kernel(40000, 20000, 7), Kernel(65000, 25000, 7),
                 Kernel(0, 100000, 9, "nccl spinning on its own stream"),
                 Kernel(62000, 500, 3, "small copy on a side stream"), Memory(5, 400000)};
  KinetoTrace trace = LoadKinetoTrace(Write("t.json", Trace(events)));
  RankProfile p = AnalyzeRank(trace, -1);
  EXPECT_EQ(p.compute_stream, 7);
  EXPECT_DOUBLE_EQ(p.iteration_ms, 100);
  EXPECT_DOUBLE_EQ(p.busy_ms, 65);
  EXPECT_DOUBLE_EQ(p.idle_fraction, 0.35);
  EXPECT_EQ(p.free_memory_bytes, 600000);
  ASSERT_EQ(p.slots.size(), 4u);
  EXPECT_EQ(p.slots[0].type, BubbleType::kFill);  // 0-10: before the step's GPU work
  EXPECT_DOUBLE_EQ(p.slots[0].median_ms, 10);
  EXPECT_EQ(p.slots[1].type, BubbleType::kWarmupWait);  // 30-40: the NCCL wait
  EXPECT_DOUBLE_EQ(p.slots[1].start_ms, 30);
  EXPECT_EQ(p.slots[2].type, BubbleType::kSteady);  // 60-65
  EXPECT_EQ(p.slots[3].type, BubbleType::kDrain);   // 90-100
  EXPECT_DOUBLE_EQ(p.slots[3].median_ms, 10);

  ProfileOptions all;
  all.all_streams = true;
  EXPECT_DOUBLE_EQ(AnalyzeRank(trace, -1, all).busy_ms, 65.5);  // the side-stream copy too
  ProfileOptions coarse;
  coarse.min_bubble_ms = 6;
  EXPECT_EQ(AnalyzeRank(trace, -1, coarse).slots.size(), 3u);  // the 5 ms gap drops out
}

TEST_F(MadeUpTraces, SlotSummariesSpanIterations) {
  json events = json::array();
  const double gaps_ms[] = {4, 6, 5, 8, 3};
  for (int i = 0; i < 5; ++i) {
    double t0 = i * 100000.0;
    events.push_back(Step("user_annotation", i + 1, t0, 100000));
    events.push_back(Kernel(t0, 40000, 7));
    events.push_back(Kernel(t0 + 40000 + gaps_ms[i] * 1000, 100000 - 40000 - gaps_ms[i] * 1000, 7));
  }
  RankProfile p = AnalyzeRank(LoadKinetoTrace(Write("t.json", Trace(events, 1, 2))), -1);
  ASSERT_EQ(p.slots.size(), 1u);
  const SlotSummary& s = p.slots[0];
  EXPECT_EQ(s.type, BubbleType::kSteady);  // rank 1 of 2 is the last stage: no warm-up
  EXPECT_EQ(s.iterations, 5);
  EXPECT_DOUBLE_EQ(s.median_ms, 5);
  EXPECT_DOUBLE_EQ(s.min_ms, 3);
  EXPECT_NEAR(s.p10_ms, 3.4, 1e-9);
  EXPECT_DOUBLE_EQ(s.start_ms, 40);
}

TEST_F(MadeUpTraces, StreamingReaderHandlesChunkBoundariesEscapesAndGzip) {
  // Over 8 MiB, so values straddle read chunks; strings hold escaped quotes,
  // backslashes and brackets that must not count as structure.
  json events = json::array();
  events.push_back(Step("user_annotation", 1, 0, 1e9));
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    json k = Kernel(i * 1000.0, 500, 7, "k\"{[\\\\" + std::string(150, 'x') + "]}\\\"");
    k["args"]["note"] = "ends with a backslash \\";
    events.push_back(k);
  }
  std::string text = Trace(events).dump(1);
  ASSERT_GT(text.size(), size_t{9} << 20);
  std::string plain = Write("big.json", text);
  std::string gz = dir_.path() + "/big.json.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  TraceStreamOptions streaming;
  streaming.one_shot_gunzip_limit = 0;
  for (auto [path, options] : {std::pair{plain, TraceStreamOptions{}}, std::pair{gz, TraceStreamOptions{}},
                               std::pair{gz, streaming}}) {
    SCOPED_TRACE(path);
    KinetoTrace t = LoadKinetoTrace(path, options);
    EXPECT_EQ(t.events, static_cast<uint64_t>(n + 1));
    EXPECT_EQ(t.gpu_ops.size(), static_cast<size_t>(n));
    EXPECT_EQ(t.json_bytes, text.size());
  }
  // The buffer does not grow with the file.
  TraceStreamVisitor count_only;
  TraceStreamStats stats = StreamTrace(plain, count_only);
  EXPECT_LE(stats.peak_buffer_bytes, size_t{17} << 20);
}

TEST_F(MadeUpTraces, BadInputGetsAClearError) {
  json good = Trace({Step("user_annotation", 1, 0, 1000), Kernel(0, 10, 7)});
  std::string good_text = good.dump();
  struct Case {
    std::string name, text, message;
  };
  std::vector<Case> cases = {
      {"empty", "", "the file is empty"},
      {"truncated", good_text.substr(0, good_text.size() / 2), "truncated"},
      {"not an object", "[1, 2, 3]", "not a JSON object"},
      {"mismatched", R"({"traceEvents": [{"ts": 1]})", "mismatched"},
      {"garbage between events", R"({"traceEvents": [{"ts": 1} {"ts": 2}]})", "expected ','"},
      {"trailing data", good_text + "xyz", "after the end"},
      {"bad number", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": "soon"}]})",
       "malformed"},
      {"binary", std::string("\x01\x02\xff\xfe", 4), "not a JSON object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = Write("bad.json", c.text);
    try {
      AnalyzeRank(LoadKinetoTrace(path), 0);
      ADD_FAILURE() << "no error";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // A gzip file cut short.
  std::string gz = dir_.path() + "/cut.json.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, good_text.data(), static_cast<unsigned>(good_text.size()));
  gzclose(f);
  fs::resize_file(gz, fs::file_size(gz) - 12);
  EXPECT_THROW(LoadKinetoTrace(gz), TraceError);
  EXPECT_THROW(LoadKinetoTrace(dir_.path() + "/missing.json"), TraceError);
}

// A stream id beyond an int (an unsigned 32-bit value, a handle's address)
// is a stream like any other; only one a double cannot hold exactly is
// malformed.
TEST_F(MadeUpTraces, StreamIdsBeyondAnIntAreStreamsLikeAnyOther) {
  json events = {Step("user_annotation", 1, 0, 100000), Kernel(10000, 20000, 7), Kernel(40000, 20000, 7),
                 Kernel(65000, 25000, 7), Kernel(30000, 5000, 3)};
  for (int i : {1, 2, 3}) events[i]["args"]["stream"] = 4294967295.0;
  RankProfile p = AnalyzeRank(LoadKinetoTrace(Write("t.json", Trace(events))), -1);
  EXPECT_EQ(p.compute_stream, 4294967295);
  EXPECT_DOUBLE_EQ(p.busy_ms, 65) << "the other stream's 5 ms is not the compute stream's";
  for (int i : {1, 2, 3}) events[i]["args"]["stream"] = 140737488355328.0;  // 2^47, a user-space address
  EXPECT_EQ(AnalyzeRank(LoadKinetoTrace(Write("t.json", Trace(events))), -1).compute_stream, 140737488355328);
  // Past 2^53 an integer is read as written, not rounded through a double.
  for (int i : {1, 2, 3}) events[i]["args"]["stream"] = int64_t{1} << 60;
  EXPECT_EQ(AnalyzeRank(LoadKinetoTrace(Write("t.json", Trace(events))), -1).compute_stream, int64_t{1} << 60);
  for (int i : {1, 2, 3}) events[i]["args"]["stream"] = (int64_t{1} << 53) + 1;
  EXPECT_EQ(AnalyzeRank(LoadKinetoTrace(Write("t.json", Trace(events))), -1).compute_stream,
            (int64_t{1} << 53) + 1);
  for (const json& bad : {json(1e300), json(18446744073709551615ull), json(2.5)}) {
    events[1]["args"]["stream"] = bad;
    try {
      LoadKinetoTrace(Write("t.json", Trace(events)));
      ADD_FAILURE() << "stream id " << bad.dump() << " was read";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find("trace event #1 is malformed"), std::string::npos) << e.what();
    }
  }
}

// What cannot be right is refused with the file and the field named, or
// skipped and said: a rank no run has, a duration below zero.
TEST_F(MadeUpTraces, ImpossibleRanksAreRefusedAndNegativeDurationsSkippedAndSaid) {
  const json events = {Step("user_annotation", 1, 0, 100000), Kernel(10000, 20000, 7),
                       Kernel(40000, 20000, 7)};
  auto error = [&](const json& trace) {
    std::string path = Write("t.json", trace);
    try {
      LoadKinetoTrace(path);
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto with_info = [&](json info) {
    json t = Trace(events);
    t["distributedInfo"] = std::move(info);
    return t;
  };
  EXPECT_NE(error(with_info({{"rank", 1e12}, {"world_size", 2}}))
                .find("distributedInfo's rank is 1000000000000: expected a whole number from 0 to 1"),
            std::string::npos);
  EXPECT_NE(error(with_info({{"rank", 1e12}})).find("distributedInfo's rank is 1000000000000"),
            std::string::npos) << "without a world size too";
  EXPECT_NE(error(with_info({{"rank", 0.5}, {"world_size", 2}})).find("rank is 0.5"), std::string::npos);
  EXPECT_NE(error(with_info({{"rank", -1}, {"world_size", 2}})).find("rank is -1"), std::string::npos);
  EXPECT_NE(error(with_info({{"rank", 2}, {"world_size", 2}})).find("rank is 2: expected a whole number from 0 to 1"),
            std::string::npos);
  EXPECT_NE(error(with_info({{"rank", 0}, {"world_size", 0}})).find("world_size is 0"), std::string::npos);
  EXPECT_NE(error(with_info({{"rank", 0}, {"world_size", 1e12}})).find("world_size is 1000000000000"),
            std::string::npos);
  EXPECT_NE(error(with_info({{"rank", 0}, {"world_size", 2}, {"pg_config", {{{"ranks", {0, 1e12}}}}}}))
                .find("pg_config rank is 1000000000000"),
            std::string::npos);
  EXPECT_EQ(error(with_info({{"rank", "1"}, {"world_size", 2}})), "no error") << "a number as a string";
  json huge_device = Trace({Step("user_annotation", 1, 0, 100000), Kernel(10000, 20000, 7, "gemm")});
  huge_device["traceEvents"][1]["args"]["device"] = 1e12;
  EXPECT_NE(error(huge_device).find("trace event #1 is malformed"), std::string::npos);
  json nan_time = Trace(events);
  nan_time["traceEvents"][1]["ts"] = "nan";
  EXPECT_NE(error(nan_time).find("trace event #1 is malformed"), std::string::npos);

  // A kernel and a step that end before they begin: left out, and counted.
  json negative = Trace(events);
  negative["traceEvents"].push_back(Kernel(70000, -5000, 7));
  negative["traceEvents"].push_back(Step("user_annotation", 2, 100000, -1));
  const std::string path = Write("negative.json", negative);
  KinetoTrace trace = LoadKinetoTrace(path);
  EXPECT_EQ(trace.negative_durations, 2u);
  EXPECT_EQ(trace.first_negative_duration_event, 3u);
  EXPECT_EQ(trace.gpu_ops.size(), 2u);
  EXPECT_EQ(trace.cpu_steps.size(), 1u);
  EXPECT_DOUBLE_EQ(AnalyzeRank(trace, -1).busy_ms, 40);
  EXPECT_EQ(SkippedEventsMessage(LoadKinetoTrace(Write("t.json", Trace(events)))), "");
  ShellResult r = RunShell(std::string(FREERIDE_BIN) + " profile " + path, dir_.path());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("freeride profile: warning: " + path +
                       ": skipped 2 event(s) with a negative duration (the first: trace event #3, "
                       "\"dur\": -5000)"),
            std::string::npos) << r.err;
  r = RunShell(std::string(FREERIDE_BIN) + " profile " +
                   Write("rank.json", with_info({{"rank", 1e12}, {"world_size", 2}})),
               dir_.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("freeride profile: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank is 1000000000000"), std::string::npos) << r.err;
}

json CpuOp(double ts, double dur, const std::string& name, int tid = 11) {
  return {{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"ts", ts}, {"dur", dur}, {"tid", tid}};
}

TEST_F(MadeUpTraces, TracesWithoutWhatTheProfilerNeedsAreExplained) {
  auto message = [&](const json& trace) {
    try {
      AnalyzeRank(LoadKinetoTrace(Write("t.json", trace)), 0);
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json nothing = Trace({Step("user_annotation", 1, 0, 1000)});
  EXPECT_NE(message(nothing).find("no GPU kernels, and no CPU operators"), std::string::npos);
  json no_steps = Trace({Kernel(0, 10, 7)});
  EXPECT_NE(message(no_steps).find("no ProfilerStep"), std::string::npos);
  // prof.step() without a schedule: torch writes no marks, so saying "call prof.step()" misleads.
  EXPECT_NE(message(no_steps).find("only when the profiler has a schedule"), std::string::npos);
  json cpu_only_no_steps = Trace({CpuOp(0, 500, "aten::mm")});
  const std::string cpu = message(cpu_only_no_steps);
  EXPECT_NE(cpu.find("no GPU kernels and no ProfilerStep#N marks"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("schedule=torch.profiler.schedule("), std::string::npos) << cpu;
}

// A CPU-only run (gloo): busy time is the CPU operators of the thread that
// marks the steps; a blocking receive, and what runs inside it, is waiting.
TEST_F(MadeUpTraces, CpuOnlyTracesAreReadFromTheTrainingThreadsOperators) {
  json step = Step("user_annotation", 1, 0, 100000);
  step["tid"] = 11;
  json events = {step,
                 CpuOp(0, 30000, "aten::mm"),
                 CpuOp(30000, 25000, "c10d::recv_"),      // waits 30-55 ms
                 CpuOp(31000, 100, "aten::empty"),        // inside the wait: not work
                 CpuOp(55000, 20000, "freeride_test::spend"),
                 CpuOp(80000, 20000, "aten::addmm"),
                 CpuOp(0, 100000, "aten::mm", 12)};       // another thread: not this rank's work
  KinetoTrace trace = LoadKinetoTrace(Write("cpu.json", Trace(events, 0, 2)));
  EXPECT_TRUE(trace.gpu_ops.empty());
  EXPECT_EQ(trace.cpu_ops.size(), 6u);
  RankProfile p = AnalyzeRank(trace, -1);
  EXPECT_EQ(p.busy_source, "cpu");
  EXPECT_EQ(p.cpu_thread, 11);
  EXPECT_DOUBLE_EQ(p.busy_ms, 70);
  ASSERT_EQ(p.slots.size(), 2u);
  EXPECT_DOUBLE_EQ(p.slots[0].start_ms, 30);
  EXPECT_DOUBLE_EQ(p.slots[0].median_ms, 25);
  EXPECT_DOUBLE_EQ(p.slots[1].start_ms, 75);
  EXPECT_DOUBLE_EQ(p.slots[1].median_ms, 5);
  EXPECT_EQ(p.free_memory_bytes, -1);
  // A GPU trace is read as before: its CPU operators are not even parsed.
  json gpu = {Step("user_annotation", 1, 0, 1000), Kernel(0, 10, 7), CpuOp(0, 1000, "aten::mm")};
  EXPECT_TRUE(LoadKinetoTrace(Write("gpu.json", Trace(gpu))).cpu_ops.empty());
}

// The GPipe traces of issue 33: a gap typed "drain" in one iteration (the
// GPU step mark ended before it) and "steady" in the others is one slot, not
// two overlapping ones.
TEST_F(MadeUpTraces, AGapIsOneSlotWhateverTypeEachIterationGivesIt) {
  json events = json::array();
  for (int i = 0; i < 3; ++i) {
    double t0 = i * 100000.0;
    events.push_back(Step("user_annotation", i + 1, t0, 100000));
    // Step 1's GPU mark ends at 40 ms, before the gap; the others' cover it.
    events.push_back(Step("gpu_user_annotation", i + 1, t0, i == 0 ? 40000 : 100000));
    events.push_back(Kernel(t0, 40000, 7));
    events.push_back(Kernel(t0 + 40000 + 20000 + i * 400, 40000 - i * 400, 7));
  }
  RankProfile p = AnalyzeRank(LoadKinetoTrace(Write("t.json", Trace(events, 1, 2))), -1);
  EXPECT_EQ(p.iterations[0].gaps[0].type, BubbleType::kDrain);
  EXPECT_EQ(p.iterations[1].gaps[0].type, BubbleType::kSteady);
  ASSERT_EQ(p.slots.size(), 1u) << "the one gap, matched across the 3 iterations";
  EXPECT_EQ(p.slots[0].iterations, 3);
  EXPECT_EQ(p.slots[0].type, BubbleType::kSteady);  // the type most iterations gave it
  EXPECT_DOUBLE_EQ(p.slots[0].median_ms, 20.4);
  for (const Iteration& it : p.iterations) EXPECT_EQ(it.gaps[0].slot, 0);
}

// Gaps that split from one iteration to the next fit no list of slots: the
// profile says so (and which steps), and the CLI exits 3 after printing.
TEST_F(MadeUpTraces, GapsThatDoNotLineUpAreReportedNotListed) {
  json events = json::array();
  for (int i = 0; i < 2; ++i) {
    double t0 = i * 100000.0;
    events.push_back(Step("user_annotation", i + 1, t0, 100000));
    events.push_back(Kernel(t0, 40000, 7));
    if (i == 1) events.push_back(Kernel(t0 + 48000, 2000, 7));  // splits step 2's gap in two
    events.push_back(Kernel(t0 + 60000, 40000, 7));
  }
  std::string path = Write("split.json", Trace(events, 1, 2));
  RankProfile p = AnalyzeRank(LoadKinetoTrace(path), -1);
  EXPECT_TRUE(p.slots.empty());
  EXPECT_NE(p.slots_conflict.find("do not line up"), std::string::npos) << p.slots_conflict;
  EXPECT_NE(p.slots_conflict.find("step 1"), std::string::npos) << p.slots_conflict;
  EXPECT_NE(p.slots_conflict.find("step 2"), std::string::npos) << p.slots_conflict;
  json out = ProfileToJson({p}, 1.0);
  EXPECT_TRUE(out["ranks"][0]["bubbles"].empty());
  EXPECT_EQ(out["ranks"][0]["slots_conflict"], p.slots_conflict);
  ShellResult r = RunShell(std::string(FREERIDE_BIN) + " profile " + path, dir_.path());
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.out.find("no bubble slots"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 2 gaps (start+length ms): 40.00+8.00 50.00+10.00"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("rank 1: the iterations' gaps do not line up"), std::string::npos) << r.err;
}

TEST_F(MadeUpTraces, RanksOfDifferentRunsAreRefused) {
  auto load = [&](const std::string& name, const json& trace) {
    KinetoTrace t = LoadKinetoTrace(Write(name, trace));
    RankProfile p = AnalyzeRank(t, 0);
    return std::pair{t, p};
  };
  json events = {Step("user_annotation", 1, 0, 1000), Kernel(0, 10, 7)};
  json later = {Step("user_annotation", 1, 5e7, 1000), Kernel(5e7, 10, 7)};
  auto [a_t, a_p] = load("a.json", Trace(events, 0, 2));
  auto [b_t, b_p] = load("b.json", Trace(events, 1, 2));
  EXPECT_NO_THROW(CheckSameRun({a_t, b_t}, {a_p, b_p}));
  auto [c_t, c_p] = load("c.json", Trace(events, 1, 4));
  EXPECT_THROW(CheckSameRun({a_t, c_t}, {a_p, c_p}), TraceError);  // world sizes differ
  EXPECT_THROW(CheckSameRun({a_t, a_t}, {a_p, a_p}), TraceError);  // rank 0 twice
  auto [d_t, d_p] = load("d.json", Trace(later, 1, 2));
  try {
    CheckSameRun({a_t, d_t}, {a_p, d_p});
    ADD_FAILURE() << "50 s apart, accepted";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("different runs"), std::string::npos);
  }
}

TEST_F(MadeUpTraces, CliExitsWithTwoAndAMessage) {
  std::string bad = Write("bad.json", std::string("{\"traceEvents\": [{\"ts\": 1"));
  ShellResult r = RunShell(std::string(FREERIDE_BIN) + " profile " + bad, dir_.path());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("freeride profile:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace freeride::profile
