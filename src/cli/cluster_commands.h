// `freeride status --servers ...` and `freeride report --servers ...`: one
// view of the daemons of a job's nodes (client/cluster_view.h), in words or
// as JSON.  The exit status is 1 when a node's daemon did not answer, so
// that a script notices it even where the total looks fine.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace freeride::cli {

struct ClusterRequest {
  std::string servers;       // "[NAME=]HOST:PORT,..."
  std::string cluster_file;  // one [NAME=]HOST:PORT a line
  std::string token_file;    // the daemons' token (a read-only one is enough)
  std::string tls_ca;
  double timeout_seconds = 10;
  bool json = false;
  bool Requested() const { return !servers.empty() || !cluster_file.empty(); }
};

// Adds --servers, --cluster and --timeout to `cmd` (the token and TLS
// options are the command's own).
void AddClusterOptions(CLI::App* cmd, ClusterRequest* request);

enum class ClusterDetail {
  kStatus,  // per node, then each node's lanes now
  kReport,  // per node, then every task of every node
};

// Asks the nodes and prints the view; returns the exit status.
int RunClusterView(const ClusterRequest& request, ClusterDetail detail, const char* command);

}  // namespace freeride::cli
