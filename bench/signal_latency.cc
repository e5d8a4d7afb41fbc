// bench/signal_latency: time from freeride_bubble_begin() to the start of the
// side task's step, over many bubbles, next to the prototype's path (an RPC
// to a scheduler that polls every 10 ms), measured in the same run.
//
//   build/bench/signal_latency [--bubbles 10000] [--polled-bubbles 500]
//
// FreeRide path: a real daemon (in this process) with one CPU lane, a real
// side-task process (example_count_task, 50 us steps) and bubble marks
// through the C ABI.  Latencies come from the daemon's event log: the stage's
// begin mark vs the first step's start, both on CLOCK_MONOTONIC.
#include <grpcpp/grpcpp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "daemon/daemon.h"
#include "freeride/freeride.h"
#include "prototype_scheduler.grpc.pb.h"

extern char** environ;

namespace {

using freeride::kMicrosecond;
using freeride::kMillisecond;
using freeride::MonotonicNow;
using freeride::Nanos;

void SleepFor(Nanos ns) {
  timespec ts{static_cast<time_t>(ns / freeride::kSecond), static_cast<long>(ns % freeride::kSecond)};
  nanosleep(&ts, nullptr);
}

struct Summary {
  size_t count = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;
};

Summary Summarize(std::vector<Nanos> v) {
  Summary s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
    return v[i] / 1000.0;
  };
  s.p50_us = at(0.50);
  s.p99_us = at(0.99);
  s.max_us = v.back() / 1000.0;
  return s;
}

std::vector<Nanos> MeasureFreeRide(int bubbles, const std::string& dir,
                                   std::vector<Nanos>* dispatch_latencies) {
  freeride::DaemonOptions options;
  options.socket_path = dir + "/d.sock";
  options.state_dir = dir + "/state";
  options.lanes.push_back({0, "cpu:0", 0, -1});
  freeride::Daemon daemon(options);
  std::string error;
  if (!daemon.Start(&error)) {
    std::fprintf(stderr, "daemon: %s\n", error.c_str());
    std::exit(1);
  }
  freeride::v1::TaskSpec spec;
  spec.set_name("latency-probe");
  spec.add_command(COUNT_TASK_BIN);
  spec.add_command("--total");
  spec.add_command("1000000000");
  spec.add_command("--step-us");
  spec.add_command("50");
  spec.set_working_dir(dir);
  spec.set_lane(0);
  freeride::v1::TaskInfo info;
  if (!daemon.tasks()->Submit(spec, &info).ok()) std::exit(1);
  for (int i = 0; i < 500 && info.state() != "PAUSED"; ++i) {
    usleep(10000);
    daemon.tasks()->Get(info.id(), "", &info);
  }
  freeride_stage* stage = freeride_stage_open(0, options.socket_path.c_str());
  Nanos progress_at = MonotonicNow();
  for (int i = 0; i < bubbles; ++i) {
    SleepFor(1 * kMillisecond);  // "compute"
    freeride_bubble_begin(stage, 0, 2 * kMillisecond, UINT64_MAX);
    SleepFor(2 * kMillisecond);
    freeride_bubble_end(stage);
    if (MonotonicNow() - progress_at > 5 * freeride::kSecond) {
      std::fprintf(stderr, "  freeride path: %d/%d bubbles\n", i + 1, bubbles);
      progress_at = MonotonicNow();
    }
  }
  freeride_stage_close(stage);
  daemon.Shutdown();

  std::map<uint32_t, Nanos> begin_by_seq;
  std::map<uint32_t, Nanos> first_step_by_seq;
  std::vector<Nanos>& dispatch = *dispatch_latencies;
  std::ifstream in(options.state_dir + "/events.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto e = nlohmann::json::parse(line);
    if (e["type"] == "bubble") {
      begin_by_seq[e["seq"]] = e["begin_ns"];
      if (e["first_grant_ns"] > 0)
        dispatch.push_back(e["first_grant_ns"].get<Nanos>() - e["begin_ns"].get<Nanos>());
    }
    if (e["type"] == "step") {
      uint32_t seq = e["bubble_seq"];
      Nanos start = e["start_ns"];
      auto it = first_step_by_seq.find(seq);
      if (it == first_step_by_seq.end() || start < it->second) first_step_by_seq[seq] = start;
    }
  }
  std::vector<Nanos> latencies;
  size_t missed = 0;
  for (auto [seq, begin] : begin_by_seq) {
    auto it = first_step_by_seq.find(seq);
    if (it == first_step_by_seq.end()) {
      ++missed;
      continue;
    }
    latencies.push_back(it->second - begin);
  }
  if (missed) std::fprintf(stderr, "  freeride path: %zu bubbles without a step\n", missed);
  return latencies;
}

