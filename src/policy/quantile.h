// Quantile of a small sample without allocation.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>

#include "base/clock.h"

namespace freeride {

constexpr int kMaxQuantileWindow = 64;

// The q-quantile (0..1, nearest rank) of values[0..count).  count must be in
// 1..kMaxQuantileWindow.  Copies to the stack; never allocates.
inline Nanos QuantileOf(const Nanos* values, int count, double q) {
  std::array<Nanos, kMaxQuantileWindow> scratch;
  std::copy(values, values + count, scratch.begin());
  int rank = static_cast<int>(std::ceil(std::clamp(q, 0.0, 1.0) * count)) - 1;
  rank = std::clamp(rank, 0, count - 1);
  std::nth_element(scratch.begin(), scratch.begin() + rank, scratch.begin() + count);
  return scratch[rank];
}

}  // namespace freeride
