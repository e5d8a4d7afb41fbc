// freeride-pagerank: PageRank as a FreeRide iterative side task.  A step is
// a slice of the vertices of one iteration, sized to --step-ms by its work
// (in-edges and vertices: graph.h's WorkBefore), not its vertex count.
//
//   freeride-pagerank --rmat-scale 20 --device auto --step-ms 2
//   freeride-pagerank --edges soc-LiveJournal1.txt --output top.tsv
//   freeride-pagerank --rmat-scale 22 --standalone --seconds 10   # alone rate
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "common/gpu.h"
#include "common/bubble_windows.h"
#include "common/step_sizer.h"
#include "common/task_options.h"
#include "freeride/task.h"
#include "pagerank/pagerank.h"

namespace freeride::tasks {
namespace {

struct Options {
  std::string edges;
  int rmat_scale = 0;
  int edge_factor = 16;
  uint64_t seed = 1;
  CommonTaskOptions common;
  double tolerance = 1e-6;
  int max_iterations = 100;
  std::string output;
  int top = 20;
};

class PageRankTask : public IterativeTask {
 public:
  explicit PageRankTask(Options o) : o_(std::move(o)) {}

  std::string unit() const override { return "edges"; }
  uint64_t peak_memory_bytes() const override { return PeakGpuBytes(); }

  void Init() override {
    Device device = ChooseDevice(o_.common.device);
    uint64_t limit = MemoryLimitBytes();
    if (o_.edges.empty()) {
      // The size is known before generating: refuse before allocating.
      int64_t vertices = int64_t{1} << std::clamp(o_.rmat_scale, 0, 62);
      CheckMemoryFits(PageRankBytes(vertices, vertices * o_.edge_factor), limit,
                      "the R-MAT graph of scale " + std::to_string(o_.rmat_scale));
      graph_ = GenerateRmat(o_.rmat_scale, o_.edge_factor, o_.seed);
    } else {
      graph_ = LoadEdgeList(o_.edges, limit);
    }
    engine_ = MakePageRankEngine(device, graph_);
    // The sizer's items are units of work (graph.h's WorkBefore), so that a
    // chunk of hubs and one of leaves of one budget take alike.
    const int64_t vertex_work = kVertexWork + graph_.edges() / std::max<int64_t>(1, graph_.vertices);
    sizer_ = StepSizer(static_cast<int64_t>(o_.common.step_ms * 1e6), 1024 * vertex_work, 32 * kVertexWork,
                       WorkBefore(graph_, graph_.vertices));
    on_gpu_ = device == Device::kCuda;
    std::fprintf(stderr, "pagerank: %lld vertices, %lld edges on %s, step budget %.2f ms\n",
                 static_cast<long long>(graph_.vertices), static_cast<long long>(graph_.edges()),
                 DeviceName(device), o_.common.step_ms);
  }

  StepResult Step() override {
    if (steps_++ == 0) {
      sizer_.set_slow_chunks(SlowChunksForThisStep(on_gpu_));
      bubble_steps_.Start(sizer_.slow_chunks(), o_.common.fixed_steps);
    }
    sizer_.set_target_ns(bubble_steps_.TargetNs());
    if (cursor_ == 0) engine_->BeginIteration();
    const int64_t end = ChunkEnd(graph_, cursor_, sizer_.next_items());
    sizer_.RunChunk(WorkBefore(graph_, end) - WorkBefore(graph_, cursor_),
                    [&] { engine_->ProcessVertices(cursor_, end); });
    double units = static_cast<double>(graph_.in_offsets[end] - graph_.in_offsets[cursor_]);
    bubble_steps_.Record(units);
    cursor_ = end;
    if (cursor_ < graph_.vertices) return {units, false};
    cursor_ = 0;
    double change = engine_->EndIteration();
    ++iteration_;
    std::fprintf(stderr, "pagerank: iteration %d, L1 change %.3g\n", iteration_, change);
    return {units, change < o_.tolerance || iteration_ >= o_.max_iterations};
  }

  void Finish() override {
    if (o_.output.empty()) return;
    std::vector<double> ranks = engine_->Ranks();
    std::vector<int64_t> order(ranks.size());
    std::iota(order.begin(), order.end(), 0);
    size_t k = std::min<size_t>(o_.top, order.size());
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return ranks[a] > ranks[b]; });
    std::ofstream out(o_.output);
    for (size_t i = 0; i < k; ++i) out << order[i] << '\t' << ranks[order[i]] << '\n';
  }

  // The ranks of the last finished iteration; a half-done one is redone.
  bool Save(const std::string& path) override {
    std::ofstream out(path, std::ios::binary);
    std::vector<double> ranks = engine_->Ranks();
    int64_t header[3] = {graph_.vertices, graph_.edges(), iteration_};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    out.write(reinterpret_cast<const char*>(ranks.data()), ranks.size() * sizeof(double));
    return static_cast<bool>(out);
  }

  bool Restore(const std::string& path) override {
    std::ifstream in(path, std::ios::binary);
    int64_t header[3];
    if (!in.read(reinterpret_cast<char*>(header), sizeof header)) return false;
    if (header[0] != graph_.vertices || header[1] != graph_.edges()) {
      std::fprintf(stderr, "pagerank: checkpoint is for another graph; starting over\n");
      return false;
    }
    std::vector<double> ranks(graph_.vertices);
    if (!in.read(reinterpret_cast<char*>(ranks.data()), ranks.size() * sizeof(double)))
      return false;
    engine_->SetRanks(ranks);
    iteration_ = static_cast<int>(header[2]);
    cursor_ = 0;
    return true;
  }

 private:
  Options o_;
  Graph graph_;
  std::unique_ptr<PageRankEngine> engine_;
  StepSizer sizer_{1, 1, 1, 1};
  // The step time aimed at: --step-ms, or behind a gate bubble-sized.
  BubbleSizedSteps bubble_steps_{static_cast<int64_t>(o_.common.step_ms * 1e6)};
  bool on_gpu_ = false;
  uint64_t steps_ = 0;
  int64_t cursor_ = 0;
  int iteration_ = 0;
};

}  // namespace
}  // namespace freeride::tasks

int main(int argc, char** argv) {
  freeride::tasks::Options o;
  CLI::App app{"PageRank as a FreeRide side task (pull-based CSR, damping 0.85)"};
  auto* edges = app.add_option("--edges", o.edges, "SNAP-style edge list: 'src dst' per line");
  auto* rmat = app.add_option("--rmat-scale", o.rmat_scale, "Generate an R-MAT graph of 2^S vertices");
  edges->excludes(rmat);
  app.add_option("--edge-factor", o.edge_factor, "R-MAT edges per vertex")->capture_default_str();
  app.add_option("--seed", o.seed, "R-MAT seed")->capture_default_str();
  app.add_option("--tolerance", o.tolerance, "Stop when the L1 change is below this")
      ->capture_default_str();
  app.add_option("--max-iterations", o.max_iterations, "Stop after this many iterations")
      ->capture_default_str();
  app.add_option("--output", o.output, "Write the top vertices and ranks here (TSV)");
  app.add_option("--top", o.top, "How many vertices --output lists")->capture_default_str();
  return freeride::tasks::RunTaskMain<freeride::tasks::PageRankTask>(
      app, o, argc, argv, [](const auto& o) { return !o.edges.empty() || o.rmat_scale != 0; },
      "freeride-pagerank: give --edges FILE or --rmat-scale S");
}
