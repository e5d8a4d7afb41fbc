#include "cli/doctor_checks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/units.h"
#include "channel/lane_segment.h"
#include "channel/shared_mapping.h"
#include "channel/task_segment.h"
#include "client/client.h"
#include "daemon/mps_control.h"

extern char** environ;

namespace freeride::cli {
namespace {

namespace fs = std::filesystem;

constexpr long kTmpfsMagic = 0x01021994;
// Room for the segments of a full node: 8 lanes, 64 resident side tasks.
constexpr uint64_t kShmNeededBytes = 8 * sizeof(LaneSegmentLayout) + 64 * sizeof(TaskSegmentLayout);

Finding Make(std::string area, Severity severity, std::string what, std::string fix = "") {
  return Finding{std::move(area), severity, std::move(what), std::move(fix)};
}

// A folder this user may create entries in (write and search permission).
// Empty when it may; else why not.
std::string WhyNotWritable(const std::string& dir) {
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return fmt::format("{} is not writable by this user ({})", dir, std::strerror(errno));
  return "";
}

// The nearest existing ancestor of path (path itself when it exists).
fs::path ExistingAncestor(fs::path path) {
  std::error_code ec;
  while (!path.empty() && !fs::exists(path, ec) && path != path.parent_path()) path = path.parent_path();
  return path;
}

struct CommandOutput {
  int exit_status = -1;  // -1: could not run or timed out
  std::string output;    // stdout and stderr together
  std::string error;     // why it could not run
};

// Runs argv with stdout and stderr captured, killing it after timeout; env
// entries ("NAME=value") replace or add to this process's environment.
CommandOutput RunAndCapture(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                            std::chrono::seconds timeout) {
  CommandOutput result;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.error = std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> entries = env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const std::string& mine : env) replaced |= mine.rfind(name, 0) == 0;
    if (!replaced) entries.push_back(entry);
  }
  std::vector<char*> envp;
  for (std::string& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    result.error = std::strerror(spawned);
    return result;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    result.error = fmt::format("no answer in {} s", timeout.count());
  } else if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
    if (result.exit_status == 127) result.error = "command not found";
  } else {
    result.error = "killed by a signal";
  }
  return result;
}

std::string_view SeverityWord(Severity s) {
  switch (s) {
    case Severity::kOk: return "ok";
    case Severity::kNote: return "note";
    case Severity::kWarning: return "WARN";
    case Severity::kBlocker: return "FAIL";
  }
  return "?";
}

std::string_view IsolationWords(v1::Isolation isolation) {
  switch (isolation) {
    case v1::ISOLATION_CPU_SCHED_IDLE: return "CPU lanes: side tasks in SCHED_IDLE, on a core only when it is free";
    case v1::ISOLATION_GPU_TIME_SLICED: return "GPU time-slicing without MPS: a side task's kernels can delay the training's";
    case v1::ISOLATION_GPU_MPS: return "MPS: side tasks at client priority 1, below the training";
    case v1::ISOLATION_CPU_NORMAL:
      return "CPU lanes: side tasks at the normal policy (--cpu-task-priority normal), sharing a "
             "busy core with the stage when a step overruns its bubble";
    default: return "unknown (a daemon older than this CLI)";
  }
}

}  // namespace

const char kPythonProbe[] = R"PY(
import json, sys
out = {"python": sys.version.split()[0]}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["cuda_devices"] = torch.cuda.device_count() if out["cuda_available"] else 0
    try:
        import torch.distributed.pipelining  # noqa: F401
        out["pipelining"] = True
    except Exception as e:
        out["pipelining"] = False
        out["pipelining_error"] = f"{type(e).__name__}: {e}"
except Exception as e:
    out["torch_error"] = f"{type(e).__name__}: {e}"
try:
    import freeride
    freeride.load_library()
    import freeride._native as native
    out["freeride"] = freeride.__file__
    out["libfreeride"] = native.loaded_path()
except Exception as e:
    out["freeride_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
)PY";

