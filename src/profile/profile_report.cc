#include "profile/profile_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/units.h"

namespace freeride::profile {
namespace {

std::string Memory(int64_t bytes) {
  if (bytes < 0) return "unknown (profile with profile_memory=True)";
  return FormatBytes(static_cast<uint64_t>(bytes));
}

const char* TypeColour(BubbleType type) {
  switch (type) {
    case BubbleType::kFill: return "#4e79a7";
    case BubbleType::kWarmupWait: return "#f28e2b";
    case BubbleType::kSteady: return "#59a14f";
    case BubbleType::kDrain: return "#b07aa1";
  }
  return "#999";
}

}  // namespace

std::string FormatProfileTable(const std::vector<RankProfile>& ranks, double min_bubble_ms) {
  std::string out;
  for (const RankProfile& r : ranks) {
    std::string where =
        r.busy_source == "cpu"
            ? fmt::format("CPU operators of thread {} (the trace has no GPU kernels)", r.cpu_thread)
            : fmt::format("device {} ({}), compute stream {}", r.device,
                          r.device_name.empty() ? "?" : r.device_name, r.compute_stream);
    out += fmt::format("rank {}{}  {}  {}\n", r.rank,
                       r.world_size ? fmt::format(" of {}", r.world_size) : "", r.path, where);
    out += fmt::format(
        "  {} iterations ({} ProfilerStep marks): {:.1f} ms each, busy {:.1f} ms, idle {:.1f}%\n",
        r.iterations.size(), r.window_source, r.iteration_ms, r.busy_ms, 100 * r.idle_fraction);
    if (r.busy_source != "cpu")
      out += fmt::format("  free GPU memory {} (device {} minus peak reserved {})\n",
                         Memory(r.free_memory_bytes), FormatBytes(r.total_memory_bytes),
                         FormatBytes(r.peak_reserved_bytes));
    if (!r.slots_conflict.empty()) {
      out += fmt::format("  no bubble slots: {}\n", r.slots_conflict);
      for (const Iteration& it : r.iterations) {
        out += fmt::format("  step {} gaps (start+length ms):", it.step);
        for (const Gap& g : it.gaps) out += fmt::format(" {:.2f}+{:.2f}", g.start_ms, g.duration_ms);
        out += "\n";
      }
      out += "\n";
      continue;
    }
    if (r.slots.empty()) {
      out += fmt::format("  no bubbles of {} ms or more\n\n", min_bubble_ms);
      continue;
    }
    out += fmt::format("  {:>4}  {:<14} {:>9} {:>9} {:>9} {:>9} {:>6}\n", "slot", "type",
                       "start ms", "median", "p10", "min", "iters");
    for (size_t i = 0; i < r.slots.size(); ++i) {
      const SlotSummary& s = r.slots[i];
      out += fmt::format("  {:>4}  {:<14} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>6}\n", i,
                         fmt::format("{} ({})", BubbleTypeName(s.type), BubbleTypeLetter(s.type)),
                         s.start_ms, s.median_ms, s.p10_ms, s.min_ms, s.iterations);
    }
    if (r.left_out_gaps > 0)
      out += fmt::format(
          "  {} gap(s), {:.2f} ms in all, of fewer than half the iterations (splitting a slot the "
          "others have, or past the median iteration's end): idle time, in no slot\n",
          r.left_out_gaps, r.left_out_ms);
    out += "\n";
  }
  out += "types: fill (A) waiting for the first input, warmup_wait (B) waiting for the first\n"
         "gradient after warm-up, steady (D) gaps between steady-state actions, drain (C)\n"
         "after the last action.  NCCL kernels count as idle: they spin while waiting;\n"
         "on CPU, communication operators (c10d, gloo) count as idle: they block while waiting.\n";
  return out;
}

nlohmann::json ProfileToJson(const std::vector<RankProfile>& ranks, double min_bubble_ms) {
  nlohmann::json out;
  out["min_bubble_ms"] = min_bubble_ms;
  out["ranks"] = nlohmann::json::array();
  for (const RankProfile& r : ranks) {
    nlohmann::json rank{{"rank", r.rank},
                        {"world_size", r.world_size},
                        {"trace", r.path},
                        {"busy_source", r.busy_source},
                        {"device", r.device},
                        {"device_name", r.device_name},
                        {"compute_stream", r.compute_stream},
                        {"cpu_thread", r.cpu_thread},
                        {"iterations", r.iterations.size()},
                        {"window_source", r.window_source},
                        {"iteration_ms", r.iteration_ms},
                        {"busy_ms", r.busy_ms},
                        {"idle_fraction", r.idle_fraction},
                        {"total_memory_bytes", r.total_memory_bytes},
                        {"peak_reserved_bytes", r.peak_reserved_bytes},
                        {"free_memory_bytes", r.free_memory_bytes}};
    if (!r.slots_conflict.empty()) rank["slots_conflict"] = r.slots_conflict;
    rank["left_out_gaps"] = r.left_out_gaps;
    rank["left_out_ms"] = r.left_out_ms;
    rank["bubbles"] = nlohmann::json::array();
    for (size_t i = 0; i < r.slots.size(); ++i) {
      const SlotSummary& s = r.slots[i];
      rank["bubbles"].push_back({{"slot", i},
                                 {"type", BubbleTypeName(s.type)},
                                 {"prototype_type", std::string(1, BubbleTypeLetter(s.type))},
                                 {"start_ms", s.start_ms},
                                 {"duration_ms", s.median_ms},
                                 {"p10_ms", s.p10_ms},
                                 {"min_ms", s.min_ms},
                                 {"max_ms", s.max_ms},
                                 {"iterations", s.iterations}});
    }
    rank["per_iteration"] = nlohmann::json::array();
    for (const Iteration& it : r.iterations) {
      nlohmann::json gaps = nlohmann::json::array();
      for (const Gap& g : it.gaps)
        gaps.push_back({{"start_ms", g.start_ms},
                        {"duration_ms", g.duration_ms},
                        {"type", BubbleTypeName(g.type)},
                        {"slot", g.slot}});
      rank["per_iteration"].push_back({{"step", it.step},
                                       {"length_ms", it.length_ms},
                                       {"busy_ms", it.busy_ms},
                                       {"bubbles", gaps}});
    }
    out["ranks"].push_back(rank);
  }
  return out;
}

std::string ProfileToCsv(const std::vector<RankProfile>& ranks) {
  std::string out =
      "rank,iteration_ms,idle_fraction,free_memory_bytes,slot,type,prototype_type,start_ms,"
      "duration_ms,p10_ms,min_ms,iterations\n";
  for (const RankProfile& r : ranks)
    for (size_t i = 0; i < r.slots.size(); ++i) {
      const SlotSummary& s = r.slots[i];
      out += fmt::format("{},{:.3f},{:.4f},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{}\n", r.rank,
                         r.iteration_ms, r.idle_fraction, r.free_memory_bytes, i,
                         BubbleTypeName(s.type), BubbleTypeLetter(s.type), s.start_ms,
                         s.median_ms, s.p10_ms, s.min_ms, s.iterations);
    }
  return out;
}

std::string RenderProfileSvg(const std::vector<RankProfile>& ranks) {
  constexpr double kLeft = 90, kWidth = 900, kLaneHeight = 34, kTop = 40;
  double longest = 1;
  for (const RankProfile& r : ranks)
    if (!r.iterations.empty()) longest = std::max(longest, r.iterations.front().length_ms);
  double scale = kWidth / longest;
  double height = kTop + kLaneHeight * ranks.size() + 50;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"20\" font-size=\"14\">Compute timeline, first profiled "
      "iteration per rank (bubbles coloured by type)</text>\n",
      kLeft + kWidth + 20, height, kLeft);
  for (size_t lane = 0; lane < ranks.size(); ++lane) {
    const RankProfile& r = ranks[lane];
    double y = kTop + lane * kLaneHeight;
    svg += fmt::format("<text x=\"10\" y=\"{}\">rank {} ({:.0f}% idle)</text>\n", y + 18, r.rank,
                       100 * r.idle_fraction);
    if (r.iterations.empty()) continue;
    const Iteration& it = r.iterations.front();
    for (const auto& [s, e] : it.busy_ms_intervals)
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"24\" "
                         "fill=\"#bbbbbb\"/>\n",
                         kLeft + s * scale, y, std::max(0.3, (e - s) * scale));
    for (const Gap& g : it.gaps) {
      double x = kLeft + g.start_ms * scale, w = g.duration_ms * scale;
      svg += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"24\" fill=\"{}\" "
          "fill-opacity=\"0.8\"><title>{} {:.2f} ms at {:.2f} ms</title></rect>\n",
          x, y, w, TypeColour(g.type), BubbleTypeName(g.type), g.duration_ms, g.start_ms);
      if (w > 28)
        svg += fmt::format("<text x=\"{:.2f}\" y=\"{}\" fill=\"white\">{}{:.1f}</text>\n", x + 3,
                           y + 16, BubbleTypeLetter(g.type), g.duration_ms);
    }
  }
  double legend_y = kTop + ranks.size() * kLaneHeight + 20;
  double x = kLeft;
  for (BubbleType t : {BubbleType::kFill, BubbleType::kWarmupWait, BubbleType::kSteady,
                       BubbleType::kDrain}) {
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\">{} ({})</text>\n",
                       x, legend_y, TypeColour(t), x + 16, legend_y + 10, BubbleTypeName(t),
                       BubbleTypeLetter(t));
    x += 140;
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\">{:.0f} ms</text>\n", kLeft + kWidth - 40,
                     legend_y + 10, longest);
  svg += "</svg>\n";
  return svg;
}

}  // namespace freeride::profile
