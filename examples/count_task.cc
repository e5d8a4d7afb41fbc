// A minimal iterative side task: counts to --total, spending --step-us of
// CPU time per step (or, with --step-kind sleep, sleeping through it as a GPU
// task waits for its kernel).  It checkpoints its counter, so a restarted
// daemon resumes it where it stopped.
//
//   freeride submit --name counter -- ./example_count_task --total 2000 --step-us 500
#include <freeride/task.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

class CountTask : public freeride::IterativeTask {
 public:
  CountTask(long total, long step_us, bool sleep)
      : total_(total), step_us_(step_us), sleep_(sleep) {}

  std::string unit() const override { return "counts"; }

  freeride::StepResult Step() override {
    // Busy work standing in for a kernel launch: burns step_us of CPU.
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(step_us_);
    if (sleep_) {
      std::this_thread::sleep_until(until);
    } else {
      volatile double sink = 0;
      while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
    }
    ++count_;
    return {.units = 1, .done = count_ >= total_};
  }

  bool Save(const std::string& path) override {
    std::ofstream out(path);
    out << count_ << "\n";
    return static_cast<bool>(out);
  }

  bool Restore(const std::string& path) override {
    std::ifstream in(path);
    return static_cast<bool>(in >> count_);
  }

  void Finish() override { std::printf("counted to %ld\n", count_); }

 private:
  long total_;
  long step_us_;
  bool sleep_;
  long count_ = 0;
};

int main(int argc, char** argv) {
  freeride::RunOptions options = freeride::ParseRunOptions(&argc, argv);
  long total = 1000, step_us = 500;
  const char* step_kind = "spin";
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc || std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      const bool help = std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0;
      std::fprintf(help ? stdout : stderr,
                   "usage: %s [--total N] [--step-us US] [--step-kind spin|sleep] [--standalone --seconds T]\n",
                   argv[0]);
      return help ? 0 : 2;
    }
    if (std::strcmp(argv[i], "--total") == 0) total = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--step-us") == 0) step_us = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--step-kind") == 0) step_kind = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--total N] [--step-us US] [--step-kind spin|sleep] "
                   "[--standalone --seconds T]\n",
                   argv[0]);
      return 2;
    }
  }
  if (total <= 0 || step_us < 0) {
    std::fprintf(stderr, "--total must be positive and --step-us non-negative\n");
    return 2;
  }
  if (std::strcmp(step_kind, "spin") != 0 && std::strcmp(step_kind, "sleep") != 0) {
    std::fprintf(stderr, "--step-kind must be spin or sleep, not '%s'\n", step_kind);
    return 2;
  }
  CountTask task(total, step_us, std::strcmp(step_kind, "sleep") == 0);
  return freeride::RunIterativeTask(task, options);
}
