// Launches side-task processes and reports their exits.
//
// Every fork happens on the supervisor's own long-lived thread, so that
// PR_SET_PDEATHSIG (which follows the forking thread) kills the tasks if the
// daemon dies; a restarted daemon then relaunches them from checkpoints
// instead of finding orphans it cannot control.  Exits are noticed through
// pidfds in one poll() loop, with no periodic wake-ups.
#pragma once
#include <sys/types.h>

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "daemon/task_cgroup.h"

namespace freeride {

struct LaunchRequest {
  int64_t task_id = 0;
  std::string executable;          // absolute path
  std::vector<std::string> argv;
  std::vector<std::string> env;    // KEY=VALUE
  std::string working_dir;
  std::string stdout_path;
  std::string stderr_path;
  // Tasks that run only inside bubbles start stopped (SIGSTOP, and frozen
  // too with a cgroup), as soon as exec has succeeded.
  bool stop_after_exec = false;
  // The task's cgroup, which the child joins before exec; null: none, the
  // task is then signalled through its process group.  When the task's
  // process ends, whatever it left in the cgroup is killed.
  std::shared_ptr<TaskCgroup> cgroup;
  int cpu_core = -1;               // pin to this core; -1: no pinning
  // SCHED_IDLE: the task gets a core only when nothing else wants it.  CPU
  // lanes use it (unless the daemon runs with --cpu-task-priority normal) so
  // that a side task never takes a core from a training stage, the CPU
  // counterpart of MPS priority 1 on GPUs.  False: the daemon's own policy
  // (SCHED_OTHER unless it was started under another) and niceness.
  bool idle_cpu_priority = false;
};

struct LaunchResult {
  pid_t pid = -1;
  std::string error;               // set when pid < 0
};

struct ProcessExit {
  int64_t task_id = 0;
  pid_t pid = 0;
  int exit_code = 0;               // valid when term_signal == 0
  int term_signal = 0;
};

class ProcessSupervisor {
 public:
  using ExitCallback = std::function<void(const ProcessExit&)>;

  // on_exit runs on the supervisor thread for every launched process.
  // Starts that thread.
  explicit ProcessSupervisor(ExitCallback on_exit);
  // Shuts down.
  ~ProcessSupervisor();
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Launches on the supervisor thread and waits for exec to succeed or fail.
  // A failure (or a shutdown) gives pid -1 and the error.  Any thread but
  // the supervisor's own (not from on_exit): the launch waits for that
  // thread.
  LaunchResult Launch(const LaunchRequest& request);
  // Sends a signal to the task's whole process group, else to `pid` alone;
  // false when neither could be signalled or pid <= 0.  Any thread.
  static bool Signal(pid_t pid, int signal);
  // Stops the thread; kills every still-running child (and its cgroup) with
  // SIGKILL first, and fails launches still waiting.  Idempotent; not from
  // the supervisor thread.
  void Shutdown();

  // Children launched and not yet reaped.  Any thread.
  size_t running() const;

 private:
  struct PendingLaunch {
    LaunchRequest request;
    std::promise<LaunchResult> result;
  };
  struct Child {
    int64_t task_id;
    pid_t pid;
    std::shared_ptr<TaskCgroup> cgroup;
  };
  void Loop();
  LaunchResult DoLaunch(const LaunchRequest& request);
  void Wake();

  ExitCallback on_exit_;
  int event_fd_ = -1;
  mutable std::mutex mu_;
  std::vector<PendingLaunch*> pending_;
  std::map<int, Child> children_;  // by pidfd
  bool stopping_ = false;
  std::thread thread_;
};

// The last `max_bytes` of a file (for stderr tails); "" when it cannot be
// read.  Any thread.
std::string ReadFileTail(const std::string& path, size_t max_bytes);

// CPU time (user and system) that process `pid` has used so far, or -1 when
// it cannot be read (the process is gone).  Any thread.
Nanos ProcessCpuTime(pid_t pid);

}  // namespace freeride
