// Keeps each side task's whole process tree in a cgroup of its own (cgroup
// v2), so that stopping, continuing and killing a task reach every process
// it started, those that left its process group (setsid, double forks)
// too, and so that the daemon's death takes them all down.
//
// Layout: <the daemon's own cgroup>/freeride-<hash of the instance>/task-<id>.
// It needs a writable cgroup v2 hierarchy with cgroup.freeze and cgroup.kill
// (Linux 5.14): root, or a subtree delegated to the daemon's user (systemd's
// Delegate=yes).  Without one the daemon signals process groups instead and
// says so once (TaskCgroups::Open).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace freeride {

// One task's cgroup.  Every method may be called from any thread.
class TaskCgroup {
 public:
  // Takes ownership of both descriptors; the destructor closes them but
  // leaves the cgroup (Remove removes it).
  TaskCgroup(std::string dir, int procs_fd, int freeze_fd);
  ~TaskCgroup();
  TaskCgroup(const TaskCgroup&) = delete;
  TaskCgroup& operator=(const TaskCgroup&) = delete;

  // cgroup.procs, open for writing: a child writes "0" to it to join
  // before it executes the task (an async-signal-safe write).
  int procs_fd() const { return procs_fd_; }
  // Freezes (true) or thaws every process in the cgroup.  A frozen process
  // can still be killed.  It may wait on the kernel's cgroup lock; errors
  // are ignored.
  void Freeze(bool frozen);
  // SIGKILL to every process in the cgroup; errors are ignored.
  void Kill();
  // Kills what is left, waits up to a second for it to go and removes the
  // cgroup.  Returns false when something stayed (the next daemon start
  // removes it).
  bool Remove();
  // CPU time used by every process that was ever in the cgroup (cpu.stat's
  // usage_usec), in nanoseconds; -1 when it cannot be read.  Any thread.
  int64_t CpuUsageNs() const;

 private:
  std::string dir_;
  int procs_fd_ = -1;
  int freeze_fd_ = -1;
};

// The daemon's parent cgroup of its tasks' cgroups.  Open, StartDeathGuard
// and Close from the thread that starts and stops the daemon; available and
// Create from any thread after Open.
class TaskCgroups {
 public:
  TaskCgroups() = default;
  ~TaskCgroups();
  TaskCgroups(const TaskCgroups&) = delete;
  TaskCgroups& operator=(const TaskCgroups&) = delete;

  // Makes (or finds) the parent cgroup for `instance` (the state directory,
  // hashed) under the daemon's own cgroup, and kills and removes the task
  // cgroups a killed daemon of the same instance left behind; their count
  // goes to *leftovers.  Returns false, with *why, where cgroups cannot be
  // used; the daemon then works without them.  Call once, before tasks run.
  bool Open(const std::string& instance, int* leftovers, std::string* why);
  bool available() const { return !parent_.empty(); }

  // A new cgroup for one launch of a task, or nullptr with *error.
  std::shared_ptr<TaskCgroup> Create(int64_t task_id, std::string* error) const;

  // Forks the death guard: a small process that waits for the daemon to go,
  // however it goes (a SIGKILL too), and then kills every task's tree.  A
  // task's own process dies with the daemon through PR_SET_PDEATHSIG; the
  // guard takes the rest.  Call from the thread that starts the daemon.
  bool StartDeathGuard(std::string* error);
  // Clean shutdown, once the tasks are gone: stops the guard and removes the
  // parent cgroup (killing what is left in it).  Idempotent.
  void Close();

 private:
  std::string parent_;
  int guard_pipe_ = -1;  // the write end; the guard sees EOF when the daemon goes
  pid_t guard_pid_ = -1;
};

}  // namespace freeride
