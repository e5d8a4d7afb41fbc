// The node daemon: wires the journal, event log, task manager, lanes and the
// gRPC control server together, and takes them apart again.
#pragma once
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "base/env.h"
#include "daemon/control_service.h"
#include "daemon/daemon_options.h"
#include "daemon/event_log.h"
#include "daemon/journal.h"
#include "daemon/lane.h"
#include "daemon/shared_probe_schedule.h"
#include "daemon/metrics.h"
#include "daemon/task_cgroup.h"
#include "daemon/task_manager.h"
#include "daemon/tcp_gate.h"

namespace freeride {

// Start and Shutdown are not synchronised: one thread calls them.  The
// accessors below may be used from any thread once Start has returned.
class Daemon {
 public:
  // The task manager, the control services and the TCP gate take their time
  // and waits from `env`, which outlives the daemon.
  explicit Daemon(DaemonOptions options, Env* env = Env::Default());
  // Shuts down.
  ~Daemon();

  // Prepares the state directory (refusing one another daemon holds),
  // recovers the journal, maps the lane segments and starts serving.
  // Returns false with a message when it cannot; the destructor then
  // releases what was taken.  Call once.
  bool Start(std::string* error);
  // Stops serving, checkpoints and stops tasks, flushes the journal.
  // Idempotent.
  void Shutdown();

  // Null until Start has made it.
  TaskManager* tasks() { return tasks_.get(); }
  // What `freeride status` shows of the lanes; after Start.  Any thread.
  void FillStats(v1::StatsReply* reply) const { service_->FillStats(reply); }
  // What Start recovered or accepted, for the start message.
  const std::vector<std::string>& recovery_notes() const { return recovery_notes_; }
  // Whether each task runs in a cgroup of its own (daemon/task_cgroup.h).
  bool tasks_in_cgroups() const { return cgroups_.available(); }
  const DaemonOptions& options() const { return options_; }
  // The /metrics port (0: metrics are off).
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  // The TCP port of the control API (the one chosen for port 0); 0: no TCP.
  int tcp_port() const { return tcp_port_; }

 private:
  bool PrepareSocket(std::string* error);
  // Puts tasks into cgroups where it can (killing what a killed daemon's
  // tasks left), else notes the warning.  False only when the death guard
  // cannot start.
  bool PrepareCgroups(std::vector<std::string>* notes, std::string* error);

  DaemonOptions options_;
  Env* const env_;
  int lock_fd_ = -1;
  TaskCgroups cgroups_;
  Journal journal_;
  EventLog events_;
  std::unique_ptr<TaskManager> tasks_;
  std::unique_ptr<SharedProbeSchedule> probe_schedule_;  // shared by the lanes
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unique_ptr<ControlService> service_;         // the Unix socket's
  std::unique_ptr<ControlService> remote_service_;  // behind the TCP gate
  // TLS when a certificate and key are given, plain TCP otherwise.
  bool TcpCredentials(std::shared_ptr<grpc::ServerCredentials>* credentials,
                      std::string* error) const;

  // Separate servers: whatever happens on TCP, the Unix socket answers.
  std::unique_ptr<grpc::Server> server_;      // the Unix socket
  std::unique_ptr<grpc::Server> tcp_server_;  // on a private abstract socket, fed by gate_
  TcpGate gate_;
  // Starts the TCP side: the remote service, its server and the gate.
  bool StartTcp(std::string* error);
  int tcp_port_ = 0;
  std::unique_ptr<MetricsServer> metrics_;
  std::vector<std::string> recovery_notes_;
  bool started_ = false;
};

}  // namespace freeride