// The prototype's path: AddBubble RPC -> queue -> scheduler polling every
// 10 ms -> wakes the task's runner -> step starts.
class PrototypeScheduler final : public freeride::bench::PrototypeScheduler::Service {
 public:
  grpc::Status AddBubble(grpc::ServerContext*, const freeride::bench::Bubble* bubble,
                         freeride::bench::Ack*) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(bubble->issued_ns());
    return grpc::Status::OK;
  }
  void RunScheduler() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::lock_guard<std::mutex> lock(mu_);
      while (!pending_.empty()) {
        issued_.push_back(pending_.front());
        pending_.pop_front();
        task_cv_.notify_one();
      }
    }
    task_cv_.notify_all();
  }
  void RunTask() {
    std::unique_lock<std::mutex> lock(mu_);
    size_t done = 0;
    while (!stop_ || done < issued_.size()) {
      task_cv_.wait(lock, [&] { return stop_ || done < issued_.size(); });
      while (done < issued_.size()) latencies_.push_back(MonotonicNow() - issued_[done++]);
    }
  }
  void Stop() { stop_ = true; }
  std::vector<Nanos> latencies() {
    std::lock_guard<std::mutex> lock(mu_);
    return latencies_;
  }

 private:
  std::mutex mu_;
  std::condition_variable task_cv_;
  std::deque<Nanos> pending_;
  std::vector<Nanos> issued_;
  std::vector<Nanos> latencies_;
  std::atomic<bool> stop_{false};
};

std::vector<Nanos> MeasurePolled(int bubbles, const std::string& dir) {
  PrototypeScheduler service;
  std::string address = "unix:" + dir + "/proto.sock";
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  std::thread scheduler([&] { service.RunScheduler(); });
  std::thread task([&] { service.RunTask(); });
  auto stub = freeride::bench::PrototypeScheduler::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < bubbles; ++i) {
    SleepFor(1 * kMillisecond);
    grpc::ClientContext context;
    freeride::bench::Bubble bubble;
    bubble.set_issued_ns(MonotonicNow());
    freeride::bench::Ack ack;
    stub->AddBubble(&context, bubble, &ack);
    SleepFor(2 * kMillisecond);
  }
  SleepFor(30 * kMillisecond);
  service.Stop();
  scheduler.join();
  task.join();
  server->Shutdown();
  return service.latencies();
}

}  // namespace

int main(int argc, char** argv) {
  int bubbles = 10000, polled = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bubbles")) bubbles = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--polled-bubbles")) polled = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--bubbles N] [--polled-bubbles N]\n", argv[0]);
      return 2;
    }
  }
  char pattern[] = "/tmp/frbench-XXXXXX";
  std::string dir = mkdtemp(pattern);
  std::fprintf(stderr, "signal_latency: %d bubbles through FreeRide's shared-memory path, %d "
                       "through a polled gRPC path (cores: %ld)\n",
               bubbles, polled, sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<Nanos> dispatch;
  Summary shm = Summarize(MeasureFreeRide(bubbles, dir, &dispatch));
  Summary hop = Summarize(dispatch);
  Summary rpc = Summarize(MeasurePolled(polled, dir));
  std::filesystem::remove_all(dir);
  std::printf("%-28s %8s %10s %10s %10s\n", "path", "bubbles", "p50_us", "p99_us", "max_us");
  std::printf("%-28s %8zu %10.1f %10.1f %10.1f\n", "freeride_shm_futex", shm.count, shm.p50_us,
              shm.p99_us, shm.max_us);
  std::printf("%-28s %8zu %10.1f %10.1f %10.1f\n", "  dispatcher wake-up", hop.count,
              hop.p50_us, hop.p99_us, hop.max_us);
  std::printf("%-28s %8zu %10.1f %10.1f %10.1f\n", "prototype_grpc_poll_10ms", rpc.count,
              rpc.p50_us, rpc.p99_us, rpc.max_us);
  std::printf("{\"bench\":\"signal_latency\",\"freeride\":{\"bubbles\":%zu,\"p50_us\":%.1f,"
              "\"p99_us\":%.1f},\"prototype\":{\"bubbles\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f},"
              "\"p99_speedup\":%.1f}\n",
              shm.count, shm.p50_us, shm.p99_us, rpc.count, rpc.p50_us, rpc.p99_us,
              shm.p99_us > 0 ? rpc.p99_us / shm.p99_us : 0);
  return 0;
}
