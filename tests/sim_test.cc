#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/cluster_sim.h"
#include "sim/sim_report.h"
#include "sim/stage_times_file.h"
#include "test_util.h"

namespace freeride::sim {
namespace {

SimConfig EqualStages(ScheduleKind kind, int stages, int microbatches) {
  SimConfig c;
  c.schedule = kind;
  c.stages = stages;
  c.microbatches = microbatches;
  c.stage_times = {StageTimes{1.0, 2.0, 0, -1}};
  c.iterations = 20;
  c.tasks = DefaultTaskMix();
  c.threads = 2;
  return c;
}

// One stage, one pipeline: "1 stage", "1 GPU", and a figure that rounds to
// nothing is printed as +0.000%, not -0.000%.
TEST(SimReport, CountsOfOneAreSingularAndNothingIsNotALoss) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 1, 1);
  c.iterations = 1;
  SimResult r = Simulate(c);
  r.overhead_pct = -1e-9;
  r.cost_saving_pct = -0.01;
  const std::string text = FormatSimResult(r);
  EXPECT_NE(text.find("1f1b, 1 stage, 1 micro-batch, 1 pipeline (1 GPU), 1 iteration\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("-0.0"), std::string::npos) << text;
  EXPECT_NE(text.find("without side tasks: +0.000%"), std::string::npos) << text;
  EXPECT_NE(text.find("cost saving:            0.0%"), std::string::npos) << text;
  c = EqualStages(ScheduleKind::k1F1B, 4, 8);
  EXPECT_NE(FormatSimResult(Simulate(c)).find("1f1b, 4 stages, 8 micro-batches, 1 pipeline (4 GPUs), 20 iterations"),
            std::string::npos);
}

TEST(Simulate, EqualStageTimesGiveTheClosedFormBubbleFraction) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (auto [p, m] : {std::pair{2, 1}, {4, 4}, {4, 16}, {8, 4}, {8, 32}}) {
      SimConfig c = EqualStages(kind, p, m);
      c.data_parallel = 3;
      SimResult r = Simulate(c);
      ASSERT_TRUE(r.closed_form_bubble_fraction.has_value());
      EXPECT_NEAR(r.bubble_fraction, ClosedFormBubbleFraction(p, m), 1e-9)
          << ScheduleKindName(kind) << " P=" << p << " M=" << m;
      EXPECT_NEAR(r.iteration_ms_baseline, (m + p - 1) * 3.0, 1e-9) << "makespan (M+P-1)(F+B)";
    }
  }
}

// Without noise and with steps that never vary, a step that does not fit the
// predicted rest of a bubble is never started, so nothing overruns and the
// training is exactly as fast as without side tasks.
TEST(Simulate, ConstantStepsInNoiselessBubblesNeverOverrun) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 4, 8);
  c.stage_times = {StageTimes{5.0, 10.0, 0, -1}};
  SimTask fixed{"fixed", "steps", 1000, 1.3, 1.3, 1.3, 1.3, 0, 0};
  c.tasks = {fixed};
  SimResult r = Simulate(c);
  EXPECT_EQ(r.overrun_gpu_s, 0);
  EXPECT_EQ(r.overhead_pct, 0);
  EXPECT_GT(r.harvest_ratio, 0.7);
  EXPECT_LT(r.harvest_ratio, 1.0);
  EXPECT_NEAR(r.tasks[0].units, r.tasks[0].work_gpu_s * 1000, 1e-6);
}

// Bubbles shorter than the dispatch latency get no step, and must not delay
// the trainer: only a step that runs past a bubble's end does.
TEST(Simulate, OnlyStepsPastTheEndDelayTheTraining) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 8, 8);
  c.stage_times = {StageTimes{0.1, 0.2, 0, -1}};  // gaps of 0.1-0.3 ms, latency 0.2 ms
  c.jitter_cv = 0.05;
  SimResult r = Simulate(c);
  EXPECT_EQ(r.overrun_gpu_s, 0);
  EXPECT_EQ(r.overhead_pct, 0) << "delay without an overrun";
}

