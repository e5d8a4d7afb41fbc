// The node daemon: wires the journal, event log, task manager, lanes and the
// gRPC control server together, and takes them apart again.
#pragma once
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/control_service.h"
#include "daemon/daemon_options.h"
#include "daemon/event_log.h"
#include "daemon/journal.h"
#include "daemon/lane.h"
#include "daemon/shared_probe_schedule.h"
#include "daemon/metrics.h"
#include "daemon/task_manager.h"

namespace freeride {

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();

  // Prepares the state directory (refusing one another daemon holds),
  // recovers the journal, maps the lane segments and starts serving.
  // Returns false with a message when it cannot.
  bool Start(std::string* error);
  // Stops serving, checkpoints and stops tasks, flushes the journal.
  void Shutdown();

  TaskManager* tasks() { return tasks_.get(); }
  // What `freeride status` shows of the lanes; after Start.  Any thread.
  void FillStats(v1::StatsReply* reply) const { service_->FillStats(reply); }
  const std::vector<std::string>& recovery_notes() const { return recovery_notes_; }
  const DaemonOptions& options() const { return options_; }
  // The /metrics port (0: metrics are off).
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  // The TCP port of the control API (the one chosen for port 0); 0: no TCP.
  int tcp_port() const { return tcp_port_; }

 private:
  bool PrepareSocket(std::string* error);

  DaemonOptions options_;
  int lock_fd_ = -1;
  Journal journal_;
  EventLog events_;
  std::unique_ptr<TaskManager> tasks_;
  std::unique_ptr<SharedProbeSchedule> probe_schedule_;  // shared by the lanes
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unique_ptr<ControlService> service_;
  // TLS when a certificate and key are given, plain TCP otherwise.
  bool TcpCredentials(std::shared_ptr<grpc::ServerCredentials>* credentials,
                      std::string* error) const;

  std::unique_ptr<grpc::Server> server_;
  int tcp_port_ = 0;
  std::unique_ptr<MetricsServer> metrics_;
  std::vector<std::string> recovery_notes_;
  bool started_ = false;
};

}  // namespace freeride
