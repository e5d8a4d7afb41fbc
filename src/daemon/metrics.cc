#include "daemon/metrics.h"

#include "policy/overhead_guard.h"

#include <fmt/format.h>
#include <httplib.h>

#include <limits>
#include <map>

namespace freeride {

// Workers of the /metrics server (see Start).
constexpr size_t kMetricsWorkers = 32;
namespace {

std::string LabelValue(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

class Exposition {
 public:
  // Declares a metric family once; samples follow with Sample().
  void Family(const std::string& name, const char* type, const char* help) {
    text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void Sample(const std::string& name, const std::string& labels, double value) {
    text_ += fmt::format("{}{}{}{} {}\n", name, labels.empty() ? "" : "{", labels,
                         labels.empty() ? "" : "}", value);
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

}  // namespace

std::string RenderPrometheusMetrics(const v1::StatsReply& stats,
                                    const std::vector<v1::TaskInfo>& tasks) {
  Exposition e;
  e.Family("freeride_daemon_uptime_seconds", "gauge", "Seconds since the daemon started.");
  e.Sample("freeride_daemon_uptime_seconds", "", static_cast<double>(stats.uptime_ns()) / 1e9);
  auto lane_labels = [](const v1::LaneStats& l) {
    return fmt::format("lane=\"{}\",device=\"{}\"", l.lane(), LabelValue(l.device()));
  };
  struct LaneMetric {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const v1::LaneStats&);
  };
  const LaneMetric lane_metrics[] = {
      {"freeride_lane_bubbles_total", "counter", "Bubbles the lane served.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.bubbles()); }},
      {"freeride_lane_bubble_seconds_total", "counter", "Idle time of the stage, in bubbles.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.bubble_ns()) / 1e9; }},
      {"freeride_lane_harvested_seconds_total", "counter",
       "Side-task step time inside bubbles.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.harvested_ns()) / 1e9; }},
      {"freeride_lane_allowed_seconds_total", "counter",
       "Time imperative tasks were let run inside bubbles (not work, so not harvested).",
       [](const v1::LaneStats& l) { return static_cast<double>(l.allowed_ns()) / 1e9; }},
      {"freeride_lane_overrun_seconds_total", "counter",
       "Side-task step time past bubble ends.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.overrun_ns()) / 1e9; }},
      {"freeride_lane_in_bubble", "gauge", "1 while the stage is idle in a bubble.",
       [](const v1::LaneStats& l) { return l.in_bubble() ? 1.0 : 0.0; }},
      {"freeride_lane_stage_alive", "gauge", "1 while a training stage is attached and alive.",
       [](const v1::LaneStats& l) { return l.stage_alive() ? 1.0 : 0.0; }},
      {"freeride_lane_resident_tasks", "gauge", "Launched tasks held by the lane.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.resident_tasks()); }},
      {"freeride_lane_queued_tasks", "gauge", "Tasks waiting for the lane.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.queued_tasks()); }},
      // The GPU gate's (0 on a lane without one).
      {"freeride_lane_gate_open_seconds_total", "counter", "Time the lane's GPU gate was open.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.gate_open_ns()) / 1e9; }},
      {"freeride_lane_gate_early_closes_total", "counter",
       "Bubbles whose gate admitted work no more before their end (the close margin).",
       [](const v1::LaneStats& l) { return static_cast<double>(l.gate_early_closes()); }},
      {"freeride_lane_gate_forced_closes_total", "counter", "Gates closed for a silent or dead stage.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.gate_forced_closes()); }},
      {"freeride_lane_gate_late_seconds_total", "counter",
       "Gated side work found running after its bubble closed (judged by the overrun budget).",
       [](const v1::LaneStats& l) { return static_cast<double>(l.gate_late_ns()) / 1e9; }},
      {"freeride_lane_gate_late_stretches_total", "counter", "Stretches of such late work.",
       [](const v1::LaneStats& l) { return static_cast<double>(l.gate_late_bubbles()); }},
      {"freeride_lane_gate_pending_seconds_total", "counter",
       "Busy time gated side work spent pending on its GPU wait after its bubble closed (runs nothing).",
       [](const v1::LaneStats& l) { return static_cast<double>(l.gate_pending_ns()) / 1e9; }},
  };
  for (const LaneMetric& m : lane_metrics) {
    e.Family(m.name, m.type, m.help);
    for (const auto& l : stats.lanes()) e.Sample(m.name, lane_labels(l), m.value(l));
  }
  // Free memory only where a stage has said it: unknown is the largest value
  // (the channel's "no figure"), which would plot as 18 EB.
  e.Family("freeride_lane_free_memory_bytes", "gauge",
           "Device memory the stage leaves to side tasks (last mark); absent until a stage gives it.");
  for (const auto& l : stats.lanes())
    if (l.free_memory_bytes() != std::numeric_limits<uint64_t>::max())
      e.Sample("freeride_lane_free_memory_bytes", lane_labels(l), static_cast<double>(l.free_memory_bytes()));
  // Where an open gate's time went unused, by why (LaneStats' gate_held_*_ns).
  e.Family("freeride_lane_gate_held_open_seconds_total", "counter",
           "Gated programs' threads held on the host while the gate was open, summed over threads: waiting "
           "for the bubble's deadline (no forecast admitted the piece), for queued work to drain, or because "
           "the next piece would not end by the deadline (fit).");
  for (const auto& l : stats.lanes()) {
    const std::pair<const char*, int64_t> held[] = {
        {"unpublished", l.gate_held_unpublished_ns()}, {"drain", l.gate_held_drain_ns()}, {"fit", l.gate_held_fit_ns()}};
    for (const auto& [why, ns] : held)
      e.Sample("freeride_lane_gate_held_open_seconds_total", fmt::format("{},why=\"{}\"", lane_labels(l), why),
               static_cast<double>(ns) / 1e9);
  }
  // The live overhead estimate: samples only for lanes that have one, so a
  // dashboard never plots a number the daemon does not have.
  const LaneMetric overhead_metrics[] = {
      {"freeride_lane_training_slowdown_ratio", "gauge",
       "Live estimate of the training's slowdown from side work (0.004 = +0.4%).",
       [](const v1::LaneStats& l) { return l.overhead().slowdown(); }},
      {"freeride_lane_training_slowdown_low_ratio", "gauge", "Its 95% interval's low end.",
       [](const v1::LaneStats& l) { return l.overhead().slowdown_low(); }},
      {"freeride_lane_training_slowdown_high_ratio", "gauge", "Its 95% interval's high end.",
       [](const v1::LaneStats& l) { return l.overhead().slowdown_high(); }},
  };
  for (const LaneMetric& m : overhead_metrics) {
    e.Family(m.name, m.type, m.help);
    for (const auto& l : stats.lanes())
      if (l.overhead().known()) e.Sample(m.name, lane_labels(l), m.value(l));
  }
  e.Family("freeride_lane_guard_level", "gauge",
           "The overhead guard's level: 0 normal, 1 wider margins, 2 fewer grants, 3 demoted, "
           "4 paused.");
  for (const auto& l : stats.lanes())
    e.Sample("freeride_lane_guard_level", lane_labels(l), static_cast<double>(l.overhead().guard()));
  std::map<std::string, int> by_state;
  for (const char* state :
       {"SUBMITTED", "CREATED", "PAUSED", "RUNNING", "FINISHED", "FAILED", "CANCELLED"})
    by_state[state] = 0;
  for (const auto& t : tasks) ++by_state[t.state()];
  e.Family("freeride_tasks", "gauge", "Tasks by state.");
  for (const auto& [state, count] : by_state)
    e.Sample("freeride_tasks", fmt::format("state=\"{}\"", LabelValue(state)), count);
  auto task_labels = [](const v1::TaskInfo& t) {
    return fmt::format("id=\"{}\",name=\"{}\",lane=\"{}\"", t.id(), LabelValue(t.spec().name()),
                       t.lane());
  };
  e.Family("freeride_task_progress", "gauge", "Work done, in the task's unit (see unit label).");
  for (const auto& t : tasks)
    e.Sample("freeride_task_progress",
             task_labels(t) + fmt::format(",unit=\"{}\"", LabelValue(t.progress_unit())),
             t.progress());
  e.Family("freeride_task_steps_total", "counter", "Steps the task ran.");
  for (const auto& t : tasks)
    e.Sample("freeride_task_steps_total", task_labels(t), static_cast<double>(t.steps()));
  e.Family("freeride_task_allowed_seconds_total", "counter",
           "An imperative task's time let run in bubbles (not work, so not harvested).");
  for (const auto& t : tasks)
    e.Sample("freeride_task_allowed_seconds_total", task_labels(t),
             static_cast<double>(t.allowed_ns()) / 1e9);
  e.Family("freeride_task_harvested_seconds_total", "counter", "The task's step time in bubbles.");
  for (const auto& t : tasks)
    e.Sample("freeride_task_harvested_seconds_total", task_labels(t),
             static_cast<double>(t.harvested_ns()) / 1e9);
  return e.Take();
}

MetricsServer::MetricsServer() = default;
MetricsServer::~MetricsServer() { Stop(); }

bool MetricsServer::Start(const std::string& address, Render render, std::string* error) {
  size_t colon = address.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon + 1 < address.size()) {
    char* end = nullptr;
    long parsed = std::strtol(address.c_str() + colon + 1, &end, 10);
    if (*end == '\0' && parsed >= 0 && parsed <= 65535) port = static_cast<int>(parsed);
  }
  if (colon == std::string::npos || colon == 0 || port < 0) {
    *error = fmt::format("--metrics: '{}' is not HOST:PORT (e.g. 127.0.0.1:9464)", address);
    return false;
  }
  std::string host = address.substr(0, colon);
  server_ = std::make_unique<httplib::Server>();
  // A connection holds a worker while it waits for a request: with the
  // defaults (8 workers, 5 s) a few dozen idle connections queued a scrape
  // past Prometheus' 10 s timeout (docs/reliability.md).  A scrape is one
  // short request, so idle ones are let go after a second, among more
  // workers.
  server_->new_task_queue = [] { return new httplib::ThreadPool(kMetricsWorkers); };
  server_->set_keep_alive_timeout(1);
  server_->set_read_timeout(1, 0);
  server_->Get("/metrics", [render](const httplib::Request&, httplib::Response& response) {
    response.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("FreeRide daemon: metrics at /metrics\n", "text/plain");
  });
  port_ = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) {
    *error = fmt::format("--metrics: cannot listen on {}", address);
    server_.reset();
    return false;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return true;
}

void MetricsServer::Stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace freeride
