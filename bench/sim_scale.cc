// How fast `freeride simulate` is at 8,192 GPUs, and how its memory grows:
// with the number of pipelines, not with iterations.  Each configuration
// runs in a child process so that its peak resident memory is its own.
//
//   bench/sim_scale [--threads N]
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim/cluster_sim.h"

namespace {

using freeride::sim::SimConfig;

struct Measured {
  double seconds = 0;
  long peak_rss_kib = 0;
  double harvest_ratio = 0;
};

SimConfig Config(int stages, int gpus, int iterations, int threads) {
  SimConfig c;
  c.stages = stages;
  c.data_parallel = gpus / stages;
  c.microbatches = stages;
  c.iterations = iterations;
  c.tasks = freeride::sim::DefaultTaskMix();
  c.jitter_cv = 0.02;
  c.threads = threads;
  return c;
}

// Runs the simulation in a child; its exit status carries nothing, a pipe
// carries the figures back.
Measured RunInChild(const SimConfig& config) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    auto start = std::chrono::steady_clock::now();
    freeride::sim::SimResult r = freeride::sim::Simulate(config);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double out[2] = {seconds, r.harvest_ratio};
    if (write(fds[1], out, sizeof(out)) != sizeof(out)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  double in[2] = {0, 0};
  if (read(fds[0], in, sizeof(in)) != sizeof(in)) std::abort();
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  return {in[0], usage.ru_maxrss, in[1]};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);

  fmt::print("freeride simulate at scale: 1F1B, 8 stages, 8 micro-batches, pagerank+sgd+image, "
             "jitter 2%\n\n");
  Measured target = RunInChild(Config(8, 8192, 100, threads));
  fmt::print("8192 GPUs x 100 iterations: {:.2f} s (target <= 10 s), peak RSS {:.1f} MiB, "
             "harvest {:.1f}%\n\n",
             target.seconds, target.peak_rss_kib / 1024.0, 100 * target.harvest_ratio);

  fmt::print("{:>8} {:>11} {:>10} {:>14}\n", "GPUs", "iterations", "seconds", "peak RSS MiB");
  struct Row { int gpus, iterations; };
  const std::vector<Row> rows = {{1024, 100}, {2048, 100}, {4096, 100}, {8192, 100},
                                 {2048, 25},  {2048, 50},  {2048, 200}, {2048, 400}};
  for (const Row& row : rows) {
    Measured m = RunInChild(Config(8, row.gpus, row.iterations, threads));
    fmt::print("{:>8} {:>11} {:>10.2f} {:>14.1f}\n", row.gpus, row.iterations, m.seconds,
               m.peak_rss_kib / 1024.0);
  }
  return 0;
}
