#include "client/cluster_view.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>

namespace freeride {
namespace {

std::string Trim(std::string text) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && blank(text.back())) text.pop_back();
  size_t first = 0;
  while (first < text.size() && blank(text[first])) ++first;
  return text.substr(first);
}

// One "[NAME=]HOST:PORT" entry; nullopt and *error when it is not one.
std::optional<ClusterNode> ParseNode(const std::string& entry, std::string* error) {
  ClusterNode node;
  std::string address = entry;
  if (size_t eq = entry.find('='); eq != std::string::npos) {
    node.name = Trim(entry.substr(0, eq));
    address = Trim(entry.substr(eq + 1));
    if (node.name.empty()) {
      *error = fmt::format("'{}' has an empty name before '='", entry);
      return std::nullopt;
    }
  }
  size_t colon = address.rfind(':');
  std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  char* end = nullptr;
  long number = port.empty() ? 0 : std::strtol(port.c_str(), &end, 10);
  if (colon == std::string::npos || colon == 0 || port.empty() || *end != '\0' || number < 1 ||
      number > 65535) {
    *error = fmt::format("'{}' is not HOST:PORT (a port from 1 to 65535)", address);
    return std::nullopt;
  }
  node.server = address;
  if (node.name.empty()) node.name = address;
  return node;
}

std::optional<std::vector<ClusterNode>> CheckUnique(std::vector<ClusterNode> nodes,
                                                    std::string* error) {
  if (nodes.empty()) {
    *error = "no nodes given";
    return std::nullopt;
  }
  std::set<std::string> names;
  for (const ClusterNode& n : nodes)
    if (!names.insert(n.name).second) {
      *error = fmt::format("the node '{}' is named twice", n.name);
      return std::nullopt;
    }
  return nodes;
}

NodeHealth HealthOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return NodeHealth::kOk;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return NodeHealth::kMissing;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED: return NodeHealth::kRefused;
    default: return NodeHealth::kFailing;
  }
}

void AddLane(const std::string& node, const v1::LaneStats& l, NodeFigures* f) {
  ++f->lanes;
  f->lanes_with_stage += l.stage_alive() ? 1 : 0;
  f->bubbles += l.bubbles();
  f->bubble_ns += l.bubble_ns();
  f->harvested_ns += l.harvested_ns();
  f->overrun_ns += l.overrun_ns();
  f->allowed_ns += l.allowed_ns();
  f->lanes_paused += l.overhead().guard() == v1::GUARD_LEVEL_PAUSED ? 1 : 0;
  const v1::OverheadEstimate& o = l.overhead();
  if (!o.known()) return;
  ++f->lanes_with_estimate;
  if (!f->worst_overhead || o.slowdown() > f->worst_overhead->slowdown)
    f->worst_overhead = LaneOverhead{node, l.lane(), o.slowdown(), o.slowdown_low(),
                                     o.slowdown_high(), o.cycles()};
}

void AddTask(const std::string& node, const v1::TaskInfo& t, NodeFigures* f,
             std::vector<FailedTask>* failed) {
  const std::string& state = t.state();
  if (state == "SUBMITTED") ++f->tasks_queued;
  else if (state == "CREATED" || state == "PAUSED" || state == "RUNNING") ++f->tasks_launched;
  else if (state == "FINISHED") ++f->tasks_finished;
  else if (state == "CANCELLED") ++f->tasks_cancelled;
  else if (state == "FAILED") {
    ++f->tasks_failed;
    failed->push_back(FailedTask{node, t.id(), t.spec().name(), t.exit_code(), t.term_signal(),
                                 t.message()});
  }
}

void AddFigures(const NodeFigures& from, NodeFigures* to) {
  to->lanes += from.lanes;
  to->lanes_with_stage += from.lanes_with_stage;
  to->bubbles += from.bubbles;
  to->bubble_ns += from.bubble_ns;
  to->harvested_ns += from.harvested_ns;
  to->overrun_ns += from.overrun_ns;
  to->allowed_ns += from.allowed_ns;
  to->lanes_with_estimate += from.lanes_with_estimate;
  to->lanes_paused += from.lanes_paused;
  if (from.worst_overhead &&
      (!to->worst_overhead || from.worst_overhead->slowdown > to->worst_overhead->slowdown))
    to->worst_overhead = from.worst_overhead;
  to->tasks_queued += from.tasks_queued;
  to->tasks_launched += from.tasks_launched;
  to->tasks_finished += from.tasks_finished;
  to->tasks_failed += from.tasks_failed;
  to->tasks_cancelled += from.tasks_cancelled;
}

nlohmann::json FiguresJson(const NodeFigures& f) {
  nlohmann::json j = {
      {"lanes", f.lanes},
      {"lanes_with_stage", f.lanes_with_stage},
      {"bubbles", f.bubbles},
      {"bubble_ns", f.bubble_ns},
      {"harvested_ns", f.harvested_ns},
      {"harvested_share", f.bubble_ns > 0 ? static_cast<double>(f.harvested_ns) / f.bubble_ns : 0.0},
      {"overrun_ns", f.overrun_ns},
      {"allowed_ns", f.allowed_ns},
      {"lanes_with_estimate", f.lanes_with_estimate},
      {"lanes_paused", f.lanes_paused},
      {"tasks",
       {{"queued", f.tasks_queued},
        {"launched", f.tasks_launched},
        {"finished", f.tasks_finished},
        {"failed", f.tasks_failed},
        {"cancelled", f.tasks_cancelled}}},
  };
  if (f.worst_overhead) {
    const LaneOverhead& o = *f.worst_overhead;
    j["worst_overhead"] = {{"node", o.node},         {"lane", o.lane}, {"slowdown", o.slowdown},
                           {"slowdown_low", o.low},  {"slowdown_high", o.high},
                           {"cycles", o.cycles}};
  } else {
    j["worst_overhead"] = nullptr;
  }
  return j;
}

}  // namespace

