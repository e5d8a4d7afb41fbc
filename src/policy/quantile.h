// Quantile of a small sample without allocation.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "base/clock.h"

namespace freeride {

constexpr int kMaxQuantileWindow = 64;

// The 0-based index of the nearest-rank q-quantile (q in 0..1) of `count`
// sorted values; count must be at least 1.
inline size_t NearestRankIndex(size_t count, double q) {
  size_t rank = static_cast<size_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count)));
  return std::clamp<size_t>(rank, 1, count) - 1;
}

// The q-quantile (0..1, nearest rank) of values[0..count).  count must be in
// 1..kMaxQuantileWindow.  Copies to the stack; never allocates.
inline Nanos QuantileOf(const Nanos* values, int count, double q) {
  std::array<Nanos, kMaxQuantileWindow> scratch;
  std::copy(values, values + count, scratch.begin());
  size_t rank = NearestRankIndex(static_cast<size_t>(count), q);
  std::nth_element(scratch.begin(), scratch.begin() + rank, scratch.begin() + count);
  return scratch[rank];
}

// The same for a sample of any size, taken by value (it is reordered); 0
// for an empty one.  For off-line figures: it allocates.
inline Nanos QuantileOf(std::vector<Nanos> values, double q) {
  if (values.empty()) return 0;
  size_t rank = NearestRankIndex(values.size(), q);
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

}  // namespace freeride
