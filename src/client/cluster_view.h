// One view of a whole job: the daemons of several nodes, asked over TCP, and
// what they say added up per node and in total.  A node whose daemon does
// not answer, or answers with an error, is named as such and never counted
// in the total as if it were idle.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "freeride.pb.h"

namespace freeride {

// One node as the user names it: a label and its daemon's HOST:PORT.
struct ClusterNode {
  std::string name;    // the label in the view; HOST:PORT when none was given
  std::string server;  // HOST:PORT of a daemon started with --listen
};

// Parses "[NAME=]HOST:PORT,[NAME=]HOST:PORT,...".  nullopt and *error for an
// empty list, an entry without a port or with a bad one, or a name used twice.
std::optional<std::vector<ClusterNode>> ParseClusterNodes(const std::string& list,
                                                          std::string* error);

// Reads a cluster file: one [NAME=]HOST:PORT a line; blank lines and lines
// starting with # are skipped.  Errors name the file and the line.
std::optional<std::vector<ClusterNode>> ReadClusterFile(const std::string& path, std::string* error);

// What one node's daemon answered, or why it did not.
struct NodeSnapshot {
  ClusterNode node;
  grpc::StatusCode code = grpc::StatusCode::OK;  // not OK: the daemon's stats are unknown
  std::string problem;                           // the error, in words, when code is not OK
  v1::StatsReply stats;
  std::vector<v1::TaskInfo> tasks;  // every task, ended ones too
};

// Asks every node's daemon for its stats and tasks, 64 nodes at once, each
// call bounded by `timeout`.  `connection` gives the token and TLS CA shared
// by all nodes (its server is replaced by each node's).  Never fails as a
// whole: a node that cannot be asked gets its code and problem.  Any thread.
std::vector<NodeSnapshot> FetchCluster(const std::vector<ClusterNode>& nodes,
                                       const DaemonEndpoint& connection,
                                       std::chrono::milliseconds timeout);

// How a node's daemon stands.
enum class NodeHealth {
  kOk,        // answered
  kMissing,   // no daemon answered at its address in time
  kRefused,   // its daemon refused the token
  kFailing,   // its daemon answered with another error
};
const char* NodeHealthName(NodeHealth health);  // "ok", "missing", "refused", "failing"

// A lane's live overhead estimate, with where it is.
struct LaneOverhead {
  std::string node;
  int lane = 0;
  double slowdown = 0, low = 0, high = 0;  // 0.004 = +0.4% iteration time
  int cycles = 0;
};

// A task that failed, with where and why.
struct FailedTask {
  std::string node;
  int64_t id = 0;
  std::string name;
  int exit_code = 0;
  int term_signal = 0;
  std::string message;
};

// Figures of one node, or of the nodes that answered added up.
struct NodeFigures {
  int lanes = 0;
  int lanes_with_stage = 0;
  uint64_t bubbles = 0;
  int64_t bubble_ns = 0;     // idle time seen
  int64_t harvested_ns = 0;  // side-task steps inside it
  int64_t overrun_ns = 0;    // side-task time past a bubble's end
  int64_t allowed_ns = 0;    // imperative tasks let run (not work)
  // The lane whose training slows the most by its estimate: a pipeline runs
  // at the pace of its slowest stage, so this, not a sum or a mean, is the
  // job's.  Unset while no lane has an estimate.
  std::optional<LaneOverhead> worst_overhead;
  int lanes_with_estimate = 0;
  int lanes_paused = 0;      // overhead guard at its last level: no side work
  // Tasks by state: queued (SUBMITTED), launched (CREATED, PAUSED between
  // bubbles, RUNNING), and the ended ones.
  int tasks_queued = 0, tasks_launched = 0, tasks_finished = 0, tasks_failed = 0,
      tasks_cancelled = 0;
};

struct NodeSummary {
  ClusterNode node;
  NodeHealth health = NodeHealth::kOk;
  std::string problem;  // why it is not ok
  std::string version;
  int64_t daemon_pid = 0;
  int64_t uptime_ns = 0;
  NodeFigures figures;  // zero unless ok
};

struct ClusterSummary {
  std::vector<NodeSummary> nodes;  // in the order given
  NodeFigures total;               // over the nodes that answered only
  int answered = 0;
  std::vector<FailedTask> failed;  // every failed task of every node
  bool AllAnswered() const { return answered == static_cast<int>(nodes.size()); }
};

// Adds up the snapshots.  Pure.
ClusterSummary SummarizeCluster(const std::vector<NodeSnapshot>& snapshots);

// The summary as JSON (stable keys, for scripts).  Pure.
std::string ClusterSummaryToJson(const ClusterSummary& summary);

}  // namespace freeride
