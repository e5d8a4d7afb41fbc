// `freeride task-profile [--seconds T] [--output F] -- CMD ARGS...`: runs an
// iterative side task alone (the SDK's standalone mode, asked through
// FREERIDE_STANDALONE_SECONDS) for T seconds and
// records its alone rate, step-time distribution and peak device memory as
// a profile JSON that `freeride submit --profile F` uses.
#include <fmt/format.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/child_process.h"
#include "base/files.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "client/task_profile.h"
#include "daemon/gpu_query.h"
#include "sdk/task_channel.h"

namespace freeride::cli {
namespace {

// The task's process group, while it runs: a signal that ends this command
// ends the task and whatever it started (Python's workers, a shell's
// children), which went on running orphaned.
volatile sig_atomic_t task_group = 0;

void EndTaskGroupAndExit(int signal_number) {
  if (task_group > 0) kill(-task_group, SIGKILL);
  _exit(128 + signal_number);
}

struct TaskProfileArgs {
  double seconds = 10;
  double timeout = 600;
  std::string output;
  std::vector<std::string> command;
};

// Device memory nvidia-smi attributes to `pid` (0 when there is no
// nvidia-smi or the process holds no GPU memory).
uint64_t ProcessGpuBytes(pid_t pid) {
  uint64_t total = 0;
  for (auto [p, mib] : NvidiaSmiIntegerPairs("compute-apps=pid,used_memory"))
    if (p == pid) total += mib << 20;
  return total;
}

int RunTaskProfile(const TaskProfileArgs& args) {
  if (args.command.empty()) {
    fmt::print(stderr, "freeride task-profile: no command; usage: freeride task-profile "
                       "[--seconds T] [--output F] -- CMD ARGS...\n");
    return 2;
  }
  std::string output = args.output;
  if (output.empty())
    output = std::filesystem::path(args.command[0]).filename().string() + ".profile.json";
  // Where the profile goes is checked before the run, not after it.
  {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::absolute(output, ec).parent_path();
    if (ec || !std::filesystem::is_directory(parent, ec) || access(parent.c_str(), W_OK | X_OK) != 0) {
      fmt::print(stderr, "freeride task-profile: cannot write the profile to {}: {} is not a directory "
                         "this user can write\n", output, parent.string());
      return 2;
    }
    if (std::filesystem::is_directory(output, ec)) {
      fmt::print(stderr, "freeride task-profile: cannot write the profile to {}: it is a directory; give "
                         "a file's path\n", output);
      return 2;
    }
  }
  // Alone for --seconds through the environment, not appended arguments,
  // which a task that parses its own (argparse) would refuse.
  std::vector<std::string> argv = args.command;

  int fds[2];
  if (pipe(fds) != 0) {
    fmt::print(stderr, "freeride task-profile: pipe: {}\n", std::strerror(errno));
    return 1;
  }
  fmt::print(stderr, "freeride task-profile: running '{}' alone for {} s after its setup\n",
             fmt::join(args.command, " "), args.seconds);
  // The ending signals wait until the task's group is known and their
  // handler set: one arriving in between would end this command by default
  // and leave the task's children running.
  sigset_t ending, before;
  sigemptyset(&ending);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&ending, signal_number);
  sigprocmask(SIG_BLOCK, &ending, &before);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &before, nullptr);
    fmt::print(stderr, "freeride task-profile: fork: {}\n", std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return 1;
  }
  if (pid == 0) {
    // A group of its own, ended with this command (below), and ended with
    // it if this command is killed outright (unless that came first).  Its
    // input is /dev/null, as a daemon's task's is: outside the terminal's
    // group, a read would stop it.
    TieChildToParent(parent);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    if (const int null_fd = open("/dev/null", O_RDONLY); null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      close(null_fd);
    }
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    // Alone means alone: never attach to a daemon this shell knows of.
    for (const char* v : {kEnvTaskId, kEnvTaskSegment, kEnvLaneSegment, kEnvMemory})
      unsetenv(v);
    setenv(kEnvStandaloneSeconds, fmt::format("{}", args.seconds).c_str(), 1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "freeride task-profile: cannot run %s: %s\n", cargv[0],
                 std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  setpgid(pid, pid);  // also here: whichever of the two runs first
  task_group = pid;
  // Put back once the task is gone: a signal while the profile is written
  // then stops this command as it would have, not through _exit, which
  // would leave the profile's temporary file behind.
  struct sigaction ending_action{}, saved_actions[3];
  ending_action.sa_handler = EndTaskGroupAndExit;
  sigemptyset(&ending_action.sa_mask);
  const int ending_signals[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; ++i) sigaction(ending_signals[i], &ending_action, &saved_actions[i]);
  sigprocmask(SIG_SETMASK, &before, nullptr);
  const bool sample_gpu = CommandExists("nvidia-smi");
  uint64_t process_gpu_bytes = 0;
  std::string out, last_result;
  auto start = std::chrono::steady_clock::now();
  auto last_sample = start;
  bool open = true, timed_out = false, reaped = false;
  int status = 0;
  // Reads what is there now (waiting up to `wait_ms` for it); false once the
  // pipe is closed.
  auto read_some = [&](int wait_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return true;
    char buffer[4096];
    ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n <= 0) return false;
    out.append(buffer, static_cast<size_t>(n));
    return true;
  };
  // Until the task has exited, or --timeout: a task that closes its standard
  // output early (or leaves it to a child of its own) is still timed.
  while (!reaped) {
    if (open) {
      open = read_some(200);
    } else {
      poll(nullptr, 0, 200);
    }
    if (waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      // What it wrote before it exited, and no more.
      for (pollfd p{fds[0], POLLIN, 0}; open && poll(&p, 1, 0) > 0; p.revents = 0) open = read_some(0);
      break;
    }
    auto now = std::chrono::steady_clock::now();
    if (sample_gpu && now - last_sample > std::chrono::milliseconds(500)) {
      process_gpu_bytes = std::max(process_gpu_bytes, ProcessGpuBytes(pid));
      last_sample = now;
    }
    if (std::chrono::duration<double>(now - start).count() > args.timeout) {
      kill(-pid, SIGKILL);  // the group: a shell's or Python's children too
      timed_out = true;
      break;
    }
  }
  close(fds[0]);
  if (!reaped) waitpid(pid, &status, 0);
  // Alone means nothing of it is left running afterwards either.
  kill(-pid, SIGKILL);
  task_group = 0;
  for (int i = 0; i < 3; ++i) sigaction(ending_signals[i], &saved_actions[i], nullptr);
  if (timed_out) {
    fmt::print(stderr, "freeride task-profile: the task ran past --timeout {} s and was killed\n",
               args.timeout);
    return 1;
  }
  // The task's own stdout lines go to ours; the standalone line is the last.
  std::optional<TaskProfile> profile;
  std::string why = "it printed nothing on stdout";
  size_t begin = 0;
  while (begin < out.size()) {
    size_t end = out.find('\n', begin);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(begin, end - begin);
    begin = end + 1;
    if (auto p = ProfileFromStandaloneLine(line, &why)) {
      profile = p;
    } else if (!line.empty()) {
      fmt::print("{}\n", line);
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr, "freeride task-profile: the task {}; no profile written\n",
               WIFEXITED(status) ? fmt::format("exited with status {}", WEXITSTATUS(status))
                                 : fmt::format("was killed by signal {}", WTERMSIG(status)));
    return 1;
  }
  if (!profile) {
    fmt::print(stderr,
               "freeride task-profile: no standalone result line from the task ({}); profiles "
               "need an iterative SDK task, which prints one when run alone\n",
               why);
    return 1;
  }
  profile->command = args.command;
  profile->process_gpu_bytes = process_gpu_bytes;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  profile->host = host;
  profile->created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  std::string error;
  if (!WriteFileAtomically(output, TaskProfileToJson(*profile), &error)) {
    fmt::print(stderr, "freeride task-profile: {}\n", error);
    return 1;
  }
  fmt::print(stderr,
             "alone rate  {:.4g} {}/s over {:.1f} s, {} steps\n"
             "step time   p50 {:.3f} ms  p90 {:.3f} ms  p99 {:.3f} ms  max {:.3f} ms\n"
             "memory      peak {} (task), {} (nvidia-smi, whole process); reserve {}\n"
             "profile     {}   use: freeride submit --profile {}\n",
             profile->rate_per_s, profile->unit, profile->seconds, profile->steps,
             profile->step_ms_p50, profile->step_ms_p90, profile->step_ms_p99,
             profile->step_ms_max, FormatBytes(profile->peak_memory_bytes),
             sample_gpu ? FormatBytes(process_gpu_bytes) : std::string("n/a"),
             FormatBytes(ProfiledMemoryBytes(*profile)), output, output);
  return 0;
}

}  // namespace

void AddTaskProfileCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TaskProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "task-profile", "Profile a side task alone: freeride task-profile [OPTIONS] -- CMD ARGS...");
  cmd->add_option("--seconds", args->seconds, "How long to run it after its setup")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->check(FiniteSeconds());
  cmd->add_option("--timeout", args->timeout, "Kill it after this many seconds in all")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->check(FiniteSeconds());
  cmd->add_option("--output,-o", args->output, "Profile file (default: CMD.profile.json)");
  cmd->add_option("command", args->command, "The task's command, after --");
  cmd->callback([args, exit_code] { *exit_code = RunTaskProfile(*args); });
}

}  // namespace freeride::cli