std::vector<Finding> CheckGpus(const CudaDriverInfo& driver, bool nvidia_smi) {
  std::vector<Finding> found;
  if (!driver.library_loaded) {
    found.push_back(Make("driver", Severity::kNote,
                         fmt::format("no NVIDIA driver ({}): CPU lanes only", driver.library_error),
                         ""));
    return found;
  }
  if (driver.init_result != 0) {
    found.push_back(Make("driver", Severity::kBlocker,
                         fmt::format("libcuda.so.1 loads but does not start: {}", driver.init_error),
                         "check the driver with nvidia-smi; in a container, run it with the GPUs "
                         "(e.g. --gpus all) and the driver's libraries mounted"));
    return found;
  }
  found.push_back(Make("driver", Severity::kOk,
                       fmt::format("NVIDIA driver for CUDA {}.{}, {} GPU(s)", driver.driver_version / 1000,
                                   driver.driver_version % 1000 / 10, driver.gpus.size())));
  if (driver.gpus.empty()) {
    found.push_back(Make("gpus", Severity::kBlocker, "the driver starts but sees no GPU",
                         "check CUDA_VISIBLE_DEVICES and that the container was given the GPUs"));
    return found;
  }
  if (!nvidia_smi)
    found.push_back(Make("nvidia-smi", Severity::kWarning,
                         "nvidia-smi is not on PATH: the daemon cannot check --gpus against the "
                         "GPUs present or read their memory",
                         "put nvidia-smi on PATH, or give the daemon --lane-memory"));
  if (!driver.has_launch_host_func)
    found.push_back(Make("stream marks", Severity::kBlocker,
                         "the driver has no cuLaunchHostFunc: freeride.torch cannot mark bubbles "
                         "in stream order",
                         "update the NVIDIA driver (CUDA 10 or later)"));
  for (const GpuDevice& gpu : driver.gpus) {
    std::string area = fmt::format("gpu {}", gpu.index);
    std::string describe = fmt::format("{}, {}, compute {}.{}", gpu.name, FormatBytes(gpu.memory_bytes),
                                       gpu.compute_major, gpu.compute_minor);
    if (gpu.compute_mode == 2) {
      found.push_back(Make(area, Severity::kBlocker, describe + ", compute mode Prohibited: no process may use it",
                           fmt::format("nvidia-smi -i {} -c DEFAULT", gpu.index)));
      continue;
    }
    found.push_back(Make(area, Severity::kOk,
                         describe + (gpu.compute_mode == 3 ? ", compute mode Exclusive_Process (MPS needed "
                                                             "for side tasks to share it)"
                                                           : "")));
    auto yes = [](int v) { return v == 1 ? "yes" : v == 0 ? "no" : "unknown"; };
    std::string ops = fmt::format("stream memory operations: 32-bit {}, 64-bit {}, wait NOR {}",
                                  yes(gpu.stream_mem_ops), yes(gpu.stream_mem_ops_64),
                                  yes(gpu.stream_wait_value_nor));
    bool all = gpu.stream_mem_ops == 1 && gpu.stream_mem_ops_64 == 1 && gpu.stream_wait_value_nor == 1;
    found.push_back(Make(area, gpu.stream_mem_ops == 1 ? Severity::kOk : Severity::kWarning,
                         ops + (gpu.stream_mem_ops == 1
                                    ? " (the GPU gate needs the 32-bit ones)"
                                    : " (the GPU gate needs the 32-bit ones: without them its lanes' "
                                      "tasks are refused; start the daemon with --gate off for "
                                      "host-side dispatch)"),
                         all || driver.driver_version >= 12000
                             ? ""
                             : "drivers before CUDA 12 enable them with the nvidia module option "
                               "NVreg_EnableStreamMemOPs=1"));
  }
  return found;
}

