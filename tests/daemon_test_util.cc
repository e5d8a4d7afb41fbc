#include "daemon_test_util.h"

#include <signal.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "client/client.h"

extern char** environ;

namespace freeride {

v1::TaskSpec MakeSpec(const std::string& name, std::vector<std::string> command) {
  v1::TaskSpec spec;
  spec.set_name(name);
  for (auto& c : command) spec.add_command(c);
  spec.set_working_dir(std::filesystem::current_path().string());
  spec.set_lane(-1);
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) (*spec.mutable_env())[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return spec;
}

DaemonOptions CpuOptions(const TempDir& dir, int lanes) {
  DaemonOptions options;
  options.socket_path = dir.path() + "/d.sock";
  options.state_dir = dir.path() + "/state";
  for (int i = 0; i < lanes; ++i)
    options.lanes.push_back({i, "cpu:" + std::to_string(i), 8ULL << 30, -1});
  return options;
}

bool WaitUntil(const std::function<bool()>& done, Nanos timeout) {
  for (Nanos deadline = MonotonicNow() + timeout; MonotonicNow() < deadline; usleep(20000))
    if (done()) return true;
  return done();
}

v1::TaskInfo WaitForTask(TaskManager* tasks, int64_t id,
                         const std::function<bool(const v1::TaskInfo&)>& done, Nanos timeout) {
  v1::TaskInfo info;
  Nanos deadline = MonotonicNow() + timeout;
  while (MonotonicNow() < deadline) {
    tasks->Get(id, "", &info);
    if (done(info)) return info;
    usleep(20000);
  }
  return info;
}

v1::TaskInfo WaitForState(TaskManager* tasks, int64_t id, const std::string& state,
                          Nanos timeout) {
  return WaitForTask(
      tasks, id, [&](const v1::TaskInfo& info) { return info.state() == state; }, timeout);
}

v1::TaskInfo WaitForRetry(TaskManager* tasks, int64_t id, int attempts, Nanos timeout) {
  return WaitForTask(
      tasks, id,
      [&](const v1::TaskInfo& info) {
        // While the next attempt launches, attempts counts it but the
        // message is still the last retry's, which names that attempt.
        return info.state() == "SUBMITTED" && info.attempts() == attempts &&
               info.message().find("retrying in") != std::string::npos &&
               info.message().find(fmt::format("(attempt {} of", attempts + 1)) !=
                   std::string::npos;
      },
      timeout);
}

pid_t StartDaemonProcess(const DaemonOptions& options, const std::vector<std::string>& extra_args,
                         rlim_t descriptor_limit, uint64_t file_size_limit) {
  std::vector<std::string> args = {FREERIDE_BIN, "daemon", "--socket", options.socket_path,
                                   "--state-dir", options.state_dir, "--cpu-lanes", "1",
                                   "--allow-root"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log = options.state_dir + ".log";
  pid_t pid = fork();
  if (pid == 0) {
    freopen(log.c_str(), "a", stdout);
    freopen(log.c_str(), "a", stderr);
    if (descriptor_limit > 0) {
      rlimit limit{descriptor_limit, descriptor_limit};
      setrlimit(RLIMIT_NOFILE, &limit);
    }
    if (file_size_limit > 0) {
      rlimit limit{file_size_limit, file_size_limit};
      setrlimit(RLIMIT_FSIZE, &limit);
      signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails (EFBIG) instead of killing
    }
    execv(FREERIDE_BIN, argv.data());
    _exit(127);
  }
  WaitUntil([&] {
    std::string error;
    auto stub = ConnectToDaemon(options.socket_path, &error);
    if (!stub) return false;
    grpc::ClientContext context;
    SetDeadline(&context, std::chrono::seconds(5));
    v1::StatsReply stats;
    return stub->GetStats(&context, v1::StatsRequest(), &stats).ok();
  });
  return pid;
}

grpc::StatusCode StatsCode(const DaemonEndpoint& endpoint) {
  std::string why;
  auto stub = ConnectToDaemon(endpoint, &why);
  EXPECT_NE(stub, nullptr) << why;
  if (!stub) return grpc::StatusCode::UNAVAILABLE;
  grpc::ClientContext context;
  PrepareContext(&context, endpoint, std::chrono::seconds(30));  // a hang guard: it answers in ms
  v1::StatsReply reply;
  return stub->GetStats(&context, v1::StatsRequest(), &reply).error_code();
}

v1::TaskInfo GetTask(v1::FreeRide::Stub& stub, int64_t id) {
  grpc::ClientContext context;
  SetDeadline(&context, std::chrono::seconds(5));
  v1::GetTaskRequest request;
  request.set_id(id);
  v1::TaskInfo info;
  stub.GetTask(&context, request, &info);
  return info;
}

}  // namespace freeride
