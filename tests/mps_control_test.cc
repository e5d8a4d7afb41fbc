#include "daemon/mps_control.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
  std::vector<std::string> limited = GpuTaskEnvironment(1, "/p", 0, 40);
  EXPECT_EQ(limited.back(), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40");
  EXPECT_EQ(GpuTaskEnvironment(1, "/p", 0, 100).size(), 3u) << "100% is no limit";
  EXPECT_EQ(GpuTaskEnvironment(1, "", 0, 40).size(), 1u) << "no thread share without MPS";
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

// A control daemon the user already runs is found by its endpoint in
// CUDA_MPS_PIPE_DIRECTORY: a named pipe (older CUDA) or a Unix socket (CUDA 13).
TEST(MpsControl, ARunningControlDaemonIsUsedWhetherItsEndpointIsAPipeOrASocket) {
  TempDir dir;
  std::string fifo_dir = dir.path() + "/fifo", socket_dir = dir.path() + "/sock";
  ASSERT_EQ(mkdir(fifo_dir.c_str(), 0700), 0);
  ASSERT_EQ(mkdir(socket_dir.c_str(), 0700), 0);
  ASSERT_EQ(mkfifo((fifo_dir + "/control").c_str(), 0600), 0);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::string path = socket_dir + "/control";
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  for (const std::string& pipe_dir : {fifo_dir, socket_dir}) {
    setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir.c_str(), 1);
    MpsSetup setup;
    std::string error;
    ASSERT_TRUE(SetUpMps(MpsMode::kOn, dir.path() + "/state", &setup, &error)) << error;
    EXPECT_EQ(setup.pipe_dir, pipe_dir);
    EXPECT_FALSE(setup.started_by_us);
  }
  // A plain file named control is not a control daemon.
  std::string plain_dir = dir.path() + "/plain";
  ASSERT_EQ(mkdir(plain_dir.c_str(), 0700), 0);
  FILE* f = std::fopen((plain_dir + "/control").c_str(), "w");
  std::fclose(f);
  setenv("CUDA_MPS_PIPE_DIRECTORY", plain_dir.c_str(), 1);
  MpsSetup setup;
  std::string error;
  if (SetUpMps(MpsMode::kAuto, dir.path() + "/state2", &setup, &error)) {
    EXPECT_NE(setup.pipe_dir, plain_dir);
  }
  close(fd);
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
}

}  // namespace
}  // namespace freeride
