#include "daemon/task_dirs.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/files.h"
#include "base/paths.h"

namespace freeride {
namespace {

constexpr const char* kJournalFile = "/journal";
constexpr const char* kOrphanedFile = "/orphaned";

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}


// Writes a small file whole (through a temporary name), saying why not.
Status WriteSmallFile(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool written = fd >= 0 && write(fd, content.data(), content.size()) ==
                                static_cast<ssize_t>(content.size());
  int saved_errno = errno;
  if (fd >= 0 && close(fd) != 0 && written) {
    written = false;
    saved_errno = errno;
  }
  if (written && rename(tmp.c_str(), path.c_str()) == 0) return Status::Ok();
  if (written) saved_errno = errno;
  unlink(tmp.c_str());
  return {saved_errno == ENOSPC ? ErrorCode::kResourceExhausted : ErrorCode::kUnavailable,
          fmt::format("cannot write {}: {}", path, std::strerror(saved_errno))};
}

}  // namespace

std::string TaskDirJournal(const std::string& dir) {
  return Trimmed(ReadWholeFile(dir + kJournalFile).value_or(""));
}

bool TaskDirOrphaned(const std::string& dir) {
  struct stat st;
  return stat((dir + kOrphanedFile).c_str(), &st) == 0;
}

Status TieTaskDir(const std::string& dir, const std::string& journal_uuid) {
  return WriteSmallFile(dir + kJournalFile, journal_uuid + "\n");
}

Status EnsureTaskDir(const std::string& dir, const std::string& journal_uuid) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    std::string error;
    if (!MakeDirs(dir, 0700, &error)) return {ErrorCode::kUnavailable, error};
    Status tied = TieTaskDir(dir, journal_uuid);
    std::error_code ignored;
    if (!tied.ok()) std::filesystem::remove_all(dir, ignored);
    return tied;
  }
  if (TaskDirOrphaned(dir))
    return {ErrorCode::kFailedPrecondition,
            fmt::format("{} is marked orphaned (its task was lost from the journal); it is not "
                        "reused",
                        dir)};
  std::string owner = TaskDirJournal(dir);
  if (owner != journal_uuid)
    return {ErrorCode::kFailedPrecondition,
            fmt::format("{} belongs to journal {}, not to this daemon's journal {}; it is not "
                        "reused",
                        dir, owner.empty() ? "(none)" : owner, journal_uuid)};
  return Status::Ok();
}

Status MarkTaskDirOrphaned(const std::string& dir, const std::string& why) {
  return WriteSmallFile(dir + kOrphanedFile, why + "\n");
}

std::vector<int64_t> ListTaskDirIds(const std::string& tasks_dir) {
  std::vector<int64_t> ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tasks_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 18 || name[0] == '0' ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (entry.is_directory(ec)) ids.push_back(std::stoll(name));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace freeride
