#include <cmath>
#include <stdexcept>

#include "pagerank/pagerank.h"

namespace freeride::tasks {
namespace {

class CpuPageRank : public PageRankEngine {
 public:
  explicit CpuPageRank(const Graph& g)
      : g_(g), rank_(g.vertices, 1.0 / g.vertices), next_(g.vertices), contrib_(g.vertices) {}

  void BeginIteration() override {
    dangling_ = 0;
    for (int64_t v = 0; v < g_.vertices; ++v) {
      if (g_.out_degree[v] == 0) {
        dangling_ += rank_[v];
        contrib_[v] = 0;
      } else {
        contrib_[v] = rank_[v] / g_.out_degree[v];
      }
    }
  }

  void ProcessVertices(int64_t begin, int64_t end) override {
    const double base = (1 - kDamping) / g_.vertices + kDamping * dangling_ / g_.vertices;
    for (int64_t v = begin; v < end; ++v) {
      double sum = 0;
      for (int64_t e = g_.in_offsets[v]; e < g_.in_offsets[v + 1]; ++e)
        sum += contrib_[g_.in_sources[e]];
      next_[v] = base + kDamping * sum;
    }
  }

  double EndIteration() override {
    double l1 = 0;
    for (int64_t v = 0; v < g_.vertices; ++v) l1 += std::fabs(next_[v] - rank_[v]);
    rank_.swap(next_);
    return l1;
  }

  std::vector<double> Ranks() const override { return rank_; }
  void SetRanks(const std::vector<double>& r) override { rank_ = r; }

 private:
  const Graph& g_;
  std::vector<double> rank_, next_, contrib_;
  double dangling_ = 0;
};

}  // namespace

std::unique_ptr<PageRankEngine> MakeCpuPageRank(const Graph& graph) {
  return std::make_unique<CpuPageRank>(graph);
}

#ifndef FREERIDE_WITH_CUDA
std::unique_ptr<PageRankEngine> MakeCudaPageRank(const Graph&) {
  throw std::runtime_error("this build has no CUDA");
}
#endif

std::unique_ptr<PageRankEngine> MakePageRankEngine(Device device, const Graph& graph) {
  return device == Device::kCuda ? MakeCudaPageRank(graph) : MakeCpuPageRank(graph);
}

}  // namespace freeride::tasks
