// A side task that misbehaves on purpose, for the reliability tests:
//   --step-us US          a normal step's CPU time
//   --slow-every N --slow-us US   every Nth step takes US instead (a heavy
//                         tail the step estimate does not expect: overruns)
//   --hang-after N        step N never returns
//   --crash-after N       step N dereferences null (SIGSEGV)
//   --total N             steps before it finishes
//   --steal-us US --steal-for-ms MS   for its first MS ms, each bubble it
//                         hands back leaves US of CPU work running on a
//                         thread (as a GPU kernel outlives the step that
//                         launched it): the stage's core is stolen, which no
//                         step record shows, but the training's iterations do
#include <freeride/task.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
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
  long steal_us = 0, steal_for_ms = 0;
};

// Burns `us` of its own thread's CPU time for each request, after the step
// that asked has returned: CPU time, not wall time, so that the theft is the
// same however loaded the machine is.
class CoreThief {
 public:
  explicit CoreThief(long us) : us_(us), thread_([this] { Loop(); }) { thread_.detach(); }
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
      BurnCpuTime(us_);
    }
  }
  static void BurnCpuTime(long us) {
    auto cpu_ns = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return ts.tv_sec * 1000000000L + ts.tv_nsec;
    };
    const long until = cpu_ns() + us * 1000L;
    volatile double sink = 0;
    while (cpu_ns() < until)
      for (int i = 0; i < 1000; ++i) sink = sink + 1.0;
  }
  long us_;
  std::mutex mu_;
  std::condition_variable cv_;
  long pending_ = 0;
  std::thread thread_;
};

class BadTask : public freeride::IterativeTask {
 public:
  explicit BadTask(Settings s)
      : s_(s), started_(std::chrono::steady_clock::now()),
        thief_(s.steal_us > 0 ? new CoreThief(s.steal_us) : nullptr) {}
  std::string unit() const override { return "steps"; }
  void Pause() override {
    if (thief_ && std::chrono::steady_clock::now() - started_ <
                      std::chrono::milliseconds(s_.steal_for_ms))
      thief_->Steal();
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
    return {.units = 1, .done = steps_ >= s_.total};
  }

 private:
  Settings s_;
  long steps_ = 0;
  std::chrono::steady_clock::time_point started_;
  CoreThief* thief_;  // lives as long as the process: its thread may still burn
};

}  // namespace

int main(int argc, char** argv) {
  freeride::RunOptions options = freeride::ParseRunOptions(&argc, argv);
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    long v = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--step-us")) s.step_us = v;
    else if (!std::strcmp(argv[i], "--slow-every")) s.slow_every = v;
    else if (!std::strcmp(argv[i], "--slow-us")) s.slow_us = v;
    else if (!std::strcmp(argv[i], "--hang-after")) s.hang_after = v;
    else if (!std::strcmp(argv[i], "--crash-after")) s.crash_after = v;
    else if (!std::strcmp(argv[i], "--total")) s.total = v;
    else if (!std::strcmp(argv[i], "--steal-us")) s.steal_us = v;
    else if (!std::strcmp(argv[i], "--steal-for-ms")) s.steal_for_ms = v;
    else {
      std::fprintf(stderr, "bad_task: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  BadTask task(s);
  return freeride::RunIterativeTask(task, options);
}
