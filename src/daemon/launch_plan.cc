#include "daemon/launch_plan.h"

#include <fmt/format.h>

#include <cstdlib>

#include "daemon/mps_control.h"
#include "daemon/task_logs.h"
#include "sdk/task_channel.h"

namespace freeride {

bool IsChannelVariable(const std::string& key) {
  // kEnvStandaloneSeconds is task-profile's: a task the daemon launches
  // never runs alone, whatever the submitting shell had set.
  for (const char* name : {kEnvTaskSegment, kEnvLaneSegment, kEnvCheckpointDir, kEnvTaskId,
                           kEnvStepHint, kEnvMemory, kEnvStandaloneSeconds, "FREERIDE_LANE",
                           "FREERIDE_SOCKET", "FREERIDE_GATE_PAGE"})
    if (key == name) return true;
  return false;
}

LaunchRequest PlanLaunch(const LaunchPlanInput& in) {
  const v1::TaskSpec& spec = *in.spec;
  LaunchRequest request;
  request.task_id = in.task_id;
  request.executable = in.executable;
  request.argv.assign(spec.command().begin(), spec.command().end());
  request.working_dir = spec.working_dir();
  request.stdout_path = TaskStdoutLog(in.task_dir);
  request.stderr_path = TaskStderrLog(in.task_dir);
  request.stop_after_exec = true;
  int gpu = -1;
  if (in.lane) {
    request.cpu_core = in.lane->cpu_core;
    if (in.lane->device.rfind("gpu:", 0) == 0) gpu = std::atoi(in.lane->device.c_str() + 4);
    else request.idle_cpu_priority = in.cpu_task_priority == CpuTaskPriority::kIdle;
  }
  // GPU lanes: the task sees only its GPU, and under MPS runs below the
  // trainer's priority within its memory grant.  A process sees the first of
  // two entries with one key, so the inherited or submitted copies of these
  // keys (a scheduler's CUDA_VISIBLE_DEVICES=0,1,2,3) are dropped, not
  // merely followed.
  std::vector<std::string> gpu_env;
  if (gpu >= 0) gpu_env = GpuTaskEnvironment(gpu, in.mps_pipe_dir, spec.memory_bytes(),
                                           in.mps_thread_percentage);
  const bool gated = !in.gate_library.empty() && !in.gate_page_path.empty();
  std::string preload = gated ? in.gate_library : "";
  auto set_by_lane = [&](const std::string& key) {
    if (IsChannelVariable(key)) return true;
    if (gated && key == "LD_PRELOAD") return true;
    for (const std::string& entry : gpu_env)
      if (entry.compare(0, entry.find('='), key) == 0) return true;
    return false;
  };
  // The gate's interposer goes first, ahead of whatever the task preloads
  // itself, so that it sees the driver's look-ups before anyone else.
  auto keep_preload = [&](const std::string& key, const std::string& value) {
    if (gated && key == "LD_PRELOAD" && !value.empty()) preload += ":" + value;
  };
  if (spec.env().empty()) {
    for (const std::string& entry : in.daemon_environment) {
      std::string key = entry.substr(0, entry.find('='));
      if (!set_by_lane(key)) request.env.push_back(entry);
      else if (key.size() < entry.size()) keep_preload(key, entry.substr(key.size() + 1));
    }
  } else {
    for (const auto& [key, value] : spec.env()) {
      if (!set_by_lane(key)) request.env.push_back(key + "=" + value);
      else keep_preload(key, value);
    }
  }
  const int lane_index = in.lane ? in.lane->index : -1;
  request.env.push_back(fmt::format("{}={}", kEnvTaskSegment, in.task_segment_path));
  request.env.push_back(fmt::format("{}={}", kEnvLaneSegment, in.lane_segment_path));
  request.env.push_back(fmt::format("{}={}", kEnvCheckpointDir, in.checkpoint_dir));
  request.env.push_back(fmt::format("{}={}", kEnvTaskId, in.task_id));
  request.env.push_back(fmt::format("{}={}", kEnvMemory, spec.memory_bytes()));
  request.env.push_back(fmt::format("FREERIDE_LANE={}", lane_index));
  for (std::string& entry : gpu_env) request.env.push_back(std::move(entry));
  request.env.push_back(fmt::format("FREERIDE_SOCKET={}", in.socket_path));
  if (gated) {
    request.env.push_back("LD_PRELOAD=" + preload);
    request.env.push_back("FREERIDE_GATE_PAGE=" + in.gate_page_path);
  }
  if (spec.step_time_hint_ns() > 0)
    request.env.push_back(fmt::format("{}={}", kEnvStepHint, spec.step_time_hint_ns()));
  return request;
}

}  // namespace freeride
