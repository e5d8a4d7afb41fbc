#include "profile/bubble_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "profile/sample_stats.h"

namespace freeride::profile {
namespace {

// Marks within this distance count as touching (annotations and kernels are
// timestamped by different clocks paths, a few microseconds apart).
constexpr double kTouchUs = 50;

using Interval = std::pair<double, double>;

std::vector<Interval> MergeIntervals(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Interval> merged;
  for (const Interval& s : spans) {
    if (!merged.empty() && s.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, s.second);
    else
      merged.push_back(s);
  }
  return merged;
}

// The key with the largest total, or -1 for an empty map.
template <typename Id>
Id Busiest(const std::map<Id, double>& totals) {
  Id best = -1;
  double best_total = -1;
  for (const auto& [key, total] : totals)
    if (total > best_total) best = key, best_total = total;
  return best;
}

// Types gaps from where they lie relative to the GPU-side ProfilerStep marks
// (which span a step's own GPU work), else relative to the window edges.
class GapClassifier {
 public:
  GapClassifier(const std::vector<StepWindow>& gpu_steps, bool last_stage)
      : gpu_steps_(gpu_steps), last_stage_(last_stage) {}

  // `window` is the iteration the gap lies in.
  BubbleType Classify(double start_us, double end_us, const StepWindow& window) {
    if (gpu_steps_.empty()) {
      if (start_us <= window.start_us + kTouchUs) return BubbleType::kFill;
      if (end_us >= window.end_us - kTouchUs) return BubbleType::kDrain;
      return Interior(window.step);
    }
    // The wait for a step's first input; on a continuous run the previous
    // step's drain merges into it.
    for (const StepWindow& s : gpu_steps_)
      if (s.start_us >= start_us - kTouchUs && s.start_us <= end_us + kTouchUs)
        return BubbleType::kFill;
    const StepWindow* owner = nullptr;
    for (const StepWindow& s : gpu_steps_)
      if (s.start_us <= start_us) owner = &s;
    if (owner == nullptr) return BubbleType::kSteady;  // work of an unprofiled step
    if (start_us >= owner->end_us - kTouchUs) return BubbleType::kDrain;
    return Interior(owner->step);
  }

 private:
  // The first gap inside a step is the wait for the first gradient after
  // the warm-up forwards, except on the last stage, which has no warm-up.
  BubbleType Interior(int step_key) {
    if (!last_stage_ && interior_seen_.insert(step_key).second) return BubbleType::kWarmupWait;
    return BubbleType::kSteady;
  }

