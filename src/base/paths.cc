#include "base/paths.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace freeride {
uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

namespace {

// The socket as one spelling of its file: absolute, with `.`, `..`, `//` and
// the symlinks of its existing directories resolved.  The daemon and each
// trainer and task name the segments from it, each as it was told the
// socket: `run/fr.sock` from one directory and `/srv/run/fr.sock`, or a
// symlinked path, must name the same segments (the socket itself is found
// either way), and two daemons at `fr.sock` in different directories must not.
std::string OneSpelling(const std::string& socket_path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(socket_path, error);
  if (error) return socket_path;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(absolute, error);
  return error ? absolute.lexically_normal().string() : canonical.string();
}

std::string SegmentPrefix(const std::string& socket_path) {
  return fmt::format("/dev/shm/freeride-{}-{:012x}", getuid(),
                     Fnv1a64(OneSpelling(socket_path)) & 0xffffffffffffULL);
}

}  // namespace

std::string DefaultSocketPath() {
  if (const char* env = std::getenv("FREERIDE_SOCKET"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg)
    return std::string(xdg) + "/freeride.sock";
  return fmt::format("/tmp/freeride-{}/freeride.sock", getuid());
}

std::string DefaultStateDir() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/freeride";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.local/state/freeride";
  return fmt::format("/tmp/freeride-{}/state", getuid());
}

std::string LaneSegmentPath(const std::string& socket_path, int lane) {
  return fmt::format("{}-lane{}", SegmentPrefix(socket_path), lane);
}

std::string GatePagePath(const std::string& socket_path, int lane) {
  return LaneSegmentPath(socket_path, lane) + "-gate";
}

std::string TaskSegmentPath(const std::string& socket_path, int64_t task_id) {
  return fmt::format("{}-task{}", SegmentPrefix(socket_path), task_id);
}

bool MakeDirs(const std::string& dir, unsigned mode, std::string* error) {
  if (dir.empty()) return true;
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      *error = fmt::format("cannot create directory {}: {}", partial, std::strerror(errno));
      return false;
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = fmt::format("{} is not a directory", dir);
    return false;
  }
  return true;
}

}  // namespace freeride
