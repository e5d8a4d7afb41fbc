#include "daemon/task_logs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/files.h"
#include "daemon/process_supervisor.h"

namespace freeride {
namespace {

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool Fail(std::string* error, const std::string& what) {
  *error = fmt::format("{}: {}", what, std::strerror(errno));
  return false;
}

// Writes the last `keep` bytes of the `size`-byte file at `path` to `out_path`.
bool CopyTail(const std::string& path, uint64_t size, uint64_t keep, const std::string& out_path,
              std::string* error) {
  Fd in{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) return Fail(error, "cannot open " + path);
  Fd out{open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (out.fd < 0) return Fail(error, "cannot write " + out_path);
  // In the kernel, in pieces: a log may be gigabytes past the size by now.
  off_t from = static_cast<off_t>(size - keep);
  for (uint64_t left = keep; left > 0;) {
    const ssize_t n = sendfile(out.fd, in.fd, &from, static_cast<size_t>(std::min<uint64_t>(left, 1 << 30)));
    if (n < 0) return Fail(error, "cannot write " + out_path);
    if (n == 0) break;  // emptied meanwhile
    left -= static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace

std::string ReadTaskLogTail(const std::string& path, size_t max_bytes) {
  std::string tail = ReadFileTail(path, max_bytes);
  if (tail.size() < max_bytes) tail = ReadFileTail(RotatedFilePath(path, 1), max_bytes - tail.size()) + tail;
  return tail;
}

bool TrimTaskLog(const std::string& path, uint64_t max_bytes, std::string* error) {
  error->clear();
  if (max_bytes == 0) return false;
  struct stat st{};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size <= max_bytes) return false;
  const std::string kept = RotatedFilePath(path, 1);
  std::string reason;
  if (!ReplaceFileAtomically(
          kept, [&](const std::string& tmp) { return CopyTail(path, size, max_bytes / 2, tmp, &reason); },
          error)) {
    if (!reason.empty()) *error = reason;  // what failed, not only that the copy did
    unlink(kept.c_str());                  // no stale tail
  }
  // Emptied even when the tail could not be kept (the disk is full): the
  // task's old output goes before the journal's room does.
  if (truncate(path.c_str(), 0) != 0) {
    Fail(error, "cannot empty " + path);
    return false;
  }
  return true;
}

}  // namespace freeride
