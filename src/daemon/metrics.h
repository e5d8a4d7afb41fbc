// Prometheus metrics of a daemon: the lane and task statistics that `freeride
// status` shows, in the plain-text exposition format (version 0.0.4), served
// over HTTP at /metrics when the daemon runs with --metrics HOST:PORT.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "freeride.pb.h"

namespace httplib {
class Server;
}

namespace freeride {

// The exposition text for one snapshot of the daemon.  Pure; any thread.
std::string RenderPrometheusMetrics(const v1::StatsReply& stats,
                                    const std::vector<v1::TaskInfo>& tasks);

// Start and Stop from one thread.
class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  MetricsServer();
  // Stops the server.
  ~MetricsServer();

  // Listens on "HOST:PORT" (PORT 0 picks a free one) and serves GET /metrics
  // with `render()` from a thread of its own.  Returns false and sets *error
  // when the address is malformed or cannot be bound.  `render` runs on the
  // server's threads.
  bool Start(const std::string& address, Render render, std::string* error);
  // Stops serving and joins the thread.  Idempotent.
  void Stop();
  // The port bound by Start (the one chosen for port 0).
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace freeride
