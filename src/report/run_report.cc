#include "report/run_report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "policy/quantile.h"
#include "report/repeated_records.h"

namespace freeride::report {
namespace {

// Mean of the periods between consecutive iteration starts, without outliers.
double LaneIterationMs(const std::vector<int64_t>& starts, uint64_t* periods_used) {
  std::vector<int64_t> periods;
  for (size_t i = 1; i < starts.size(); ++i)
    if (starts[i] > starts[i - 1]) periods.push_back(starts[i] - starts[i - 1]);
  *periods_used = 0;
  if (periods.empty()) return 0;
  int64_t median = QuantileOf(periods, 0.5);
  double sum = 0;
  for (int64_t p : periods) {
    if (p > 3 * median) continue;
    sum += static_cast<double>(p);
    ++*periods_used;
  }
  return *periods_used ? sum / static_cast<double>(*periods_used) / 1e6 : 0;
}

// The median period between a lane's iteration starts; 0 without two.
int64_t MedianPeriod(const std::vector<int64_t>& starts) {
  std::vector<int64_t> periods;
  for (size_t i = 1; i < starts.size(); ++i)
    if (starts[i] > starts[i - 1]) periods.push_back(starts[i] - starts[i - 1]);
  return periods.empty() ? 0 : QuantileOf(periods, 0.5);
}

std::string Ms(int64_t ns) { return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6); }

std::string Seconds(int64_t ns) {
  double s = static_cast<double>(ns) / 1e9;
  return s >= 1 ? fmt::format("{:.2f} s", s) : Ms(ns);
}

std::string Pct(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

}  // namespace

int64_t ActiveSpanNs(std::vector<std::pair<int64_t, int64_t>> bubbles, int64_t median_period_ns) {
  if (bubbles.empty()) return 0;
  std::sort(bubbles.begin(), bubbles.end());
  int64_t span = 0, start = bubbles[0].first, end = bubbles[0].second;
  for (size_t i = 1; i < bubbles.size(); ++i) {
    if (median_period_ns > 0 && bubbles[i].first - end > 3 * median_period_ns) {
      span += end - start;  // a pause between runs: not the training's time
      start = bubbles[i].first;
    }
    end = std::max(end, bubbles[i].second);
  }
  return span + end - start;
}

std::map<int, std::vector<int64_t>> IterationStartsByLane(const EventLogData& log) {
  std::map<int, std::map<uint32_t, size_t>> counts;
  for (const BubbleRecord& b : log.bubbles) ++counts[b.lane][b.slot];
  std::map<int, uint32_t> marker;
  for (const auto& [lane, by_slot] : counts) {
    size_t best = 0;
    for (const auto& [slot, n] : by_slot)
      if (n > best) {
        best = n;
        marker[lane] = slot;
      }
  }
  std::map<int, std::vector<int64_t>> begins;
  for (const BubbleRecord& b : log.bubbles)
    if (b.slot == marker[b.lane]) begins[b.lane].push_back(b.begin_ns);
  for (auto& [lane, v] : begins) std::sort(v.begin(), v.end());
  return begins;
}

double IterationMs(const EventLogData& log, uint64_t* periods) {
  double sum = 0;
  int lanes = 0;
  uint64_t total_periods = 0;
  for (const auto& [lane, begins] : IterationStartsByLane(log)) {
    uint64_t used = 0;
    double ms = LaneIterationMs(begins, &used);
    if (used == 0) continue;
    sum += ms;
    ++lanes;
    total_periods += used;
  }
  if (periods) *periods = total_periods;
  return lanes ? sum / lanes : 0;
}

RunReport ComputeRunReport(const EventLogData& run, const EventLogData* baseline,
                           const ReportOptions& options) {
  RunReport r;
  r.path = run.path;
  r.gpu_hour_price = options.gpu_hour_price;
  for (const auto& [lane, overhead] : run.last_overhead) r.live_overhead.push_back(overhead);
  if (run.skipped_lines > 0)
    r.notes.push_back(fmt::format("{}: skipped {} malformed line(s), the first at line {} ({})",
                                  run.path, run.skipped_lines, run.first_skipped_line,
                                  run.first_skip_reason));
  // Left out by the reader; said here so that the figures are not taken for
  // the whole file's.
  r.dropped_bubble_records = run.dropped_bubbles;
  r.dropped_step_records = run.dropped_steps;
  for (const EventLogData* log : {&run, baseline})
    if (log != nullptr)
      if (std::string dropped = DroppedRecordsMessage(*log); !dropped.empty()) r.notes.push_back(dropped);

  // Lanes: bubbles, harvest and overrun as the daemon accounted them.
  std::map<int, LaneReport> lanes;
  std::map<int, std::vector<int64_t>> overruns;
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> lane_bubbles;
  for (const BubbleRecord& b : run.bubbles) {
    LaneReport& l = lanes[b.lane];
    l.lane = b.lane;
    ++l.bubbles;
    l.bubble_ns += b.end_ns - b.begin_ns;
    l.harvested_ns += b.harvested_ns;
    l.allowed_ns += b.allowed_ns;
    l.overrun_ns += b.overrun_ns;
    overruns[b.lane].push_back(b.overrun_ns);
    lane_bubbles[b.lane].emplace_back(b.begin_ns, b.end_ns);
  }
  for (const StepRecord& s : run.steps) {
    LaneReport& l = lanes[s.lane];
    l.lane = s.lane;
    ++l.steps;
  }
  auto iteration_starts = IterationStartsByLane(run);
  double iteration_ms_sum = 0;
  int lanes_with_iterations = 0;
  std::vector<int64_t> all_overruns;
  for (auto& [index, l] : lanes) {
    l.overrun_p99_ns = QuantileOf(overruns[index], 0.99);
    for (int64_t o : overruns[index]) l.overrun_max_ns = std::max(l.overrun_max_ns, o);
    all_overruns.insert(all_overruns.end(), overruns[index].begin(), overruns[index].end());
    l.span_ns = ActiveSpanNs(lane_bubbles[index], MedianPeriod(iteration_starts[index]));
    l.iteration_ms = LaneIterationMs(iteration_starts[index], &l.iterations);
    if (l.iterations > 0) {
      iteration_ms_sum += l.iteration_ms;
      ++lanes_with_iterations;
    }
    r.total.bubbles += l.bubbles;
    r.total.span_ns += l.span_ns;
    r.total.bubble_ns += l.bubble_ns;
    r.total.harvested_ns += l.harvested_ns;
    r.total.allowed_ns += l.allowed_ns;
    r.total.overrun_ns += l.overrun_ns;
    r.total.overrun_max_ns = std::max(r.total.overrun_max_ns, l.overrun_max_ns);
    r.total.steps += l.steps;
    r.total.iterations += l.iterations;
    r.lanes.push_back(l);
  }
  r.total.lane = -1;
  r.total.overrun_p99_ns = QuantileOf(all_overruns, 0.99);
  // The same figure as IterationMs(run), from the lanes just measured.
  r.total.iteration_ms = lanes_with_iterations ? iteration_ms_sum / lanes_with_iterations : 0;
  if (r.total.span_ns > 0)
    r.bubble_fraction = static_cast<double>(r.total.bubble_ns) / static_cast<double>(r.total.span_ns);
  if (r.total.bubble_ns > 0)
    r.harvest_ratio_time = static_cast<double>(r.total.harvested_ns) / static_cast<double>(r.total.bubble_ns);
  if (run.bubbles.empty()) r.notes.push_back(fmt::format("{}: no bubble events: did a training stage mark bubbles while the daemon ran?", run.path));

  // Tasks: work from the step events, valued at the alone rate.
  std::map<int64_t, TaskReport> tasks;
  for (const auto& [id, meta] : run.tasks) {
    TaskReport& t = tasks[id];
    t.id = id;
    t.name = meta.name;
    t.lane = meta.lane;
    t.unit = meta.unit;
    t.state = meta.last_state;
    t.alone_rate_per_s = meta.alone_rate_per_s;
    if (meta.started) {
      t.units = meta.start_progress;
      t.steps = meta.start_steps;
    }
  }
  std::map<int64_t, double> step_units;  // by task: the units its steps in the log carry
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const StepRecord& s = run.steps[i];
    TaskReport& t = tasks[s.task_id];
    t.id = s.task_id;
    if (t.lane < 0) t.lane = s.lane;
    t.step_ns += s.end_ns - s.start_ns;
    t.overrun_ns += s.overrun_ns;
    auto meta = run.tasks.find(s.task_id);
    if (meta != run.tasks.end() && meta->second.started && i < meta->second.steps_before_start)
      continue;  // superseded by the start's figures
    ++t.steps;
    t.units += s.units;
    step_units[s.task_id] += s.units;
  }
  // A program without the SDK (--progress-regex, --progress-file) shows its
  // progress to the daemon, not in its steps (each a span it was let run,
  // of 0 units): its work is the progress the daemon logged from its first
  // transition in this log to its last (from 0 where the log holds its
  // submission; a rotated log's window otherwise, as its steps are).
  for (auto& [id, t] : tasks) {
    auto meta = run.tasks.find(id);
    if (meta == run.tasks.end() || step_units[id] > 0) continue;
    const double shown = meta->second.progress - meta->second.first_progress.value_or(0);
    if (shown > t.units) t.units = shown;
  }
  std::vector<std::string> unvalued;
  for (auto& [id, t] : tasks) {
    if (t.name.empty()) t.name = fmt::format("task {}", id);
    if (auto it = options.alone_rates.find(t.name); it != options.alone_rates.end())
      t.alone_rate_per_s = it->second;
    if (t.alone_rate_per_s > 0) {
      t.work_gpu_s = t.units / t.alone_rate_per_s;
      r.work_gpu_s += t.work_gpu_s;
    } else if (t.units > 0) {
      unvalued.push_back(t.name);
    }
    r.tasks.push_back(t);
  }
  if (!unvalued.empty())
    r.notes.push_back(fmt::format(
        "no alone rate for {}: their work is not valued (submit with --profile, or pass "
        "--alone-rates)", fmt::join(unvalued, ", ")));