  const std::vector<StepWindow>& gpu_steps_;
  bool last_stage_;
  std::set<int> interior_seen_;
};

// The compute stream's kernels, memcpys and memsets (every stream's with
// all_streams) on the busiest device, merged.  False when the trace has no
// GPU work to read.
bool ReadGpuBusy(const KinetoTrace& trace, const ProfileOptions& options, RankProfile& out,
                 std::vector<Interval>& busy) {
  std::map<int, double> device_busy;
  for (const GpuOp& op : trace.gpu_ops)
    if (!op.communication) device_busy[op.device] += op.end_us - op.start_us;
  if (device_busy.empty()) return false;
  out.busy_source = "gpu";
  out.device = Busiest(device_busy);
  std::map<int64_t, double> stream_busy;
  for (const GpuOp& op : trace.gpu_ops)
    if (!op.communication && op.device == out.device)
      stream_busy[op.stream] += op.end_us - op.start_us;
  out.compute_stream = Busiest(stream_busy);
  if (auto it = trace.devices.find(out.device); it != trace.devices.end()) {
    out.device_name = it->second.name;
    out.total_memory_bytes = it->second.total_memory_bytes;
  }
  if (auto it = trace.peak_reserved_bytes.find(out.device); it != trace.peak_reserved_bytes.end())
    out.peak_reserved_bytes = it->second;
  // A reserve past the device's memory (a trace whose ids or figures are
  // off) leaves nothing free, not a negative amount.
  if (out.total_memory_bytes > 0 && out.peak_reserved_bytes > 0)
    out.free_memory_bytes = out.peak_reserved_bytes >= out.total_memory_bytes
                                ? 0
                                : static_cast<int64_t>(out.total_memory_bytes - out.peak_reserved_bytes);
  std::vector<Interval> spans;
  for (const GpuOp& op : trace.gpu_ops)
    if (!op.communication && op.device == out.device &&
        (options.all_streams || op.stream == out.compute_stream))
      spans.emplace_back(op.start_us, op.end_us);
  busy = MergeIntervals(std::move(spans));
  return true;
}

// A CPU-only run: the CPU operators of the thread that marks the steps,
// except communication and what runs inside it (a blocking receive is
// waiting, not work).  False when that thread ran no operator.
bool ReadCpuBusy(const KinetoTrace& trace, RankProfile& out, std::vector<Interval>& busy) {
  if (trace.cpu_steps.empty()) return false;
  std::map<int64_t, int> steps_of_thread;
  for (const StepWindow& w : trace.cpu_steps) ++steps_of_thread[w.thread];
  int64_t thread = std::max_element(steps_of_thread.begin(), steps_of_thread.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; })
                       ->first;
  std::vector<Interval> waits, spans;
  for (const CpuOp& op : trace.cpu_ops)
    if (op.thread == thread) (op.communication ? waits : spans).emplace_back(op.start_us, op.end_us);
  waits = MergeIntervals(std::move(waits));
  std::vector<Interval> work;
  for (const Interval& s : spans) {
    auto after = std::upper_bound(waits.begin(), waits.end(), Interval{s.first, 1e300});
    bool inside = after != waits.begin() && std::prev(after)->second >= s.second;
    if (!inside) work.push_back(s);
  }
  if (work.empty()) return false;
  out.busy_source = "cpu";
  out.device_name = "CPU";
  out.cpu_thread = thread;
  busy = MergeIntervals(std::move(work));
  return true;
}

}  // namespace

RankProfile AnalyzeRank(const KinetoTrace& trace, int fallback_rank,
                        const ProfileOptions& options) {
  RankProfile out;
  out.path = trace.path;
  out.rank = trace.rank.value_or(fallback_rank);
  out.world_size = trace.world_size.value_or(0);

  // torch writes ProfilerStep#N marks only for a profiler with a schedule:
  // prof.step() alone, without one, leaves none.
  constexpr const char* kStepMarksHint =
      "torch marks iterations (ProfilerStep#N) only when the profiler has a schedule: "
      "torch.profiler.profile(..., schedule=torch.profiler.schedule(wait=1, warmup=1, active=3)), "
      "with prof.step() called once per iteration";
  const bool no_marks = trace.cpu_steps.empty() && trace.gpu_steps.empty();
  std::vector<Interval> busy;
  if (!ReadGpuBusy(trace, options, out, busy) && !ReadCpuBusy(trace, out, busy))
    throw TraceError(
        no_marks ? fmt::format("{}: no GPU kernels and no ProfilerStep#N marks in the trace. Profile with "
                               "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (CPU only for a "
                               "CPU run); {}.",
                               trace.path, kStepMarksHint)
                 : fmt::format("{}: no GPU kernels, and no CPU operators on the thread of the ProfilerStep "
                               "marks, in the trace. Profile with activities=[ProfilerActivity.CPU, "
                               "ProfilerActivity.CUDA] (CPU only for a CPU run).",
                               trace.path));

  // The training loop's own step marks are the iteration; the GPU marks only
  // span each step's GPU work and miss the fill before it.
  const std::vector<StepWindow>& windows =
      !trace.cpu_steps.empty() ? trace.cpu_steps : trace.gpu_steps;
  out.window_source = !trace.cpu_steps.empty() ? "cpu" : "gpu";
  if (windows.empty())
    throw TraceError(fmt::format("{}: no ProfilerStep#N annotations: {}.", trace.path, kStepMarksHint));

  bool last_stage = out.world_size > 0 && out.rank == out.world_size - 1;
  GapClassifier classifier(trace.gpu_steps, last_stage);
  size_t first_busy = 0;
  for (const StepWindow& w : windows) {
    Iteration it;
    it.step = w.step;
    it.window_start_us = w.start_us;
    it.length_ms = (w.end_us - w.start_us) / 1000;
    while (first_busy < busy.size() && busy[first_busy].second <= w.start_us) ++first_busy;
    double cursor = w.start_us;
    auto add_gap = [&](double s, double e) {
      double ms = (e - s) / 1000;
      if (ms < options.min_bubble_ms) return;
      it.gaps.push_back({(s - w.start_us) / 1000, ms, classifier.Classify(s, e, w)});
    };
    for (size_t i = first_busy; i < busy.size() && busy[i].first < w.end_us; ++i) {
      double s = std::max(busy[i].first, w.start_us), e = std::min(busy[i].second, w.end_us);
      if (e <= s) continue;
      if (s > cursor) add_gap(cursor, s);
      it.busy_ms += (e - s) / 1000;
      it.busy_ms_intervals.emplace_back((s - w.start_us) / 1000, (e - w.start_us) / 1000);
      cursor = e;
    }
    if (w.end_us > cursor) add_gap(cursor, w.end_us);
    out.iterations.push_back(std::move(it));
  }

  std::vector<double> lengths, busies, idles;
  for (const Iteration& it : out.iterations) {
    lengths.push_back(it.length_ms);
    busies.push_back(it.busy_ms);
    idles.push_back(it.length_ms > 0 ? 1 - it.busy_ms / it.length_ms : 0);
  }
  out.iteration_ms = Median(lengths);
  out.busy_ms = Median(busies);
  out.idle_fraction = Median(idles);

  std::vector<std::vector<Gap>> gaps;
  std::vector<int> steps;
  for (const Iteration& it : out.iterations) {
    gaps.push_back(it.gaps);
    steps.push_back(it.step);
  }
  SlotMatch match = MatchSlots(gaps, steps, lengths);
  for (size_t i = 0; i < gaps.size(); ++i) out.iterations[i].gaps = std::move(gaps[i]);
  out.slots = std::move(match.slots);
  out.slots_conflict = std::move(match.conflict);
  out.left_out_gaps = match.left_out_gaps;
  out.left_out_ms = match.left_out_ms;
  return out;
}

