// What a forked child does first so that it never outlives the process that
// started it (a daemon's side task, task-profile's task).
#pragma once
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <csignal>

namespace freeride {

// In a child just forked by `parent`: a process group of its own (so that
// the whole group, its own children too, can be killed at once), killed
// with SIGKILL when its parent dies; exits 127 at once when the parent died
// during the fork already.  Async-signal-safe: between fork and exec only.
inline void TieChildToParent(pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
}

}  // namespace freeride