TEST(Simulate, BubbleLengthsAreLearnedOnlineSoTheFirstIterationHarvestsNothing) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 4, 4);
  c.iterations = 1;
  EXPECT_EQ(Simulate(c).harvested_gpu_s, 0) << "no slot has a history in the first iteration";
  c.iterations = 2;
  EXPECT_GT(Simulate(c).harvested_gpu_s, 0);
}

TEST(Simulate, ResultsDoNotDependOnTheThreadCount) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 4, 4);
  c.data_parallel = 7;
  c.jitter_cv = 0.1;
  c.straggler_prob = 0.05;
  c.threads = 1;
  SimResult one = Simulate(c);
  c.threads = 3;
  SimResult three = Simulate(c);
  EXPECT_EQ(one.wall_s, three.wall_s);
  EXPECT_EQ(one.wall_s_baseline, three.wall_s_baseline);
  EXPECT_EQ(one.harvested_gpu_s, three.harvested_gpu_s);
  EXPECT_EQ(one.overrun_gpu_s, three.overrun_gpu_s);
}

// Long-tailed steps and noisy bubbles do overrun; the overrun is measured and
// shows as the training's slowdown, which the cost saving pays for.
TEST(Simulate, OverrunsAreMeasuredAndCostTheTraining) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 4, 4);
  c.stage_times = {StageTimes{5.0, 10.0, 0, -1}};
  c.jitter_cv = 0.3;
  c.tasks = {SimTask{"tail", "steps", 0, 1.0, 1.5, 6.0, 9.0, 0, 0}};
  SimResult r = Simulate(c);
  EXPECT_GT(r.overrun_gpu_s, 0);
  EXPECT_GT(r.overhead_pct, 0);
  double slowdown_gpu_s = c.Gpus() * (r.wall_s - r.wall_s_baseline);
  EXPECT_NEAR(r.cost_saving_pct,
              100 * (r.work_gpu_s - slowdown_gpu_s) / (c.Gpus() * r.wall_s_baseline), 1e-9);

  c.overrun_cost = 0;  // an overrun that never delays the trainer
  EXPECT_EQ(Simulate(c).overhead_pct, 0);
}

// Timing noise makes some gaps of one slot near zero and others a few
// milliseconds: slots of two kinds, whose p10 is the short kind.  The
// simulator takes the runtime's second look (docs/architecture.md), so with
// it on, more work is done than with it off.
TEST(Simulate, TheSecondLookAddsWorkWhereNoiseMakesSlotsOfTwoKinds) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 4, 4);
  c.stage_times = {StageTimes{5.0, 10.0, 0, -1}};
  c.jitter_cv = 0.3;
  c.iterations = 200;
  c.tasks = {SimTask{"fixed", "steps", 1000, 1.3, 1.3, 1.3, 1.3, 0, 0}};
  SimResult with = Simulate(c);
  c.predictor.second_look_min_samples = c.predictor.window;  // never enough long bubbles
  SimResult without = Simulate(c);
  EXPECT_GT(with.work_gpu_s, without.work_gpu_s * 1.003)
      << with.work_gpu_s << " GPU-s with the second look, " << without.work_gpu_s << " without";
}

TEST(Simulate, StragglersSlowEveryReplicaThroughTheAllReduce) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 4, 4);
  c.data_parallel = 16;
  double steady = Simulate(c).iteration_ms_baseline;
  c.straggler_prob = 0.05;
  c.straggler_slowdown = 2;
  double straggling = Simulate(c).iteration_ms_baseline;
  EXPECT_GT(straggling, steady * 1.2) << "with 64 GPUs most iterations have a straggler";
}