void CheckSameRun(const std::vector<KinetoTrace>& traces, const std::vector<RankProfile>& ranks) {
  std::map<int, std::string> seen;
  for (const RankProfile& r : ranks) {
    if (auto [it, inserted] = seen.emplace(r.rank, r.path); !inserted)
      throw TraceError(fmt::format("rank {} appears twice: {} and {}. Pass one trace per rank.",
                                   r.rank, it->second, r.path));
  }
  for (size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i].world_size != ranks[0].world_size)
      throw TraceError(fmt::format(
          "traces from different runs: {} has world size {}, {} has {}", ranks[0].path,
          ranks[0].world_size, ranks[i].path, ranks[i].world_size));
    if (traces[i].group_ranks != traces[0].group_ranks)
      throw TraceError(fmt::format("traces from different runs: {} and {} list different ranks "
                                   "in their process group",
                                   ranks[0].path, ranks[i].path));
    // Kineto timestamps are µs from one epoch; ranks of one run step together.
    double offset_ns = static_cast<double>(traces[i].base_time_ns.value_or(0) -
                                           traces[0].base_time_ns.value_or(0));
    double a = ranks[0].iterations.front().window_start_us * 1000;
    double b = ranks[i].iterations.front().window_start_us * 1000 + offset_ns;
    double tolerance_ns = 2 * std::max(ranks[0].iteration_ms, ranks[i].iteration_ms) * 1e6;
    if (std::abs(a - b) > tolerance_ns)
      throw TraceError(fmt::format(
          "traces from different runs: the first profiled iteration of {} starts {:.1f} s away "
          "from that of {}",
          ranks[i].path, std::abs(a - b) / 1e9, ranks[0].path));
    std::set<int> steps_a, steps_b;
    for (const Iteration& it : ranks[0].iterations) steps_a.insert(it.step);
    for (const Iteration& it : ranks[i].iterations) steps_b.insert(it.step);
    if (steps_a != steps_b)
      throw TraceError(fmt::format("traces from different runs: {} and {} profiled different "
                                   "ProfilerStep numbers",
                                   ranks[0].path, ranks[i].path));
  }
}

}  // namespace freeride::profile
