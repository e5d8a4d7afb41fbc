// The daemon under load: 10,000 queued tasks and bubble marks at the rate of
// 1 million an hour (278 a second over 4 lanes), for --seconds.  Prints the
// daemon process's resident memory and CPU use every few seconds: memory
// should stay flat and CPU below 1% of a core.
//
//   bench/daemon_load [--seconds 60] [--tasks 10000] [--step-us 2000]
//                     [--step-kind sleep|spin] [--bin-dir DIR]
//
// --bin-dir takes freeride, example_count_task and example_stage_replay from
// DIR (a bundle's bin/ on a GPU node) instead of this build.
//
// Steps default to 2 ms, as the built-in GPU tasks' are on H200; every step
// is an event-log line, so shorter steps cost the daemon more.  By default a
// task sleeps through its step, as a GPU task waits for its kernel; with
// --step-kind spin it burns the CPU instead, and on a machine with fewer
// cores than lanes the tasks then slow each other and the daemon down.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"

namespace {

constexpr int kLanes = 4;

long ResidentKiB(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

double CpuSeconds(pid_t pid) {  // user + system, all threads
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {
    if (i == 14) utime = std::atol(field.c_str());
    if (i == 15) {
      stime = std::atol(field.c_str());
      break;
    }
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

pid_t Spawn(const std::vector<std::string>& args) {
  std::fflush(stdout);  // or the child's copy of the buffer is printed again
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    freopen("/dev/null", "w", stdout);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 60, tasks = 10000, step_us = 2000;
  std::string step_kind = "sleep";
  std::string freeride_bin = FREERIDE_BIN, count_bin = COUNT_TASK_BIN, replay_bin = STAGE_REPLAY_BIN;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bin-dir")) {
      std::string dir = std::filesystem::absolute(argv[i + 1]).string();  // tasks run in /tmp
      freeride_bin = dir + "/freeride";
      count_bin = dir + "/example_count_task";
      replay_bin = dir + "/example_stage_replay";
    }
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--tasks")) tasks = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--step-us")) step_us = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--step-kind")) step_kind = argv[i + 1];
  }
  char pattern[] = "/tmp/fr-load-XXXXXX";
  std::string dir = mkdtemp(pattern);
  std::string socket = dir + "/d.sock";
  pid_t daemon = Spawn({freeride_bin, "daemon", "--socket", socket, "--state-dir", dir + "/state",
                        "--cpu-lanes", std::to_string(kLanes), "--allow-root"});
  std::string error;
  std::unique_ptr<freeride::v1::FreeRide::Stub> stub;
  for (int i = 0; i < 200 && !stub; ++i) {
    usleep(50000);
    stub = freeride::ConnectToDaemon(socket, &error);
  }
  auto stop_daemon = [&] {
    kill(daemon, SIGTERM);
    waitpid(daemon, nullptr, 0);
  };
  if (!stub) {
    fmt::print(stderr, "daemon_load: {}\n", error);
    stop_daemon();
    return 1;
  }
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < tasks; ++i) {
    freeride::v1::SubmitRequest request;
    auto* spec = request.mutable_spec();
    spec->set_name(fmt::format("load-{}", i));
    spec->add_command(count_bin);
    spec->add_command("--total");
    spec->add_command("1000000000");
    spec->add_command("--step-us");
    spec->add_command(std::to_string(step_us));
    spec->add_command("--step-kind");
    spec->add_command(step_kind);
    spec->set_working_dir("/tmp");
    spec->set_lane(i % kLanes);
    (*spec->mutable_env())["PATH"] = "/usr/bin:/bin";
    grpc::ClientContext context;
    freeride::SetDeadline(&context, std::chrono::seconds(10));
    freeride::v1::SubmitReply reply;
    grpc::Status status = stub->Submit(&context, request, &reply);
    if (!status.ok()) {
      fmt::print(stderr, "daemon_load: submit {}: {}\n", i, status.error_message());
      stop_daemon();
      return 1;
    }
  }
  double submit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("{} cores; submitted {} tasks in {:.1f} s; daemon RSS {:.1f} MiB\n",
             std::thread::hardware_concurrency(), tasks, submit_s,
             ResidentKiB(daemon) / 1024.0);

  // 278 bubbles a second over 4 lanes: each stage 3.6 ms busy + 10.8 ms bubble.
  std::vector<pid_t> stages;
  for (int lane = 0; lane < kLanes; ++lane)
    stages.push_back(Spawn({replay_bin, "--socket", socket, "--lane", std::to_string(lane),
                            "--iterations", "100000000", "--busy-ms", "3.6", "--bubbles-ms", "10.8",
                            "--busy", "sleep"}));
  sleep(3);  // tasks launch and the first bubbles are served
  fmt::print("\n{:>8} {:>12} {:>14} {:>12} {:>16}\n", "seconds", "RSS MiB", "daemon CPU %",
             "bubbles", "bubbles/hour");
  auto stats = [&] {
    grpc::ClientContext context;
    freeride::SetDeadline(&context, std::chrono::seconds(10));
    freeride::v1::StatsReply reply;
    stub->GetStats(&context, freeride::v1::StatsRequest(), &reply);
    uint64_t bubbles = 0;
    for (const auto& lane : reply.lanes()) bubbles += lane.bubbles();
    return bubbles;
  };
  double cpu0 = CpuSeconds(daemon);
  uint64_t bubbles0 = stats();
  auto t0 = std::chrono::steady_clock::now();
  double last_cpu = cpu0;
  uint64_t last_bubbles = bubbles0;
  auto last = t0;
  for (int elapsed = 0; elapsed < seconds;) {
    int step = std::min(10, seconds - elapsed);
    sleep(step);
    elapsed += step;
    auto now = std::chrono::steady_clock::now();
    double wall = std::chrono::duration<double>(now - last).count();
    double cpu = CpuSeconds(daemon);
    uint64_t bubbles = stats();
    fmt::print("{:>8} {:>12.1f} {:>13.2f}% {:>12} {:>16.0f}\n", elapsed, ResidentKiB(daemon) / 1024.0,
               100 * (cpu - last_cpu) / wall, bubbles - bubbles0,
               (bubbles - last_bubbles) / wall * 3600);
    last_cpu = cpu;
    last_bubbles = bubbles;
    last = now;
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("\noverall: daemon CPU {:.2f}% of a core, {:.0f} bubbles/hour, {} tasks queued, "
             "{} us steps ({})\n",
             100 * (CpuSeconds(daemon) - cpu0) / wall, (stats() - bubbles0) / wall * 3600, tasks,
             step_us, step_kind);
  for (pid_t s : stages) kill(s, SIGKILL);
  for (pid_t s : stages) waitpid(s, nullptr, 0);
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