std::optional<std::vector<ClusterNode>> ParseClusterNodes(const std::string& list,
                                                          std::string* error) {
  std::vector<ClusterNode> nodes;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string entry = Trim(list.substr(start, comma == std::string::npos ? std::string::npos
                                                                           : comma - start));
    if (!entry.empty()) {
      auto node = ParseNode(entry, error);
      if (!node) return std::nullopt;
      nodes.push_back(*node);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return CheckUnique(std::move(nodes), error);
}

std::optional<std::vector<ClusterNode>> ReadClusterFile(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = fmt::format("cannot read the cluster file {}", path);
    return std::nullopt;
  }
  std::vector<ClusterNode> nodes;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    auto node = ParseNode(line, error);
    if (!node) {
      *error = fmt::format("{} line {}: {}", path, number, *error);
      return std::nullopt;
    }
    nodes.push_back(*node);
  }
  auto checked = CheckUnique(std::move(nodes), error);
  if (!checked) *error = fmt::format("{}: {}", path, *error);
  return checked;
}

std::vector<NodeSnapshot> FetchCluster(const std::vector<ClusterNode>& nodes,
                                       const DaemonEndpoint& connection,
                                       std::chrono::milliseconds timeout) {
  auto fetch = [&connection, timeout](const ClusterNode& node) {
    NodeSnapshot snapshot;
    snapshot.node = node;
    DaemonEndpoint endpoint = connection;
    endpoint.server = node.server;
    std::string error;
    auto stub = ConnectToDaemon(endpoint, &error);
    if (!stub) {
      snapshot.code = grpc::StatusCode::FAILED_PRECONDITION;
      snapshot.problem = error;
      return snapshot;
    }
    grpc::ClientContext context;
    PrepareContext(&context, endpoint, timeout);
    grpc::Status status = stub->GetStats(&context, v1::StatsRequest(), &snapshot.stats);
    v1::ListTasksReply tasks;
    if (status.ok()) status = ListAllTasks(*stub, endpoint, /*include_ended=*/true, timeout, &tasks);
    if (!status.ok()) {
      snapshot.code = status.error_code();
      snapshot.problem = DescribeRpcError(status, endpoint);
      snapshot.stats.Clear();
      return snapshot;
    }
    snapshot.tasks.assign(tasks.tasks().begin(), tasks.tasks().end());
    return snapshot;
  };
  // In waves, so that a job of thousands of nodes does not start thousands
  // of threads: a wave takes at most `timeout` per call.
  constexpr size_t kAtOnce = 64;
  std::vector<NodeSnapshot> snapshots;
  for (size_t first = 0; first < nodes.size(); first += kAtOnce) {
    std::vector<std::future<NodeSnapshot>> pending;
    for (size_t i = first; i < std::min(nodes.size(), first + kAtOnce); ++i)
      pending.push_back(std::async(std::launch::async, fetch, nodes[i]));
    for (auto& p : pending) snapshots.push_back(p.get());
  }
  return snapshots;
}

const char* NodeHealthName(NodeHealth health) {
  switch (health) {
    case NodeHealth::kOk: return "ok";
    case NodeHealth::kMissing: return "missing";
    case NodeHealth::kRefused: return "refused";
    case NodeHealth::kFailing: return "failing";
  }
  return "?";
}

ClusterSummary SummarizeCluster(const std::vector<NodeSnapshot>& snapshots) {
  ClusterSummary summary;
  for (const NodeSnapshot& s : snapshots) {
    NodeSummary node;
    node.node = s.node;
    node.health = HealthOf(s.code);
    node.problem = s.problem;
    if (node.health == NodeHealth::kOk) {
      ++summary.answered;
      node.version = s.stats.version();
      node.daemon_pid = s.stats.daemon_pid();
      node.uptime_ns = s.stats.uptime_ns();
      for (const v1::LaneStats& l : s.stats.lanes()) AddLane(s.node.name, l, &node.figures);
      for (const v1::TaskInfo& t : s.tasks) AddTask(s.node.name, t, &node.figures, &summary.failed);
      AddFigures(node.figures, &summary.total);
    }
    summary.nodes.push_back(std::move(node));
  }
  return summary;
}

std::string ClusterSummaryToJson(const ClusterSummary& summary) {
  nlohmann::json nodes = nlohmann::json::array();
  std::vector<std::string> not_answered;
  for (const NodeSummary& n : summary.nodes) {
    nlohmann::json j = {{"name", n.node.name},
                        {"server", n.node.server},
                        {"health", NodeHealthName(n.health)}};
    if (n.health == NodeHealth::kOk) {
      j["version"] = n.version;
      j["daemon_pid"] = n.daemon_pid;
      j["uptime_ns"] = n.uptime_ns;
      j["figures"] = FiguresJson(n.figures);
    } else {
      j["problem"] = n.problem;
      not_answered.push_back(n.node.name);
    }
    nodes.push_back(std::move(j));
  }
  nlohmann::json failed = nlohmann::json::array();
  for (const FailedTask& f : summary.failed)
    failed.push_back({{"node", f.node},
                      {"id", f.id},
                      {"name", f.name},
                      {"exit_code", f.exit_code},
                      {"term_signal", f.term_signal},
                      {"message", f.message}});
  nlohmann::json out = {{"nodes", std::move(nodes)},
                        {"answered", summary.answered},
                        {"not_answered", not_answered},
                        {"total", FiguresJson(summary.total)},
                        {"failed_tasks", std::move(failed)}};
  return out.dump(2) + "\n";
}

}  // namespace freeride
