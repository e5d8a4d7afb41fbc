#include "sim/sim_report.h"

#include <fmt/format.h>

#include <cmath>

#include "base/units.h"

namespace freeride::sim {
namespace {

double Pct(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

// `value` as printed with `decimals` places, without a "-0.0": a figure that
// rounds to nothing is shown as nothing, not as a loss.
double Shown(double value, int decimals) {
  return std::fabs(value) < 0.5 * std::pow(10.0, -decimals) ? 0.0 : value;
}

std::string Describe(const SimConfig& c) {
  std::string shape = Counted(c.stages, "stage", "stages");
  if (c.VirtualStages() > 1) shape += fmt::format(" x {} virtual", c.VirtualStages());
  return fmt::format("{}, {}, {}, {} ({}), {}", ScheduleKindName(c.schedule), shape,
                     Counted(c.microbatches, "micro-batch", "micro-batches"),
                     Counted(c.data_parallel, "pipeline", "pipelines"), Counted(c.Gpus(), "GPU", "GPUs"),
                     Counted(c.iterations, "iteration", "iterations"));
}

}  // namespace

std::string FormatSimResult(const SimResult& r) {
  const SimConfig& c = r.config;
  std::string out = fmt::format("FreeRide simulation: {}\n", Describe(c));
  out += fmt::format("  side tasks: {}\n\n", [&] {
    if (c.tasks.empty()) return std::string("none");
    std::string names;
    for (const SimTask& t : c.tasks) names += (names.empty() ? "" : ", ") + t.name;
    return names + (c.placement == TaskPlacement::kAll ? " (every GPU queues all)"
                                                       : " (one per GPU, round robin)");
  }());
  out += fmt::format("{:>5} {:>7} {:>8} {:>9} {:>10} {:>11} {:>10} {:>12} {:>12}\n", "stage",
                     "GPUs", "idle%", "bubbles", "harvest", "overrun/it", "steps", "work GPU-s",
                     "GPU-equiv");
  for (const StageResult& s : r.stages) {
    out += fmt::format("{:>5} {:>7} {:>7.1f}% {:>9} {:>9.1f}% {:>8.3f} ms {:>10} {:>12.1f} {:>12.2f}\n",
                       s.stage, s.gpus, Pct(s.idle_gpu_s, s.idle_gpu_s + s.busy_gpu_s),
                       s.bubbles / std::max<int64_t>(1, s.gpus), Pct(s.harvested_gpu_s, s.bubble_gpu_s),
                       s.overrun_gpu_s * 1e3 / std::max<int64_t>(1, s.gpus) / c.iterations,
                       s.steps, s.work_gpu_s, s.work_gpu_s / r.wall_s);
  }
  if (!r.tasks.empty()) {
    out += fmt::format("\n{:<16} {:>7} {:>12} {:>12} {:>16}\n", "task", "GPUs", "steps",
                       "work GPU-s", "work");
    for (const TaskResult& t : r.tasks)
      out += fmt::format("{:<16} {:>7} {:>12} {:>12.1f} {:>16}\n", t.name.substr(0, 16), t.gpus,
                         t.steps, t.work_gpu_s,
                         t.units > 0 ? fmt::format("{:.4g} {}", t.units, t.unit) : "-");
  }
  out += "\nSummary\n";
  out += fmt::format("  bubble fraction:        {:.1f}% of GPU time idle", 100 * r.bubble_fraction);
  if (r.closed_form_bubble_fraction)
    out += fmt::format(" (closed form (P-1)/(M+P-1): {:.1f}%)", 100 * *r.closed_form_bubble_fraction);
  out += "\n";
  out += fmt::format("  harvested:              {:.1f}% of the bubble time ({:.1f} of {:.1f} GPU-s; "
                     "{:.1f}% of all GPU time)\n",
                     100 * r.harvest_ratio, r.harvested_gpu_s, r.bubble_gpu_s,
                     100 * r.harvested_fraction);
  out += fmt::format("  training iteration:     {:.3f} ms vs {:.3f} ms without side tasks: {:+.3f}%"
                     " (overruns {:.3f} GPU-s)\n",
                     r.iteration_ms, r.iteration_ms_baseline, Shown(r.overhead_pct, 3), r.overrun_gpu_s);
  out += fmt::format("  side work:              {:.1f} GPU-s, worth {:.1f} dedicated GPUs\n",
                     r.work_gpu_s, r.extra_gpu_equivalents);
  out += fmt::format("  cost saving:            {:.1f}% of the training's GPU time\n",
                     Shown(r.cost_saving_pct, 1));
  if (r.money_saved_per_hour)
    out += fmt::format("  money:                  {:.2f} per hour of training (at {:.2f} per GPU-hour)\n",
                       *r.money_saved_per_hour, c.gpu_hour_price);
  out += fmt::format("  simulated in {:.2f} s on {} thread{}\n", r.simulated_seconds, r.threads,
                     r.threads == 1 ? "" : "s");
  return out;
}

nlohmann::json SimResultToJson(const SimResult& r) {
  const SimConfig& c = r.config;
  nlohmann::json stages = nlohmann::json::array();
  for (const StageResult& s : r.stages)
    stages.push_back({{"stage", s.stage},
                      {"gpus", s.gpus},
                      {"bubble_fraction", s.idle_gpu_s / std::max(1e-300, s.idle_gpu_s + s.busy_gpu_s)},
                      {"bubble_gpu_s", s.bubble_gpu_s},
                      {"harvested_gpu_s", s.harvested_gpu_s},
                      {"harvest_ratio", s.bubble_gpu_s > 0 ? s.harvested_gpu_s / s.bubble_gpu_s : 0},
                      {"overrun_gpu_s", s.overrun_gpu_s},
                      {"work_gpu_s", s.work_gpu_s},
                      {"gpu_equivalents", s.work_gpu_s / r.wall_s},
                      {"bubbles", s.bubbles},
                      {"steps", s.steps}});
  nlohmann::json tasks = nlohmann::json::array();
  for (const TaskResult& t : r.tasks)
    tasks.push_back({{"name", t.name}, {"unit", t.unit}, {"gpus", t.gpus}, {"steps", t.steps},
                     {"work_gpu_s", t.work_gpu_s}, {"units", t.units}});
  nlohmann::json out = {
      {"schedule", ScheduleKindName(c.schedule)},
      {"stages", c.stages},
      {"virtual_stages", c.VirtualStages()},
      {"microbatches", c.microbatches},
      {"data_parallel", c.data_parallel},
      {"gpus", c.Gpus()},
      {"iterations", c.iterations},
      {"bubble_fraction", r.bubble_fraction},
      {"closed_form_bubble_fraction",
       r.closed_form_bubble_fraction ? nlohmann::json(*r.closed_form_bubble_fraction) : nullptr},
      {"harvest_ratio", r.harvest_ratio},
      {"harvested_fraction", r.harvested_fraction},
      {"overhead_pct", r.overhead_pct},
      {"cost_saving_pct", r.cost_saving_pct},
      {"extra_gpu_equivalents", r.extra_gpu_equivalents},
      {"iteration_ms", r.iteration_ms},
      {"iteration_ms_baseline", r.iteration_ms_baseline},
      {"bubble_gpu_s", r.bubble_gpu_s},
      {"harvested_gpu_s", r.harvested_gpu_s},
      {"overrun_gpu_s", r.overrun_gpu_s},
      {"work_gpu_s", r.work_gpu_s},
      {"per_stage", stages},
      {"tasks", tasks},
      {"simulated_seconds", r.simulated_seconds},
  };
  if (r.money_saved_per_hour) out["money_saved_per_hour"] = *r.money_saved_per_hour;
  return out;
}

std::string FormatSweep(const std::vector<SimResult>& rows) {
  if (rows.empty()) return "";
  const SimConfig& c = rows.front().config;
  const int64_t global_batch = static_cast<int64_t>(c.microbatches) * c.data_parallel;
  std::string out = fmt::format(
      "FreeRide scale-out: {}, {}, a fixed global batch of {}, {}\n\n", ScheduleKindName(c.schedule),
      Counted(c.stages, "stage", "stages"), Counted(global_batch, "micro-batch", "micro-batches"),
      Counted(c.iterations, "iteration", "iterations"));
  out += fmt::format("{:>7} {:>10} {:>8} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9}\n", "GPUs",
                     "pipelines", "M", "bubble", "harvest", "overhead", "GPU-equiv", "saving",
                     "sim s");
  for (const SimResult& r : rows)
    out += fmt::format("{:>7} {:>10} {:>8} {:>8.1f}% {:>8.1f}% {:>+9.3f}% {:>10.1f} {:>8.1f}% {:>9.2f}\n",
                       r.config.Gpus(), r.config.data_parallel, r.config.microbatches,
                       100 * r.bubble_fraction, 100 * r.harvest_ratio, Shown(r.overhead_pct, 3),
                       r.extra_gpu_equivalents, Shown(r.cost_saving_pct, 1), r.simulated_seconds);
  return out;
}

nlohmann::json SweepToJson(const std::vector<SimResult>& rows) {
  // The top level is the largest scale, as a single run's JSON is, so that
  // readers of one shape read both.
  nlohmann::json out = rows.empty() ? nlohmann::json::object() : SimResultToJson(rows.back());
  out["sweep"] = nlohmann::json::array();
  for (const SimResult& r : rows) out["sweep"].push_back(SimResultToJson(r));
  return out;
}

}  // namespace freeride::sim
