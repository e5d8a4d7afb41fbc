// PageRank on the GPU: one warp per vertex for the pull sum, so that
// high-in-degree vertices of power-law graphs do not serialise a thread.
#include "common/cuda_check.h"
#include "pagerank/pagerank.h"

namespace freeride::tasks {
namespace {

__global__ void Contributions(int64_t n, const double* rank, const int32_t* out_degree,
                              double* contrib, double* dangling) {
  int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  double mine = 0;
  if (v < n) {
    if (out_degree[v] == 0) {
      mine = rank[v];
      contrib[v] = 0;
    } else {
      contrib[v] = rank[v] / out_degree[v];
    }
  }
  for (int off = 16; off > 0; off /= 2) mine += __shfl_down_sync(0xffffffff, mine, off);
  if ((threadIdx.x & 31) == 0 && mine != 0) atomicAdd(dangling, mine);
}

__global__ void PullSlice(int64_t begin, int64_t end, int64_t n, const int64_t* offsets,
                          const int32_t* sources, const double* contrib, const double* dangling,
                          double* next) {
  int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  int lane = threadIdx.x & 31;
  int64_t v = begin + warp;
  if (v >= end) return;
  double sum = 0;
  for (int64_t e = offsets[v] + lane; e < offsets[v + 1]; e += 32) sum += contrib[sources[e]];
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffff, sum, off);
  if (lane == 0) next[v] = (1 - kDamping) / n + kDamping * (*dangling / n + sum);
}

__global__ void L1Change(int64_t n, const double* a, const double* b, double* out) {
  int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  double d = v < n ? fabs(a[v] - b[v]) : 0;
  for (int off = 16; off > 0; off /= 2) d += __shfl_down_sync(0xffffffff, d, off);
  if ((threadIdx.x & 31) == 0 && d != 0) atomicAdd(out, d);
}

int Blocks(int64_t threads) { return static_cast<int>((threads + 255) / 256); }

class CudaPageRank : public PageRankEngine {
 public:
  explicit CudaPageRank(const Graph& g)
      : n_(g.vertices),
        offsets_(g.vertices + 1),
        sources_(std::max<int64_t>(1, g.edges())),
        out_degree_(g.vertices),
        rank_(g.vertices),
        next_(g.vertices),
        contrib_(g.vertices),
        scalars_(2) {
    offsets_.CopyFrom(g.in_offsets.data(), g.vertices + 1);
    if (g.edges() > 0) sources_.CopyFrom(g.in_sources.data(), g.edges());
    out_degree_.CopyFrom(g.out_degree.data(), g.vertices);
    SetRanks(std::vector<double>(n_, 1.0 / n_));
  }

  void BeginIteration() override {
    CUDA_CHECK(cudaMemset(scalars_.get(), 0, 2 * sizeof(double)));
    Contributions<<<Blocks(n_), 256>>>(n_, rank_.get(), out_degree_.get(), contrib_.get(),
                                       scalars_.get());
    CUDA_CHECK(cudaGetLastError());
  }

  void ProcessVertices(int64_t begin, int64_t end) override {
    if (end <= begin) return;
    PullSlice<<<Blocks((end - begin) * 32), 256>>>(begin, end, n_, offsets_.get(),
                                                   sources_.get(), contrib_.get(),
                                                   scalars_.get(), next_.get());
    CUDA_CHECK(cudaGetLastError());
    // A step ends when its work is done: the time the sizer sees is real.
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  double EndIteration() override {
    L1Change<<<Blocks(n_), 256>>>(n_, rank_.get(), next_.get(), scalars_.get() + 1);
    CUDA_CHECK(cudaGetLastError());
    double l1 = 0;
    CUDA_CHECK(cudaMemcpy(&l1, scalars_.get() + 1, sizeof(double), cudaMemcpyDeviceToHost));
    std::swap(rank_, next_);
    return l1;
  }

  std::vector<double> Ranks() const override {
    std::vector<double> r(n_);
    rank_.CopyTo(r.data(), n_);
    return r;
  }
  void SetRanks(const std::vector<double>& r) override { rank_.CopyFrom(r.data(), n_); }

 private:
  int64_t n_;
  DeviceBuffer<int64_t> offsets_;
  DeviceBuffer<int32_t> sources_, out_degree_;
  DeviceBuffer<double> rank_, next_, contrib_, scalars_;  // scalars: dangling, l1
};

}  // namespace

std::unique_ptr<PageRankEngine> MakeCudaPageRank(const Graph& graph) {
  return std::make_unique<CudaPageRank>(graph);
}

}  // namespace freeride::tasks
