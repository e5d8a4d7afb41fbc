#include "daemon/task_logs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

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

// Copies the last `keep` bytes of the `size`-byte file at `path` to `kept`,
// through a temporary file.
bool KeepTail(const std::string& path, uint64_t size, uint64_t keep, const std::string& kept,
              std::string* error) {
  Fd in{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) return Fail(error, "cannot open " + path);
  const std::string temporary = kept + ".tmp";
  Fd out{open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (out.fd < 0) return Fail(error, "cannot write " + temporary);
  auto fail_writing = [&](const std::string& what) {
    const int saved = errno;
    unlink(temporary.c_str());
    errno = saved;
    return Fail(error, what);
  };
  // In chunks: a log may be gigabytes past the size by now.
  std::vector<char> chunk(1 << 16);
  for (uint64_t done = 0; done < keep;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), keep - done));
    const ssize_t got = pread(in.fd, chunk.data(), want, static_cast<off_t>(size - keep + done));
    if (got < 0) return fail_writing("cannot read " + path);
    if (got == 0) break;  // emptied meanwhile
    for (ssize_t written = 0; written < got;) {
      const ssize_t n = write(out.fd, chunk.data() + written, static_cast<size_t>(got - written));
      if (n < 0) return fail_writing("cannot write " + temporary);
      written += n;
    }
    done += static_cast<uint64_t>(got);
  }
  if (rename(temporary.c_str(), kept.c_str()) != 0) return fail_writing("cannot rename " + temporary);
  return true;
}

}  // namespace

bool TrimTaskLog(const std::string& path, uint64_t max_bytes, std::string* error) {
  error->clear();
  if (max_bytes == 0) return false;
  struct stat st{};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size <= max_bytes) return false;
  const std::string kept = path + ".1";
  if (!KeepTail(path, size, max_bytes / 2, kept, error)) unlink(kept.c_str());  // no stale tail
  // Emptied even when the tail could not be kept (the disk is full): the
  // task's old output goes before the journal's room does.
  if (truncate(path.c_str(), 0) != 0) {
    Fail(error, "cannot empty " + path);
    return false;
  }
  return true;
}

}  // namespace freeride
