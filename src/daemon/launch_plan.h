// How a task's process is started: its command, directories, core, CPU
// priority and environment, from its spec and its lane.  Pure: the caller
// passes the daemon's own environment in; TaskManager hands the result to
// the ProcessSupervisor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/daemon_options.h"
#include "daemon/process_supervisor.h"
#include "freeride.pb.h"

namespace freeride {

struct LaunchPlanInput {
  int64_t task_id = 0;
  std::string executable;          // resolved, absolute
  const v1::TaskSpec* spec = nullptr;
  const LaneConfig* lane = nullptr;
  std::string task_dir;            // its logs go here
  std::string checkpoint_dir;
  std::string task_segment_path;
  std::string lane_segment_path;
  std::string socket_path;         // the daemon's
  // A CPU lane's task: idle (SCHED_IDLE) or the normal policy.
  CpuTaskPriority cpu_task_priority = CpuTaskPriority::kIdle;
  std::string mps_pipe_dir;        // empty: no MPS
  int mps_thread_percentage = 0;   // the tasks' share of SMs under MPS; 0: all
  // A gated lane's: the interposer preloaded into the task (LD_PRELOAD,
  // ahead of any the task sets) and its lane's gate page; empty: no gate.
  std::string gate_library;
  std::string gate_page_path;
  // KEY=VALUE, the daemon's own: inherited when the spec names no
  // environment of its own.
  std::vector<std::string> daemon_environment;
};

// Variables that describe one launch's channel, or ask a task to run alone
// (FREERIDE_STANDALONE_SECONDS).  Stale copies (from a shell inside another
// task, or a daemon started there) never leak through: they are dropped from
// the inherited or submitted environment, and the channel's set afresh.
bool IsChannelVariable(const std::string& key);

// The launch request, without a cgroup (the caller makes one).  The task
// starts stopped (stop_after_exec): the lane continues it inside bubbles,
// an iterative task only until it attaches to the SDK.  Every key the lane
// sets (the channel's, and a GPU lane's device and MPS settings) appears
// once, with the lane's value.  `input.spec` must be set; without
// `input.lane` there is no core, device or idle priority; a GPU lane's task
// is never idle (MPS priority and the gate isolate it).
LaunchRequest PlanLaunch(const LaunchPlanInput& input);

}  // namespace freeride
