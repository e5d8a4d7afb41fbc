// The lengths of a process's recent timed pieces of GPU work, their 95th
// percentile and their mean.  Not synchronised: its owner serialises the calls.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

namespace freeride::gate {

class WorkLengths {
 public:
  static constexpr size_t kWindow = 128;

  // Adds one length (negative ones are ignored).
  void Add(int64_t ns) {
    if (ns < 0) return;
    window_[next_++ % kWindow] = ns;
    count_ = std::min(count_ + 1, kWindow);
  }
  // The 95th percentile of the window (the next-to-largest of 20, the
  // largest below 20): 0 with no samples.
  int64_t P95() const {
    if (count_ == 0) return 0;
    std::array<int64_t, kWindow> sorted = window_;
    auto end = sorted.begin() + count_;
    size_t rank = std::min(count_ - 1, (count_ * 95) / 100);
    std::nth_element(sorted.begin(), sorted.begin() + rank, end);
    return sorted[rank];
  }
  // The mean of the window: 0 with no samples.
  int64_t Mean() const {
    if (count_ == 0) return 0;
    int64_t sum = 0;
    for (size_t i = 0; i < count_; ++i) sum += window_[i];
    return sum / static_cast<int64_t>(count_);
  }
  size_t count() const { return count_; }
  // Empties the window.
  void Clear() {
    next_ = 0;
    count_ = 0;
  }

 private:
  std::array<int64_t, kWindow> window_{};
  size_t next_ = 0;
  size_t count_ = 0;
};

}  // namespace freeride::gate
