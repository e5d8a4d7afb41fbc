#include "daemon/task_spec.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/units.h"

namespace freeride {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string Join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

std::string ResolveExecutable(const std::string& command, const std::string& path_var,
                              const std::string& working_dir, std::string* error) {
  if (command.empty()) {
    *error = "the command is empty";
    return "";
  }
  if (command.find('/') != std::string::npos) {
    std::string path = command[0] == '/' ? command : Join(working_dir, command);
    if (IsExecutableFile(path)) return path;
    *error = fmt::format("command '{}' does not exist or is not executable", command);
    return "";
  }
  std::string search = path_var;
  if (search.empty()) {
    const char* env = std::getenv("PATH");
    search = env ? env : "/usr/local/bin:/usr/bin:/bin";
  }
  size_t start = 0;
  while (start <= search.size()) {
    size_t end = search.find(':', start);
    if (end == std::string::npos) end = search.size();
    std::string dir = search.substr(start, end - start);
    if (dir.empty()) dir = ".";
    if (dir[0] != '/') dir = Join(working_dir, dir);
    std::string candidate = Join(dir, command);
    if (IsExecutableFile(candidate)) return candidate;
    start = end + 1;
  }
  *error = fmt::format("command '{}' not found on PATH", command);
  return "";
}

std::string ValidateSpec(const v1::TaskSpec& spec, const std::vector<LaneLimits>& lanes,
                         std::string* resolved) {
  if (spec.name().empty()) return "the task has no name";
  if (spec.name().size() > 128) return "the task name is longer than 128 characters";
  for (char c : spec.name()) {
    if (static_cast<unsigned char>(c) < 0x20)
      return "the task name contains control characters";
  }
  if (spec.command_size() == 0) return "no command given: use `freeride submit -- CMD ARGS...`";
  if (spec.priority() < -1000 || spec.priority() > 1000)
    return fmt::format("priority {} is outside -1000..1000", spec.priority());
  if (spec.step_time_hint_ns() < 0) return "the step-time hint is negative";
  if (spec.max_retries() < 0 || spec.max_retries() > 100)
    return fmt::format("retries {} is outside 0..100", spec.max_retries());
  if (spec.kind() != v1::TASK_KIND_ITERATIVE && spec.kind() != v1::TASK_KIND_IMPERATIVE)
    return "unknown task kind";
  if (spec.working_dir().empty() || spec.working_dir()[0] != '/')
    return "the working directory must be an absolute path";
  struct stat st;
  if (stat(spec.working_dir().c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fmt::format("working directory {} does not exist", spec.working_dir());

  if (spec.lane() < -1) return fmt::format("lane {} does not exist", spec.lane());
  uint64_t largest = 0;
  bool any_unlimited = false;
  const LaneLimits* chosen = nullptr;
  for (const LaneLimits& lane : lanes) {
    if (lane.capacity_bytes == 0) any_unlimited = true;
    largest = std::max(largest, lane.capacity_bytes);
    if (lane.lane == spec.lane()) chosen = &lane;
  }
  if (spec.lane() >= 0) {
    if (!chosen) {
      return fmt::format("lane {} does not exist; this daemon has lanes 0..{}", spec.lane(),
                         lanes.empty() ? -1 : static_cast<int>(lanes.size()) - 1);
    }
    if (chosen->capacity_bytes != 0 && spec.memory_bytes() > chosen->capacity_bytes)
      return fmt::format("the task asks for {} but lane {} has only {}",
                         FormatBytes(spec.memory_bytes()), spec.lane(),
                         FormatBytes(chosen->capacity_bytes));
  } else if (!any_unlimited && spec.memory_bytes() > largest) {
    return fmt::format("the task asks for {} but the largest lane has only {}",
                       FormatBytes(spec.memory_bytes()), FormatBytes(largest));
  }

  std::string path_var;
  auto it = spec.env().find("PATH");
  if (it != spec.env().end()) path_var = it->second;
  std::string error;
  *resolved = ResolveExecutable(spec.command(0), path_var, spec.working_dir(), &error);
  if (resolved->empty()) return error;
  return "";
}

}  // namespace freeride
