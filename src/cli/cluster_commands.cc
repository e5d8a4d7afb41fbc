#include "cli/cluster_commands.h"

#include <fmt/format.h>

#include <cctype>
#include <chrono>

#include "base/units.h"
#include "client/cluster_view.h"

namespace freeride::cli {
namespace {

std::string Share(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : "-";
}

// The worst lane's estimate, or why there is none; never a number the
// daemons do not have.
std::string SlowdownWords(const NodeFigures& f, bool name_node) {
  if (!f.worst_overhead)
    return f.lanes == 0 ? "-" : fmt::format("no estimate yet (0 of {} lanes)", f.lanes);
  const LaneOverhead& o = *f.worst_overhead;
  return fmt::format("{:+.2f}% [{:+.2f}%, {:+.2f}%] {}lane {}", 100 * o.slowdown, 100 * o.low,
                     100 * o.high, name_node ? o.node + " " : "", o.lane);
}

std::string TaskCounts(const NodeFigures& f) {
  return fmt::format("{}/{}/{}/{}", f.tasks_queued, f.tasks_launched, f.tasks_finished,
                     f.tasks_failed);
}

std::string Row(const std::string& name, const std::string& health, const NodeFigures& f,
                bool name_node) {
  return fmt::format("{:<16} {:<8} {:>5} {:>6} {:>9} {:>10} {:>10} {:>6} {:>9}  {:<13} {}\n", name,
                     health, f.lanes, f.lanes_with_stage, f.bubbles, FormatDuration(f.bubble_ns),
                     FormatDuration(f.harvested_ns), Share(f.harvested_ns, f.bubble_ns),
                     FormatDuration(f.overrun_ns), TaskCounts(f), SlowdownWords(f, name_node));
}

// The nodes, the total over those that answered, and the ones that did not.
void PrintNodes(const ClusterSummary& summary) {
  int missing = static_cast<int>(summary.nodes.size()) - summary.answered;
  fmt::print("cluster: {} node(s), {} answered{}\n\n", summary.nodes.size(), summary.answered,
             missing ? fmt::format("; {} NOT COUNTED in the total (below)", missing) : "");
  fmt::print("{:<16} {:<8} {:>5} {:>6} {:>9} {:>10} {:>10} {:>6} {:>9}  {:<13} {}\n", "node",
             "health", "lanes", "stages", "bubbles", "idle", "harvested", "share", "overrun",
             "tasks q/l/d/f", "training slowdown (worst lane, 95% interval)");
  for (const NodeSummary& n : summary.nodes) {
    if (n.health == NodeHealth::kOk) {
      fmt::print("{}", Row(n.node.name, "ok", n.figures, false));
    } else {
      std::string health = NodeHealthName(n.health);
      for (char& c : health) c = static_cast<char>(std::toupper(c));
      fmt::print("{:<16} {:<8} {}\n", n.node.name, health, n.problem);
    }
  }
  fmt::print("{}", Row(fmt::format("total ({} of {})", summary.answered, summary.nodes.size()), "",
                       summary.total, true));
  fmt::print("\n(tasks q/l/d/f: queued, launched, done, failed; the job's slowdown is its slowest "
             "stage's: the worst lane, not a sum)\n");
  for (const NodeSummary& n : summary.nodes) {
    if (n.health != NodeHealth::kOk) {
      fmt::print("NOT COUNTED: {} ({}): {}\n", n.node.name, NodeHealthName(n.health), n.problem);
      continue;
    }
    const NodeFigures& f = n.figures;
    if (f.lanes_with_stage < f.lanes)
      fmt::print("note: {}: {} of {} lane(s) have no training stage attached\n", n.node.name,
                 f.lanes - f.lanes_with_stage, f.lanes);
    if (f.lanes_paused > 0)
      fmt::print("note: {}: the overhead guard paused side work on {} lane(s)\n", n.node.name,
                 f.lanes_paused);
  }
  if (!summary.failed.empty()) {
    fmt::print("\nfailed tasks:\n");
    for (const FailedTask& t : summary.failed)
      fmt::print("  {:<16} {:>5}  {:<20} exit {}{}  {}\n", t.node, t.id, t.name, t.exit_code,
                 t.term_signal ? fmt::format(" (signal {})", t.term_signal) : "", t.message);
  }
}

void PrintLanes(const std::vector<NodeSnapshot>& snapshots) {
  fmt::print("\n{:<16} {:>4}  {:<7} {:>7} {:>8} {:>10} {:>6}  {}\n", "node", "lane", "device",
             "stage", "bubbles", "idle", "share", "now");
  for (const NodeSnapshot& s : snapshots) {
    if (s.code != grpc::StatusCode::OK) continue;
    for (const v1::LaneStats& l : s.stats.lanes()) {
      std::string now = !l.stage_alive() ? "no stage attached"
                        : l.in_bubble()  ? fmt::format("bubble (slot {})", l.current_slot())
                                         : "busy/training";
      fmt::print("{:<16} {:>4}  {:<7} {:>7} {:>8} {:>10} {:>6}  {}; guard {}\n", s.node.name,
                 l.lane(), l.device(), l.stage_alive() ? std::to_string(l.stage_pid()) : "-",
                 l.bubbles(), FormatDuration(l.bubble_ns()),
                 Share(l.harvested_ns(), l.bubble_ns()), now, l.overhead().guard_level());
    }
  }
}

void PrintTasks(const std::vector<NodeSnapshot>& snapshots) {
  fmt::print("\n{:<16} {:>5}  {:<20} {:>4}  {:<10} {:>8} {:>10}  {}\n", "node", "id", "name", "lane",
             "state", "steps", "harvested", "progress");
  bool any = false;
  for (const NodeSnapshot& s : snapshots)
    for (const v1::TaskInfo& t : s.tasks) {
      any = true;
      fmt::print("{:<16} {:>5}  {:<20} {:>4}  {:<10} {:>8} {:>10}  {:.4g} {}\n", s.node.name, t.id(),
                 t.spec().name(), t.lane(), t.state(), t.steps(), FormatDuration(t.harvested_ns()),
                 t.progress(), t.progress_unit());
    }
  if (!any) fmt::print("  (no tasks on the nodes that answered)\n");
}

}  // namespace

void AddClusterOptions(CLI::App* cmd, ClusterRequest* request) {
  cmd->add_option("--servers", request->servers,
                  "The cluster view: the daemons of several nodes, [NAME=]HOST:PORT,... (started "
                  "with --listen; one --token-file for all, a read-only one is enough)");
  cmd->add_option("--cluster", request->cluster_file,
                  "The cluster view, with the nodes in a file: one [NAME=]HOST:PORT a line");
  cmd->add_option("--timeout", request->timeout_seconds,
                  "With --servers/--cluster: seconds to wait for each node's daemon")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

int RunClusterView(const ClusterRequest& request, ClusterDetail detail, const char* command) {
  std::string error;
  if (!request.servers.empty() && !request.cluster_file.empty()) {
    fmt::print(stderr, "freeride {}: give the nodes with --servers or --cluster, not both\n", command);
    return 2;
  }
  auto nodes = !request.servers.empty() ? ParseClusterNodes(request.servers, &error)
                                        : ReadClusterFile(request.cluster_file, &error);
  if (!nodes) {
    fmt::print(stderr, "freeride {}: {}\n", command, error);
    return 2;
  }
  if (request.token_file.empty()) {
    fmt::print(stderr, "freeride {}: the cluster view needs --token-file: daemons on TCP refuse "
                       "requests without their token (a read-only token is enough)\n", command);
    return 2;
  }
  DaemonEndpoint connection;
  connection.tls_ca_file = request.tls_ca;
  auto token = ReadTokenFile(request.token_file, &error);
  if (!token) {
    fmt::print(stderr, "freeride {}: {}\n", command, error);
    return 2;
  }
  connection.token = *token;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(request.timeout_seconds * 1000));
  std::vector<NodeSnapshot> snapshots = FetchCluster(*nodes, connection, timeout);
  ClusterSummary summary = SummarizeCluster(snapshots);
  if (request.json) {
    fmt::print("{}", ClusterSummaryToJson(summary));
  } else {
    PrintNodes(summary);
    if (detail == ClusterDetail::kStatus) PrintLanes(snapshots);
    else PrintTasks(snapshots);
  }
  return summary.AllAnswered() ? 0 : 1;
}

}  // namespace freeride::cli
