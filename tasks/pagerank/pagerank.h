// Pull-based PageRank (damping 0.85, dangling mass spread evenly) that runs
// one iteration in slices of vertices, so a slice fits a bubble.  CPU and
// CUDA engines share this interface and give the same ranks.
#pragma once
#include <memory>
#include <vector>

#include "common/gpu.h"
#include "pagerank/graph.h"

namespace freeride::tasks {

class PageRankEngine {
 public:
  virtual ~PageRankEngine() = default;
  // Prepares the iteration: contributions rank/out_degree, dangling mass.
  virtual void BeginIteration() = 0;
  // Computes the next rank of vertices [begin, end).
  virtual void ProcessVertices(int64_t begin, int64_t end) = 0;
  // Ends the iteration: returns the L1 change and makes next the ranks.
  virtual double EndIteration() = 0;
  virtual std::vector<double> Ranks() const = 0;
  virtual void SetRanks(const std::vector<double>& ranks) = 0;
};

inline constexpr double kDamping = 0.85;

// The graph must outlive the engine.
std::unique_ptr<PageRankEngine> MakePageRankEngine(Device device, const Graph& graph);
std::unique_ptr<PageRankEngine> MakeCpuPageRank(const Graph& graph);
std::unique_ptr<PageRankEngine> MakeCudaPageRank(const Graph& graph);  // throws without CUDA

}  // namespace freeride::tasks