Finding CheckMps(const CudaDriverInfo& driver, const std::string& scratch_dir) {
  if (!driver.library_loaded || driver.init_result != 0 || driver.gpus.empty())
    return Make("mps", Severity::kNote, "no usable GPU: MPS does not apply (CPU lanes isolate side "
                                        "tasks with SCHED_IDLE)");
  MpsSetup setup;
  std::string error;
  std::string dir = fmt::format("{}/freeride-doctor-{}", scratch_dir, getpid());
  SetUpMps(MpsMode::kAuto, dir, &setup, &error);
  bool ok = !setup.pipe_dir.empty();
  std::string what = ok ? (setup.started_by_us ? "an MPS control daemon starts (stopped again)"
                                               : setup.note)
                        : setup.note;
  TearDownMps(setup);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ok) return Make("mps", Severity::kOk, what + ": side tasks run below the training's priority");
  return Make("mps", Severity::kWarning,
              what + "; without MPS, side tasks share the GPUs by time-slicing and can slow the "
                     "training",
              "install the NVIDIA driver's nvidia-cuda-mps-control and run the daemon where it may "
              "start it (docs/architecture.md, --mps)");
}

std::vector<Finding> CheckSharedMemory(const std::string& dir) {
  std::vector<Finding> found;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    found.push_back(Make("shm", Severity::kBlocker, fmt::format("{} does not exist", dir),
                         "mount a tmpfs there (mount -t tmpfs tmpfs /dev/shm)"));
    return found;
  }
  struct statfs fs_info;
  uint64_t free_bytes = 0, total_bytes = 0;
  bool tmpfs = false;
  if (statfs(dir.c_str(), &fs_info) == 0) {
    free_bytes = static_cast<uint64_t>(fs_info.f_bavail) * fs_info.f_bsize;
    total_bytes = static_cast<uint64_t>(fs_info.f_blocks) * fs_info.f_bsize;
    tmpfs = fs_info.f_type == kTmpfsMagic;
  }
  std::string mode = fmt::format("{:o}", st.st_mode & 07777);
  std::string describe = fmt::format("{}: {} free of {}, mode {}{}", dir, FormatBytes(free_bytes),
                                     FormatBytes(total_bytes), mode, tmpfs ? ", tmpfs" : "");
  if (std::string why = WhyNotWritable(dir); !why.empty()) {
    found.push_back(Make("shm", Severity::kBlocker, describe + "; " + why,
                         fmt::format("chmod 1777 {}", dir)));
    return found;
  }
  // The real thing: create, size and map a segment the way lanes do.
  std::string probe = fmt::format("{}/freeride-doctor-{}", dir, getpid());
  std::string error;
  {
    SharedMapping mapping;
    if (!mapping.Map(probe, sizeof(LaneSegmentLayout), true, true, &error)) {
      unlink(probe.c_str());
      found.push_back(Make("shm", Severity::kBlocker, describe + "; a segment cannot be mapped: " + error,
                           "check the mount's options (noexec is fine; it must allow shared mappings)"));
      return found;
    }
    std::memset(mapping.data(), 0, mapping.size());
  }
  unlink(probe.c_str());
  if (free_bytes < kShmNeededBytes) {
    found.push_back(Make("shm", Severity::kBlocker,
                         fmt::format("{}; a node needs about {} for its segments", describe,
                                     FormatBytes(kShmNeededBytes)),
                         "make /dev/shm larger (docker: --shm-size=1g)"));
    return found;
  }
  found.push_back(Make("shm", Severity::kOk, describe + "; a lane segment was created and mapped"));
  if (!tmpfs)
    found.push_back(Make("shm", Severity::kWarning,
                         fmt::format("{} is not a tmpfs: segments may be written back to disk", dir),
                         "mount a tmpfs there"));
  return found;
}

