// Settings of one node daemon.
#pragma once
#include <string>
#include <vector>

#include "base/clock.h"
#include "policy/bubble_predictor.h"
#include "policy/dispatch_policy.h"
#include "policy/overrun_budget.h"

namespace freeride {

struct LaneConfig {
  int index = 0;
  std::string device;           // "gpu:0" or "cpu:0"
  uint64_t capacity_bytes = 0;  // memory side tasks may hold; 0: unknown
  int cpu_core = -1;            // pin the lane's tasks to this core; -1: none
};

struct DaemonOptions {
  std::string socket_path;
  std::string state_dir;
  std::vector<LaneConfig> lanes;
  int max_resident_per_lane = 4;     // launched tasks held per lane
  Nanos stage_timeout = 10 * kSecond;  // a bubble with no marks for this long is over
  Nanos cancel_grace = 3 * kSecond;  // SIGTERM, then SIGKILL after this
  Nanos retry_backoff = 1 * kSecond; // doubled per attempt
  std::string mps_pipe_dir;  // GPU lanes' tasks join this MPS server; empty: no MPS
  std::string metrics_address;  // HOST:PORT for Prometheus /metrics; empty: off
  // The control API on TCP as well as the Unix socket: off unless set, and
  // then every TCP request must carry this token (see docs/security.md).
  std::string listen_address;  // HOST:PORT
  std::string token;
  std::string tls_cert_file, tls_key_file;  // both set: TCP with TLS
  bool realtime_dispatch = true;   // SCHED_FIFO for lane threads when permitted
  DispatchConfig dispatch;
  BubblePredictorConfig predictor;
  OverrunBudgetConfig overrun_budget;
};

}  // namespace freeride
