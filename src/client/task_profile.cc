#include "client/task_profile.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <utility>
#include <nlohmann/json.hpp>

namespace freeride {
namespace {

using nlohmann::json;

constexpr int kProfileVersion = 1;
// More memory than any machine holds: a figure above it is a damaged
// profile, and adding the margin to it could wrap around to nothing.
constexpr uint64_t kMostMemoryBytes = 1ULL << 60;

template <typename T>
bool Read(const json& j, const char* key, T* out, std::string* error) {
  auto it = j.find(key);
  if (it == j.end()) {
    *error = std::string("missing \"") + key + "\"";
    return false;
  }
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    *error = std::string("\"") + key + "\" has the wrong type";
    return false;
  }
  return true;
}

// Why the profile's figures cannot stand ("" when they can): a rate or step
// time that is negative or not finite, or a step longer than a day (its
// nanoseconds would not fit the step-time hint: 1e300 ms read as negative).
std::string FiguresProblem(const TaskProfile& p) {
  constexpr double kMostStepMs = 86'400'000;  // a day
  if (!(p.rate_per_s >= 0) || !std::isfinite(p.rate_per_s))
    return fmt::format("rate_per_s {} is not a finite rate of 0 or more", p.rate_per_s);
  for (auto [name, ms] : {std::pair{"p50", p.step_ms_p50}, {"p90", p.step_ms_p90}, {"p99", p.step_ms_p99},
                          {"max", p.step_ms_max}})
    if (!(ms >= 0 && ms <= kMostStepMs))
      return fmt::format("step time {} of {} ms is not from 0 to a day ({} ms)", name, ms, kMostStepMs);
  return "";
}

}  // namespace

std::optional<TaskProfile> ProfileFromStandaloneLine(const std::string& line, std::string* error) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("mode", "") != "standalone") {
    *error = "not a standalone result line";
    return std::nullopt;
  }
  TaskProfile p;
  if (!Read(j, "unit", &p.unit, error) || !Read(j, "rate_per_s", &p.rate_per_s, error) ||
      !Read(j, "seconds", &p.seconds, error) || !Read(j, "steps", &p.steps, error) ||
      !Read(j, "step_ms_p50", &p.step_ms_p50, error) ||
      !Read(j, "step_ms_p90", &p.step_ms_p90, error) ||
      !Read(j, "step_ms_p99", &p.step_ms_p99, error) ||
      !Read(j, "step_ms_max", &p.step_ms_max, error) ||
      !Read(j, "peak_memory_bytes", &p.peak_memory_bytes, error))
    return std::nullopt;
  if (std::string problem = FiguresProblem(p); !problem.empty()) {
    *error = "its " + problem;
    return std::nullopt;
  }
  return p;
}

std::string TaskProfileToJson(const TaskProfile& p) {
  json j = {{"freeride_task_profile", kProfileVersion},
            {"command", p.command},
            {"unit", p.unit},
            {"rate_per_s", p.rate_per_s},
            {"seconds", p.seconds},
            {"steps", p.steps},
            {"step_ms", {{"p50", p.step_ms_p50}, {"p90", p.step_ms_p90}, {"p99", p.step_ms_p99},
                         {"max", p.step_ms_max}}},
            {"peak_memory_bytes", p.peak_memory_bytes},
            {"process_gpu_bytes", p.process_gpu_bytes},
            {"host", p.host},
            {"created_unix", p.created_unix}};
  return j.dump(2) + "\n";
}

std::optional<TaskProfile> ReadTaskProfile(const std::string& path, std::string* error) {
  struct stat st;
  bool found = stat(path.c_str(), &st) == 0;
  if (!found || !S_ISREG(st.st_mode)) {
    *error = path + (found && S_ISDIR(st.st_mode) ? ": is a directory, not a profile file"
                                                  : ": does not exist or is not a file");
    return std::nullopt;
  }
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot open";
    return std::nullopt;
  }
  json j;
  try {
    j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  } catch (const std::exception& e) {  // a read error of the stream
    *error = path + ": cannot read: " + e.what();
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("freeride_task_profile")) {
    *error = path + ": not a FreeRide task profile (write one with `freeride task-profile -- CMD`)";
    return std::nullopt;
  }
  TaskProfile p;
  std::string why;
  int version = 0;
  json steps;
  if (!Read(j, "freeride_task_profile", &version, &why) ||
      !Read(j, "command", &p.command, &why) || !Read(j, "unit", &p.unit, &why) ||
      !Read(j, "rate_per_s", &p.rate_per_s, &why) || !Read(j, "step_ms", &steps, &why) ||
      !Read(steps, "p50", &p.step_ms_p50, &why) || !Read(steps, "p90", &p.step_ms_p90, &why) ||
      !Read(steps, "p99", &p.step_ms_p99, &why) || !Read(steps, "max", &p.step_ms_max, &why) ||
      !Read(j, "peak_memory_bytes", &p.peak_memory_bytes, &why)) {
    *error = path + ": " + why;
    return std::nullopt;
  }
  if (!j["freeride_task_profile"].is_number_integer() || version != kProfileVersion) {
    *error = path + ": profile version " + j["freeride_task_profile"].dump() + ", this FreeRide reads " +
             std::to_string(kProfileVersion);
    return std::nullopt;
  }
  if (p.command.empty()) {
    *error = path + ": an empty command";
    return std::nullopt;
  }
  if (std::string problem = FiguresProblem(p); !problem.empty()) {
    *error = path + ": " + problem;
    return std::nullopt;
  }
  // Optional fields: absent is fine, the wrong type is an error, not a crash.
  try {
    p.seconds = j.value("seconds", 0.0);
    p.steps = j.value("steps", uint64_t{0});
    p.process_gpu_bytes = j.value("process_gpu_bytes", uint64_t{0});
    p.host = j.value("host", "");
    p.created_unix = j.value("created_unix", int64_t{0});
  } catch (const json::exception& e) {
    *error = path + ": an optional field has the wrong type (" + e.what() + ")";
    return std::nullopt;
  }
  if (p.peak_memory_bytes > kMostMemoryBytes || p.process_gpu_bytes > kMostMemoryBytes) {
    *error = path + ": peak_memory_bytes or process_gpu_bytes is larger than 1 EiB";
    return std::nullopt;
  }
  return p;
}

uint64_t ProfiledMemoryBytes(const TaskProfile& p) {
  uint64_t peak = std::max(p.peak_memory_bytes, p.process_gpu_bytes);
  if (peak == 0) return 0;
  uint64_t margin = std::max<uint64_t>(64ULL << 20, peak / 10);
  return peak > UINT64_MAX - margin ? UINT64_MAX : peak + margin;
}

void ApplyTaskProfile(const TaskProfile& p, v1::TaskSpec* spec) {
  if (spec->command_size() == 0)
    for (const auto& arg : p.command) spec->add_command(arg);
  if (spec->memory_bytes() == 0) spec->set_memory_bytes(ProfiledMemoryBytes(p));
  if (spec->step_time_hint_ns() == 0)
    spec->set_step_time_hint_ns(static_cast<int64_t>(p.step_ms_p99 * 1e6));
  spec->set_alone_rate_per_s(p.rate_per_s);
}

}  // namespace freeride
