#include "daemon/mps_control.h"

#include "daemon/gpu_query.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace freeride {
namespace {

// The control daemon's endpoint: a named pipe in older CUDA releases, a Unix
// socket since (CUDA 13 on the H200 nodes makes a socket).
bool HaveControlPipe(const std::string& dir) {
  struct stat st;
  return !dir.empty() && stat((dir + "/control").c_str(), &st) == 0 &&
         (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

// Runs `command` through the shell; its exit status (-1 when it could not run).
int Shell(const std::string& command) {
  int status = std::system(command.c_str());
  return status == -1 ? -1 : WEXITSTATUS(status);
}

}  // namespace

bool ParseMpsMode(const std::string& text, MpsMode* mode) {
  if (text == "off") *mode = MpsMode::kOff;
  else if (text == "auto") *mode = MpsMode::kAuto;
  else if (text == "on") *mode = MpsMode::kOn;
  else return false;
  return true;
}

bool SetUpMps(MpsMode mode, const std::string& state_dir, MpsSetup* setup, std::string* error) {
  *setup = MpsSetup{};
  if (mode == MpsMode::kOff) {
    setup->note = "MPS off (--mps off)";
    return true;
  }
  auto give_up = [&](const std::string& why) {
    if (mode == MpsMode::kOn) {
      *error = "--mps on: " + why;
      return false;
    }
    setup->note = "MPS off: " + why;
    return true;
  };
  // A control daemon the user runs already (its pipe directory from the
  // environment, else the default one).
  const char* env_dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  std::string running = env_dir && *env_dir ? env_dir : "/tmp/nvidia-mps";
  if (HaveControlPipe(running)) {
    setup->pipe_dir = running;
    setup->note = "MPS: using the control daemon at " + running;
    return true;
  }
  if (!CommandExists("nvidia-cuda-mps-control"))
    return give_up("nvidia-cuda-mps-control is not installed");
  std::string dir = state_dir + "/mps";
  std::error_code ec;
  std::filesystem::create_directories(dir + "/pipe", ec);
  std::filesystem::create_directories(dir + "/log", ec);
  if (ec) return give_up("cannot create " + dir + ": " + ec.message());
  std::string start = fmt::format(
      "CUDA_MPS_PIPE_DIRECTORY='{0}/pipe' CUDA_MPS_LOG_DIRECTORY='{0}/log' "
      "nvidia-cuda-mps-control -d >/dev/null 2>&1",
      dir);
  // Its exit status is not reliable, and -d returns before the daemonised
  // control process has made its pipe: the pipe is what counts.
  Shell(start);
  for (int i = 0; i < 50 && !HaveControlPipe(dir + "/pipe"); ++i) usleep(100000);
  if (!HaveControlPipe(dir + "/pipe"))
    return give_up("nvidia-cuda-mps-control -d failed (it needs the GPUs in a compute mode that "
                   "allows MPS, and may need root); see " + dir + "/log");
  setup->pipe_dir = dir + "/pipe";
  setup->started_by_us = true;
  setup->note = fmt::format(
      "MPS: started a control daemon; run trainers with CUDA_MPS_PIPE_DIRECTORY={} so that they "
      "join it at priority 0",
      setup->pipe_dir);
  return true;
}

void TearDownMps(const MpsSetup& setup) {
  if (!setup.started_by_us) return;
  Shell(fmt::format("echo quit | CUDA_MPS_PIPE_DIRECTORY='{}' nvidia-cuda-mps-control >/dev/null 2>&1",
                    setup.pipe_dir));
}

std::vector<std::string> GpuTaskEnvironment(int gpu, const std::string& pipe_dir,
                                            uint64_t memory_bytes, int thread_percentage) {
  std::vector<std::string> env = {fmt::format("CUDA_VISIBLE_DEVICES={}", gpu)};
  if (pipe_dir.empty()) return env;
  env.push_back("CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir);
  env.push_back("CUDA_MPS_CLIENT_PRIORITY=1");
  // The task sees its GPU as device 0.
  if (memory_bytes > 0)
    env.push_back(fmt::format("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0={}M",
                              std::max<uint64_t>(1, memory_bytes >> 20)));
  if (thread_percentage > 0 && thread_percentage < 100)
    env.push_back(fmt::format("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={}", thread_percentage));
  return env;
}

}  // namespace freeride
