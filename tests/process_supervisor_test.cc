// ProcessSupervisor's launch errors name what failed to start.
#include "daemon/process_supervisor.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace freeride {
namespace {

// A working directory removed between the submission (which checks it) and
// a (re)launch: the error said "changing to its working directory failed:
// No such file or directory" without naming it.
TEST(ProcessSupervisor, ALaunchThatCannotStartNamesTheDirectoryOrProgram) {
  TempDir dir;
  ProcessSupervisor supervisor([](const ProcessExit&) {});
  LaunchRequest request;
  request.task_id = 1;
  request.executable = "/bin/true";
  request.argv = {"true"};
  request.working_dir = dir.path() + "/gone";
  request.stdout_path = dir.path() + "/stdout.log";
  request.stderr_path = dir.path() + "/stderr.log";
  LaunchResult result = supervisor.Launch(request);
  EXPECT_EQ(result.pid, -1);
  EXPECT_NE(result.error.find("changing to its working directory " + dir.path() + "/gone failed: No such file"),
            std::string::npos)
      << result.error;
  request.working_dir = dir.path();
  request.executable = dir.path() + "/stdout.log";  // a file that cannot be run
  result = supervisor.Launch(request);
  EXPECT_EQ(result.pid, -1);
  EXPECT_NE(result.error.find("executing the command " + dir.path() + "/stdout.log failed: Permission denied"),
            std::string::npos)
      << result.error;
  supervisor.Shutdown();
}

}  // namespace
}  // namespace freeride
