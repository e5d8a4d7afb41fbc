// A minimal iterative side task: counts to --total, spending --step-us of
// CPU time per step.  It checkpoints its counter, so a restarted daemon
// resumes it where it stopped.
//
//   freeride submit --name counter -- ./example_count_task --total 2000 --step-us 500
#include <freeride/task.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

class CountTask : public freeride::IterativeTask {
 public:
  CountTask(long total, long step_us) : total_(total), step_us_(step_us) {}

  std::string unit() const override { return "counts"; }

  freeride::StepResult Step() override {
    // Busy work standing in for a kernel launch: burns step_us of CPU.
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(step_us_);
    volatile double sink = 0;
    while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
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
  long count_ = 0;
};

int main(int argc, char** argv) {
  freeride::RunOptions options = freeride::ParseRunOptions(&argc, argv);
  long total = 1000, step_us = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--total") == 0) total = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--step-us") == 0) step_us = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--total N] [--step-us US] [--standalone --seconds T]\n",
                   argv[0]);
      return 2;
    }
  }
  if (total <= 0 || step_us < 0) {
    std::fprintf(stderr, "--total must be positive and --step-us non-negative\n");
    return 2;
  }
  CountTask task(total, step_us);
  return freeride::RunIterativeTask(task, options);
}
