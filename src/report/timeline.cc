#include "report/timeline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "report/run_report.h"

namespace freeride::report {
namespace {

constexpr const char* kTaskColours[] = {"#1b9e77", "#7570b3", "#e7298a", "#66a61e",
                                        "#e6ab02", "#a6761d", "#1f78b4", "#b15928"};
constexpr const char* kBusyColour = "#9aa5b1";
constexpr const char* kBubbleColour = "#f4f1e8";
constexpr const char* kOverrunColour = "#d62728";

std::map<int, std::vector<const BubbleRecord*>> BubblesByLane(const EventLogData& log) {
  std::map<int, std::vector<const BubbleRecord*>> lanes;
  for (const BubbleRecord& b : log.bubbles) lanes[b.lane].push_back(&b);
  for (auto& [lane, v] : lanes)
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->begin_ns < b->begin_ns; });
  return lanes;
}

int64_t FirstTime(const EventLogData& log) {
  int64_t first = INT64_MAX;
  for (const BubbleRecord& b : log.bubbles) first = std::min(first, b.begin_ns);
  for (const StepRecord& s : log.steps) first = std::min(first, s.start_ns);
  return first == INT64_MAX ? 0 : first;
}

std::string TaskName(const EventLogData& log, int64_t id) {
  auto it = log.tasks.find(id);
  if (it != log.tasks.end() && !it->second.name.empty()) return it->second.name;
  return fmt::format("task {}", id);
}

// Gaps longer than this between two bubbles of a lane are not drawn as busy.
int64_t BusyGapLimit(const EventLogData& log) {
  double iteration_ms = IterationMs(log);
  return iteration_ms > 0 ? static_cast<int64_t>(3 * iteration_ms * 1e6) : 1'000'000'000;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string RenderPerfettoTrace(const EventLogData& log) {
  const int64_t origin = FirstTime(log);
  const int64_t gap_limit = BusyGapLimit(log);
  auto us = [origin](int64_t ns) { return static_cast<double>(ns - origin) / 1e3; };
  enum Track { kTraining = 1, kBubbles = 2, kSideTasks = 3 };
  nlohmann::json events = nlohmann::json::array();
  auto lanes = BubblesByLane(log);
  std::set<int> lane_ids;
  for (const auto& [lane, v] : lanes) lane_ids.insert(lane);
  for (const StepRecord& s : log.steps) lane_ids.insert(s.lane);
  for (int lane : lane_ids) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", lane}, {"tid", 0},
                      {"args", {{"name", fmt::format("GPU lane {}", lane)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", lane}, {"tid", 0},
                      {"args", {{"sort_index", lane}}}});
    const char* names[] = {"", "training (busy)", "bubbles", "side tasks"};
    for (int track : {kTraining, kBubbles, kSideTasks}) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", lane}, {"tid", track},
                        {"args", {{"name", names[track]}}}});
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", lane}, {"tid", track},
                        {"args", {{"sort_index", track}}}});
    }
  }
  for (const auto& [lane, bubbles] : lanes) {
    for (size_t i = 0; i < bubbles.size(); ++i) {
      const BubbleRecord& b = *bubbles[i];
      nlohmann::json args = {{"slot", b.slot}, {"seq", b.seq}, {"steps", b.steps},
                             {"harvested_ms", b.harvested_ns / 1e6},
                             {"allowed_ms", b.allowed_ns / 1e6},
                             {"overrun_ms", b.overrun_ns / 1e6}, {"ended_by", b.ended_by ? events::BubbleEndName(*b.ended_by) : "unknown"},
                             {"verdict", b.verdict ? VerdictName(*b.verdict) : "unknown"}};
      if (b.predicted_end_ns > 0) args["predicted_ms"] = (b.predicted_end_ns - b.begin_ns) / 1e6;
      if (b.free_memory_bytes) args["free_memory_bytes"] = *b.free_memory_bytes;
      events.push_back({{"ph", "X"}, {"name", fmt::format("bubble slot {}", b.slot)},
                        {"cat", "bubble"}, {"pid", lane}, {"tid", kBubbles},
                        {"ts", us(b.begin_ns)}, {"dur", (b.end_ns - b.begin_ns) / 1e3},
                        {"args", args}});
      if (i + 1 < bubbles.size()) {
        int64_t gap = bubbles[i + 1]->begin_ns - b.end_ns;
        if (gap > 0 && gap <= gap_limit)
          events.push_back({{"ph", "X"}, {"name", "training"}, {"cat", "training"},
                            {"pid", lane}, {"tid", kTraining}, {"ts", us(b.end_ns)},
                            {"dur", gap / 1e3}});
      }
    }
  }
  for (const StepRecord& s : log.steps) {
    nlohmann::json args = {{"task_id", s.task_id}, {"units", s.units},
                           {"bubble_seq", s.bubble_seq}, {"overrun_ms", s.overrun_ns / 1e6}};
    if (s.late) args["late"] = true;
    if (s.allowed) args["allowed"] = true;
    events.push_back({{"ph", "X"}, {"name", TaskName(log, s.task_id)},
                      {"cat", s.allowed ? "side_task_let_run" : "side_task"},
                      {"pid", s.lane}, {"tid", kSideTasks}, {"ts", us(s.start_ns)},
                      {"dur", (s.end_ns - s.start_ns) / 1e3}, {"args", args}});
  }
  nlohmann::json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"},
                          {"otherData", {{"source", log.path}, {"producer", "freeride timeline"}}}};
  return trace.dump() + "\n";
}