// The real 4xH200 run: stage times derived from its profile (busy time per
// rank, 4 micro-batches), its measured timing noise (1%: the per-iteration
// busy time varies by 0.1-0.3% over 8 actions) and the in-bubble step
// slowdown of its demo run (18.22 s of steps did 17.006 GPU-s of alone work:
// 1.07).  The demo measured (bench/results/demo_gpu_4xh200.txt) 18.22 s of
// side-task steps in 49.54 GPU-s: 36.8% of GPU time; the profile measured
// the compute stream idle 44.7% of the time (mean of the four ranks).
TEST(Simulate, ReplayingTheH200RunReproducesItsBubbleFractionAndHarvest) {
  std::string error;
  auto times = ReadStageTimesFile(std::string(EXAMPLES_DIR) + "/data/h200_1f1b_bubbles.json", 4,
                                  2.0, &error);
  ASSERT_TRUE(times) << error;
  ASSERT_EQ(times->ranks, 4);
  SimConfig c;
  c.stages = 4;
  c.microbatches = 4;
  c.stage_times = times->stages;
  c.iterations = 100;
  c.jitter_cv = 0.01;
  c.step_slowdown = 1.07;
  c.tasks = DefaultTaskMix();  // lanes 0-3: pagerank, sgd, image, pagerank, as in the demo
  SimResult r = Simulate(c);
  EXPECT_NEAR(100 * r.bubble_fraction, 44.7, 3.0);
  EXPECT_NEAR(100 * r.harvested_fraction, 100 * 18.22 / 49.54, 3.0);
  EXPECT_LT(r.overhead_pct, 0.5);
}

TEST(Simulate, ScaleOutAtAFixedGlobalBatchGrowsTheBubble) {
  SimConfig base = EqualStages(ScheduleKind::k1F1B, 8, 1);
  base.iterations = 5;
  std::vector<SimConfig> configs = ScaleOutConfigs(base, {64, 128, 256}, 64);
  ASSERT_EQ(configs.size(), 3u);
  EXPECT_EQ(configs[0].data_parallel, 8);
  EXPECT_EQ(configs[0].microbatches, 8);
  EXPECT_EQ(configs[2].microbatches, 2);
  double previous = 0;
  for (const SimConfig& c : configs) {
    SimResult r = Simulate(c);
    EXPECT_GT(r.bubble_fraction, previous);
    previous = r.bubble_fraction;
  }
  EXPECT_THROW(ScaleOutConfigs(base, {64, 100}, 64), std::invalid_argument) << "100 % 8 != 0";
  EXPECT_THROW(ScaleOutConfigs(base, {1024}, 64), std::invalid_argument) << "128 pipelines, 64 micro-batches";
}

