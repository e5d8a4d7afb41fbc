// Built-in side tasks on the CPU: the work-plan sizer, PageRank and SGD
// against independent references, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "common/step_sizer.h"
#include "pagerank/graph.h"
#include "pagerank/pagerank.h"
#include "sgd/sgd.h"
#include "test_util.h"

namespace freeride::tasks {
namespace {

TEST(StepSizer, SizesChunksToTheBudgetFromMeasuredCost) {
  StepSizer sizer(2'000'000, 100, 10, 1'000'000);  // 2 ms budget
  EXPECT_EQ(sizer.next_items(), 100);
  // Items cost 1 µs: growth is capped at 2x a step, then settles at 2000.
  int64_t prev = 100;
  for (int i = 0; i < 20; ++i) {
    int64_t n = sizer.next_items();
    EXPECT_LE(n, 2 * prev);
    sizer.Record(n, n * 1000);
    prev = n;
  }
  EXPECT_EQ(sizer.next_items(), 2000);
  // A slower chunk (contention) is believed at once: no repeated overrun.
  sizer.Record(2000, 2000 * 4000);
  EXPECT_EQ(sizer.next_items(), 500);
  // A faster one only moves the estimate part of the way.
  sizer.Record(500, 500 * 1000);
  EXPECT_GT(sizer.next_items(), 500);
  EXPECT_LT(sizer.next_items(), 2000);
  StepSizer bounded(1'000'000'000, 5, 10, 50);
  EXPECT_EQ(bounded.next_items(), 10);
  bounded.Record(10, 1);
  bounded.Record(20, 1);
  bounded.Record(40, 1);
  EXPECT_EQ(bounded.next_items(), 50);
}

// Dense power iteration straight from the definition, as the reference.
std::vector<double> ReferencePageRank(int n, const std::vector<std::pair<int32_t, int32_t>>& edges,
                                      int iterations) {
  std::vector<int> out(n, 0);
  for (auto [s, d] : edges) ++out[s];
  std::vector<double> r(n, 1.0 / n);
  for (int it = 0; it < iterations; ++it) {
    std::vector<double> next(n, 0);
    double dangling = 0;
    for (int v = 0; v < n; ++v)
      if (out[v] == 0) dangling += r[v];
    for (auto [s, d] : edges) next[d] += r[s] / out[s];
    for (int v = 0; v < n; ++v) next[v] = (1 - 0.85) / n + 0.85 * (next[v] + dangling / n);
    r = next;
  }
  return r;
}

TEST(PageRank, SlicedIterationsMatchTheDefinition) {
  std::mt19937 rng(5);
  const int n = 500;
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (int e = 0; e < 3000; ++e) edges.emplace_back(rng() % n, rng() % (n - 50));  // some dangling
  Graph g = BuildGraph(n, edges);
  auto engine = MakeCpuPageRank(g);
  for (int it = 0; it < 30; ++it) {
    engine->BeginIteration();
    for (int64_t v = 0; v < n;) {  // uneven slices, as bubbles give them
      int64_t end = std::min<int64_t>(n, v + 1 + rng() % 97);
      engine->ProcessVertices(v, end);
      v = end;
    }
    engine->EndIteration();
  }
  std::vector<double> ours = engine->Ranks(), ref = ReferencePageRank(n, edges, 30);
  double l1 = 0, sum = 0;
  for (int v = 0; v < n; ++v) l1 += std::fabs(ours[v] - ref[v]), sum += ours[v];
  EXPECT_LE(l1, 1e-10);
  EXPECT_NEAR(sum, 1.0, 1e-9);
}

TEST(PageRank, RmatGraphIsDeterministicAndSkewed) {
  Graph a = GenerateRmat(10, 8, 1), b = GenerateRmat(10, 8, 1), c = GenerateRmat(10, 8, 2);
  EXPECT_EQ(a.vertices, 1024);
  EXPECT_EQ(a.edges(), 8192);
  EXPECT_EQ(a.in_sources, b.in_sources);
  EXPECT_NE(a.in_sources, c.in_sources);
  int max_in = 0;
  for (int64_t v = 0; v < a.vertices; ++v)
    max_in = std::max<int>(max_in, a.in_offsets[v + 1] - a.in_offsets[v]);
  EXPECT_GT(max_in, 8 * 8);  // power-law: a hub far above the mean of 8
  EXPECT_THROW(GenerateRmat(0, 8, 1), std::runtime_error);
}

TEST(PageRank, EdgeListsAreReadWithClearErrors) {
  TempDir dir;
  auto write = [&](const std::string& text) {
    std::string p = dir.path() + "/g.txt";
    std::ofstream(p) << text;
    return p;
  };
  Graph g = LoadEdgeList(write("# SNAP header\n100\t7\n7 100\n\n7 3000000000\n"));
  EXPECT_EQ(g.vertices, 3);  // sparse ids renumbered
  EXPECT_EQ(g.edges(), 3);
  auto message = [&](const std::string& text, uint64_t limit = 0) {
    try {
      LoadEdgeList(write(text), limit);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("1 2\n3 four\n").find("g.txt:2: expected two non-negative"), std::string::npos);
  EXPECT_NE(message("1 2 3\n").find("got more"), std::string::npos);
  EXPECT_NE(message("-1 2\n").find(":1:"), std::string::npos);
  EXPECT_NE(message("# nothing\n").find("no edges"), std::string::npos);
  EXPECT_NE(message("1 2\n2 3\n", 10).find("memory limit"), std::string::npos);
  EXPECT_THROW(LoadEdgeList(dir.path() + "/missing.txt"), std::runtime_error);
}

TEST(Sgd, LearnsAGeneratedLowRankModelAndSlicingDoesNotMatter) {
  RatingSet set = GenerateRatings(400, 200, 40000, 8, 11, 0.05f);
  SgdParams p;
  p.rank = 8;
  auto whole = MakeSgdEngine(Device::kCpu, set, p);
  auto sliced = MakeSgdEngine(Device::kCpu, set, p);
  double start = whole->Rmse();
  const int64_t n = static_cast<int64_t>(set.ratings.size());
  for (int epoch = 0; epoch < 15; ++epoch) {
    whole->Update(0, n);
    for (int64_t i = 0; i < n; i += 777) sliced->Update(i, std::min(n, i + 777));
  }
  double end = whole->Rmse();
  EXPECT_LT(end, 0.5 * start);
  EXPECT_LT(end, 0.25);
  EXPECT_DOUBLE_EQ(sliced->Rmse(), end);  // sequential SGD: same updates, same order
}

TEST(Sgd, RatingFilesAreReadWithClearErrors) {
  TempDir dir;
  std::string p = dir.path() + "/r.csv";
  std::ofstream(p) << "# user,item,rating\n10,20,4.5\n11::20::3\n10\t21\t1\n";
  RatingSet set = LoadRatings(p, 8);
  EXPECT_EQ(set.users, 2);
  EXPECT_EQ(set.items, 2);
  EXPECT_EQ(set.ratings.size(), 3u);
  std::ofstream(p) << "1 2 3\n1 2 nan\n";
  try {
    LoadRatings(p, 8);
    ADD_FAILURE() << "accepted nan";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("r.csv:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MakeSgdEngine(Device::kCpu, set, SgdParams{.rank = 65}), std::runtime_error);
}

TEST(TaskBinaries, BadArgumentsAndInputsExitNonZeroWithAMessage) {
  TempDir dir;
  auto run = [&](const std::string& args) {
    std::string cmd = args + " > " + dir.path() + "/out 2> " + dir.path() + "/err";
    int status = std::system(cmd.c_str());
    std::ifstream err(dir.path() + "/err");
    return std::pair{WEXITSTATUS(status), std::string((std::istreambuf_iterator<char>(err)), {})};
  };
  auto [rc1, err1] = run(std::string(PAGERANK_BIN));
  EXPECT_EQ(rc1, 2);
  EXPECT_NE(err1.find("--edges FILE or --rmat-scale"), std::string::npos);
  auto [rc2, err2] = run(std::string(PAGERANK_BIN) + " --edges " + dir.path() + "/none.txt");
  EXPECT_EQ(rc2, 1);
  EXPECT_NE(err2.find("cannot open"), std::string::npos);
  auto [rc3, err3] = run(std::string(SGD_BIN) + " --generate-ratings 1000 --device warp-drive");
  EXPECT_EQ(rc3, 1);
  EXPECT_NE(err3.find("--device must be cpu, cuda or auto"), std::string::npos);
  // Standalone: the alone rate and step-time quantiles as one JSON line.
  auto [rc4, err4] = run(std::string(SGD_BIN) +
                         " --generate-ratings 20000 --epochs 2 --device cpu --standalone");
  EXPECT_EQ(rc4, 0) << err4;
  std::vector<nlohmann::json> lines = ReadJsonLines(dir.path() + "/out");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["task"], "sgd");
  EXPECT_EQ(lines[1]["unit"], "ratings");
  EXPECT_DOUBLE_EQ(lines[1]["units"].get<double>(), 40000);
  EXPECT_TRUE(lines[1]["finished"].get<bool>());
  EXPECT_GT(lines[1]["step_ms_p50"].get<double>(), 0);
}

}  // namespace
}  // namespace freeride::tasks
