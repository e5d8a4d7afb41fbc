#include "daemon/task_cgroup.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/files.h"
#include "base/paths.h"

namespace freeride {
namespace {

// How long a killed cgroup is given to empty before it is left for later.
constexpr int kEmptyWaitSteps = 200;           // of 5 ms: 1 s
constexpr useconds_t kEmptyWaitStepUs = 5000;

bool WriteControl(const std::string& path, const char* value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, value, std::strlen(value)) == static_cast<ssize_t>(std::strlen(value));
  close(fd);
  return ok;
}

bool IsPopulated(const std::string& dir) {
  std::string events = ReadWholeFile(dir + "/cgroup.events").value_or("");
  return events.find("populated 1") != std::string::npos;
}

// Kills everything in the cgroup at `dir`, waits up to a second for it to
// empty, then removes it.
bool KillAndRemove(const std::string& dir) {
  WriteControl(dir + "/cgroup.kill", "1");
  for (int i = 0; i < kEmptyWaitSteps && IsPopulated(dir); ++i) usleep(kEmptyWaitStepUs);
  return rmdir(dir.c_str()) == 0 || errno == ENOENT;
}

// Where the cgroup v2 hierarchy is mounted ("" if nowhere): /sys/fs/cgroup
// on a unified system, /sys/fs/cgroup/unified on a hybrid one.
std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string field, mount_point;
    for (int i = 0; i < 5 && fields >> field; ++i) mount_point = field;
    return mount_point;
  }
  return "";
}

// This process's cgroup v2 path ("0::/path" in /proc/self/cgroup).
std::string OwnCgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

}  // namespace

TaskCgroup::TaskCgroup(std::string dir, int procs_fd, int freeze_fd)
    : dir_(std::move(dir)), procs_fd_(procs_fd), freeze_fd_(freeze_fd) {}

TaskCgroup::~TaskCgroup() {
  for (int fd : {procs_fd_, freeze_fd_})
    if (fd >= 0) close(fd);
}

void TaskCgroup::Freeze(bool frozen) { (void)!pwrite(freeze_fd_, frozen ? "1" : "0", 1, 0); }

void TaskCgroup::Kill() { WriteControl(dir_ + "/cgroup.kill", "1"); }

bool TaskCgroup::Remove() { return KillAndRemove(dir_); }


int64_t TaskCgroup::CpuUsageNs() const {
  std::ifstream in(dir_ + "/cpu.stat");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value)
    if (key == "usage_usec") return value * 1000;
  return -1;
}

TaskCgroups::~TaskCgroups() { Close(); }

bool TaskCgroups::Open(const std::string& instance, int* leftovers, std::string* why) {
  *leftovers = 0;
  std::string mount = Cgroup2Mount();
  std::string own = OwnCgroup();
  if (mount.empty() || own.empty()) {
    *why = "no cgroup v2 hierarchy is mounted";
    return false;
  }
  if (own.back() == '/') own.pop_back();
  std::string parent = fmt::format("{}{}/freeride-{:016x}", mount, own, Fnv1a64(instance));
  if (mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = fmt::format("cannot create the cgroup {}: {}", parent, std::strerror(errno));
    return false;
  }
  for (const char* file : {"/cgroup.kill", "/cgroup.freeze"}) {
    if (access((parent + file).c_str(), W_OK) != 0) {
      *why = fmt::format("{}{} is missing or not writable (cgroup.kill needs Linux 5.14)", parent,
                         file);
      rmdir(parent.c_str());
      return false;
    }
  }
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ignored)) {
    if (!entry.is_directory() || entry.path().filename().string().rfind("task-", 0) != 0) continue;
    if (IsPopulated(entry.path().string())) ++*leftovers;
    KillAndRemove(entry.path().string());
  }
  parent_ = parent;
  return true;
}

std::shared_ptr<TaskCgroup> TaskCgroups::Create(int64_t task_id, std::string* error) const {
  std::string dir = fmt::format("{}/task-{}", parent_, task_id);
  // A cgroup left by an earlier attempt that did not empty in time.
  if (mkdir(dir.c_str(), 0700) != 0 && (errno != EEXIST || !KillAndRemove(dir) ||
                                        mkdir(dir.c_str(), 0700) != 0)) {
    *error = fmt::format("cannot create the task's cgroup {}: {}", dir, std::strerror(errno));
    return nullptr;
  }
  int procs = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  int freeze = open((dir + "/cgroup.freeze").c_str(), O_WRONLY | O_CLOEXEC);
  if (procs < 0 || freeze < 0) {
    *error = fmt::format("cannot open the task's cgroup {}: {}", dir, std::strerror(errno));
    for (int fd : {procs, freeze})
      if (fd >= 0) close(fd);
    rmdir(dir.c_str());
    return nullptr;
  }
  return std::make_shared<TaskCgroup>(dir, procs, freeze);
}

bool TaskCgroups::StartDeathGuard(std::string* error) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *error = fmt::format("cannot start the death guard: {}", std::strerror(errno));
    return false;
  }
  // Prepared before fork: the child of a multithreaded process may only make
  // async-signal-safe calls.
  const std::string kill_path = parent_ + "/cgroup.kill";
  const char* kill_file = kill_path.c_str();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[0], 3);
    int null_fd = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null_fd, fd);
    // Nothing else of the daemon's: not its sockets, not its lock.
    syscall(SYS_close_range, 4u, ~0u, 0u);
    setsid();  // not in the daemon's process group: a Ctrl-C there does not end it
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) signal(s, SIG_IGN);
    prctl(PR_SET_NAME, "freeride-guard");
    char byte;
    for (;;) {
      ssize_t n = read(3, &byte, 1);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    int fd = open(kill_file, O_WRONLY);
    if (fd >= 0) (void)!write(fd, "1", 1);
    _exit(0);
  }
  int fork_errno = errno;
  close(fds[0]);
  if (pid < 0) {
    close(fds[1]);
    *error = fmt::format("cannot start the death guard: {}", std::strerror(fork_errno));
    return false;
  }
  guard_pipe_ = fds[1];
  guard_pid_ = pid;
  return true;
}

void TaskCgroups::Close() {
  if (guard_pipe_ >= 0) close(guard_pipe_);
  guard_pipe_ = -1;
  if (guard_pid_ > 0)
    while (waitpid(guard_pid_, nullptr, 0) < 0 && errno == EINTR) {}
  guard_pid_ = -1;
  if (parent_.empty()) return;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(parent_, ignored))
    if (entry.is_directory()) KillAndRemove(entry.path().string());
  rmdir(parent_.c_str());
  parent_.clear();
}

}  // namespace freeride
