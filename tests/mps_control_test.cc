#include "daemon/mps_control.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace freeride {
namespace {

TEST(MpsControl, GpuTasksSeeTheirGpuAndJoinMpsBelowTheTrainer) {
  EXPECT_EQ(GpuTaskEnvironment(3, "", 1ULL << 30),
            std::vector<std::string>{"CUDA_VISIBLE_DEVICES=3"});
  std::vector<std::string> env = GpuTaskEnvironment(2, "/s/mps/pipe", 3ULL << 30);
  EXPECT_EQ(env, (std::vector<std::string>{"CUDA_VISIBLE_DEVICES=2",
                                           "CUDA_MPS_PIPE_DIRECTORY=/s/mps/pipe",
                                           "CUDA_MPS_CLIENT_PRIORITY=1",
                                           "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=3072M"}));
  EXPECT_EQ(GpuTaskEnvironment(0, "/p", 0).size(), 3u) << "no limit without a memory grant";
}

TEST(MpsControl, ModesParseAndOffOrAutoNeverFailWithoutMps) {
  MpsMode mode;
  EXPECT_TRUE(ParseMpsMode("auto", &mode));
  EXPECT_EQ(mode, MpsMode::kAuto);
  EXPECT_FALSE(ParseMpsMode("yes", &mode));
  TempDir dir;
  MpsSetup setup;
  std::string error;
  ASSERT_TRUE(SetUpMps(MpsMode::kOff, dir.path(), &setup, &error));
  EXPECT_TRUE(setup.pipe_dir.empty());
  // This machine has no MPS: auto runs without it and says why; on refuses.
  setenv("CUDA_MPS_PIPE_DIRECTORY", (dir.path() + "/none").c_str(), 1);
  if (std::system("command -v nvidia-cuda-mps-control >/dev/null 2>&1") != 0) {
    ASSERT_TRUE(SetUpMps(MpsMode::kAuto, dir.path(), &setup, &error));
    EXPECT_TRUE(setup.pipe_dir.empty());
    EXPECT_NE(setup.note.find("not installed"), std::string::npos) << setup.note;
    EXPECT_FALSE(SetUpMps(MpsMode::kOn, dir.path(), &setup, &error));
    EXPECT_NE(error.find("--mps on"), std::string::npos);
  }
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
}

}  // namespace
}  // namespace freeride
