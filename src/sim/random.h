// Small, fast random streams for the simulator: one per pipeline and
// purpose, seeded from (seed, pipeline, purpose), so that results do not
// depend on how pipelines are spread over threads.
#pragma once
#include <cmath>
#include <cstdint>

#include "sim/sim_config.h"

namespace freeride::sim {

// SplitMix64: 8 bytes of state, good enough statistics for timing noise.
class RandomStream {
 public:
  RandomStream(uint64_t seed, uint64_t pipeline, uint64_t purpose)
      : state_(seed * 0x9E3779B97F4A7C15ull ^ (pipeline + 1) * 0xBF58476D1CE4E5B9ull ^
               (purpose + 1) * 0x94D049BB133111EBull) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller; one of the pair is used, keeping the
  // stream's state one word).
  double Normal() {
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// Draws a task's step time from its measured quantiles: the inverse of a
// piecewise-linear distribution through (0.5, p50), (0.9, p90), (0.99, p99)
// and (1, max), with its lower end as far below p50 as p90 is above it.
class StepSampler {
 public:
  explicit StepSampler(const SimTask& task) {
    double p50 = task.step_ms_p50, p90 = task.step_ms_p90;
    double low = std::max(0.0, 2 * p50 - p90);
    const double values[kPoints] = {low, p50, p90, task.step_ms_p99, task.step_ms_max};
    for (int i = 0; i < kPoints; ++i) ns_[i] = values[i] * 1e6;
  }
  // A step time in nanoseconds.
  double Draw(RandomStream& rng) const {
    double u = rng.Uniform();
    int i = 0;
    while (i + 2 < kPoints && u >= kProbabilities[i + 1]) ++i;
    double span = kProbabilities[i + 1] - kProbabilities[i];
    double f = (u - kProbabilities[i]) / span;
    return ns_[i] + f * (ns_[i + 1] - ns_[i]);
  }

 private:
  static constexpr int kPoints = 5;
  static constexpr double kProbabilities[kPoints] = {0.0, 0.5, 0.9, 0.99, 1.0};
  double ns_[kPoints];
};

}  // namespace freeride::sim