void ExpectRefused(const SimConfig& c, const std::string& words) {
  try {
    Simulate(c);
    ADD_FAILURE() << "accepted; expected an error about " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Simulate, ImpossibleConfigurationsAreRefusedClearly) {
  SimConfig good = EqualStages(ScheduleKind::k1F1B, 4, 4);
  SimConfig c = good;
  c.microbatches = 0;
  ExpectRefused(c, "micro-batches");
  c = good;
  c.layers = 3;
  ExpectRefused(c, "only 3 layers");
  c = good;
  c.stage_times = {StageTimes{-1, 2, 0, -1}};
  ExpectRefused(c, "forward time");
  c = good;
  c.stage_times = {StageTimes{1, 2, 0, -1}, StageTimes{1, 2, 0, -1}};
  ExpectRefused(c, "2 stage times given for 4");
  c = good;
  c.p2p_ms = std::nan("");
  ExpectRefused(c, "--p2p");
  c = good;
  c.free_memory_bytes = 512ull << 20;
  ExpectRefused(c, "could never run");
  c = good;
  c.tasks[0].step_ms_p99 = 0.1;
  ExpectRefused(c, "quantiles must rise");
  c = good;
  c.schedule = ScheduleKind::kZeroBubbleV;
  c.virtual_stages = 3;
  EXPECT_THROW(Simulate(c), std::invalid_argument);
  // Sizes that would only run out of memory, or run for hours: refused
  // before the run, saying what to change.
  c = good;
  c.data_parallel = 100'000;
  c.microbatches = 1'000'000 / 4;
  ExpectRefused(c, "GiB of bubble history (at most 8 GiB): simulate fewer GPUs or micro-batches");
  c = good;
  c.stage_times = {StageTimes{86'400'000, 86'400'000, 0, -1}};  // a day each
  ExpectRefused(c, "task steps (4 GPUs x 20 iterations, each idle about");
  c.tasks.clear();  // no task steps to simulate: a day is a time like any other
  EXPECT_NO_THROW(ValidateSimConfig(c));
  c = good;
  c.data_parallel = 2048;  // 8192 GPUs, as docs/simulate.md's first example
  EXPECT_NO_THROW(ValidateSimConfig(c));
}

// The estimate of task steps weighs a straggler's slowdown by the chance
// that any GPU straggles in an iteration: a rare straggler is not counted
// as if every iteration were slowed.
TEST(SimConfig, TheStepEstimateWeighsStragglersByTheirChance) {
  SimConfig c = EqualStages(ScheduleKind::k1F1B, 4, 4);
  c.straggler_slowdown = 3;
  c.straggler_prob = 1;  // every iteration slowed 3x
  auto refused = [&](double stage_ms) {
    c.stage_times = {StageTimes{stage_ms, 2 * stage_ms, 0, -1}};
    try {
      ValidateSimConfig(c);
      return false;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("task steps"), std::string::npos) << e.what();
      return true;
    }
  };
  // The shortest stage time (doubling) whose run is refused with every
  // iteration slowed: half of it was not, so it is within the bound at a
  // slowdown of 1.5 or less.
  double stage_ms = 1;
  while (!refused(stage_ms)) stage_ms *= 2;
  ASSERT_GT(stage_ms, 1);
  c.straggler_prob = 0.001;  // on 4 GPUs, about 1 iteration in 250 slowed
  EXPECT_FALSE(refused(stage_ms)) << "a rare straggler weighed as a constant one, at " << stage_ms << " ms";
}

