#include "policy/overhead_probe.h"

#include <algorithm>
#include <cmath>

namespace freeride {
namespace {

// A well-mixed 64-bit hash (splitmix64's finaliser), so that neighbouring
// cycles get unrelated window offsets.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double Median(std::vector<Nanos>& values) {
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = static_cast<double>(values[mid]);
  if (values.size() % 2 == 1) return upper;
  double lower = static_cast<double>(*std::max_element(values.begin(), values.begin() + mid));
  return (lower + upper) / 2;
}

}  // namespace

ProbeSchedule ProbeSchedule::ForIteration(Nanos iteration, const ProbeConfig& config) {
  ProbeSchedule schedule;
  if (iteration <= 0 || !config.Valid()) return schedule;
  const double scale = std::max(
      1.0, static_cast<double>(config.min_period) / (static_cast<double>(iteration) * config.period_iterations));
  schedule.period_ = static_cast<Nanos>(scale * iteration * config.period_iterations);
  schedule.window_ = static_cast<Nanos>(scale * iteration * (config.withheld_iterations + 1));
  return schedule;
}

TimeWindow ProbeSchedule::WindowOf(int64_t cycle) const {
  if (period_ <= 0) return {};
  const Nanos start_of_cycle = cycle * period_;
  // A window keeps a window's length from either end of its cycle, so an
  // iteration that straddles two cycles touches neither cycle's window.
  const Nanos room = period_ - 3 * window_;
  const Nanos offset = window_ + static_cast<Nanos>(Mix(static_cast<uint64_t>(cycle)) %
                                                    static_cast<uint64_t>(room));
  return {start_of_cycle + offset, start_of_cycle + offset + window_};
}

bool ProbeSchedule::Withheld(Nanos t) const {
  return period_ > 0 && WindowOf(CycleOf(t)).Contains(t);
}

TimeWindow ProbeSchedule::NextWindow(Nanos t) const {
  if (period_ <= 0) return {};
  TimeWindow window = WindowOf(CycleOf(t));
  return window.end > t ? window : WindowOf(CycleOf(t) + 1);
}

OverheadEstimator::OverheadEstimator(OverheadEstimatorConfig config) : config_(config) {}

bool OverheadEstimator::ObserveIteration(Nanos begin, Nanos end, const ProbeSchedule& schedule) {
  if (!schedule.enabled() || end <= begin) return false;
  const int64_t cycle = schedule.CycleOf(begin);
  bool closed = false;
  if (cycle != cycle_) {
    if (cycle_ >= 0) {
      CloseCycle();
      closed = true;
    }
    cycle_ = cycle;
  }
  const TimeWindow window = schedule.WindowOf(cycle);
  if (begin >= window.start && end <= window.end) {
    withheld_.push_back(end - begin);
  } else if (!window.Overlaps(begin, end)) {
    served_.push_back(end - begin);
  }
  return closed;
}

void OverheadEstimator::CloseCycle() {
  if (static_cast<int>(withheld_.size()) >= config_.min_withheld &&
      static_cast<int>(served_.size()) >= config_.min_served) {
    const int64_t withheld_count = static_cast<int64_t>(withheld_.size());
    const int64_t served_count = static_cast<int64_t>(served_.size());
    const double ratio = Median(served_) / Median(withheld_) - 1.0;
    ratios_.push_back(ratio);
    ++ratios_added_;
    ratio_withheld_.push_back(withheld_count);
    ratio_served_.push_back(served_count);
    if (static_cast<int>(ratios_.size()) > config_.window_cycles) {
      ratios_.erase(ratios_.begin());
      ratio_withheld_.erase(ratio_withheld_.begin());
      ratio_served_.erase(ratio_served_.begin());
    }
  }
  withheld_.clear();
  served_.clear();
}

OverheadEstimate OverheadEstimator::Estimate() const {
  OverheadEstimate estimate;
  estimate.cycles = static_cast<int>(ratios_.size());
  estimate.min_cycles = config_.min_cycles;
  for (size_t i = 0; i < ratios_.size(); ++i) {
    estimate.withheld_iterations += ratio_withheld_[i];
    estimate.served_iterations += ratio_served_[i];
  }
  if (!estimate.known()) return estimate;
  const double n = static_cast<double>(ratios_.size());
  double sum = 0;
  for (double r : ratios_) sum += r;
  estimate.mean = sum / n;
  double squares = 0;
  for (double r : ratios_) squares += (r - estimate.mean) * (r - estimate.mean);
  const double standard_error = n > 1 ? std::sqrt(squares / (n - 1) / n) : 0;
  const double half = StudentT95(static_cast<int>(n) - 1) * standard_error;
  estimate.low = estimate.mean - half;
  estimate.high = estimate.mean + half;
  return estimate;
}

void OverheadEstimator::Reset() {
  cycle_ = -1;
  withheld_.clear();
  served_.clear();
  ratios_.clear();
  ratio_withheld_.clear();
  ratio_served_.clear();
}

double StudentT95(int degrees_of_freedom) {
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                      2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                      2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                      2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  constexpr int kRows = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));
  if (degrees_of_freedom < 1) return kTable[0];
  if (degrees_of_freedom <= kRows) return kTable[degrees_of_freedom - 1];
  return 1.96;
}

}  // namespace freeride
