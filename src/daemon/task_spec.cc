#include "daemon/task_spec.h"

#include "daemon/progress_watch.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/units.h"
#include "base/utf8.h"

namespace freeride {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Characters that print as nothing, move the cursor or reorder the text
// around them (C0 and C1 controls, zero-width and bidirectional marks,
// embeddings, overrides and isolates, line separators, the BOM).
bool IsHiddenOrReordering(int32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x061C || (c >= 0x200B && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202E) || (c >= 0x2060 && c <= 0x2069) || c == 0xFEFF;
}

bool IsSpace(int32_t c) {
  return c == ' ' || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x202F ||
         c == 0x205F || c == 0x3000;
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

std::string NameProblem(std::string_view name) {
  if (name.empty()) return "the task has no name";
  if (name.size() > 128) return "the task name is longer than 128 bytes";
  bool blank = true, digits = true;
  for (size_t at = 0; at < name.size();) {
    int32_t c = NextCodePoint(name, &at);
    if (c < 0) return "the task name is not valid UTF-8";
    if (IsHiddenOrReordering(c))
      return fmt::format("the task name contains a control or formatting character (U+{:04X})", c);
    blank = blank && IsSpace(c);
    digits = digits && c >= '0' && c <= '9';
  }
  if (blank) return "the task name is blank";
  if (digits) return "the task name is all digits, which `show` and `cancel` read as a task id";
  return "";
}

std::string ValidateSpec(const v1::TaskSpec& spec, const std::vector<LaneLimits>& lanes,
                         std::string* resolved) {
  if (std::string problem = NameProblem(spec.name()); !problem.empty()) return problem;
  if (spec.command_size() == 0) return "no command given: use `freeride submit -- CMD ARGS...`";
  if (spec.priority() < -1000 || spec.priority() > 1000)
    return fmt::format("priority {} is outside -1000..1000", spec.priority());
  if (spec.step_time_hint_ns() < 0) return "the step-time hint is negative";
  if (spec.max_retries() < 0 || spec.max_retries() > 100)
    return fmt::format("retries {} is outside 0..100", spec.max_retries());
  if (spec.kind() != v1::TASK_KIND_ITERATIVE && spec.kind() != v1::TASK_KIND_IMPERATIVE)
    return "unknown task kind";
  if (!spec.progress_regex().empty()) {
    if (spec.progress_regex().size() > 1024) return "the progress regex is longer than 1024 characters";
    if (std::string problem = ProgressWatch::Check(spec.progress_regex()); !problem.empty())
      return problem;
  }
  if (!v1::ProgressStreams_IsValid(spec.progress_streams()))
    return fmt::format("unknown progress streams {} (0: both outputs, 1: standard output, 2: standard error)",
                       static_cast<int>(spec.progress_streams()));
  if (spec.progress_streams() != v1::PROGRESS_STREAMS_BOTH && spec.progress_regex().empty())
    return "progress streams name the outputs a progress regex reads: give a progress regex";
  if (spec.progress_file().size() > 4096) return "the progress file's path is too long";
  if (!spec.progress_regex().empty() && !spec.progress_file().empty())
    return "give a progress regex or a progress file, not both: each says the progress so far";
  if (spec.progress_unit().size() > 64) return "the progress unit is longer than 64 characters";
  if (spec.working_dir().empty() || spec.working_dir()[0] != '/')
    return "the working directory must be an absolute path";
  struct stat st;
  if (stat(spec.working_dir().c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fmt::format("working directory {} does not exist", spec.working_dir());
  if (!spec.progress_file().empty()) {
    const std::string& file = spec.progress_file();
    const std::string path = file[0] == '/' ? file : spec.working_dir() + "/" + file;
    if (std::string problem = ProgressWatch::CheckFile(path); !problem.empty()) return problem;
  }

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
