#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "common/data_lines.h"
#include "sgd/sgd.h"

namespace freeride::tasks {

uint64_t SgdBytes(int32_t users, int32_t items, int64_t ratings, int rank) {
  return static_cast<uint64_t>(ratings) * sizeof(Rating) +
         (static_cast<uint64_t>(users) + items) * rank * sizeof(float);
}

RatingSet LoadRatings(const std::string& path, int rank, uint64_t max_bytes) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the rating file");
  RatingSet set;
  std::unordered_map<int64_t, int32_t> users, items;
  std::string line;
  int64_t line_no = 0;
  while (NextDataLine(in, &line, &line_no)) {
    for (char& c : line)
      if (c == ',' || c == ':' || c == '\t') c = ' ';
    std::istringstream fields(line);
    int64_t u = -1, i = -1;
    double r = 0;
    if (!(fields >> u >> i >> r) || u < 0 || i < 0 || !std::isfinite(r))
      throw std::runtime_error(path + ":" + std::to_string(line_no) +
                               ": expected 'user item rating', got '" + line + "'");
    auto ui = users.emplace(u, static_cast<int32_t>(users.size())).first->second;
    auto ii = items.emplace(i, static_cast<int32_t>(items.size())).first->second;
    set.ratings.push_back({ui, ii, static_cast<float>(r)});
    if ((set.ratings.size() & 0xFFFF) == 0)
      CheckMemoryFits(SgdBytes(users.size(), items.size(), set.ratings.size(), rank), max_bytes,
                      path + ": the part of the ratings read so far");
  }
  if (set.ratings.empty()) throw std::runtime_error(path + ": no ratings found");
  CheckMemoryFits(SgdBytes(users.size(), items.size(), set.ratings.size(), rank), max_bytes,
                  path + ": the ratings and factors");
  set.users = static_cast<int32_t>(users.size());
  set.items = static_cast<int32_t>(items.size());
  // A fixed shuffle: SGD converges badly on ratings sorted by user.
  std::shuffle(set.ratings.begin(), set.ratings.end(), std::mt19937_64(42));
  return set;
}

RatingSet GenerateRatings(int32_t users, int32_t items, int64_t count, int rank, uint64_t seed,
                          float noise) {
  if (users < 1 || items < 1 || count < 1 || rank < 1)
    throw std::runtime_error("generated ratings need users, items, count and rank >= 1");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> factor(0.f, 1.f);
  std::normal_distribution<float> gauss(0.f, noise);
  std::vector<float> u(static_cast<size_t>(users) * rank), v(static_cast<size_t>(items) * rank);
  for (float& x : u) x = factor(rng);
  for (float& x : v) x = factor(rng);
  RatingSet set{users, items, {}};
  set.ratings.reserve(count);
  std::uniform_int_distribution<int32_t> pick_user(0, users - 1), pick_item(0, items - 1);
  for (int64_t n = 0; n < count; ++n) {
    int32_t a = pick_user(rng), b = pick_item(rng);
    float dot = 0;
    for (int k = 0; k < rank; ++k) dot += u[a * rank + k] * v[b * rank + k];
    // Ratings around 1..5 like a star scale.
    set.ratings.push_back({a, b, 1.f + 4.f * dot / rank * 2.f + gauss(rng)});
  }
  return set;
}

void InitialFactors(const RatingSet& set, const SgdParams& p, std::vector<float>* users,
                    std::vector<float>* items) {
  std::mt19937_64 rng(p.seed);
  // Start near sqrt(mean / rank) so that initial predictions are about the mean.
  double mean = 0;
  for (const Rating& r : set.ratings) mean += r.value;
  mean /= set.ratings.size();
  float centre = static_cast<float>(std::sqrt(std::max(0.0, mean) / p.rank));
  std::uniform_real_distribution<float> jitter(0.9f * centre, 1.1f * centre);
  users->resize(static_cast<size_t>(set.users) * p.rank);
  items->resize(static_cast<size_t>(set.items) * p.rank);
  for (float& x : *users) x = jitter(rng);
  for (float& x : *items) x = jitter(rng);
}

namespace {

class CpuSgd : public SgdEngine {
 public:
  CpuSgd(const RatingSet& set, const SgdParams& p) : set_(set), p_(p) {
    InitialFactors(set, p, &users_, &items_);
  }

  void Update(int64_t begin, int64_t end) override {
    const int k = p_.rank;
    for (int64_t n = begin; n < end; ++n) {
      const Rating& r = set_.ratings[n];
      float* pu = &users_[static_cast<size_t>(r.user) * k];
      float* qi = &items_[static_cast<size_t>(r.item) * k];
      float dot = 0;
      for (int j = 0; j < k; ++j) dot += pu[j] * qi[j];
      float err = r.value - dot;
      for (int j = 0; j < k; ++j) {
        float pj = pu[j], qj = qi[j];
        pu[j] += p_.learning_rate * (err * qj - p_.regularisation * pj);
        qi[j] += p_.learning_rate * (err * pj - p_.regularisation * qj);
      }
    }
  }

  double Rmse() override {
    const int k = p_.rank;
    double sum = 0;
    for (const Rating& r : set_.ratings) {
      float dot = 0;
      for (int j = 0; j < k; ++j)
        dot += users_[static_cast<size_t>(r.user) * k + j] * items_[static_cast<size_t>(r.item) * k + j];
      double e = r.value - dot;
      sum += e * e;
    }
    return std::sqrt(sum / set_.ratings.size());
  }

  void GetFactors(std::vector<float>* u, std::vector<float>* i) const override {
    *u = users_;
    *i = items_;
  }
  void SetFactors(const std::vector<float>& u, const std::vector<float>& i) override {
    users_ = u;
    items_ = i;
  }

 private:
  const RatingSet& set_;
  SgdParams p_;
  std::vector<float> users_, items_;
};

}  // namespace

std::unique_ptr<SgdEngine> MakeCudaSgd(const RatingSet& set, const SgdParams& params);

#ifndef FREERIDE_WITH_CUDA
std::unique_ptr<SgdEngine> MakeCudaSgd(const RatingSet&, const SgdParams&) {
  throw std::runtime_error("this build has no CUDA");
}
#endif

std::unique_ptr<SgdEngine> MakeSgdEngine(Device device, const RatingSet& set,
                                         const SgdParams& params) {
  if (params.rank < 1 || params.rank > 64) throw std::runtime_error("--rank must be in 1..64");
  if (device == Device::kCuda) return MakeCudaSgd(set, params);
  return std::make_unique<CpuSgd>(set, params);
}

}  // namespace freeride::tasks
