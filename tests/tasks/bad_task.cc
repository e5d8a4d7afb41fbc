// A side task that misbehaves on purpose, for the reliability tests:
//   --step-us US          a normal step's CPU time
//   --slow-every N --slow-us US   every Nth step takes US instead (a heavy
//                         tail the step estimate does not expect: overruns)
//   --hang-after N        step N never returns
//   --crash-after N       step N dereferences null (SIGSEGV)
//   --total N             steps before it finishes
//   --steal-us US --steal-until-file STOP --device-lock PATH   until the
//                         file STOP exists, each bubble it hands back leaves
//                         a thread holding the stage's device (an exclusive
//                         lock on PATH, as example_stage_replay --device-lock
//                         takes it) for US, as a GPU kernel outlives the step
//                         that launched it: no step record shows it, but the
//                         training's iterations do
#include <freeride/task.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <cstdlib>
#include <cstring>

namespace {

void Burn(long us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  volatile double sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
}

struct Settings {
  long step_us = 300, slow_every = 0, slow_us = 0, hang_after = 0, crash_after = 0;
  long total = 1000000;
  double units = 1;  // what each step reports: -5 or nan play a task whose figures are wrong
  std::string unit = "steps";  // --unit-hex: bytes that are not UTF-8 play a task whose unit is not text
  long steal_us = 0;
  const char* steal_until_file = nullptr;
  const char* device_lock = nullptr;
};

// Holds the device lock for `us` on its own thread for each request, after
// the bubble that asked has been handed back.
class DeviceThief {
 public:
  DeviceThief(long us, int lock_fd) : us_(us), lock_fd_(lock_fd), thread_([this] { Loop(); }) {
    thread_.detach();
  }
  void Steal() {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
    cv_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return pending_ > 0; });
        pending_ = 0;
      }
      flock(lock_fd_, LOCK_EX);
      usleep(static_cast<useconds_t>(us_));
      flock(lock_fd_, LOCK_UN);
    }
  }
  long us_;
  int lock_fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  long pending_ = 0;
  std::thread thread_;
};

class BadTask : public freeride::IterativeTask {
 public:
  explicit BadTask(Settings s)
      : s_(s),
        thief_(s.steal_us > 0 && s.device_lock && s.steal_until_file
                   ? new DeviceThief(s.steal_us, open(s.device_lock, O_RDWR | O_CREAT, 0600))
                   : nullptr) {}
  std::string unit() const override { return s_.unit; }
  void Pause() override {
    if (thief_ && access(s_.steal_until_file, F_OK) != 0) thief_->Steal();
  }
  freeride::StepResult Step() override {
    ++steps_;
    if (s_.hang_after > 0 && steps_ == s_.hang_after)
      for (;;) pause();
    if (s_.crash_after > 0 && steps_ == s_.crash_after) {
      volatile int* null = nullptr;
      *null = 1;
    }
    Burn(s_.slow_every > 0 && steps_ % s_.slow_every == 0 ? s_.slow_us : s_.step_us);
    return {.units = s_.units, .done = steps_ >= s_.total};
  }

 private:
  Settings s_;
  long steps_ = 0;
  DeviceThief* thief_;  // lives as long as the process: its thread may still burn
};

}  // namespace

int main(int argc, char** argv) {
  freeride::RunOptions options = freeride::ParseRunOptions(&argc, argv);
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    long v = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--units")) s.units = std::strtod(argv[i + 1], nullptr);
    else if (!std::strcmp(argv[i], "--unit-hex")) {
      s.unit.clear();
      for (const char* h = argv[i + 1]; h[0] && h[1]; h += 2) s.unit += static_cast<char>(std::stoi(std::string(h, 2), nullptr, 16));
    }
    else if (!std::strcmp(argv[i], "--step-us")) s.step_us = v;
    else if (!std::strcmp(argv[i], "--slow-every")) s.slow_every = v;
    else if (!std::strcmp(argv[i], "--slow-us")) s.slow_us = v;
    else if (!std::strcmp(argv[i], "--hang-after")) s.hang_after = v;
    else if (!std::strcmp(argv[i], "--crash-after")) s.crash_after = v;
    else if (!std::strcmp(argv[i], "--total")) s.total = v;
    else if (!std::strcmp(argv[i], "--steal-us")) s.steal_us = v;
    else if (!std::strcmp(argv[i], "--steal-until-file")) s.steal_until_file = argv[i + 1];
    else if (!std::strcmp(argv[i], "--device-lock")) s.device_lock = argv[i + 1];
    else {
      std::fprintf(stderr, "bad_task: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  BadTask task(s);
  return freeride::RunIterativeTask(task, options);
}