std::string RenderTimelineSvg(const EventLogData& log, const SvgWindow& window) {
  auto lanes = BubblesByLane(log);
  // Iteration boundaries: those of the lowest lane that has two.
  std::vector<int64_t> starts;
  for (auto& [lane, lane_starts] : IterationStartsByLane(log))
    if (lane_starts.size() >= 2) {
      starts = std::move(lane_starts);
      break;
    }
  int64_t from = FirstTime(log), to = from + 500'000'000;
  int drawn_iterations = 0;
  if (starts.size() >= 2) {
    int count = std::max(1, window.iterations);
    int available = static_cast<int>(starts.size()) - 1;
    count = std::min(count, available);
    int first = window.first_iteration >= 0 ? window.first_iteration : (available - count) / 2;
    first = std::clamp(first, 0, available - count);
    from = starts[first];
    to = starts[first + count];
    drawn_iterations = count;
  }
  const double span = static_cast<double>(std::max<int64_t>(to - from, 1));

  std::set<int> lane_ids;
  for (const auto& [lane, v] : lanes) lane_ids.insert(lane);
  for (const StepRecord& s : log.steps) lane_ids.insert(s.lane);
  std::map<int64_t, int> task_colour;
  for (const StepRecord& s : log.steps)
    if (s.end_ns > from && s.start_ns < to) task_colour.try_emplace(s.task_id, 0);
  int next = 0;
  for (auto& [id, colour] : task_colour) colour = next++ % 8;

  constexpr double kLeft = 110, kWidth = 1000, kRow = 34, kTop = 58;
  const double height = kTop + kRow * lane_ids.size() + 70;
  auto x = [&](int64_t ns) {
    return kLeft + kWidth * std::clamp(static_cast<double>(ns - from) / span, 0.0, 1.0);
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kLeft + kWidth + 30, height);
  RunReport totals = ComputeRunReport(log, nullptr, {});
  svg += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">FreeRide: {} of a pipeline's "
      "iterations, {} lane(s), one per GPU or pipeline stage</text>\n<text x=\"{}\" y=\"42\" fill=\"#444\">whole run: {:.1f}% of GPU "
      "time idle in bubbles; side tasks used {:.1f}% of it</text>\n",
      kLeft, drawn_iterations ? fmt::format("{}", drawn_iterations) : "the start", lane_ids.size(),
      kLeft, 100 * totals.bubble_fraction, 100 * totals.harvest_ratio_time);
  const int64_t gap_limit = BusyGapLimit(log);
  int row = 0;
  for (int lane : lane_ids) {
    double y = kTop + kRow * row++;
    svg += fmt::format("<text x=\"10\" y=\"{:.0f}\">lane {}</text>\n", y + 20, lane);
    const auto& bubbles = lanes[lane];
    for (size_t i = 0; i < bubbles.size(); ++i) {
      const BubbleRecord& b = *bubbles[i];
      if (i + 1 < bubbles.size()) {
        int64_t busy_from = b.end_ns, busy_to = bubbles[i + 1]->begin_ns;
        if (busy_to - busy_from <= gap_limit && busy_to > from && busy_from < to)
          svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"26\" "
                             "fill=\"{}\"><title>training {:.2f} ms</title></rect>\n",
                             x(busy_from), y + 2, x(busy_to) - x(busy_from), kBusyColour,
                             (busy_to - busy_from) / 1e6);
      }
      if (b.end_ns <= from || b.begin_ns >= to) continue;
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"26\" "
                         "fill=\"{}\" stroke=\"#c9c2a8\" stroke-width=\"0.5\"><title>bubble slot "
                         "{}: {:.2f} ms, {} steps</title></rect>\n",
                         x(b.begin_ns), y + 2, x(b.end_ns) - x(b.begin_ns), kBubbleColour, b.slot,
                         (b.end_ns - b.begin_ns) / 1e6, b.steps);
    }
    for (const StepRecord& s : log.steps) {
      if (s.lane != lane || s.end_ns <= from || s.start_ns >= to) continue;
      int64_t inside_end = s.end_ns - s.overrun_ns;
      svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"18\" "
                         "fill=\"{}\"><title>{}: {:.3f} ms, {:.4g} units</title></rect>\n",
                         x(s.start_ns), y + 6, std::max(0.3, x(inside_end) - x(s.start_ns)),
                         kTaskColours[task_colour[s.task_id]], Escape(TaskName(log, s.task_id)),
                         (s.end_ns - s.start_ns) / 1e6, s.units);
      if (s.overrun_ns > 0)
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"18\" "
                           "fill=\"{}\"><title>overrun {:.3f} ms</title></rect>\n",
                           x(inside_end), y + 6, std::max(0.3, x(s.end_ns) - x(inside_end)),
                           kOverrunColour, s.overrun_ns / 1e6);
    }
  }
  double axis_y = kTop + kRow * lane_ids.size() + 8;
  svg += fmt::format("<line x1=\"{}\" y1=\"{:.0f}\" x2=\"{}\" y2=\"{:.0f}\" stroke=\"#333\"/>\n",
                     kLeft, axis_y, kLeft + kWidth, axis_y);
  for (int tick = 0; tick <= 4; ++tick) {
    double tx = kLeft + kWidth * tick / 4.0;
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\" fill=\"#333\">"
                       "{:.1f} ms</text>\n", tx, axis_y + 16, span / 1e6 * tick / 4.0);
  }
  double legend_y = axis_y + 36, lx = kLeft;
  auto legend = [&](const char* colour, const std::string& label) {
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"12\" height=\"12\" fill=\"{}\" "
                       "stroke=\"#999\" stroke-width=\"0.5\"/><text x=\"{:.0f}\" y=\"{:.0f}\">{}"
                       "</text>\n", lx, legend_y - 10, colour, lx + 16, legend_y, Escape(label));
    lx += 30 + 7.0 * label.size();
  };
  legend(kBusyColour, "training");
  legend(kBubbleColour, "bubble (idle)");
  for (const auto& [id, colour] : task_colour) legend(kTaskColours[colour], TaskName(log, id));
  legend(kOverrunColour, "overrun");
  svg += "</svg>\n";
  return svg;
}

}  // namespace freeride::report
