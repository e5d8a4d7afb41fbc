// Where the daemon's rendezvous points live: its socket and the per-lane
// shared-memory segments.  Both sides derive the same names from the same
// socket path, so a stage needs no RPC to find its lane.
#pragma once
#include <cstdint>
#include <string>

namespace freeride {

// The socket used when none is given: $FREERIDE_SOCKET, else
// $XDG_RUNTIME_DIR/freeride.sock, else /tmp/freeride-<uid>/freeride.sock.
std::string DefaultSocketPath();

// The 64-bit FNV-1a hash of `text`: a stable short name for a path.
uint64_t Fnv1a64(const std::string& text);

// The daemon's state directory when none is given: $XDG_STATE_HOME/freeride,
// else $HOME/.local/state/freeride, else /tmp/freeride-<uid>/state.
std::string DefaultStateDir();

// The file backing lane `lane`'s bubble segment for the daemon at
// socket_path: /dev/shm/freeride-<uid>-<hash of socket path>-lane<lane>, the
// path hashed as one spelling (absolute, `.`, `..` and symlinks of its
// existing directories resolved), so every spelling of one socket names the
// same segments.
std::string LaneSegmentPath(const std::string& socket_path, int lane);

// The GPU gate page of lane `lane` (gate/gate_page.h): the lane segment's
// path with "-gate" appended.
std::string GatePagePath(const std::string& socket_path, int lane);

// The file backing one task's control segment.
std::string TaskSegmentPath(const std::string& socket_path, int64_t task_id);

// Creates dir and its parents with the given mode (existing ones are kept
// as they are); returns false and sets *error (not null) on failure, or
// when `dir` exists and is not a directory.  An empty `dir` succeeds.
bool MakeDirs(const std::string& dir, unsigned mode, std::string* error);

}  // namespace freeride