  // Overhead: the training's iteration time against the baseline's.
  double t_with = r.total.iteration_ms;
  double t_base = t_with;
  if (baseline) {
    uint64_t periods = 0;
    double base = IterationMs(*baseline, &periods);
    if (base > 0 && t_with > 0) {
      r.baseline_iteration_ms = base;
      r.overhead_pct = 100.0 * (t_with - base) / base;
      t_base = base;
    } else {
      r.notes.push_back(fmt::format("no overhead: {} has no iterations to compare (a slot seen twice on a lane)",
                                    base > 0 ? run.path : baseline->path));
    }
  } else {
    r.notes.push_back("no --baseline: the training's slowdown is not measured or subtracted");
  }

  // Cost saving: the side work at dedicated-GPU rates, less the training's
  // extra time at every GPU of the pipeline, over the GPU time the training
  // would have needed without side tasks.
  size_t gpus = lanes.size();
  double wall_s = 0;
  for (const LaneReport& l : r.lanes) wall_s = std::max(wall_s, static_cast<double>(l.span_ns) / 1e9);
  if (gpus > 0 && wall_s > 0 && t_with > 0) {
    double slowdown_fraction = (t_with - t_base) / t_with;
    r.slowdown_gpu_s = static_cast<double>(gpus) * wall_s * slowdown_fraction;
    double baseline_gpu_s = static_cast<double>(gpus) * wall_s * (t_base / t_with);
    r.cost_saving_pct = 100.0 * (r.work_gpu_s - r.slowdown_gpu_s) / baseline_gpu_s;
    if (options.gpu_hour_price > 0) {
      r.money_saved = (r.work_gpu_s - r.slowdown_gpu_s) / 3600.0 * options.gpu_hour_price;
      r.money_saved_per_hour = *r.money_saved / (wall_s / 3600.0);
    }
  } else if (gpus > 0 && t_with <= 0) {
    r.notes.push_back("no cost saving: no training iterations in the log (no slot seen twice on a lane)");
  }
  return r;
}

