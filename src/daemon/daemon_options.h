// Settings of one node daemon.
#pragma once
#include <string>
#include <vector>

#include "base/clock.h"
#include "policy/bubble_predictor.h"
#include "policy/dispatch_policy.h"
#include "policy/overhead_guard.h"
#include "policy/overhead_probe.h"
#include "policy/overrun_budget.h"

namespace freeride {

// The scheduling policy CPU lanes' side tasks are launched at.  Either way
// the dispatcher runs a task only inside bubbles (SIGSTOP, or blocked in the
// SDK, outside them); the policy decides who wins the core when both want it.
enum class CpuTaskPriority {
  // SCHED_IDLE: a task gets its core only when nothing else wants it, so it
  // never takes the core from a CPU stage, even in a step that overruns its
  // bubble.  The default.
  kIdle,
  // The daemon's own policy and niceness (SCHED_OTHER, unless the daemon
  // was started under another): a task shares a busy core fairly.  For
  // tests and demos on machines loaded by other work, where an idle task
  // would wait for a core that other processes keep busy; a stage on the
  // task's core is then no longer protected.
  kNormal,
};

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
  // An iterative task runs only inside bubbles until it attaches to the
  // SDK; after this much bubble time without attaching, in which it also
  // used a tenth of it on a CPU (or after ten times it regardless), it is
  // failed: a program without the SDK must be submitted as imperative.
  Nanos attach_timeout = 30 * kSecond;
  std::string mps_pipe_dir;  // GPU lanes' tasks join this MPS server; empty: no MPS
  int mps_thread_percentage = 0;  // their share of each GPU's SMs under MPS; 0: all
  std::string metrics_address;  // HOST:PORT for Prometheus /metrics; empty: off
  // The control API on TCP as well as the Unix socket: off unless set, and
  // then every TCP request must carry `token`, or `read_token` for the calls
  // that only read (see docs/security.md); at least one of them is needed.
  std::string listen_address;  // HOST:PORT
  std::string token;
  std::string read_token;
  std::string tls_cert_file, tls_key_file;  // both set: TCP with TLS
  // TCP connections served at once, in all and from one address (the
  // daemon/tcp_gate.h limits; the total is lowered to fit RLIMIT_NOFILE).
  int max_tcp_connections = 256;
  int max_tcp_connections_per_peer = 32;
  bool realtime_dispatch = true;   // SCHED_FIFO for lane threads when permitted
  CpuTaskPriority cpu_task_priority = CpuTaskPriority::kIdle;  // CPU lanes' side tasks
  // Start over a damaged, stale or lost journal (docs/reliability.md):
  // off, the daemon refuses and says why.
  bool accept_journal_loss = false;
  // events.jsonl rotates at this size, keeping this many older files
  // (daemon/event_log.h: EventLogRotation).
  uint64_t event_log_max_bytes = 256ULL << 20;
  int event_log_keep = 4;
  // Each task's stdout.log and stderr.log is kept within this size, its last
  // half kept as .1 (daemon/task_logs.h); 0: never.
  uint64_t task_log_max_bytes = 64ULL << 20;
  // The GPU gate (src/gate/): on GPU lanes every task is started with
  // gate_library preloaded, so its GPU work waits on the lane's gate page,
  // which the stage's stream opens and closes; imperative tasks then run
  // free on the CPU, their GPU work held on the GPU.  The lane ends each
  // bubble's admission gate_margin before its forecast end (policy/
  // gate_close.h); each interposer queues a piece only when it is predicted
  // to end by then (gate/piece_admission.h).  Without a library
  // (or with gate off) GPU lanes dispatch from the host alone.
  bool gate = true;
  std::string gate_library;  // libfreeride_gate.so; empty: not found
  Nanos gate_margin = 200 * kMicrosecond;
  // How long before the next bubble's forecast begin a task may queue a
  // piece behind the shut gate (policy/next_bubble.h), so that the GPU
  // starts it as the stage's stream opens the gate.  0: never ahead; a
  // piece then waits on the host for the daemon's deadline.
  Nanos gate_lead = 300 * kMicrosecond;
  DispatchConfig dispatch;
  // The live overhead probe (a period of 0 iterations turns it, and the
  // guard, off) and the guard that keeps the estimate within its budget.
  // CPU lanes estimate too, but their guard is off by default, for the
  // reason their overrun budget is: a CPU stage shares cores with its tasks
  // and the machine's noise, and CPU lanes serve demos and tests.
  ProbeConfig probe;
  OverheadGuardConfig guard;
  OverheadGuardConfig cpu_guard{.budget = 0};
  BubblePredictorConfig predictor;
  // GPU lanes' overrun budget.  CPU lanes have their own, off by default:
  // there the operating system's scheduling, not the task, makes most
  // overruns (a CPU stage and its tasks share cores), and CPU lanes serve
  // demos and tests rather than GPU training.  A hung step is killed on both.
  OverrunBudgetConfig overrun_budget;
  OverrunBudgetConfig cpu_overrun_budget{.max_fraction = 0};

  // The overrun budget and the overhead guard of lane `lane`: the CPU
  // lanes' own, else the GPU lanes'.
  const OverrunBudgetConfig& BudgetForLane(int lane) const {
    return IsCpuLane(lane) ? cpu_overrun_budget : overrun_budget;
  }
  const OverheadGuardConfig& GuardForLane(int lane) const {
    return IsCpuLane(lane) ? cpu_guard : guard;
  }
  // Whether lane `lane`'s tasks are gated on the GPU: a GPU lane, with the
  // gate on and its library found.
  bool IsGatedLane(int lane) const { return gate && !gate_library.empty() && !IsCpuLane(lane); }
  // Whether lane `lane` is configured with a "cpu:" device; false for a
  // lane not in `lanes`.
  bool IsCpuLane(int lane) const {
    for (const LaneConfig& l : lanes)
      if (l.index == lane) return l.device.rfind("cpu:", 0) == 0;
    return false;
  }
};

}  // namespace freeride