TEST(StageTimesFile, ReadsConfigsAndProfilesAndNamesWhatIsWrong) {
  TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::string path = dir.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  std::string error;
  auto config = ReadStageTimesFile(
      write("c.json", R"({"stages": [{"forward_ms": 1, "backward_ms": 2},
                                      {"forward_ms": 3, "backward_ms": 4, "weight_ms": 1}],
                          "p2p_ms": 0.5})"),
      4, 2, &error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(config->ranks, 2);
  EXPECT_EQ(config->stages[1].forward, 3);
  EXPECT_EQ(config->stages[1].WeightTime(), 1);
  EXPECT_EQ(config->p2p_ms, 0.5);

  auto profile = ReadStageTimesFile(write("p.json", R"({"ranks": [{"busy_ms": 60}, {"busy_ms": 30}]})"),
                                    5, 2, &error);
  ASSERT_TRUE(profile) << error;
  EXPECT_DOUBLE_EQ(profile->stages[0].forward, 4);  // 60 / (5 x (1 + 2))
  EXPECT_DOUBLE_EQ(profile->stages[0].backward, 8);

  EXPECT_FALSE(ReadStageTimesFile(write("bad.json", "{not json"), 4, 2, &error));
  EXPECT_NE(error.find("bad.json: not JSON (") , std::string::npos) << error << " (the parser's reason)";
  EXPECT_FALSE(ReadStageTimesFile(write("list.json", "[1, 2]"), 4, 2, &error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
  EXPECT_FALSE(ReadStageTimesFile(write("neg.json", R"({"stages": [{"forward_ms": -1, "backward_ms": 2}]})"),
                                  4, 2, &error));
  EXPECT_NE(error.find("forward_ms"), std::string::npos) << error;
  EXPECT_FALSE(ReadStageTimesFile(
      write("schedule.json", R"({"schedule": "1f1b", "stages": 2, "microbatches": 2, "iteration": 9,
                                 "bubble_fraction": 0.3, "ranks": [{"rank": 0, "busy": 6}]})"),
      4, 2, &error));
  EXPECT_NE(error.find("this is `freeride schedule --json` output"), std::string::npos) << error;
  EXPECT_NE(error.find("\"forward_ms\""), std::string::npos) << error;
  EXPECT_NE(error.find("give --schedule 1f1b --stages 2 --microbatches 2 --times F,B instead"),
            std::string::npos) << error;
  EXPECT_FALSE(ReadStageTimesFile(write("other.json", R"({"x": 1})"), 4, 2, &error));
  EXPECT_NE(error.find("neither"), std::string::npos) << error;
  EXPECT_FALSE(ReadStageTimesFile(dir.path() + "/missing.json", 4, 2, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST(SimulateCommand, PrintsTheDocumentedJsonAndRefusesBadFlags) {
  TempDir dir;
  const std::string cli = std::string(FREERIDE_BIN) + " simulate --quiet ";
  ShellResult ok = RunShell(cli + "--schedule 1f1b --stages 8 --gpus 64 --iterations 10 --json",
                            dir.path());
  ASSERT_EQ(ok.status, 0) << ok.err;
  nlohmann::json j = nlohmann::json::parse(ok.out);
  for (const char* key : {"bubble_fraction", "harvest_ratio", "overhead_pct", "cost_saving_pct", "gpus"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["gpus"], 64);
  EXPECT_EQ(j["data_parallel"], 8);
  EXPECT_EQ(j["per_stage"].size(), 8u);

  ShellResult sweep =
      RunShell(cli + "--stages 4 --sweep --sweep-gpus 16,32,64 --iterations 3 --json", dir.path());
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  nlohmann::json s = nlohmann::json::parse(sweep.out);
  ASSERT_EQ(s["sweep"].size(), 3u);
  EXPECT_EQ(s["gpus"], 64) << "the top level is the largest scale";
  EXPECT_EQ(s["sweep"][0]["microbatches"], 32);
  EXPECT_EQ(s["sweep"][2]["microbatches"], 8);

  auto refused = [&](const std::string& args, const std::string& words) {
    ShellResult r = RunShell(cli + args, dir.path());
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << args << ": " << r.err;
  };
  refused("--schedule pipedream", "unknown schedule");
  refused("--microbatches 0", "--microbatches must be at least 1");
  refused("--times 1,-2", "not a non-negative number");
  refused("--stages 4 --gpus 10", "not a multiple of --stages 4");
  refused("--stages 8 --layers 4", "only 4 layers");
  refused("--task no-such-task", "neither a built-in task");
  refused("--free-memory-gib 0.25", "could never run");
  // Not a number of GiB a GPU leaves free: said, not taken as no limit (nan)
  // or cast past the byte count's range (1e30).
  refused("--free-memory-gib nan", "--free-memory-gib nan: give the GiB of GPU memory the trainer "
                                   "leaves free, from 0 to 1024 (leave it out for no limit)");
  refused("--free-memory-gib 1e30", "--free-memory-gib 1e+30: give the GiB");
  refused("--free-memory-gib inf", "--free-memory-gib inf: give the GiB");
  refused("--free-memory-gib -1", "--free-memory-gib -1: give the GiB");
  refused("--free-memory-gib 0", "could never run");  // none free, not no limit
  refused("--stage-times /nonexistent.json", "cannot open");
  // `schedule --json` output is a schedule's timeline, not stage times: said so.
  ShellResult schedule = RunShell(std::string(FREERIDE_BIN) + " schedule --json", dir.path());
  ASSERT_EQ(schedule.status, 0) << schedule.err;
  std::ofstream(dir.path() + "/schedule.json") << schedule.out;
  refused("--stage-times " + dir.path() + "/schedule.json",
          dir.path() + "/schedule.json: this is `freeride schedule --json` output (each rank's actions and idle "
          "slots), not stage times. --stage-times expects a stage-times config");
  refused("--stage-times " + dir.path() + "/schedule.json",
          "give --schedule 1f1b --stages 4 --microbatches 4 --times F,B instead");
  refused("--price -3", "give a GPU-hour's price of 0 or more");
  refused("--times 1e308,1e308", "must be at most a day");  // the iteration's sum would be infinite
  refused("--p2p -1", "--p2p must be a time of 0 ms or more");
  // Slowdowns whose times overflowed (negative GPU-seconds, "inf ms", -nan%),
  // and times below the nanoseconds kept (100% idle; a billion empty steps).
  refused("--step-slowdown 1e300", "--step-slowdown must be in 1..1000, not 1e+300");
  refused("--straggler-slowdown 1e300 --straggler-prob 0.5", "--straggler-slowdown must be in 1..1000");
  refused("--times 1e-9,1e-9", "must be 0 or at least a nanosecond (1e-06 ms), not 1e-09");
  refused("--schedule zbv --times 1,2,1e-9", "the weight-gradient time of every stage must be 0 or at least a nanosecond");
  refused("--p2p 1e-7", "--p2p must be 0 or at least a nanosecond");

  // A profile taken at 4 micro-batches, simulated at 8: each micro-batch keeps
  // the profiled stage times (60 ms busy / (4 x 3): F 5, B 10), so the 1F1B
  // iteration is (8 + 2 - 1) x 15 ms, not half of it.
  std::ofstream(dir.path() + "/profile.json") << R"({"ranks": [{"busy_ms": 60}, {"busy_ms": 60}]})";
  const std::string from_profile = "--stages 2 --microbatches 8 --iterations 3 --json --stage-times " +
                                   dir.path() + "/profile.json";
  ShellResult profiled = RunShell(cli + from_profile + " --profile-microbatches 4", dir.path());
  ASSERT_EQ(profiled.status, 0) << profiled.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(profiled.out)["iteration_ms_baseline"].get<double>(), 135.0);
  ShellResult as_simulated = RunShell(cli + from_profile, dir.path());
  ASSERT_EQ(as_simulated.status, 0) << as_simulated.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(as_simulated.out)["iteration_ms_baseline"].get<double>(), 67.5)
      << "without the flag the profile is taken to have run the simulated count";
  refused(from_profile + " --profile-microbatches 0", "--profile-microbatches must be at least 1");
  refused(from_profile + " --global-batch 16", "give --profile-microbatches");
  refused("--stages 2 --iterations 3 --profile-microbatches 4", "needs --stage-times with a profile");
  // A profile's ranks are placed by their "rank", not by where they are
  // listed (a merged or edited file was simulated in file order).
  const std::string ranked = dir.path() + "/ranked.json";
  auto simulate_ranks = [&](const std::string& ranks) {
    std::ofstream(ranked) << R"({"ranks": [)" << ranks << "]}";
    ShellResult r = RunShell(cli + "--stages 3 --microbatches 4 --iterations 3 --json --stage-times " + ranked,
                             dir.path());
    EXPECT_EQ(r.status, 0) << ranks << r.err;
    nlohmann::json out = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    out.erase("simulated_seconds");  // the simulator's own run time
    return out;
  };
  const nlohmann::json in_order =
      simulate_ranks(R"({"rank": 0, "busy_ms": 60}, {"rank": 1, "busy_ms": 120}, {"rank": 2, "busy_ms": 30})");
  EXPECT_EQ(simulate_ranks(R"({"rank": 2, "busy_ms": 30}, {"rank": 0, "busy_ms": 60}, {"rank": 1, "busy_ms": 120})"),
            in_order);
  EXPECT_NE(simulate_ranks(R"({"busy_ms": 30}, {"busy_ms": 60}, {"busy_ms": 120})"), in_order)
      << "unnumbered, the list's order is the ranks' order";
  std::ofstream(ranked) << R"({"ranks": [{"rank": 0, "busy_ms": 60}, {"rank": 0, "busy_ms": 60}]})";
  refused("--stages 2 --stage-times " + ranked, "rank 0 is listed twice (entries 0 and 1)");
  std::ofstream(ranked) << R"({"ranks": [{"rank": 1, "busy_ms": 60}, {"busy_ms": 60}]})";
  refused("--stages 2 --stage-times " + ranked, "entry 1 of \"ranks\" needs a \"rank\" (a whole number, 0 or more)");
  std::ofstream(ranked) << R"({"ranks": [{"rank": 1.5, "busy_ms": 60}, {"rank": 0, "busy_ms": 60}]})";
  refused("--stages 2 --stage-times " + ranked, "entry 0 of \"ranks\" needs a \"rank\"");
  // One pipeline of a larger job keeps its global ranks: ranks 4..6 are stages 0..2.
  EXPECT_EQ(simulate_ranks(R"({"rank": 6, "busy_ms": 30}, {"rank": 4, "busy_ms": 60}, {"rank": 5, "busy_ms": 120})"),
            in_order);
  // ... and a fault in one is said of its own rank, not of its place.
  std::ofstream(ranked) << R"({"ranks": [{"rank": 5, "busy_ms": 0}, {"rank": 4, "busy_ms": 60}]})";
  refused("--stages 2 --stage-times " + ranked, "rank 5 was never busy");
  std::ofstream(dir.path() + "/stages.json") << R"({"stages": [{"forward_ms": 1, "backward_ms": 2}]})";
  refused("--stages 1 --iterations 3 --stage-times " + dir.path() + "/stages.json --profile-microbatches 4",
          "is for a profile");
  ShellResult swept = RunShell(cli + "--stages 1 --sweep --sweep-gpus 2,4 --iterations 3 --json --stage-times " +
                                   dir.path() + "/stages.json",
                               dir.path());
  EXPECT_EQ(swept.status, 0) << "a file of stage times needs no profile's micro-batches: " << swept.err;

  // A config file fills what the command line leaves out.
  std::string config = dir.path() + "/sim.toml";
  std::ofstream(config) << "schedule = \"gpipe\"\nstages = 8\ngpus = 16\niterations = 4\n"
                           "task = [\"sgd\"]\n";
  ShellResult from_file = RunShell(cli + "--config " + config + " --iterations 3 --json", dir.path());
  ASSERT_EQ(from_file.status, 0) << from_file.err;
  nlohmann::json c = nlohmann::json::parse(from_file.out);
  EXPECT_EQ(c["schedule"], "gpipe");
  EXPECT_EQ(c["gpus"], 16);
  EXPECT_EQ(c["iterations"], 3) << "the command line wins";
  ASSERT_EQ(c["tasks"].size(), 1u);
  EXPECT_EQ(c["tasks"][0]["name"], "sgd");
  std::ofstream(dir.path() + "/bad.toml") << "stagez = 3\n";
  refused("--config " + dir.path() + "/bad.toml", "unknown option 'stagez'");
  // A directory reads as an empty config: refused, not run on the defaults.
  refused("--config " + dir.path(), "not a file");
  // Too large to plan, or to hold: said, not aborted with bad_alloc.
  refused("--stages 100000", "is more than the 65536 a schedule is planned for");
  refused("--schedule interleaved --stages 2 --virtual 1073741824 --layers 8",
          "is more than the 65536 a schedule is planned for");
  refused("--gpus 400000 --stages 2", "200000 pipelines is more than this simulator is built for");
}

}  // namespace
}  // namespace freeride::sim