Finding CheckStateDir(const std::string& dir) {
  std::error_code ec;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    fs::path base = ExistingAncestor(dir);
    if (std::string why = WhyNotWritable(base.string()); !why.empty())
      return Make("state dir", Severity::kBlocker, fmt::format("{} does not exist and cannot be made: {}", dir, why),
                  "give the daemon a --state-dir this user can write");
    return Make("state dir", Severity::kOk, fmt::format("{} does not exist yet; the daemon will make it", dir));
  }
  if (!S_ISDIR(st.st_mode))
    return Make("state dir", Severity::kBlocker, fmt::format("{} is not a directory", dir),
                "give the daemon a --state-dir that is a directory");
  if (st.st_uid != geteuid())
    return Make("state dir", Severity::kBlocker,
                fmt::format("{} belongs to uid {}, not this user ({})", dir, st.st_uid, geteuid()),
                "run the daemon as its owner, or give it its own --state-dir");
  if (std::string why = WhyNotWritable(dir); !why.empty())
    return Make("state dir", Severity::kBlocker, why, fmt::format("chmod u+rwx {}", dir));
  std::string journal = dir + "/journal.db";
  std::string what = fmt::format("{}: mode {:o}, {}", dir, st.st_mode & 0777,
                                 fs::exists(journal, ec) ? "a journal is there (a daemon started on it resumes its queue)"
                                                         : "no journal yet");
  if (st.st_mode & 0022)
    return Make("state dir", Severity::kWarning, what + "; others may write to it",
                fmt::format("chmod go-w {}", dir));
  return Make("state dir", Severity::kOk, what);
}

