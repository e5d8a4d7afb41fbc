#include "daemon/process_supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "base/child_process.h"

namespace freeride {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// The launch's step a child failed at, reported through the exec pipe.
enum class LaunchStep : int { kNone = 0, kLogFiles, kWorkingDir, kExec, kCgroup };

// What the child reports through the exec pipe when it cannot start.
struct ChildFailure {
  LaunchStep step;
  int error;
};

// The failed step, in words, naming the directory or the program where it
// is one of theirs (a working directory removed after the submission).
std::string FailedStep(LaunchStep step, const LaunchRequest& request) {
  switch (step) {
    case LaunchStep::kLogFiles: return "opening its log files";
    case LaunchStep::kWorkingDir: return "changing to its working directory " + request.working_dir;
    case LaunchStep::kCgroup: return "joining its cgroup";
    default: return "executing the command " + request.executable;
  }
}

}  // namespace

std::string ReadFileTail(const std::string& path, size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  off_t size = lseek(fd, 0, SEEK_END);
  if (size < 0) {
    close(fd);
    return "";
  }
  off_t start = size > static_cast<off_t>(max_bytes) ? size - static_cast<off_t>(max_bytes) : 0;
  std::string out(static_cast<size_t>(size - start), '\0');
  ssize_t n = pread(fd, out.data(), out.size(), start);
  close(fd);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

Nanos ProcessCpuTime(pid_t pid) {
  clockid_t clock;
  timespec used{};
  if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &used) != 0) return -1;
  return static_cast<Nanos>(used.tv_sec) * kSecond + used.tv_nsec;
}

ProcessSupervisor::ProcessSupervisor(ExitCallback on_exit) : on_exit_(std::move(on_exit)) {
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { Loop(); });
}

ProcessSupervisor::~ProcessSupervisor() { Shutdown(); }

void ProcessSupervisor::Wake() {
  uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
}

LaunchResult ProcessSupervisor::Launch(const LaunchRequest& request) {
  PendingLaunch pending{request, {}};
  std::future<LaunchResult> result = pending.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return {-1, "the daemon is shutting down"};
    pending_.push_back(&pending);
  }
  Wake();
  return result.get();
}

bool ProcessSupervisor::Signal(pid_t pid, int signal) {
  if (pid <= 0) return false;
  // The child leads its own process group, so helpers it spawned get the
  // signal too.
  if (kill(-pid, signal) == 0) return true;
  return kill(pid, signal) == 0;
}

size_t ProcessSupervisor::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return children_.size();
}

void ProcessSupervisor::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  if (event_fd_ >= 0) close(event_fd_);
  event_fd_ = -1;
}

