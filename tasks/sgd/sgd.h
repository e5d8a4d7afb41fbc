// Matrix factorisation by SGD on a bipartite rating graph (the "sgd" task of
// the FreeRide paper).  A step updates the factors over a slice of the
// (shuffled) ratings, so a slice fits a bubble.  CPU: sequential; CUDA:
// Hogwild-style, one thread per rating.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/gpu.h"

namespace freeride::tasks {

struct Rating {
  int32_t user, item;
  float value;
};

struct RatingSet {
  int32_t users = 0, items = 0;
  std::vector<Rating> ratings;
};

// "user item rating" per line (spaces, tabs, commas or '::'; '#' comments).
// Ids are renumbered densely.  Throws std::runtime_error naming the file and
// line for malformed lines; refuses sets whose model would exceed max_bytes.
RatingSet LoadRatings(const std::string& path, int rank, uint64_t max_bytes = 0);

// Ratings of a random rank-`rank` model plus Gaussian noise (sd `noise`),
// shuffled; deterministic for a seed.
RatingSet GenerateRatings(int32_t users, int32_t items, int64_t count, int rank, uint64_t seed,
                          float noise = 0.1f);

// Bytes of ratings plus factors for this size.
uint64_t SgdBytes(int32_t users, int32_t items, int64_t ratings, int rank);

struct SgdParams {
  int rank = 16;  // at most 64
  float learning_rate = 0.01f;
  float regularisation = 0.02f;
  uint64_t seed = 7;
};

class SgdEngine {
 public:
  virtual ~SgdEngine() = default;
  // Updates the factors with ratings [begin, end).
  virtual void Update(int64_t begin, int64_t end) = 0;
  // Root-mean-square error of the model over all ratings.
  virtual double Rmse() = 0;
  virtual void GetFactors(std::vector<float>* users, std::vector<float>* items) const = 0;
  virtual void SetFactors(const std::vector<float>& users, const std::vector<float>& items) = 0;
};

// Factors start from the same seeded values on every device.  `set` must
// outlive the engine.
std::unique_ptr<SgdEngine> MakeSgdEngine(Device device, const RatingSet& set,
                                         const SgdParams& params);

// The initial factors, identical on every device: near sqrt(mean / rank),
// so that first predictions are about the mean rating.
void InitialFactors(const RatingSet& set, const SgdParams& params, std::vector<float>* users,
                    std::vector<float>* items);

}  // namespace freeride::tasks
