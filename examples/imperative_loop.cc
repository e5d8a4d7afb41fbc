// A minimal imperative side task: its own loop, stopped and continued by the
// daemon around bubbles.  Reports progress in "iterations".
//
//   freeride submit --kind imperative -- ./example_imperative_loop --seconds-of-work 2
#include <freeride/task.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

class Loop : public freeride::ImperativeTask {
 public:
  explicit Loop(double work_seconds) : work_seconds_(work_seconds) {}
  std::string unit() const override { return "iterations"; }

  int Run(freeride::ImperativeContext& context) override {
    // Counts only time it actually ran, measured in 1 ms slices, so stops
    // and continues do not count as work.
    const auto slice = std::chrono::milliseconds(1);
    double done = 0;
    while (done < work_seconds_) {
      auto start = std::chrono::steady_clock::now();
      volatile double sink = 0;
      while (std::chrono::steady_clock::now() - start < slice) sink = sink + 1.0;
      done += 0.001;
      context.ReportProgress(1);
    }
    std::printf("did %.3f s of work\n", done);
    return 0;
  }

 private:
  double work_seconds_;
};

int main(int argc, char** argv) {
  double seconds = 1.0;
  for (int i = 1; i < argc; i += 2) {
    const bool help = std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0;
    if (help || i + 1 == argc || std::strcmp(argv[i], "--seconds-of-work") != 0) {
      std::fprintf(help ? stdout : stderr, "usage: %s [--seconds-of-work S]\n", argv[0]);
      return help ? 0 : 2;
    }
    seconds = std::atof(argv[i + 1]);
  }
  Loop loop(seconds);
  return freeride::RunImperativeTask(loop);
}
