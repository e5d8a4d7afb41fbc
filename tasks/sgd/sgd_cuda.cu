// SGD matrix factorisation on the GPU, Hogwild-style as in cuMF_SGD: one
// thread per rating, reading possibly stale factors.  Updates are added
// atomically, so concurrent updates of a popular user or item are all kept
// (plain stores lost them: on sparse data the RMSE then lagged the CPU
// reference by a third after 10 epochs).
#include "common/cuda_check.h"
#include "sgd/sgd.h"

namespace freeride::tasks {
namespace {

constexpr int kMaxRank = 64;

__global__ void UpdateSlice(const Rating* ratings, int64_t begin, int64_t end, int k, float lr,
                            float reg, float* users, float* items) {
  int64_t n = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n >= end) return;
  Rating r = ratings[n];
  float* pu = users + static_cast<size_t>(r.user) * k;
  float* qi = items + static_cast<size_t>(r.item) * k;
  float p[kMaxRank], q[kMaxRank];
  float dot = 0;
  for (int j = 0; j < k; ++j) {
    p[j] = pu[j];
    q[j] = qi[j];
    dot += p[j] * q[j];
  }
  float err = r.value - dot;
  for (int j = 0; j < k; ++j) {
    atomicAdd(&pu[j], lr * (err * q[j] - reg * p[j]));
    atomicAdd(&qi[j], lr * (err * p[j] - reg * q[j]));
  }
}

__global__ void SquaredError(const Rating* ratings, int64_t count, int k, const float* users,
                             const float* items, double* out) {
  int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  double e2 = 0;
  if (n < count) {
    Rating r = ratings[n];
    float dot = 0;
    for (int j = 0; j < k; ++j)
      dot += users[static_cast<size_t>(r.user) * k + j] * items[static_cast<size_t>(r.item) * k + j];
    double e = r.value - dot;
    e2 = e * e;
  }
  for (int off = 16; off > 0; off /= 2) e2 += __shfl_down_sync(0xffffffff, e2, off);
  if ((threadIdx.x & 31) == 0 && e2 != 0) atomicAdd(out, e2);
}

class CudaSgd : public SgdEngine {
 public:
  CudaSgd(const RatingSet& set, const SgdParams& p)
      : p_(p),
        count_(static_cast<int64_t>(set.ratings.size())),
        ratings_(set.ratings.size()),
        users_(static_cast<size_t>(set.users) * p.rank),
        items_(static_cast<size_t>(set.items) * p.rank),
        sum_(1) {
    ratings_.CopyFrom(set.ratings.data(), set.ratings.size());
    std::vector<float> u, i;
    InitialFactors(set, p, &u, &i);
    SetFactors(u, i);
  }

  void Update(int64_t begin, int64_t end) override {
    if (end <= begin) return;
    UpdateSlice<<<static_cast<int>((end - begin + 255) / 256), 256>>>(
        ratings_.get(), begin, end, p_.rank, p_.learning_rate, p_.regularisation, users_.get(),
        items_.get());
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  double Rmse() override {
    CUDA_CHECK(cudaMemset(sum_.get(), 0, sizeof(double)));
    SquaredError<<<static_cast<int>((count_ + 255) / 256), 256>>>(ratings_.get(), count_, p_.rank,
                                                                 users_.get(), items_.get(),
                                                                 sum_.get());
    CUDA_CHECK(cudaGetLastError());
    double sum = 0;
    sum_.CopyTo(&sum, 1);
    return std::sqrt(sum / count_);
  }

  void GetFactors(std::vector<float>* u, std::vector<float>* i) const override {
    u->resize(users_.size());
    i->resize(items_.size());
    users_.CopyTo(u->data(), u->size());
    items_.CopyTo(i->data(), i->size());
  }
  void SetFactors(const std::vector<float>& u, const std::vector<float>& i) override {
    users_.CopyFrom(u.data(), u.size());
    items_.CopyFrom(i.data(), i.size());
  }

 private:
  SgdParams p_;
  int64_t count_;
  DeviceBuffer<Rating> ratings_;
  DeviceBuffer<float> users_, items_;
  DeviceBuffer<double> sum_;
};

}  // namespace

std::unique_ptr<SgdEngine> MakeCudaSgd(const RatingSet& set, const SgdParams& params) {
  return std::make_unique<CudaSgd>(set, params);
}

}  // namespace freeride::tasks
