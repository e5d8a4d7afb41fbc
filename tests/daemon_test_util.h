// Helpers of the tests that run a daemon: a scripted training stage, task
// specs, daemon options for CPU lanes, and a daemon in its own process.
#pragma once
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "client/client.h"
#include "daemon/daemon.h"
#include "daemon/daemon_options.h"
#include "daemon/task_manager.h"
#include "fake_env.h"
#include "freeride.grpc.pb.h"
#include "freeride/freeride.h"
#include "test_util.h"

namespace freeride {

// A stand-in training stage: busy gaps, then bubbles of fixed lengths, in
// slots 0, 1, ... (or the given slots), through the C ABI, until stopped.
class ScriptedStage {
 public:
  ScriptedStage(std::string socket, std::vector<Nanos> bubbles, Nanos busy,
                std::vector<uint32_t> slots = {})
      : socket_(std::move(socket)), bubbles_(std::move(bubbles)), busy_(busy),
        slots_(std::move(slots)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~ScriptedStage() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t bubbles() const { return emitted_; }

 private:
  static void SleepFor(Nanos ns) {
    timespec ts{static_cast<time_t>(ns / kSecond), static_cast<long>(ns % kSecond)};
    nanosleep(&ts, nullptr);
  }
  void Run() {
    freeride_stage* stage = freeride_stage_open(0, socket_.c_str());
    while (!stop_) {
      for (size_t slot = 0; slot < bubbles_.size() && !stop_; ++slot) {
        SleepFor(busy_);
        freeride_bubble_begin(stage, slots_.empty() ? static_cast<uint32_t>(slot) : slots_[slot],
                              0, 1ULL << 30);
        SleepFor(bubbles_[slot]);
        freeride_bubble_end(stage);
        ++emitted_;
      }
    }
    freeride_stage_close(stage);
  }
  std::string socket_;
  std::vector<Nanos> bubbles_;
  Nanos busy_;
  std::vector<uint32_t> slots_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> emitted_{0};
  std::thread thread_;
};

// How long a test waits for what takes milliseconds on an idle machine (a
// process to start or die, a file to appear, a state to change): only a hang
// takes longer, however loaded the machine.  Every wait ends as soon as the
// thing happens, so the bound costs nothing when it does.
inline constexpr Nanos kHangGuard = 60 * kSecond;
// How long a test waits for a side task to get work done: side tasks on CPU
// lanes run in SCHED_IDLE and get a core only when nothing else wants it.
inline constexpr Nanos kSideTaskGuard = 240 * kSecond;

// Polls `done` every 20 ms until it holds or `timeout` passes; whether it held.
bool WaitUntil(const std::function<bool()>& done, Nanos timeout = kHangGuard);

// A spec for `command` with the test's own environment and working directory.
v1::TaskSpec MakeSpec(const std::string& name, std::vector<std::string> command);

// Options for a daemon with `lanes` CPU lanes of 8 GiB each, in `dir`.
DaemonOptions CpuOptions(const TempDir& dir, int lanes = 1);

// Polls the task until `done` holds for its info or `timeout` passes; its
// last info.
v1::TaskInfo WaitForTask(TaskManager* tasks, int64_t id,
                         const std::function<bool(const v1::TaskInfo&)>& done, Nanos timeout);
// Polls the task until it is in `state` or `timeout` passes; its last info.
v1::TaskInfo WaitForState(TaskManager* tasks, int64_t id, const std::string& state,
                          Nanos timeout);
// Polls until the task's `attempts`th attempt has failed and it waits for
// its retry (SUBMITTED, not yet relaunched), or `timeout` passes; its last info.
v1::TaskInfo WaitForRetry(TaskManager* tasks, int64_t id, int attempts, Nanos timeout);

// Starts `freeride daemon` with one CPU lane on the options' socket and state
// directory, plus `extra_args`, logging to <state_dir>.log, and waits until it
// answers.  With `descriptor_limit`, its RLIMIT_NOFILE (soft and hard) is that;
// with `file_size_limit`, its files can grow no larger (a disk that fills up,
// where no small file system can be mounted).
pid_t StartDaemonProcess(const DaemonOptions& options, const std::vector<std::string>& extra_args,
                         rlim_t descriptor_limit = 0, uint64_t file_size_limit = 0);

// A test with a private directory, CPU-lane options it may adjust before
// StartDaemon(), and an in-process daemon: on the real Env, or on fake_env_
// (StartDaemon(&fake_env_)), whose time moves only when the test advances it.
class DaemonTest : public ::testing::Test {
 protected:
  void StartDaemon(Env* env = Env::Default()) {
    daemon_ = std::make_unique<Daemon>(options_, env);
    std::string error;
    ASSERT_TRUE(daemon_->Start(&error)) << error;
  }
  TaskManager* tasks() { return daemon_->tasks(); }

  TempDir dir_;
  DaemonOptions options_ = CpuOptions(dir_);
  FakeEnv fake_env_;  // outlives daemon_
  std::unique_ptr<Daemon> daemon_;
};

// The status of a GetStats call to the daemon at `endpoint`.
grpc::StatusCode StatsCode(const DaemonEndpoint& endpoint);

// GetTask by id over `stub` (an empty info when it fails).
v1::TaskInfo GetTask(v1::FreeRide::Stub& stub, int64_t id);

}  // namespace freeride