std::string FormatRunReport(const RunReport& r) {
  std::string out = fmt::format("FreeRide report: {}\n\n", r.path);
  out += fmt::format("{:>5} {:>9} {:>10} {:>10} {:>7} {:>10} {:>7} {:>10} {:>10} {:>9} {:>10}\n",
                     "lane", "bubbles", "span", "idle", "idle%", "harvested", "used%", "overrun",
                     "ovr p99", "steps", "iteration");
  auto row = [&](const LaneReport& l, const std::string& name) {
    out += fmt::format("{:>5} {:>9} {:>10} {:>10} {:>7} {:>10} {:>7} {:>10} {:>10} {:>9} {:>10}\n",
                       name, l.bubbles, Seconds(l.span_ns), Seconds(l.bubble_ns),
                       Pct(l.bubble_ns, l.span_ns), Seconds(l.harvested_ns),
                       Pct(l.harvested_ns, l.bubble_ns), Ms(l.overrun_ns), Ms(l.overrun_p99_ns),
                       l.steps, l.iteration_ms > 0 ? fmt::format("{:.2f} ms", l.iteration_ms) : "-");
  };
  for (const LaneReport& l : r.lanes) row(l, std::to_string(l.lane));
  if (r.lanes.size() > 1) row(r.total, "all");

  out += fmt::format("\n{:>5}  {:<22} {:>4} {:<10} {:>8} {:>14} {:<10} {:>12} {:>10}\n", "task",
                     "name", "lane", "state", "steps", "work", "unit", "alone rate/s", "GPU-s");
  if (r.tasks.empty()) out += "  (no side tasks in this log)\n";
  for (const TaskReport& t : r.tasks)
    out += fmt::format("{:>5}  {:<22} {:>4} {:<10} {:>8} {:>14.6g} {:<10} {:>12} {:>10}\n", t.id,
                       t.name.substr(0, 22), t.lane, t.state, t.steps, t.units,
                       t.unit.empty() ? "units" : t.unit,
                       t.alone_rate_per_s > 0 ? fmt::format("{:.4g}", t.alone_rate_per_s) : "-",
                       t.alone_rate_per_s > 0 ? fmt::format("{:.3f}", t.work_gpu_s) : "-");

  out += "\nSummary\n";
  out += fmt::format("  idle time (bubbles):      {} of {} GPU time ({:.1f}%)\n",
                     Seconds(r.total.bubble_ns), Seconds(r.total.span_ns), 100 * r.bubble_fraction);
  out += fmt::format("  used by side tasks:       {} ({:.1f}% of the idle time)\n",
                     Seconds(r.total.harvested_ns), 100 * r.harvest_ratio_time);
  if (r.total.allowed_ns > 0)
    out += fmt::format("  let run, not counted:     {} ({:.1f}% of the idle time) that imperative "
                       "tasks were let run; only the progress they report is work\n",
                       Seconds(r.total.allowed_ns),
                       100.0 * static_cast<double>(r.total.allowed_ns) /
                           static_cast<double>(std::max<int64_t>(r.total.bubble_ns, 1)));
  out += fmt::format("  overrun past bubble ends: {} in total, p99 {} per bubble, max {}\n",
                     Ms(r.total.overrun_ns), Ms(r.total.overrun_p99_ns), Ms(r.total.overrun_max_ns));
  if (r.overhead_pct)
    out += fmt::format("  training iteration:       {:.2f} ms vs {:.2f} ms baseline: {:+.2f}%\n",
                       r.total.iteration_ms, *r.baseline_iteration_ms, *r.overhead_pct);
  else if (r.total.iteration_ms > 0)
    out += fmt::format("  training iteration:       {:.2f} ms (no baseline)\n", r.total.iteration_ms);
  out += fmt::format("  side work:                {:.3f} GPU-seconds at dedicated-GPU rates\n",
                     r.work_gpu_s);
  if (r.cost_saving_pct) {
    out += fmt::format("  cost saving:              {:.1f}%  (side work {:.3f} GPU-s, less the "
                       "slowdown {:.3f} GPU-s, over the training's own GPU time)\n",
                       *r.cost_saving_pct, r.work_gpu_s, r.slowdown_gpu_s);
  }
  if (r.money_saved)
    out += fmt::format("  money:                    {:.4f} saved in this run, {:.2f} per hour of "
                       "training (at {:.2f} per GPU-hour)\n",
                       *r.money_saved, *r.money_saved_per_hour, r.gpu_hour_price);
  for (const OverheadRecord& o : r.live_overhead) {
    std::string guard = fmt::format("guard {}, {} change(s)", o.guard.empty() ? "-" : o.guard,
                                    o.guard_changes);
    if (o.slowdown)
      out += fmt::format("  live estimate, lane {}:   {:+.2f}% [{:+.2f}%, {:+.2f}%] over {} probe "
                         "cycles ({})\n",
                         o.lane, 100 * *o.slowdown, 100 * *o.slowdown_low, 100 * *o.slowdown_high,
                         o.cycles, guard);
    else
      out += fmt::format("  live estimate, lane {}:   none yet, {} of {} probe cycles ({})\n", o.lane,
                         o.cycles, o.min_cycles, guard);
  }
  for (const std::string& note : r.notes) out += fmt::format("  note: {}\n", note);
  return out;
}

