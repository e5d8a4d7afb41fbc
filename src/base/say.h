// Diagnostics of a long-running process (the daemon): a line for its stderr
// or stdout that never throws.  fmt::print throws fmt::system_error when the
// write fails (a full disk under the log, a reader that went away: SIGPIPE is
// ignored, so EPIPE), which ended the daemon in whatever thread printed,
// often the very message saying the disk was full.  A failed write is
// dropped: the event log and the journal are where state is kept.  Any
// thread.
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <utility>

namespace freeride {

template <typename... Args>
void Say(std::FILE* stream, fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    const std::string line = fmt::format(format, std::forward<Args>(args)...);
    // Flushed at once, so that a failure is met here and forgotten, not by
    // whoever flushes the stream next.
    if (std::fwrite(line.data(), 1, line.size(), stream) != line.size() || std::fflush(stream) != 0)
      std::clearerr(stream);
  } catch (...) {  // out of memory formatting it: the line is dropped too
  }
}

}  // namespace freeride
