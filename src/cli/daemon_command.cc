#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "base/paths.h"
#include "base/say.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/install_layout.h"
#include "client/client.h"
#include "daemon/daemon.h"
#include "daemon/gpu_query.h"
#include "daemon/mps_control.h"

namespace freeride::cli {
namespace {

// libfreeride_gate.so: $FREERIDE_GATE_LIBRARY, else beside this binary (a
// build tree), else in ../lib (an install or a bundle) or ../_lib (a
// wheel); "" when absent.
std::string FindGateLibrary() {
  if (const char* env = std::getenv("FREERIDE_GATE_LIBRARY"); env && *env)
    return access(env, R_OK) == 0 ? std::string(env) : std::string();
  std::string error;
  std::filesystem::path dir = ExecutableDir(&error);
  if (dir.empty()) return "";
  for (const auto& candidate : {dir / "libfreeride_gate.so", dir / ".." / "lib" / "libfreeride_gate.so",
                                dir / ".." / "_lib" / "libfreeride_gate.so"})
    if (access(candidate.c_str(), R_OK) == 0)
      return std::filesystem::weakly_canonical(candidate).string();
  return "";
}

struct DaemonArgs {
  std::string socket_path = DefaultSocketPath();
  std::string state_dir;
  std::string gpus;
  std::string mps = "auto";
  int mps_side_threads = 0;
  std::string gate = "on";
  std::string cpu_task_priority = "idle";
  int gate_margin_us = 200;
  int gate_lead_us = 300;
  int cpu_lanes = 0;
  std::string lane_cores;
  std::string lane_memory;
  std::string event_log_max_size = "256MiB";
  std::string task_log_max_size = "64MiB";
  int event_log_keep = 4;
  int max_resident = 4;
  std::string stage_timeout = "10s";
  std::string metrics;
  std::string overrun_budget = "5%";
  std::string cpu_overrun_budget = "0";
  std::string overhead_budget = "0.5%";
  std::string cpu_overhead_budget = "0";
  int probe_every = 100;
  int probe_withhold = 5;
  int overrun_window = 32;
  std::string hang_timeout = "10s";
  std::string attach_timeout = "30s";
  bool allow_root = false;
  bool accept_journal_loss = false;
  std::string listen;
  std::string token_file;
  std::string read_token_file;
  std::string tls_cert, tls_key;
  int max_connections = 256;
  int max_connections_per_peer = 32;
};

// Total memory of each GPU, by index, from nvidia-smi; empty without GPUs.
std::map<int, uint64_t> QueryGpuMemory() {
  std::map<int, uint64_t> gpus;
  for (auto [index, mib] : NvidiaSmiIntegerPairs("gpu=index,memory.total"))
    if (index >= 0) gpus[static_cast<int>(index)] = mib << 20;
  return gpus;
}

// The machine's RAM: what CPU lanes' tasks share unless --lane-memory says less.
uint64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

bool BuildLanes(const DaemonArgs& args, DaemonOptions* options, std::string* error) {
  uint64_t lane_memory = 0;
  if (!args.lane_memory.empty()) {
    auto parsed = ParseBytes(args.lane_memory, error);
    if (!parsed) return false;
    lane_memory = *parsed;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!args.gpus.empty() && args.cpu_lanes > 0) {
    *error = "give either --gpus or --cpu-lanes, not both";
    return false;
  }
  if (!args.gpus.empty() && !args.lane_cores.empty()) {
    *error = "--lane-cores goes with --cpu-lanes";
    return false;
  }
  if (!args.gpus.empty()) {
    std::map<int, uint64_t> present = QueryGpuMemory();
    // Lanes on GPUs the driver does not list are kept (a test, a node whose
    // driver comes later), but said: their side tasks get no GPU there.
    if (present.empty())
      Say(stderr,
          "freeride daemon: warning: no NVIDIA GPU was found (nvidia-smi lists none): the GPU "
          "lanes' side tasks will find no GPU until a driver and GPUs are there\n");
    std::stringstream list(args.gpus);
    std::string item;
    std::set<int> seen;
    while (std::getline(list, item, ',')) {
      char* end = nullptr;
      long gpu = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || gpu < 0 || gpu > 1023) {
        *error = fmt::format("--gpus: '{}' is not a GPU index", item);
        return false;
      }
      if (!present.empty() && !present.count(static_cast<int>(gpu))) {
        *error = fmt::format("--gpus: GPU {} does not exist; this machine has {} GPU(s)", gpu,
                             present.size());
        return false;
      }
      if (!seen.insert(static_cast<int>(gpu)).second) {
        *error = fmt::format("--gpus: GPU {} is listed twice", gpu);
        return false;
      }
      LaneConfig lane;
      lane.index = static_cast<int>(options->lanes.size());
      lane.device = fmt::format("gpu:{}", gpu);
      lane.capacity_bytes = lane_memory ? lane_memory : (present.count(gpu) ? present[gpu] : 0);
      options->lanes.push_back(lane);
    }
    return true;
  }
  int count = args.cpu_lanes > 0 ? args.cpu_lanes : 1;
  if (count > 256) {
    *error = fmt::format("--cpu-lanes {} is more than 256", count);
    return false;
  }
  std::vector<int> pinned;
  if (!args.lane_cores.empty()) {
    std::stringstream list(args.lane_cores);
    std::string item;
    while (std::getline(list, item, ',')) {
      char* end = nullptr;
      long core = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || core < 0 || core >= cores) {
        *error = fmt::format("--lane-cores: '{}' is not a core of this machine (0 to {})", item,
                             cores - 1);
        return false;
      }
      pinned.push_back(static_cast<int>(core));
    }
    if (static_cast<int>(pinned.size()) != count) {
      *error = fmt::format("--lane-cores lists {} core(s) for {} CPU lane(s)", pinned.size(), count);
      return false;
    }
  }
  for (int i = 0; i < count; ++i) {
    LaneConfig lane;
    lane.index = i;
    lane.device = fmt::format("cpu:{}", i);
    lane.capacity_bytes = lane_memory ? lane_memory : PhysicalMemoryBytes();
    lane.cpu_core = !pinned.empty() ? pinned[i] : cores > count ? i + 1 : -1;
    options->lanes.push_back(lane);
  }
  return true;
}

