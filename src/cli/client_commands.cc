#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "base/paths.h"
#include "base/utf8.h"
#include "base/units.h"
#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/gate_status.h"
#include "cli/validators.h"
#include "client/client.h"
#include "client/task_profile.h"
#include "daemon/task_spec.h"

extern char** environ;

namespace freeride::cli {
namespace {

constexpr std::chrono::milliseconds kRpcTimeout{10000};

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

// Runs fn with a connected stub; prints a clear error and returns non-zero
// when the daemon cannot be reached or the RPC fails.
// How the user named the daemon: --socket, or --server with --token-file
// (and --tls-ca for TLS).
struct DaemonTarget {
  std::string socket = DefaultSocketPath();
  std::string server;
  std::string token_file;
  std::string tls_ca;
};

// fn(stub, endpoint) makes the calls; every context is set up with
// PrepareContext(&context, endpoint, ...) so that a TCP daemon gets the token.
template <typename Fn>
int WithDaemon(const DaemonTarget& target, const char* command, Fn fn) {
  std::string error;
  DaemonEndpoint endpoint;
  endpoint.socket_path = target.socket;
  endpoint.server = target.server;
  endpoint.tls_ca_file = target.tls_ca;
  if (!target.server.empty()) {
    if (target.token_file.empty()) {
      fmt::print(stderr, "freeride {}: --server needs --token-file: a TCP daemon refuses requests "
                         "without its token\n", command);
      return 2;
    }
    auto token = ReadTokenFile(target.token_file, &error);
    if (!token) {
      fmt::print(stderr, "freeride {}: {}\n", command, error);
      return 2;
    }
    endpoint.token = *token;
  }
  auto stub = ConnectToDaemon(endpoint, &error);
  if (!stub) {
    fmt::print(stderr, "freeride {}: {}\n", command, error);
    return 1;
  }
  grpc::Status status = fn(*stub, endpoint);
  if (!status.ok()) {
    fmt::print(stderr, "freeride {}: {}\n", command, DescribeRpcError(status, endpoint));
    return status.error_code() == grpc::StatusCode::UNAVAILABLE ? 1 : 2;
  }
  return 0;
}

std::string Abbrev(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width - 1) + "~";
}

std::string TaskLine(const v1::TaskInfo& t) {
  std::string command;
  for (const auto& a : t.spec().command()) command += (command.empty() ? "" : " ") + a;
  std::string progress = t.progress_unit().empty()
                             ? fmt::format("{:.4g}", t.progress())
                             : fmt::format("{:.4g} {}", t.progress(), t.progress_unit());
  return fmt::format("{:>5}  {:<20} {:>4}  {:<10} {:>6} {:>10} {:>18}  {}", t.id(),
                     Abbrev(t.spec().name(), 20), t.lane(), t.state(), t.steps(),
                     FormatDuration(t.harvested_ns()), Abbrev(progress, 18),
                     Abbrev(command, 40));
}

// ---------------------------------------------------------------- submit --
struct SubmitArgs {
  DaemonTarget daemon;
  std::string name;
  std::string lane = "any";
  std::string memory = "0";
  int priority = 0;
  std::string kind = "iterative";
  std::string step_time;
  int retries = 0;
  std::string profile;
  std::string progress_regex;
  std::string progress_file;
  std::string progress_unit;
  std::string progress_stream;  // "": both (the default)
  bool json = false;
  std::vector<std::string> command;
};

int RunSubmit(const SubmitArgs& args) {
  v1::SubmitRequest request;
  v1::TaskSpec* spec = request.mutable_spec();
  std::string error;
  std::optional<TaskProfile> profile;
  if (!args.profile.empty()) {
    profile = ReadTaskProfile(args.profile, &error);
    if (!profile) {
      fmt::print(stderr, "freeride submit: --profile {}\n", error);
      return 2;
    }
  }
  if (args.command.empty() && !profile) {
    fmt::print(stderr, "freeride submit: no command given; usage: freeride submit [OPTIONS] -- "
                       "CMD ARGS...  (or --profile F, which holds one)\n");
    return 2;
  }
  if (profile && !args.command.empty() &&
      profile->command != args.command)
    fmt::print(stderr, "freeride submit: warning: the command differs from the one profiled in {}\n",
               args.profile);
  const std::vector<std::string>& command = args.command.empty() ? profile->command : args.command;
  auto memory = ParseBytes(args.memory, &error);
  if (!memory) {
    fmt::print(stderr, "freeride submit: --memory: {}\n", error);
    return 2;
  }
  spec->set_memory_bytes(*memory);
  if (args.lane == "any") {
    spec->set_lane(-1);
  } else {
    char* end = nullptr;
    long lane = std::strtol(args.lane.c_str(), &end, 10);
    if (args.lane.empty() || *end != '\0' || lane < 0 || lane > 1023) {
      fmt::print(stderr, "freeride submit: --lane must be a lane number or 'any', not '{}'\n",
                 args.lane);
      return 2;
    }
    spec->set_lane(static_cast<int>(lane));
  }
  if (args.kind == "iterative") {
    spec->set_kind(v1::TASK_KIND_ITERATIVE);
  } else if (args.kind == "imperative") {
    spec->set_kind(v1::TASK_KIND_IMPERATIVE);
  } else {
    fmt::print(stderr, "freeride submit: --kind must be iterative or imperative, not '{}'\n",
               args.kind);
    return 2;
  }
  spec->set_progress_regex(args.progress_regex);
  if (!args.progress_stream.empty()) {
    if (args.progress_regex.empty()) {
      fmt::print(stderr, "freeride submit: --progress-stream names the output --progress-regex reads: "
                         "give --progress-regex too\n");
      return 2;
    }
    spec->set_progress_streams(args.progress_stream == "stdout"   ? v1::PROGRESS_STREAMS_STDOUT
                               : args.progress_stream == "stderr" ? v1::PROGRESS_STREAMS_STDERR
                                                                  : v1::PROGRESS_STREAMS_BOTH);
  }
  spec->set_progress_file(args.progress_file);
  spec->set_progress_unit(args.progress_unit);
  if (!args.step_time.empty()) {
    auto step = ParseDuration(args.step_time, &error);
    if (!step) {
      fmt::print(stderr, "freeride submit: --step-time: {}\n", error);
      return 2;
    }
    spec->set_step_time_hint_ns(*step);
  }
  std::string name = args.name;
  if (name.empty()) {
    std::random_device random;
    name = fmt::format("{}-{:04x}", std::filesystem::path(command[0]).filename().string(),
                       random() & 0xffff);
  }
  // Checked here too: a name that is not UTF-8 cannot even be sent.
  if (std::string problem = NameProblem(name); !problem.empty()) {
    fmt::print(stderr, "freeride submit: --name: {}\n", problem);
    return 2;
  }
  spec->set_name(name);
  spec->set_priority(args.priority);
  spec->set_max_retries(args.retries);
  for (const std::string& a : command) spec->add_command(a);
  // Explicit --memory and --step-time win over the profile's figures.
  if (profile) ApplyTaskProfile(*profile, spec);
  std::error_code cwd_error;
  const std::filesystem::path cwd = std::filesystem::current_path(cwd_error);
  if (cwd_error) {
    fmt::print(stderr, "freeride submit: the current directory cannot be read ({}): the task runs "
                       "there, so cd to a directory that exists\n", cwd_error.message());
    return 2;
  }
  spec->set_working_dir(cwd.string());
  // The request carries text as UTF-8, and protobuf refuses to send anything
  // else (with no message of its own): say which part is not.
  auto utf8 = [](const std::string& text) { return ValidUtf8(text) == text; };
  for (size_t i = 0; i < command.size(); ++i) {
    if (!utf8(command[i])) {
      fmt::print(stderr, "freeride submit: the command's {} ('{}') is not valid UTF-8\n",
                 i == 0 ? std::string("program") : fmt::format("argument {}", i), ValidUtf8(command[i]));
      return 2;
    }
  }
  for (auto [what, text] : {std::pair<const char*, const std::string*>{"the current directory", &spec->working_dir()},
                            {"--progress-regex", &spec->progress_regex()},
                            {"--progress-file", &spec->progress_file()},
                            {"--progress-unit", &spec->progress_unit()}}) {
    if (!utf8(*text)) {
      fmt::print(stderr, "freeride submit: {} ('{}') is not valid UTF-8\n", what, ValidUtf8(*text));
      return 2;
    }
  }
  // A variable of the user's environment that is not UTF-8 cannot be sent:
  // the task runs without it, and the user is told which.
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    if (!utf8(entry)) {
      fmt::print(stderr, "freeride submit: warning: the environment variable {} is not valid UTF-8; "
                         "the task runs without it\n", ValidUtf8(entry.substr(0, eq)));
      continue;
    }
    (*spec->mutable_env())[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  v1::SubmitReply reply;
  int rc = WithDaemon(args.daemon, "submit", [&](v1::FreeRide::Stub& stub, const DaemonEndpoint& endpoint) {
    grpc::ClientContext context;
    PrepareContext(&context, endpoint, kRpcTimeout);
    return stub.Submit(&context, request, &reply);
  });
  if (rc != 0) return rc;
  if (args.json) {
    fmt::print("{}\n", ToJson(reply.task()));
  } else {
    fmt::print("submitted task {} '{}' to lane {}\n", reply.task().id(), reply.task().spec().name(),
               reply.task().lane());
  }
  return 0;
}

// ---------------------------------------------------------------- status --
struct StatusArgs {
  DaemonTarget daemon;
  ClusterRequest cluster;  // --servers/--cluster: the cluster view instead
  bool json = false;
  bool all = false;
  double watch_seconds = 0;  // > 0: refresh every this many seconds
  int refreshes = 0;         // with --watch: stop after this many (0: until interrupted)
};

int FetchStatus(const StatusArgs& args, v1::StatsReply* stats, v1::ListTasksReply* tasks) {
  return WithDaemon(args.daemon, "status", [&](v1::FreeRide::Stub& stub, const DaemonEndpoint& endpoint) {
    grpc::ClientContext c1;
    PrepareContext(&c1, endpoint, kRpcTimeout);
    grpc::Status s = stub.GetStats(&c1, v1::StatsRequest(), stats);
    if (!s.ok()) return s;
    return ListAllTasks(stub, endpoint, args.all, kRpcTimeout, tasks);
  });
}

// The lane's live overhead estimate in one line; never a number the daemon
// does not have.
std::string OverheadLine(const v1::LaneStats& l) {
  const v1::OverheadEstimate& o = l.overhead();
  std::string guard = o.budget() > 0 ? fmt::format("guard {}, budget {:.2f}%", o.guard_level(),
                                                   100 * o.budget())
                                     : "no guard";
  if (!o.probing()) return fmt::format("no estimate yet: waiting for the stage's iterations ({})", guard);
  if (!o.known())
    return fmt::format("no estimate yet: {} of {} probe cycles ({})", o.cycles(), o.min_cycles(),
                       guard);
  return fmt::format("{:+.2f}% [{:+.2f}%, {:+.2f}%] over {} probe cycles, {} withheld iterations ({})",
                     100 * o.slowdown(), 100 * o.slowdown_low(), 100 * o.slowdown_high(), o.cycles(),
                     o.withheld_iterations(), guard);
}

// `previous` (the last refresh of --watch, or null) adds each lane's share
// of bubble time harvested since then.
void PrintStatus(const StatusArgs& args, const v1::StatsReply& stats,
                 const v1::ListTasksReply& tasks, const v1::StatsReply* previous) {
  fmt::print("daemon pid {}  up {}  state {}\n", stats.daemon_pid(),
             FormatDuration(stats.uptime_ns()), stats.state_dir());
  if (!stats.mps_pipe_dir().empty())
    fmt::print("MPS server {} (trainers join it: eval \"$(freeride env)\")\n",
               stats.mps_pipe_dir());
  fmt::print("\n");
  fmt::print("{:>4}  {:<7} {:>6} {:>8} {:>10} {:>10} {:>6} {:>7} {:>9} {:>7}  {}\n", "lane",
             "device", "stage", "bubbles", "idle", "harvested", "share",
             previous ? "recent" : "", "resident", "queued", "now");
  for (const auto& l : stats.lanes()) {
    double share = l.bubble_ns() > 0 ? 100.0 * l.harvested_ns() / l.bubble_ns() : 0.0;
    std::string recent;
    if (previous) {
      recent = "-";
      for (const auto& p : previous->lanes()) {
        if (p.lane() != l.lane() || l.bubble_ns() <= p.bubble_ns()) continue;
        recent = fmt::format("{:.1f}%", 100.0 * (l.harvested_ns() - p.harvested_ns()) /
                                            (l.bubble_ns() - p.bubble_ns()));
      }
    }
    std::string now = l.in_bubble() ? fmt::format("bubble (slot {}){}", l.current_slot(),
                                                  l.running_task() ? fmt::format(", task {}",
                                                                                 l.running_task())
                                                                   : "")
                                    : "busy/training";
    if (!l.stage_alive()) now = "no stage attached";
    fmt::print("{:>4}  {:<7} {:>6} {:>8} {:>10} {:>10} {:>5.1f}% {:>7} {:>9} {:>7}  {}\n",
               l.lane(), l.device(), l.stage_alive() ? std::to_string(l.stage_pid()) : "-",
               l.bubbles(), FormatDuration(l.bubble_ns()), FormatDuration(l.harvested_ns()), share,
               recent, l.resident_tasks(), l.queued_tasks(), now);
  }
  for (const auto& l : stats.lanes())
    if (l.allowed_ns() > 0)
      fmt::print("{:>4}  imperative tasks were let run {} in bubbles: not in harvested, which "
                 "counts steps of known work\n",
                 l.lane(), FormatDuration(l.allowed_ns()));
  for (const auto& l : stats.lanes())
    if (std::string gate = GateStatusLine(l); !gate.empty()) fmt::print("{}\n", gate);
  fmt::print("\ntraining slowdown from side work (live estimate, 95% interval):\n");
  for (const auto& l : stats.lanes()) fmt::print("{:>4}  {}\n", l.lane(), OverheadLine(l));
  fmt::print("\n{:>5}  {:<20} {:>4}  {:<10} {:>6} {:>10} {:>18}  {}\n", "id", "name", "lane",
             "state", "steps", "harvested", "progress", "command");
  if (tasks.tasks().empty()) fmt::print("  (no tasks{})\n", args.all ? "" : " in flight; --all shows ended ones");
  for (const auto& t : tasks.tasks()) fmt::print("{}\n", TaskLine(t));
  for (const auto& t : tasks.tasks())
    if (t.allowed_ns() > 0)
      fmt::print("{:>5}  let run {} in bubbles (imperative: only the progress it reports is work)\n",
                 t.id(), FormatDuration(t.allowed_ns()));
}

int RunStatus(const StatusArgs& args) {
  if (args.cluster.Requested()) {
    if (!args.daemon.server.empty() || args.watch_seconds > 0 || args.all) {
      fmt::print(stderr, "freeride status: --servers/--cluster show several daemons at once: "
                         "without --server, --watch or --all (the view lists ended tasks' "
                         "failures already)\n");
      return 2;
    }
    ClusterRequest request = args.cluster;
    request.token_file = args.daemon.token_file;
    request.tls_ca = args.daemon.tls_ca;
    request.json = args.json;
    return RunClusterView(request, ClusterDetail::kStatus, "status");
  }
  v1::StatsReply stats;
  v1::ListTasksReply tasks;
  if (args.watch_seconds <= 0) {
    if (int rc = FetchStatus(args, &stats, &tasks); rc != 0) return rc;
    if (args.json) fmt::print("{{\"stats\": {},\n \"tasks\": {}}}\n", ToJson(stats), ToJson(tasks));
    else PrintStatus(args, stats, tasks, nullptr);
    return 0;
  }
  // --watch: redraw in place on a terminal; elsewhere, one block per refresh.
  const bool terminal = isatty(STDOUT_FILENO);
  std::optional<v1::StatsReply> previous;
  for (int refresh = 0; args.refreshes == 0 || refresh < args.refreshes; ++refresh) {
    if (refresh > 0) std::this_thread::sleep_for(std::chrono::duration<double>(args.watch_seconds));
    stats.Clear();
    tasks.Clear();
    if (int rc = FetchStatus(args, &stats, &tasks); rc != 0) return rc;
    if (args.json) {
      fmt::print("{{\"stats\": {}, \"tasks\": {}}}\n", ToJson(stats), ToJson(tasks));
    } else {
      fmt::print("{}", terminal ? "\033[H\033[2J" : (refresh ? "\n" : ""));
      fmt::print("every {:g} s ({}); Ctrl-C to stop\n", args.watch_seconds,
                 "recent: harvested share since the last refresh");
      PrintStatus(args, stats, tasks, previous ? &*previous : nullptr);
    }
    std::fflush(stdout);
    previous = stats;
  }
  return 0;
}

// ------------------------------------------------------------ show/cancel --
struct TaskRefArgs {
  DaemonTarget daemon;
  std::string task;
  bool json = false;
};

// A task reference: all ASCII digits is an id (a name cannot be, NameProblem),
// anything else a name, as the daemon reads names: " 2" and "+1" are names.
// "" when it can be sent, else why not.
std::string FillRef(const std::string& ref, int64_t* id, std::string* name) {
  const bool digits = !ref.empty() && std::all_of(ref.begin(), ref.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    errno = 0;
    const long long value = std::strtoll(ref.c_str(), nullptr, 10);
    if (errno == ERANGE || value <= 0) return fmt::format("task id {} is out of range (1 to {})", ref, INT64_MAX);
    *id = value;
    return "";
  }
  // A name no task can have (not UTF-8, which could not even be sent, too
  // long, blank) is refused by the daemon's own rule.
  if (std::string problem = NameProblem(ref); !problem.empty()) return problem;
  *name = ref;
  return "";
}

void PrintTask(const v1::TaskInfo& t) {
  std::string command;
  for (const auto& a : t.spec().command()) command += (command.empty() ? "" : " ") + a;
  fmt::print("task {} '{}'\n  state:     {}  ({})\n  lane:      {}\n  command:   {}\n", t.id(),
             t.spec().name(), t.state(), t.message(), t.lane(), command);
  fmt::print("  memory:    {}   priority {}   kind {}\n", FormatBytes(t.spec().memory_bytes()),
             t.spec().priority(),
             t.spec().kind() == v1::TASK_KIND_IMPERATIVE ? "imperative" : "iterative");
  fmt::print("  progress:  {:.6g} {}   steps {}   step time {}   harvested {}{}\n", t.progress(),
             t.progress_unit(), t.steps(), FormatDuration(t.step_estimate_ns()),
             FormatDuration(t.harvested_ns()),
             t.allowed_ns() > 0
                 ? fmt::format("   let run {} (imperative: not work)", FormatDuration(t.allowed_ns()))
                 : "");
  fmt::print("  attempts:  {}   pid {}   exit {}{}\n", t.attempts(), t.pid(), t.exit_code(),
             t.term_signal() ? fmt::format(" (signal {})", t.term_signal()) : "");
  if (!t.stderr_tail().empty()) fmt::print("  stderr (tail):\n{}\n", t.stderr_tail());
}

int RunShow(const TaskRefArgs& args) {
  v1::GetTaskRequest request;
  int64_t id = 0;
  std::string name;
  if (std::string problem = FillRef(args.task, &id, &name); !problem.empty()) {
    fmt::print(stderr, "freeride show: {}\n", problem);
    return 2;
  }
  request.set_id(id);
  request.set_name(name);
  v1::TaskInfo info;
  int rc = WithDaemon(args.daemon, "show", [&](v1::FreeRide::Stub& stub, const DaemonEndpoint& endpoint) {
    grpc::ClientContext context;
    PrepareContext(&context, endpoint, kRpcTimeout);
    return stub.GetTask(&context, request, &info);
  });
  if (rc != 0) return rc;
  if (args.json) fmt::print("{}\n", ToJson(info));
  else PrintTask(info);
  return 0;
}

int RunCancel(const TaskRefArgs& args) {
  v1::CancelRequest request;
  int64_t id = 0;
  std::string name;
  if (std::string problem = FillRef(args.task, &id, &name); !problem.empty()) {
    fmt::print(stderr, "freeride cancel: {}\n", problem);
    return 2;
  }
  request.set_id(id);
  request.set_name(name);
  v1::CancelReply reply;
  int rc = WithDaemon(args.daemon, "cancel", [&](v1::FreeRide::Stub& stub, const DaemonEndpoint& endpoint) {
    grpc::ClientContext context;
    PrepareContext(&context, endpoint, kRpcTimeout);
    return stub.Cancel(&context, request, &reply);
  });
  if (rc != 0) return rc;
  if (args.json) fmt::print("{}\n", ToJson(reply.task()));
  else fmt::print("task {} '{}': {}\n", reply.task().id(), reply.task().spec().name(),
                  reply.task().state() == "CANCELLED" ? "cancelled" : "cancelling");
  return 0;
}

// ------------------------------------------------------------------- env --
// `text` in single quotes for a POSIX shell.
std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Prints what a trainer's environment needs to join the daemon at `socket`,
// as lines a shell can eval: its socket, and the MPS server its GPU lanes'
// tasks run under (the trainer joins it at priority 0, above them).
int RunEnv(const std::string& socket) {
  DaemonTarget target;
  target.socket = std::filesystem::absolute(socket).lexically_normal().string();
  v1::StatsReply stats;
  int rc = WithDaemon(target, "env", [&](v1::FreeRide::Stub& stub, const DaemonEndpoint& endpoint) {
    grpc::ClientContext context;
    PrepareContext(&context, endpoint, kRpcTimeout);
    return stub.GetStats(&context, v1::StatsRequest(), &stats);
  });
  if (rc != 0) return rc;
  fmt::print("export FREERIDE_SOCKET={}\n", ShellQuote(target.socket));
  if (!stats.mps_pipe_dir().empty())
    fmt::print("export CUDA_MPS_PIPE_DIRECTORY={}\n", ShellQuote(stats.mps_pipe_dir()));
  return 0;
}

void AddDaemonTarget(CLI::App* cmd, DaemonTarget* target) {
  cmd->add_option("--socket", target->socket, "The daemon's Unix socket")->capture_default_str();
  cmd->add_option("--server", target->server,
                  "HOST:PORT of a daemon started with --listen (instead of --socket)");
  cmd->add_option("--token-file", target->token_file, "The TCP daemon's token (mode 0600)");
  cmd->add_option("--tls-ca", target->tls_ca, "Use TLS to --server, trusting this CA certificate");
}

}  // namespace

void AddClientCommands(CLI::App& app, int* exit_code) {
  auto submit = std::make_shared<SubmitArgs>();
  CLI::App* cmd = app.add_subcommand("submit", "Submit a side task: freeride submit [OPTIONS] -- CMD ARGS...");
  AddDaemonTarget(cmd, &submit->daemon);
  cmd->add_option("--name", submit->name, "Task name (default: the command's name plus a suffix)");
  cmd->add_option("--lane", submit->lane, "Lane number, or 'any'")->capture_default_str();
  cmd->add_option("--memory", submit->memory, "Declared peak device memory, e.g. 2GiB")
      ->capture_default_str();
  cmd->add_option("--priority", submit->priority, "Higher runs first")->capture_default_str();
  cmd->add_option("--progress-regex", submit->progress_regex,
                  "A program without the SDK: a regex over its output's lines that shows its "
                  "progress (one capture group: the progress so far, e.g. 'iteration (\\d+)'; "
                  "none: each matching line counts one).  RE2 syntax (as Python's re, without "
                  "backreferences or lookaround); a line ends at \\n or \\r (progress bars); "
                  "read from both of its outputs unless --progress-stream says one")
      ->check(CLI::Validator([](std::string& regex) { return regex.empty() ? "give a regex, or leave the option out" : ""; },
                             "REGEX"));
  cmd->add_option("--progress-stream", submit->progress_stream,
                  "Which output --progress-regex reads: both (the default: tqdm and Python's "
                  "logging write to stderr), stdout or stderr")
      ->check(CLI::IsMember({"both", "stdout", "stderr"}));
  cmd->add_option("--progress-file", submit->progress_file,
                  "A program without the SDK: a regular file it rewrites with its progress (its "
                  "last number counts; read while at most 4 KiB)");
  cmd->add_option("--progress-unit", submit->progress_unit,
                  "What one unit of its progress is (e.g. iterations), for reports");
  cmd->add_option("--kind", submit->kind, "iterative (SDK task) or imperative (any program)")
      ->capture_default_str();
  cmd->add_option("--step-time", submit->step_time,
                  "Expected step time, e.g. 5ms, used until steps are measured");
  cmd->add_option("--retries", submit->retries, "Relaunch a failed task up to N times")
      ->capture_default_str();
  cmd->add_option("--profile", submit->profile,
                  "A profile from `freeride task-profile`: memory, step time, alone rate "
                  "(and the command, if none is given)");
  cmd->add_flag("--json", submit->json, "Print the task as JSON");
  cmd->add_option("command", submit->command, "The command and its arguments, after --");
  cmd->callback([submit, exit_code] { *exit_code = RunSubmit(*submit); });

  auto status = std::make_shared<StatusArgs>();
  cmd = app.add_subcommand("status", "Show lanes and tasks; with --servers, of several nodes.");
  AddDaemonTarget(cmd, &status->daemon);
  AddClusterOptions(cmd, &status->cluster);
  cmd->add_flag("--json", status->json, "Print JSON");
  cmd->add_flag("--all", status->all, "Include tasks that have ended");
  cmd->add_option("--watch", status->watch_seconds,
                  "Refresh every SECONDS (a live view; with --json, one JSON object per refresh)")
      ->expected(0, 1)->default_str("1")->check(CLI::PositiveNumber)->check(FiniteSeconds());
  cmd->add_option("--refreshes", status->refreshes, "With --watch: stop after N refreshes")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([status, exit_code] { *exit_code = RunStatus(*status); });

  auto show = std::make_shared<TaskRefArgs>();
  cmd = app.add_subcommand("show", "Show one task, by id or name.");
  AddDaemonTarget(cmd, &show->daemon);
  cmd->add_option("task", show->task, "Task id or name")->required();
  cmd->add_flag("--json", show->json, "Print JSON");
  cmd->callback([show, exit_code] { *exit_code = RunShow(*show); });

  auto cancel = std::make_shared<TaskRefArgs>();
  cmd = app.add_subcommand("cancel", "Cancel a task, by id or name.");
  AddDaemonTarget(cmd, &cancel->daemon);
  cmd->add_option("task", cancel->task, "Task id or name")->required();
  cmd->add_flag("--json", cancel->json, "Print JSON");
  cmd->callback([cancel, exit_code] { *exit_code = RunCancel(*cancel); });

  auto env_socket = std::make_shared<std::string>(DefaultSocketPath());
  cmd = app.add_subcommand(
      "env",
      "Print a trainer's environment for the daemon at --socket, for a shell to eval: "
      "FREERIDE_SOCKET, and CUDA_MPS_PIPE_DIRECTORY when its GPU lanes run side tasks under MPS "
      "(the trainer then joins that server at priority 0). Fails when no daemon answers.");
  cmd->add_option("--socket", *env_socket, "The daemon's Unix socket")->capture_default_str();
  cmd->callback([env_socket, exit_code] { *exit_code = RunEnv(*env_socket); });
}

}  // namespace freeride::cli
