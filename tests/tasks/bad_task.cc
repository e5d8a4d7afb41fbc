// A side task that misbehaves on purpose, for the reliability tests:
//   --step-us US          a normal step's CPU time
//   --slow-every N --slow-us US   every Nth step takes US instead (a heavy
//                         tail the step estimate does not expect: overruns)
//   --hang-after N        step N never returns
//   --crash-after N       step N dereferences null (SIGSEGV)
//   --total N             steps before it finishes
#include <freeride/task.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
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
};

class BadTask : public freeride::IterativeTask {
 public:
  explicit BadTask(Settings s) : s_(s) {}
  std::string unit() const override { return "steps"; }
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
    else {
      std::fprintf(stderr, "bad_task: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  BadTask task(s);
  return freeride::RunIterativeTask(task, options);
}
