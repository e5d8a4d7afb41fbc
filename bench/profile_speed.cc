// `freeride profile` against the prototype's method (Python json.load,
// compute-stream filter, interval merge), timed in the same run on the same
// trace.  Usage: profile_speed TRACE [--repeat N] [--python python3]
// Prints the median seconds of each and the speed-up.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "profile/bubble_profile.h"
#include "profile/kineto_trace.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double RunPython(const std::string& python, const std::string& trace, int repeat) {
  std::string cmd = fmt::format("{} {} {} --repeat {}", python, PROTOTYPE_SCRIPT, trace, repeat);
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  double seconds = -1;
  if (std::fscanf(p, "%lf", &seconds) != 1) seconds = -1;
  pclose(p);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: profile_speed TRACE [--repeat N] [--python python3]\n");
    return 2;
  }
  std::string trace = argv[1], python = "python3";
  int repeat = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--repeat") repeat = std::max(1, std::atoi(argv[i + 1]));
    if (flag == "--python") python = argv[i + 1];
  }
  using Clock = std::chrono::steady_clock;
  std::vector<double> ours;
  size_t bubbles = 0;
  uint64_t bytes = 0;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = Clock::now();
    freeride::profile::KinetoTrace t = freeride::profile::LoadKinetoTrace(trace);
    freeride::profile::RankProfile p = freeride::profile::AnalyzeRank(t, 0);
    ours.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    bubbles = p.slots.size();
    bytes = t.json_bytes;
  }
  double theirs = RunPython(python, trace, repeat);
  double mine = Median(ours);
  fmt::print("trace            {}\n", trace);
  fmt::print("JSON size        {:.1f} MB\n", bytes / 1e6);
  fmt::print("freeride profile {:.1f} ms (median of {}, {} bubble slots)\n", mine * 1e3, repeat,
             bubbles);
  if (theirs < 0) {
    fmt::print("python baseline  failed to run ({} {})\n", python, PROTOTYPE_SCRIPT);
    return 1;
  }
  fmt::print("python json.load {:.1f} ms (median of {})\n", theirs * 1e3, repeat);
  fmt::print("speed-up         {:.1f}x\n", theirs / mine);
  return 0;
}