LaunchResult ProcessSupervisor::DoLaunch(const LaunchRequest& request) {
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls are allowed in a multithreaded process.
  std::vector<char*> argv;
  for (const std::string& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_fd = open(request.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  int err_fd = open(request.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int pipe_fds[2];
  if (out_fd < 0 || err_fd < 0 || null_fd < 0 || pipe2(pipe_fds, O_CLOEXEC) != 0) {
    std::string error = fmt::format("cannot prepare the task's files: {}", std::strerror(errno));
    for (int fd : {out_fd, err_fd, null_fd}) if (fd >= 0) close(fd);
    return {-1, error};
  }
  cpu_set_t cores;
  CPU_ZERO(&cores);
  if (request.cpu_core >= 0) CPU_SET(request.cpu_core, &cores);
  pid_t parent = getpid();
  const int cgroup_fd = request.cgroup ? request.cgroup->procs_fd() : -1;
  pid_t pid = fork();
  if (pid == 0) {
    ChildFailure failure{LaunchStep::kNone, 0};
    // Nothing of the daemon's but what the launch needs, from the start: the
    // state directory's lock above all.  The cgroup write below can wait on a
    // kernel lock, and a child that held the daemon's lock while its daemon
    // died would keep a restarted daemon out.
    int keep[] = {null_fd, out_fd, err_fd, pipe_fds[1], cgroup_fd};
    std::sort(std::begin(keep), std::end(keep));
    unsigned next = 3;
    for (int fd : keep) {
      if (fd < static_cast<int>(next)) continue;
      if (fd > static_cast<int>(next)) syscall(SYS_close_range, next, static_cast<unsigned>(fd - 1), 0u);
      next = static_cast<unsigned>(fd) + 1;
    }
    syscall(SYS_close_range, next, ~0u, 0u);
    TieChildToParent(parent);
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD}) signal(s, SIG_DFL);
    if (request.cpu_core >= 0) sched_setaffinity(0, sizeof(cores), &cores);
    if (request.idle_cpu_priority) {
      sched_param param{};
      sched_setscheduler(0, SCHED_IDLE, &param);  // best effort: the task runs either way
    }
    // Joined before exec, so that every process the task starts is born
    // inside its cgroup.
    if (cgroup_fd >= 0 && write(cgroup_fd, "0", 1) != 1) {
      failure = {LaunchStep::kCgroup, errno};
    } else if (dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
      failure = {LaunchStep::kLogFiles, errno};
    } else if (chdir(request.working_dir.c_str()) != 0) {
      failure = {LaunchStep::kWorkingDir, errno};
    } else {
      execve(request.executable.c_str(), argv.data(), envp.data());
      failure = {LaunchStep::kExec, errno};
    }
    (void)!write(pipe_fds[1], &failure, sizeof(failure));
    _exit(127);
  }
  int fork_errno = errno;
  close(pipe_fds[1]);
  for (int fd : {out_fd, err_fd, null_fd}) close(fd);
  if (pid < 0) {
    close(pipe_fds[0]);
    if (request.cgroup) request.cgroup->Remove();
    return {-1, fmt::format("fork failed: {}", std::strerror(fork_errno))};
  }
  ChildFailure failure{LaunchStep::kNone, 0};
  ssize_t n;
  do {
    n = read(pipe_fds[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n == static_cast<ssize_t>(sizeof(failure))) {
    int status;
    waitpid(pid, &status, 0);
    if (request.cgroup) request.cgroup->Remove();
    return {-1, fmt::format("the task could not start: {} failed: {}", FailedStep(failure.step, request),
                            std::strerror(failure.error))};
  }
  if (request.stop_after_exec) {
    Signal(pid, SIGSTOP);
    if (request.cgroup) request.cgroup->Freeze(true);
  }
  int pidfd = PidfdOpen(pid);
  if (pidfd < 0) {
    // Without a pidfd the supervisor could not see the task end: refuse it
    // rather than lose it.
    const int error = errno;
    Signal(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (request.cgroup) request.cgroup->Remove();
    return {-1, fmt::format("cannot watch the task's process: pidfd_open failed: {}{}",
                            std::strerror(error),
                            error == ENOSYS ? " (Linux 5.3 or later is needed)" : "")};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    children_[pidfd] = Child{request.task_id, pid, request.cgroup};
  }
  return {pid, ""};
}

void ProcessSupervisor::Loop() {
  std::vector<pollfd> fds;
  for (;;) {
    std::vector<PendingLaunch*> launches;
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      launches.swap(pending_);
      stopping = stopping_;
    }
    for (PendingLaunch* p : launches) p->result.set_value(DoLaunch(p->request));
    if (stopping) break;

    fds.clear();
    fds.push_back({event_fd_, POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [fd, child] : children_) fds.push_back({fd, POLLIN, 0});
    }
    int rc = poll(fds.data(), fds.size(), -1);
    if (rc < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      uint64_t value;
      (void)!read(event_fd_, &value, sizeof(value));
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      Child child;
      {
        std::lock_guard<std::mutex> lock(mu_);
        child = children_[fds[i].fd];
        children_.erase(fds[i].fd);
      }
      int status = 0;
      while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {}
      close(fds[i].fd);
      // The task is over: so are the processes it left behind.
      if (child.cgroup) child.cgroup->Remove();
      ProcessExit exit{child.task_id, child.pid, 0, 0};
      if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) {
        exit.term_signal = WTERMSIG(status);
        exit.exit_code = 128 + exit.term_signal;
      }
      if (on_exit_) on_exit_(exit);
    }
  }
  // Shutting down: no task may outlive its supervisor unsupervised.
  std::map<int, Child> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(children_);
    for (PendingLaunch* p : pending_) p->result.set_value({-1, "the daemon is shutting down"});
    pending_.clear();
  }
  for (auto& [fd, child] : left) {
    if (child.cgroup) child.cgroup->Kill();
    Signal(child.pid, SIGKILL);
    int status;
    while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {}
    close(fd);
    if (child.cgroup) child.cgroup->Remove();
  }
}

}  // namespace freeride
