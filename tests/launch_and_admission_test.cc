// The task manager's pure parts: where a task is placed, which queued tasks
// a lane launches, and the environment a task is started with.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/launch_plan.h"
#include "policy/task_admission.h"

namespace freeride {
namespace {

TEST(TaskAdmission, ANewTaskJoinsTheLeastLoadedLaneItsMemoryFits) {
  std::vector<LaneLoad> lanes = {{0, 0, 3}, {1, 8ull << 30, 1}, {2, 0, 1}};
  EXPECT_EQ(ChooseLane(lanes, 0), 1) << "fewest live tasks, the first of equals";
  EXPECT_EQ(ChooseLane(lanes, 16ull << 30), 2) << "lane 1 cannot hold 16 GiB";
  lanes[2].capacity_bytes = 4ull << 30;
  EXPECT_EQ(ChooseLane(lanes, 16ull << 30), 0) << "only the lane of unknown capacity";
  lanes[0].capacity_bytes = 1;
  EXPECT_EQ(ChooseLane(lanes, 16ull << 30), -1);
  EXPECT_EQ(ChooseLane({}, 0), -1);
}

TEST(TaskAdmission, ALaneLaunchesByPriorityThenArrivalWhileRoomAndMemoryLast) {
  std::vector<QueuedTask> queued = {
      {1, 0, 10, 1}, {2, 5, 11, 1}, {3, 0, 9, 1}, {4, 5, 12, 1}, {5, 0, 13, 1}};
  EXPECT_EQ(TasksToLaunch({0, 1, 0, 4}, queued), (std::vector<int64_t>{2, 4, 3}))
      << "three places left of four";
  EXPECT_TRUE(TasksToLaunch({0, 4, 0, 4}, queued).empty()) << "a full lane";
  // Memory: 10 bytes, 4 held; the 7-byte task is passed over for a 2-byte one.
  std::vector<QueuedTask> sized = {{1, 9, 1, 7}, {2, 0, 2, 2}, {3, 0, 3, 5}};
  EXPECT_EQ(TasksToLaunch({10, 1, 4, 8}, sized), (std::vector<int64_t>{2}));
  EXPECT_EQ(TasksToLaunch({0, 1, 4, 8}, sized), (std::vector<int64_t>{1, 2, 3}))
      << "capacity unknown: no memory limit";
}

bool Has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

int CountKey(const std::vector<std::string>& env, const std::string& key) {
  return static_cast<int>(std::count_if(env.begin(), env.end(), [&](const std::string& e) {
    return e.rfind(key + "=", 0) == 0;
  }));
}

LaunchPlanInput Input(const v1::TaskSpec& spec, const LaneConfig& lane) {
  LaunchPlanInput in;
  in.task_id = 7;
  in.executable = "/usr/bin/python3";
  in.spec = &spec;
  in.lane = &lane;
  in.task_dir = "/state/tasks/7";
  in.checkpoint_dir = "/state/tasks/7/checkpoint";
  in.task_segment_path = "/dev/shm/task7";
  in.lane_segment_path = "/dev/shm/lane1";
  in.socket_path = "/run/freeride.sock";
  in.daemon_environment = {"PATH=/usr/bin", "FREERIDE_TASK_SEGMENT=/dev/shm/stale",
                           "FREERIDE_LANE=9", "HOME=/root"};
  return in;
}

TEST(LaunchPlan, ACpuTaskInheritsTheDaemonsEnvironmentWithoutStaleChannelVariables) {
  v1::TaskSpec spec;
  spec.add_command("python3");
  spec.add_command("train.py");
  spec.set_working_dir("/work");
  spec.set_memory_bytes(1024);
  spec.set_step_time_hint_ns(3000000);
  LaneConfig lane{1, "cpu:0", 0, 3};
  LaunchRequest r = PlanLaunch(Input(spec, lane));
  EXPECT_EQ(r.task_id, 7);
  EXPECT_EQ(r.argv, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(r.working_dir, "/work");
  EXPECT_EQ(r.stdout_path, "/state/tasks/7/stdout.log");
  EXPECT_EQ(r.stderr_path, "/state/tasks/7/stderr.log");
  EXPECT_TRUE(r.stop_after_exec);
  EXPECT_EQ(r.cpu_core, 3);
  EXPECT_TRUE(r.idle_cpu_priority) << "a CPU lane's task never takes a core from a stage";
  EXPECT_TRUE(Has(r.env, "PATH=/usr/bin"));
  EXPECT_TRUE(Has(r.env, "HOME=/root"));
  EXPECT_FALSE(Has(r.env, "FREERIDE_TASK_SEGMENT=/dev/shm/stale"));
  EXPECT_EQ(CountKey(r.env, "FREERIDE_TASK_SEGMENT"), 1);
  EXPECT_TRUE(Has(r.env, "FREERIDE_TASK_SEGMENT=/dev/shm/task7"));
  EXPECT_TRUE(Has(r.env, "FREERIDE_LANE_SEGMENT=/dev/shm/lane1"));
  EXPECT_EQ(CountKey(r.env, "FREERIDE_LANE"), 1);
  EXPECT_TRUE(Has(r.env, "FREERIDE_LANE=1"));
  EXPECT_TRUE(Has(r.env, "FREERIDE_SOCKET=/run/freeride.sock"));
  EXPECT_EQ(CountKey(r.env, "FREERIDE_STEP_HINT_NS"), 1);
  EXPECT_EQ(CountKey(r.env, "CUDA_VISIBLE_DEVICES"), 0);
}

TEST(LaunchPlan, WithNormalCpuTaskPriorityACpuLanesTaskIsNotIdleAndAGpuLanesNeverIs) {
  v1::TaskSpec spec;
  spec.add_command("train");
  LaneConfig cpu{0, "cpu:0", 0, 1};
  LaunchPlanInput in = Input(spec, cpu);
  in.cpu_task_priority = CpuTaskPriority::kNormal;
  LaunchRequest r = PlanLaunch(in);
  EXPECT_FALSE(r.idle_cpu_priority) << "--cpu-task-priority normal";
  EXPECT_EQ(r.cpu_core, 1) << "still pinned to its lane's core";
  EXPECT_TRUE(r.stop_after_exec) << "still started stopped, for the bubbles";
  LaneConfig gpu{1, "gpu:1", 0, -1};
  in = Input(spec, gpu);
  in.cpu_task_priority = CpuTaskPriority::kIdle;
  EXPECT_FALSE(PlanLaunch(in).idle_cpu_priority) << "the CPU priority is a CPU lane's";
}

TEST(LaunchPlan, ASubmittedEnvironmentReplacesTheDaemonsAndAGpuLaneSetsItsDeviceLast) {
  v1::TaskSpec spec;
  spec.add_command("infer");
  (*spec.mutable_env())["CUDA_VISIBLE_DEVICES"] = "5";
  (*spec.mutable_env())["FREERIDE_TASK_ID"] = "99";
  // task-profile's, from the submitting shell: the task would run alone,
  // outside the bubbles, with the daemon held off by its announcement.
  (*spec.mutable_env())["FREERIDE_STANDALONE_SECONDS"] = "3";
  (*spec.mutable_env())["MY_FLAG"] = "1";
  LaneConfig lane{1, "gpu:1", 0, -1};
  LaunchRequest r = PlanLaunch(Input(spec, lane));
  EXPECT_FALSE(Has(r.env, "PATH=/usr/bin")) << "the submitter's environment only";
  EXPECT_TRUE(Has(r.env, "MY_FLAG=1"));
  EXPECT_FALSE(Has(r.env, "FREERIDE_TASK_ID=99"));
  EXPECT_TRUE(Has(r.env, "FREERIDE_TASK_ID=7"));
  EXPECT_EQ(CountKey(r.env, "FREERIDE_STANDALONE_SECONDS"), 0);
  EXPECT_FALSE(r.idle_cpu_priority);
  EXPECT_EQ(r.cpu_core, -1);
  // A process sees the first of two entries, so the submitted device must
  // be gone, not merely followed by the lane's.
  EXPECT_EQ(CountKey(r.env, "CUDA_VISIBLE_DEVICES"), 1);
  EXPECT_TRUE(Has(r.env, "CUDA_VISIBLE_DEVICES=1"));
  EXPECT_EQ(CountKey(r.env, "FREERIDE_STEP_HINT_NS"), 0) << "no hint given";
}

TEST(LaunchPlan, UnderMpsTheLanesDeviceAndMpsSettingsReplaceInheritedOnes) {
  v1::TaskSpec spec;
  spec.add_command("infer");
  spec.set_memory_bytes(2ull << 30);
  LaneConfig lane{2, "gpu:2", 0, -1};
  LaunchPlanInput in = Input(spec, lane);
  in.mps_pipe_dir = "/state/mps";
  // A daemon started by a scheduler that gave it all four GPUs, inside
  // someone else's MPS setup.
  in.daemon_environment.push_back("CUDA_VISIBLE_DEVICES=0,1,2,3");
  in.daemon_environment.push_back("CUDA_MPS_PIPE_DIRECTORY=/tmp/other");
  in.daemon_environment.push_back("CUDA_MPS_CLIENT_PRIORITY=0");
  LaunchRequest r = PlanLaunch(in);
  for (const char* key : {"CUDA_VISIBLE_DEVICES", "CUDA_MPS_PIPE_DIRECTORY",
                          "CUDA_MPS_CLIENT_PRIORITY", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"})
    EXPECT_EQ(CountKey(r.env, key), 1) << key;
  EXPECT_TRUE(Has(r.env, "CUDA_VISIBLE_DEVICES=2"));
  EXPECT_TRUE(Has(r.env, "CUDA_MPS_PIPE_DIRECTORY=/state/mps"));
  EXPECT_TRUE(Has(r.env, "CUDA_MPS_CLIENT_PRIORITY=1"));
  EXPECT_TRUE(Has(r.env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M"));
  EXPECT_TRUE(Has(r.env, "PATH=/usr/bin")) << "the rest is inherited";
}

}  // namespace
}  // namespace freeride