// "5%" or "0.05" as 0.05; nullopt for anything else or outside 0..1.
std::optional<double> ParsePercent(const std::string& text) {
  if (text.empty()) return std::nullopt;
  bool percent = text.back() == '%';
  std::string number = percent ? text.substr(0, text.size() - 1) : text;
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !std::isfinite(value)) return std::nullopt;
  if (percent) value /= 100;
  if (value < 0 || value > 1) return std::nullopt;
  return value;
}

int RunDaemon(const DaemonArgs& args) {
  // Side tasks run as the daemon's user: a root daemon is allowed only when
  // asked for, never by accident.
  const char* allow_env = std::getenv("FREERIDE_ALLOW_ROOT");
  bool allow_root = args.allow_root || (allow_env && std::string(allow_env) == "1");
  if (geteuid() == 0 && !allow_root) {
    Say(stderr,
        "freeride daemon: running as root, so every side task would run as root too. "
        "Run the daemon as the user who submits the tasks, or pass --allow-root "
        "(or set FREERIDE_ALLOW_ROOT=1) to accept that.\n");
    return 2;
  }
  DaemonOptions options;
  options.socket_path = args.socket_path;
  options.state_dir = args.state_dir.empty() ? DefaultStateDir() : args.state_dir;
  options.max_resident_per_lane = args.max_resident;
  options.accept_journal_loss = args.accept_journal_loss;
  options.metrics_address = args.metrics;
  options.cpu_task_priority =
      args.cpu_task_priority == "normal" ? CpuTaskPriority::kNormal : CpuTaskPriority::kIdle;
  std::string error;
  if (!args.listen.empty()) {
    // TCP reaches beyond this user's account, so it is never open without a token.
    if (args.token_file.empty() && args.read_token_file.empty()) {
      Say(stderr, "freeride daemon: --listen needs --token-file (or --read-token-file, for "
                         "a daemon that TCP clients may only read): the control API is never "
                         "open on TCP without a token (see docs/security.md)\n");
      return 2;
    }
    for (auto [file, token] : {std::pair{&args.token_file, &options.token},
                               std::pair{&args.read_token_file, &options.read_token}}) {
      if (file->empty()) continue;
      auto read = ReadTokenFile(*file, &error);
      if (!read) {
        Say(stderr, "freeride daemon: {}\n", error);
        return 2;
      }
      *token = *read;
    }
    options.listen_address = args.listen;
    options.tls_cert_file = args.tls_cert;
    options.tls_key_file = args.tls_key;
    options.max_tcp_connections = args.max_connections;
    options.max_tcp_connections_per_peer = args.max_connections_per_peer;
  } else if (!args.token_file.empty() || !args.read_token_file.empty() || !args.tls_cert.empty() ||
             !args.tls_key.empty()) {
    Say(stderr, "freeride daemon: --token-file, --read-token-file, --tls-cert and --tls-key "
                       "go with --listen\n");
    return 2;
  }
  auto log_size = ParseBytes(args.event_log_max_size, &error);
  if (!log_size) {
    Say(stderr, "freeride daemon: --event-log-max-size: {}\n", error);
    return 2;
  }
  options.event_log_max_bytes = *log_size;
  auto task_log_size = ParseBytes(args.task_log_max_size, &error);
  if (!task_log_size) {
    Say(stderr, "freeride daemon: --task-log-max-size: {}\n", error);
    return 2;
  }
  options.task_log_max_bytes = *task_log_size;
  options.event_log_keep = args.event_log_keep;
  auto timeout = ParseDuration(args.stage_timeout, &error);
  if (!timeout) {
    Say(stderr, "freeride daemon: --stage-timeout: {}\n", error);
    return 2;
  }
  options.stage_timeout = *timeout;
  auto attach = ParseDuration(args.attach_timeout, &error);
  if (!attach || *attach <= 0) {
    Say(stderr, "freeride daemon: --attach-timeout: {}\n",
        attach ? "give a positive duration" : error);
    return 2;
  }
  options.attach_timeout = *attach;
  std::optional<double> budget = ParsePercent(args.overrun_budget);
  std::optional<double> cpu_budget = ParsePercent(args.cpu_overrun_budget);
  auto hang = ParseDuration(args.hang_timeout, &error);
  if (!budget || !cpu_budget || !hang || args.overrun_window < 1 ||
      args.overrun_window > OverrunBudget::kMaxWindow) {
    Say(stderr, "freeride daemon: {}\n",
        !budget || !cpu_budget
            ? fmt::format("--overrun-budget/--cpu-overrun-budget '{}': give a share of "
                          "bubble time such as 5% (0 turns it off)",
                          !budget ? args.overrun_budget : args.cpu_overrun_budget)
        : !hang ? "--hang-timeout: " + error
                : fmt::format("--overrun-window must be in 1..{}", OverrunBudget::kMaxWindow));
    return 2;
  }
  options.overrun_budget.max_fraction = *budget;
  options.cpu_overrun_budget.max_fraction = *cpu_budget;
  for (OverrunBudgetConfig* b : {&options.overrun_budget, &options.cpu_overrun_budget}) {
    b->window = args.overrun_window;
    b->hang = *hang;
  }
  std::optional<double> overhead_budget = ParsePercent(args.overhead_budget);
  std::optional<double> cpu_overhead_budget = ParsePercent(args.cpu_overhead_budget);
  if (!overhead_budget || !cpu_overhead_budget) {
    Say(stderr,
        "freeride daemon: --overhead-budget/--cpu-overhead-budget '{}': give the training "
        "slowdown allowed, such as 0.5% (0 turns the guard off)\n",
        !overhead_budget ? args.overhead_budget : args.cpu_overhead_budget);
    return 2;
  }
  ProbeConfig probe;
  probe.period_iterations = args.probe_every;
  probe.withheld_iterations = args.probe_withhold;
  if (args.probe_every < 0 || args.probe_withhold < 1 || (args.probe_every > 0 && !probe.Valid())) {
    Say(stderr,
        "freeride daemon: --probe-every {} --probe-withhold {}: the period must be at "
        "least 4 x (withheld + 1) iterations, e.g. 100 and 5 (--probe-every 0 turns the "
        "probe and the guard off)\n",
        args.probe_every, args.probe_withhold);
    return 2;
  }
  options.guard.budget = *overhead_budget;
  options.cpu_guard.budget = *cpu_overhead_budget;
  options.probe.period_iterations = probe.period_iterations;
  options.probe.withheld_iterations = probe.withheld_iterations;
  if (!BuildLanes(args, &options, &error)) {
    Say(stderr, "freeride daemon: {}\n", error);
    return 2;
  }
  // Signals are taken synchronously by this thread; every thread the daemon
  // starts inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  MpsMode mps_mode;
  if (!ParseMpsMode(args.mps, &mps_mode)) {
    Say(stderr, "freeride daemon: --mps must be auto, on or off, not '{}'\n", args.mps);
    return 2;
  }
  MpsSetup mps;
  bool gpu_lanes = !options.lanes.empty() && options.lanes[0].device.rfind("gpu:", 0) == 0;
  if (gpu_lanes) {
    if (!SetUpMps(mps_mode, options.state_dir, &mps, &error)) {
      Say(stderr, "freeride daemon: {}\n", error);
      return 1;
    }
    options.mps_pipe_dir = mps.pipe_dir;
    options.mps_thread_percentage = args.mps_side_threads;  // used only under MPS
    options.gate = args.gate == "on";
    options.gate_margin = static_cast<Nanos>(args.gate_margin_us) * kMicrosecond;
    options.gate_lead = static_cast<Nanos>(args.gate_lead_us) * kMicrosecond;
    if (options.gate) {
      options.gate_library = FindGateLibrary();
      if (options.gate_library.empty())
        Say(stderr,
            "freeride daemon: warning: libfreeride_gate.so was found neither in "
            "$FREERIDE_GATE_LIBRARY nor beside this binary (nor in ../lib, ../_lib): GPU lanes "
            "dispatch from the host, with no GPU gate\n");
    }
  }
  Daemon daemon(options);
  if (!daemon.Start(&error)) {
    TearDownMps(mps);
    Say(stderr, "freeride daemon: {}\n", error);
    return 1;
  }
  std::string lanes;
  for (const LaneConfig& l : options.lanes)
    lanes += fmt::format("{}{}", lanes.empty() ? "" : ", ", l.device);
  Say(stdout, "freeride daemon {} (pid {}) listening on {}\n  lanes: {}\n  state: {}\n",
      FREERIDE_VERSION, getpid(), options.socket_path, lanes, options.state_dir);
  if (gpu_lanes) Say(stdout, "  {}\n", mps.note);
  if (!gpu_lanes && options.cpu_task_priority == CpuTaskPriority::kNormal)
    Say(stdout, "  side tasks: normal policy (--cpu-task-priority normal), not SCHED_IDLE: a step "
        "that overruns its bubble shares the core with the stage\n");
  if (gpu_lanes)
    Say(stdout, "  dispatch: {}\n",
        options.IsGatedLane(options.lanes[0].index)
            ? fmt::format("GPU gate ({}); side work queued only when predicted to end {} us "
                          "before each forecast end, from {} us before each forecast begin",
                          options.gate_library, args.gate_margin_us, args.gate_lead_us)
            : std::string("host-side (--gate off, or no gate library)"));
  if (daemon.tcp_port() > 0)
    Say(stdout, "  tcp: {}:{} ({}, {})\n",
        options.listen_address.substr(0, options.listen_address.rfind(':')),
        daemon.tcp_port(), options.tls_cert_file.empty() ? "no TLS" : "TLS",
        options.token.empty()           ? "read-only token required: TCP clients only read"
        : options.read_token.empty()    ? "token required"
                                        : "token required; the read-only token reads");
  if (daemon.metrics_port() > 0)
    Say(stdout, "  metrics: http://{}:{}/metrics\n",
        options.metrics_address.substr(0, options.metrics_address.rfind(':')),
        daemon.metrics_port());
  for (const std::string& note : daemon.recovery_notes()) Say(stdout, "  {}\n", note);
  int received = 0;
  sigwait(&signals, &received);
  Say(stdout, "freeride daemon: {} received, stopping (tasks checkpoint and resume on the next "
      "start)\n",
      strsignal(received));
  daemon.Shutdown();
  TearDownMps(mps);
  return 0;
}

}  // namespace

void AddDaemonCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DaemonArgs>();
  CLI::App* cmd = app.add_subcommand("daemon", "Run the node daemon (one per node).");
  // An empty path given is refused: an empty socket is one no client reaches,
  // and an empty state directory silently meant the default one.
  auto not_empty = [](const char* what) {
    return CLI::Validator(
        [what](std::string& path) { return path.empty() ? fmt::format("give {}: it is empty", what) : std::string(); },
        "PATH");
  };
  cmd->add_option("--socket", args->socket_path, "Unix socket of the control API (mode 0600)")
      ->capture_default_str()
      ->check(not_empty("the socket's path"));
  cmd->add_option("--state-dir", args->state_dir,
                  "Directory for the journal, event log and task files "
                  "(default $XDG_STATE_HOME/freeride or ~/.local/state/freeride)")
      ->check(not_empty("a directory"));
  cmd->add_option("--gpus", args->gpus, "GPU lanes, e.g. 0,1,2,3");
  cmd->add_option("--cpu-lanes", args->cpu_lanes,
                  "CPU lanes, for machines without GPUs (default 1 when --gpus is not given)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--lane-cores", args->lane_cores,
                  "CPU lanes: the core each lane's side tasks are pinned to, e.g. 0,1 (default: "
                  "core i+1 for lane i when there are more cores than lanes, else none); pin "
                  "stage i to the same core and its tasks use it only while it waits");
  cmd->add_option("--lane-memory", args->lane_memory,
                  "Memory side tasks may hold per lane, e.g. 8GiB (default: the GPU's total; on "
                  "CPU lanes the machine's RAM)");
  cmd->add_option("--max-resident", args->max_resident, "Launched tasks kept per lane")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--stage-timeout", args->stage_timeout,
                  "A bubble without marks for this long is treated as over")
      ->capture_default_str();
  cmd->add_option("--metrics", args->metrics,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics (off by default; PORT 0 "
                  "picks a free port)");
  cmd->add_option("--mps", args->mps,
                  "CUDA MPS for GPU lanes' tasks: auto (use or start it, else run without), on "
                  "(required), off")
      ->capture_default_str();
  cmd->add_option("--gate", args->gate,
                  "GPU lanes: on (tasks' GPU work waits on the lane's GPU gate, which the "
                  "stage's stream opens and closes; docs/gate.md) or off (host-side dispatch)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--gate-margin-us", args->gate_margin_us,
                  "Admit side work until this long before each bubble's forecast end: each task's "
                  "interposer queues a piece of GPU work only when it is predicted (by the 95th "
                  "percentile of its timed pieces) to end by then, so that it ends inside the bubble")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--gate-lead-us", args->gate_lead_us,
                  "Let each task queue GPU work behind the shut gate from this long before the "
                  "next bubble's forecast begin (learned from the stage's busy times), so that the "
                  "GPU starts it as the stage opens the gate; its wait is left pending for about "
                  "this long.  0: work waits on the host until the daemon sees the bubble begin")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--cpu-task-priority", args->cpu_task_priority,
                  "CPU lanes: the scheduling policy of side tasks.  idle (SCHED_IDLE): a task gets "
                  "its core only when nothing else wants it, which is what keeps it from slowing a "
                  "CPU stage on the same core, even in a step that overruns its bubble.  normal: "
                  "the daemon's own policy, sharing a busy core fairly; tasks still run only in "
                  "bubbles.  normal is for tests and demos on machines that other work keeps busy, "
                  "where an idle task may wait minutes for a core")
      ->capture_default_str()
      ->check(CLI::IsMember({"idle", "normal"}));
  cmd->add_option("--mps-side-threads", args->mps_side_threads,
                  "Under MPS, the percentage of each GPU's SMs side tasks' kernels may use "
                  "(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); 0: all")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  cmd->add_option("--overrun-budget", args->overrun_budget,
                  "Overrun past bubble ends a task may cause, as a share of its bubble time over "
                  "--overrun-window bubbles, before it is demoted, then killed (0: never)")
      ->capture_default_str();
  cmd->add_option("--cpu-overrun-budget", args->cpu_overrun_budget,
                  "The same for CPU lanes, where scheduling noise makes most overruns (0: never)")
      ->capture_default_str();
  cmd->add_option("--overhead-budget", args->overhead_budget,
                  "Training slowdown the guard keeps to, from the live estimate; above it side "
                  "work is cut back in steps (0: no guard)")
      ->capture_default_str();
  cmd->add_option("--cpu-overhead-budget", args->cpu_overhead_budget,
                  "The same for CPU lanes, where the machine's own noise moves iterations (0: no "
                  "guard; the estimate is still shown)")
      ->capture_default_str();
  cmd->add_option("--probe-every", args->probe_every,
                  "Training iterations per probe cycle: side work is withheld for "
                  "--probe-withhold of them to estimate its cost (0: no probe, no guard)")
      ->capture_default_str();
  cmd->add_option("--probe-withhold", args->probe_withhold,
                  "Iterations per cycle with side work withheld")
      ->capture_default_str();
  cmd->add_option("--overrun-window", args->overrun_window,
                  "Bubbles a task steps in over which that share is taken")->capture_default_str();
  cmd->add_option("--hang-timeout", args->hang_timeout,
                  "A step running this long past its bubble's end is killed (0: never)")
      ->capture_default_str();
  cmd->add_option("--attach-timeout", args->attach_timeout,
                  "An iterative task runs only inside bubbles until it attaches to the SDK; it "
                  "fails after this much bubble time without, once it also used a tenth of it on a "
                  "CPU (use --kind imperative for others)")
      ->capture_default_str();
  cmd->add_option("--event-log-max-size", args->event_log_max_size,
                  "Start a new events.jsonl when it reaches this size, keeping the older ones as "
                  "events.jsonl.1, .2, ... (0: never)")
      ->capture_default_str();
  cmd->add_option("--task-log-max-size", args->task_log_max_size,
                  "Keep each task's stdout.log and stderr.log within this size: past it, the last "
                  "half goes to stdout.log.1 (stderr.log.1) and the log starts empty (0: never)")
      ->capture_default_str();
  cmd->add_option("--event-log-keep", args->event_log_keep,
                  "Older event-log files kept after rotation")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_flag("--allow-root", args->allow_root,
               "Run as root (side tasks then run as root too); refused without this");
  cmd->add_flag("--accept-journal-loss", args->accept_journal_loss,
                "Start even though the journal is damaged, was replaced or emptied, or lost its "
                "last commits: keep what can be read, mark the lost tasks' directories orphaned "
                "(never reused); refused without this");
  cmd->add_option("--listen", args->listen,
                  "Also serve the control API on TCP HOST:PORT (needs --token-file or "
                  "--read-token-file; port 0 picks one)");
  cmd->add_option("--token-file", args->token_file,
                  "File holding the token TCP clients must send (mode 0600, 16+ characters)");
  cmd->add_option("--read-token-file", args->read_token_file,
                  "File holding a second token that may only read (status, show, the cluster "
                  "view), never submit or cancel (mode 0600, 16+ characters)");
  cmd->add_option("--tls-cert", args->tls_cert, "TLS certificate chain for --listen (PEM)");
  cmd->add_option("--tls-key", args->tls_key, "TLS private key for --listen (PEM)");
  cmd->add_option("--max-connections", args->max_connections,
                  "TCP connections served at once; more are refused (lowered to fit the "
                  "descriptor limit)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-connections-per-peer", args->max_connections_per_peer,
                  "TCP connections served at once from one address")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->callback([args, exit_code] { *exit_code = RunDaemon(*args); });
}

}  // namespace freeride::cli
