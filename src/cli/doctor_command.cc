// `freeride doctor`: checks this node for what FreeRide needs and prints what
// to fix; exits 1 when something blocks FreeRide.  The checks are in
// cli/doctor_checks.h.
#include <fmt/format.h>
#include <unistd.h>

#include "base/paths.h"
#include "cli/commands.h"
#include "cli/cuda_driver.h"
#include "cli/doctor_checks.h"
#include "cli/install_layout.h"
#include "daemon/gpu_query.h"

namespace freeride::cli {
namespace {

struct DoctorArgs {
  std::string socket_path = DefaultSocketPath();
  std::string state_dir = DefaultStateDir();
  std::string shm_dir = "/dev/shm";
  std::string python;
  std::string cuda_library = "libcuda.so.1";
  bool ready = false;  // only what a readiness probe needs
};

// `--ready`: is this node's daemon up and able to serve?  A readiness probe
// (deploy/kubernetes) runs it every few seconds, so it skips the checks that
// start processes (MPS, Python): /dev/shm, the state directory, and a daemon
// answering on the socket, whose absence blocks here.
int RunReadiness(const DoctorArgs& args) {
  std::vector<Finding> findings = CheckSharedMemory(args.shm_dir);
  findings.push_back(CheckStateDir(args.state_dir));
  for (Finding& f : CheckDaemon(args.socket_path)) {
    if (f.area == "daemon" && f.severity != Severity::kOk) f.severity = Severity::kBlocker;
    findings.push_back(std::move(f));
  }
  fmt::print("{}", FormatFindings(findings));
  return AnyBlocker(findings) ? 1 : 0;
}

int RunDoctor(const DoctorArgs& args) {
  if (args.ready) return RunReadiness(args);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string error;
  std::filesystem::path exe_dir = ExecutableDir(&error);
  std::optional<InstallLayout> layout;
  if (!exe_dir.empty()) layout = FindInstallLayout(exe_dir, &error);
  std::string from = "?";
  if (layout) {
    switch (layout->kind) {
      case LayoutKind::kInstall: from = "an install at " + exe_dir.parent_path().string(); break;
      case LayoutKind::kBuildTree: from = "the build tree " + exe_dir.string(); break;
      case LayoutKind::kWheel: from = "the wheel installed at " + exe_dir.parent_path().string(); break;
    }
  }
  fmt::print("freeride doctor: {} (uid {}), freeride {} from {}\n", host, geteuid(), FREERIDE_VERSION,
             from);
  std::vector<Finding> findings;
  if (!layout)
    findings.push_back({"files", Severity::kWarning, error,
                        "`freeride demo` and the Python checks need share/freeride beside bin/ "
                        "(cmake --install, scripts/bundle.sh), a wheel's package or a build tree"});
  CudaDriverInfo driver = ProbeCudaDriver(args.cuda_library);
  for (Finding& f : CheckGpus(driver, CommandExists("nvidia-smi"))) findings.push_back(std::move(f));
  Finding mps = CheckMps(driver, std::filesystem::temp_directory_path().string());
  findings.push_back(mps);
  for (Finding& f : CheckSharedMemory(args.shm_dir)) findings.push_back(std::move(f));
  findings.push_back(CheckStateDir(args.state_dir));
  findings.push_back(CheckSocketPath(args.socket_path));
  std::vector<Finding> daemon = CheckDaemon(args.socket_path);
  bool told = false;
  for (const Finding& f : daemon) told |= f.area == "isolation";
  if (!told) daemon.push_back(ExpectedIsolation(driver, mps));
  for (Finding& f : daemon) findings.push_back(std::move(f));
  std::string python = !args.python.empty() ? args.python : layout ? ChoosePython(*layout) : "python3";
  std::string python_path = layout ? layout->python_path.string() : "";
  for (Finding& f : CheckPython(python, python_path, exe_dir.string())) findings.push_back(std::move(f));
  fmt::print("{}", FormatFindings(findings));
  return AnyBlocker(findings) ? 1 : 0;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DoctorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "doctor", "Check this node for what FreeRide needs (GPUs and driver, MPS, /dev/shm, the "
                "socket and state directory, PyTorch, the daemon) and say what to fix; exit 1 when "
                "something blocks FreeRide.");
  cmd->add_option("--socket", args->socket_path, "The daemon's socket")->capture_default_str();
  cmd->add_option("--state-dir", args->state_dir, "The daemon's state directory")->capture_default_str();
  cmd->add_option("--shm-dir", args->shm_dir, "The shared-memory folder")->capture_default_str();
  cmd->add_option("--python", args->python,
                  "The Python to check for PyTorch (default: $FREERIDE_PYTHON, which the wheel's "
                  "`freeride` sets to its own Python; the source tree's .venv; else python3)");
  cmd->add_option("--cuda-library", args->cuda_library, "The CUDA driver library to open")
      ->capture_default_str();
  cmd->add_flag("--ready", args->ready,
                "Only what a readiness probe needs: /dev/shm, the state directory and a daemon "
                "answering on --socket (none blocks); no GPU, MPS or Python checks");
  cmd->callback([args, exit_code] { *exit_code = RunDoctor(*args); });
}

}  // namespace freeride::cli
