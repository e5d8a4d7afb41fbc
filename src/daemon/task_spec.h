// Validation of submitted task specs, shared by the daemon and clients.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "freeride.pb.h"

namespace freeride {

// Finds `command` on PATH (from env, or the daemon's own PATH when the spec
// carries none) relative to working_dir.  A command with a '/' is taken as
// it is, relative to working_dir.  Returns the path of an executable file,
// absolute when working_dir is, or "" and sets *error.
std::string ResolveExecutable(const std::string& command, const std::string& path_var,
                              const std::string& working_dir, std::string* error);

struct LaneLimits {
  int lane = 0;
  uint64_t capacity_bytes = 0;  // 0: unknown, no limit
};

// Why `name` cannot name a task, or "" when it can.  A name must be valid
// UTF-8 of 1..128 bytes, not blank, not digits only (`show 123` reads an
// id), and free of control, zero-width and bidirectional formatting
// characters, which make a name print as something it is not.  Any thread.
std::string NameProblem(std::string_view name);

// Checks a spec against the daemon's lanes: a name, a resolvable command, a
// known lane, memory no larger than any lane, sane numbers.  Returns "" when
// valid, else a message for the user.  Fills *resolved with the executable.
// Reads the file system; any thread.
std::string ValidateSpec(const v1::TaskSpec& spec, const std::vector<LaneLimits>& lanes,
                         std::string* resolved);

}  // namespace freeride