Finding CheckSocketPath(const std::string& socket_path) {
  if (socket_path.size() >= sizeof(sockaddr_un::sun_path))
    return Make("socket", Severity::kBlocker,
                fmt::format("{} is {} characters; a Unix socket path has at most {}", socket_path,
                            socket_path.size(), sizeof(sockaddr_un::sun_path) - 1),
                "give a shorter --socket (or FREERIDE_SOCKET)");
  fs::path dir = fs::path(socket_path).parent_path();
  struct stat st;
  if (lstat(socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
    return Make("socket", Severity::kBlocker, fmt::format("{} exists and is not a socket", socket_path),
                "remove it, or give another --socket");
  if (stat(dir.c_str(), &st) != 0) {
    fs::path base = ExistingAncestor(dir);
    if (std::string why = WhyNotWritable(base.string()); !why.empty())
      return Make("socket", Severity::kBlocker,
                  fmt::format("the folder {} does not exist and cannot be made: {}", dir.string(), why),
                  "give a --socket in a folder this user can write (or set XDG_RUNTIME_DIR)");
    return Make("socket", Severity::kOk, fmt::format("{} (its folder will be made)", socket_path));
  }
  if (std::string why = WhyNotWritable(dir.string()); !why.empty())
    return Make("socket", Severity::kBlocker, why, "give a --socket in a folder this user can write");
  return Make("socket", Severity::kOk, socket_path);
}

std::vector<Finding> DescribeDaemon(const v1::StatsReply& stats) {
  std::vector<Finding> found;
  found.push_back(Make("daemon", Severity::kOk,
                       fmt::format("running: pid {}, version {}, up {:.0f} s, state in {}, {} lane(s)",
                                   stats.daemon_pid(), stats.version(), stats.uptime_ns() / 1e9,
                                   stats.state_dir(), stats.lanes_size())));
  int attached = 0;
  for (const v1::LaneStats& lane : stats.lanes()) {
    bool has_stage = lane.stage_pid() > 0 && lane.stage_alive();
    attached += has_stage;
    std::string core = lane.cpu_core() >= 0 ? fmt::format(", side tasks on core {}", lane.cpu_core()) : "";
    found.push_back(Make(
        fmt::format("lane {}", lane.lane()), Severity::kOk,
        has_stage ? fmt::format("{}: stage attached (pid {}), {} bubbles so far{}", lane.device(),
                                lane.stage_pid(), lane.bubbles(), core)
                  : fmt::format("{}: no stage attached{}", lane.device(), core)));
  }
  for (const v1::LaneStats& lane : stats.lanes()) {
    if (lane.device().rfind("gpu:", 0) != 0) continue;
    bool gate = lane.dispatch() == v1::DISPATCH_GPU_GATE;
    found.push_back(Make(
        fmt::format("lane {} dispatch", lane.lane()), gate ? Severity::kOk : Severity::kNote,
        gate ? fmt::format("GPU gate: its tasks' GPU work waits on the lane's gate, which the stage's "
                           "stream opens and closes ({} early closes, {} forced so far)",
                           lane.gate_early_closes(), lane.gate_forced_closes())
             : std::string("host-side dispatch: the daemon was started with --gate off, or found no "
                           "libfreeride_gate.so"),
        gate ? "" : "start the daemon with --gate on, from an install or bundle that has "
                    "lib/libfreeride_gate.so (or set FREERIDE_GATE_LIBRARY)"));
  }
  if (!stats.lanes().empty()) {
    v1::Isolation isolation = stats.lanes(0).isolation();
    const bool weak = isolation == v1::ISOLATION_GPU_TIME_SLICED || isolation == v1::ISOLATION_CPU_NORMAL;
    found.push_back(Make("isolation", weak ? Severity::kWarning : Severity::kOk,
                         std::string(IsolationWords(isolation)),
                         isolation == v1::ISOLATION_GPU_TIME_SLICED
                             ? "restart the daemon with --mps on (see the mps line above for why "
                               "it did not start)"
                         : isolation == v1::ISOLATION_CPU_NORMAL
                             ? "restart the daemon without --cpu-task-priority normal (idle, the "
                               "default, runs CPU lanes' tasks in SCHED_IDLE)"
                             : ""));
  }
  if (attached == 0 && !stats.lanes().empty())
    found.push_back(Make("stages", Severity::kNote,
                         "no training stage is attached yet: one attaches when its process calls "
                         "freeride.torch.instrument or freeride_stage_open"));
  return found;
}

std::vector<Finding> CheckDaemon(const std::string& socket_path) {
  struct stat st;
  if (lstat(socket_path.c_str(), &st) != 0)
    return {Make("daemon", Severity::kNote, fmt::format("none running at {}", socket_path),
                 "start one: freeride daemon --gpus 0,1,2,3 (GPU node) or --cpu-lanes N")};
  std::string error;
  auto stub = ConnectToDaemon(socket_path, &error);
  v1::StatsReply stats;
  grpc::Status status = grpc::Status(grpc::StatusCode::UNAVAILABLE, error);
  if (stub) {
    grpc::ClientContext context;
    SetDeadline(&context, std::chrono::milliseconds(3000));
    status = stub->GetStats(&context, v1::StatsRequest{}, &stats);
  }
  if (!status.ok())
    return {Make("daemon", Severity::kWarning,
                 fmt::format("{} exists but no daemon answers: {}", socket_path,
                             DescribeRpcError(status, socket_path)),
                 "a daemon that died left it; `freeride daemon` replaces it when it starts")};
  return DescribeDaemon(stats);
}

std::vector<Finding> InterpretPythonProbe(const std::string& python, int exit_status,
                                          const std::string& output) {
  std::vector<Finding> found;
  nlohmann::json probe;
  size_t start = output.rfind("\n{");
  std::string line = output.substr(start == std::string::npos ? 0 : start + 1);
  if (exit_status != 0 || !(probe = nlohmann::json::parse(line, nullptr, false)).is_object()) {
    found.push_back(Make("python", Severity::kWarning,
                         fmt::format("{} did not run the probe (exit {}): {}", python, exit_status,
                                     output.substr(0, 300)),
                         "install Python 3.10 or later, or set FREERIDE_PYTHON"));
    return found;
  }
  std::string version = probe.value("python", "?");
  if (!probe.contains("torch")) {
    found.push_back(Make("pytorch", Severity::kWarning,
                         fmt::format("{} (Python {}) has no PyTorch: {}", python, version,
                                     probe.value("torch_error", "")),
                         fmt::format("{} -m pip install torch (or scripts/python-env.sh in the "
                                     "source tree; FREERIDE_PYTHON picks another Python)",
                                     python)));
  } else {
    std::string cuda = probe["torch_cuda"].is_string() ? probe["torch_cuda"].get<std::string>() : "none";
    std::string what = fmt::format("torch {} (CUDA {}, {} GPU(s) visible) in {} (Python {})",
                                   probe.value("torch", "?"), cuda, probe.value("cuda_devices", 0),
                                   python, version);
    if (probe.value("pipelining", false)) {
      found.push_back(Make("pytorch", Severity::kOk, what + "; torch.distributed.pipelining imports"));
    } else {
      found.push_back(Make("pytorch", Severity::kWarning,
                           what + "; torch.distributed.pipelining does not import: " +
                               probe.value("pipelining_error", ""),
                           "install torch 2.4 or later"));
    }
  }
  if (probe.contains("libfreeride")) {
    found.push_back(Make("python package", Severity::kOk,
                         fmt::format("freeride imports from {} with {}", probe.value("freeride", "?"),
                                     probe["libfreeride"].is_string()
                                         ? probe["libfreeride"].get<std::string>()
                                         : "?")));
  } else {
    found.push_back(Make("python package", Severity::kWarning,
                         "the freeride package does not load: " + probe.value("freeride_error", ""),
                         "pip install the wheel (scripts/wheel.sh makes it), or "
                         "set PYTHONPATH to share/freeride/python of an install"));
  }
  return found;
}

std::vector<Finding> CheckPython(const std::string& python, const std::string& python_path,
                                 const std::string& bin_dir) {
  auto prepend = [](const char* name, const std::string& first) {
    const char* old = std::getenv(name);
    return fmt::format("{}={}{}", name, first, old && *old ? std::string(":") + old : "");
  };
  CommandOutput run = RunAndCapture({python, "-c", kPythonProbe},
                                    {prepend("PYTHONPATH", python_path), prepend("PATH", bin_dir)},
                                    std::chrono::seconds(120));
  if (run.exit_status < 0)
    return {Make("python", Severity::kWarning, fmt::format("cannot run {}: {}", python, run.error),
                 "install Python 3.10 or later, or set FREERIDE_PYTHON")};
  return InterpretPythonProbe(python, run.exit_status, run.output);
}

Finding ExpectedIsolation(const CudaDriverInfo& driver, const Finding& mps) {
  bool gpus = driver.library_loaded && driver.init_result == 0 && !driver.gpus.empty();
  v1::Isolation isolation = !gpus                         ? v1::ISOLATION_CPU_SCHED_IDLE
                            : mps.severity == Severity::kOk ? v1::ISOLATION_GPU_MPS
                                                            : v1::ISOLATION_GPU_TIME_SLICED;
  return Make("isolation", Severity::kNote,
              fmt::format("no daemon to ask; one started now would use {}", IsolationWords(isolation)));
}

bool AnyBlocker(const std::vector<Finding>& findings) {
  for (const Finding& f : findings)
    if (f.severity == Severity::kBlocker) return true;
  return false;
}

std::string FormatFindings(const std::vector<Finding>& findings) {
  std::string out;
  int blockers = 0, warnings = 0;
  for (const Finding& f : findings) {
    out += fmt::format("  {:<4}  {:<14}  {}\n", SeverityWord(f.severity), f.area, f.what);
    if (!f.fix.empty()) out += fmt::format("  {:<4}  {:<14}  fix: {}\n", "", "", f.fix);
    blockers += f.severity == Severity::kBlocker;
    warnings += f.severity == Severity::kWarning;
  }
  if (blockers > 0)
    out += fmt::format("{} problem(s) block FreeRide (FAIL above); {} warning(s)\n", blockers, warnings);
  else
    out += fmt::format("nothing blocks FreeRide; {} warning(s)\n", warnings);
  return out;
}

}  // namespace freeride::cli