namespace {
nlohmann::json LaneJson(const LaneReport& l) {
  return {{"lane", l.lane},
          {"bubbles", l.bubbles},
          {"span_ns", l.span_ns},
          {"bubble_ns", l.bubble_ns},
          {"harvested_ns", l.harvested_ns},
          {"allowed_ns", l.allowed_ns},
          {"overrun_ns", l.overrun_ns},
          {"overrun_p99_ns", l.overrun_p99_ns},
          {"overrun_max_ns", l.overrun_max_ns},
          {"steps", l.steps},
          {"iterations", l.iterations},
          {"iteration_ms", l.iteration_ms}};
}

nlohmann::json Optional(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

std::string RunReportToJson(const RunReport& r) {
  nlohmann::json j;
  j["path"] = r.path;
  j["lanes"] = nlohmann::json::array();
  for (const LaneReport& l : r.lanes) j["lanes"].push_back(LaneJson(l));
  j["total"] = LaneJson(r.total);
  j["tasks"] = nlohmann::json::array();
  for (const TaskReport& t : r.tasks)
    j["tasks"].push_back({{"id", t.id},
                          {"name", t.name},
                          {"lane", t.lane},
                          {"unit", t.unit},
                          {"state", t.state},
                          {"steps", t.steps},
                          {"units", t.units},
                          {"step_ns", t.step_ns},
                          {"overrun_ns", t.overrun_ns},
                          {"alone_rate_per_s", t.alone_rate_per_s},
                          {"work_gpu_s", t.work_gpu_s}});
  j["dropped_bubble_records"] = r.dropped_bubble_records;
  j["dropped_step_records"] = r.dropped_step_records;
  j["bubble_fraction"] = r.bubble_fraction;
  j["harvest_ratio"] = r.harvest_ratio_time;
  j["iteration_ms"] = r.total.iteration_ms;
  j["baseline_iteration_ms"] = Optional(r.baseline_iteration_ms);
  j["overhead_pct"] = Optional(r.overhead_pct);
  j["work_gpu_s"] = r.work_gpu_s;
  j["slowdown_gpu_s"] = r.slowdown_gpu_s;
  j["cost_saving_pct"] = Optional(r.cost_saving_pct);
  j["gpu_hour_price"] = r.gpu_hour_price;
  j["money_saved"] = Optional(r.money_saved);
  j["money_saved_per_hour"] = Optional(r.money_saved_per_hour);
  j["live_overhead"] = nlohmann::json::array();
  for (const OverheadRecord& o : r.live_overhead)
    j["live_overhead"].push_back({{"lane", o.lane},
                                  {"cycles", o.cycles},
                                  {"min_cycles", o.min_cycles},
                                  {"slowdown", Optional(o.slowdown)},
                                  {"slowdown_low", Optional(o.slowdown_low)},
                                  {"slowdown_high", Optional(o.slowdown_high)},
                                  {"withheld_iterations", o.withheld_iterations},
                                  {"guard", o.guard},
                                  {"guard_changes", o.guard_changes}});
  j["notes"] = r.notes;
  return j.dump(2) + "\n";
}

std::optional<std::map<std::string, double>> ReadAloneRates(const std::string& path,
                                                            std::string* error) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    *error = fmt::format("cannot read alone rates {}: it is a directory", path);
    return std::nullopt;
  }
  std::ifstream in(path);
  if (!in) {
    *error = fmt::format("cannot read alone rates {}: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  } catch (const std::exception& e) {  // a read error of the stream itself
    *error = fmt::format("cannot read alone rates {}: {}", path, e.what());
    return std::nullopt;
  }
  if (!j.is_object()) {
    *error = fmt::format("{}: expected a JSON object of task name -> rate (units/s) or -> a "
                         "`freeride task-profile` object", path);
    return std::nullopt;
  }
  std::map<std::string, double> rates;
  for (const auto& [name, value] : j.items()) {
    double rate = -1;
    if (value.is_number()) rate = value.get<double>();
    else if (value.is_object() && value.contains("rate_per_s") && value["rate_per_s"].is_number())
      rate = value["rate_per_s"].get<double>();
    if (!(rate > 0) || !std::isfinite(rate)) {
      *error = fmt::format("{}: task '{}' needs a positive rate (a number, or an object with "
                           "\"rate_per_s\")", path, name);
      return std::nullopt;
    }
    rates[name] = rate;
  }
  return rates;
}

}  // namespace freeride::report
