#include "sdk/checkpoint_progress.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/files.h"

namespace freeride {
namespace {

std::string SidecarPath(const std::string& path) { return path + ".progress"; }

// One sidecar line: "INODE SIZE PROGRESS STEPS".
std::string Line(const struct stat& st, const CheckpointProgress& done) {
  return fmt::format("{} {} {:.17g} {}\n", static_cast<uint64_t>(st.st_ino),
                     static_cast<uint64_t>(st.st_size), done.progress, done.steps);
}

// The entry of the sidecar that describes the file `st`, if any.
std::optional<CheckpointProgress> Find(const std::string& sidecar, const struct stat& st) {
  std::istringstream in(sidecar);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    uint64_t inode = 0, size = 0;
    int64_t steps = 0;  // read signed: istream takes "-1" for an unsigned as UINT64_MAX
    CheckpointProgress done;
    if (!(fields >> inode >> size >> done.progress >> steps)) continue;
    if (inode != static_cast<uint64_t>(st.st_ino) || size != static_cast<uint64_t>(st.st_size))
      continue;
    if (!std::isfinite(done.progress) || done.progress < 0 || steps < 0) return std::nullopt;
    done.steps = static_cast<uint64_t>(steps);
    return done;
  }
  return std::nullopt;
}

}  // namespace

bool SaveCheckpointWithProgress(const std::string& path,
                                const std::function<bool(const std::string& tmp_path)>& save,
                                const CheckpointProgress& done) {
  // The sidecar is written before the checkpoint takes its name: the new
  // entry first, then the one describing the checkpoint still in place.
  return ReplaceFileAtomically(path, [&](const std::string& tmp) {
    struct stat saved;
    if (!save(tmp) || stat(tmp.c_str(), &saved) != 0) return false;
    std::string sidecar = Line(saved, done);
    struct stat current;
    std::string old = ReadWholeFile(SidecarPath(path)).value_or("");
    if (stat(path.c_str(), &current) == 0)
      if (auto previous = Find(old, current)) sidecar += Line(current, *previous);
    return WriteFileAtomically(SidecarPath(path), sidecar);
  });
}

std::optional<CheckpointProgress> ReadCheckpointProgress(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  std::optional<std::string> sidecar = ReadWholeFile(SidecarPath(path));
  if (!sidecar || sidecar->size() > 4096) return std::nullopt;
  return Find(*sidecar, st);
}

}  // namespace freeride
