// How much a side task may overrun its bubbles before it is demoted, and
// then killed.
//
// An overrun is step time past a bubble's end: the trainer's next kernel
// waits for (or shares the GPU with) the side task.  A task that keeps
// overrunning (its step times vary more than its estimate says, or it
// ignores the grant) is first demoted: it runs only where twice its step
// estimate fits, after every other task.  If it still overruns, it is
// killed.  A single step that runs far past its bubble (a hang) is killed at
// once.  Pure policy: the lane feeds it, the task manager acts on it.
#pragma once
#include <array>
#include <cstdint>

#include "base/clock.h"

namespace freeride {

struct OverrunBudgetConfig {
  // Mean overrun allowed per bubble the task stepped in, over `window` such
  // bubbles.  0 disables demotion and killing for overruns.
  // The defaults leave room for a loaded host (a descheduled step runs long
  // now and then); a well-behaved GPU task overruns by microseconds on
  // average (bench/results/e2e_gpu.md).
  Nanos mean_per_bubble = 2 * kMillisecond;
  int window = 64;
  // One step this far past its bubble's end is a hang: killed at once.  Long
  // enough that a host stalled on memory or I/O is not mistaken for one.
  Nanos hang = 10 * kSecond;
};

enum class OverrunVerdict { kWithin, kDemote, kKill };
const char* OverrunVerdictName(OverrunVerdict verdict);

class OverrunBudget {
 public:
  static constexpr int kMaxWindow = 256;

  explicit OverrunBudget(OverrunBudgetConfig config = {});

  // Records the task's overrun in one bubble it stepped in (0 when it ended
  // in time).  Returns kDemote the first time the window's mean exceeds the
  // budget (the window then starts afresh), kKill when it does so again
  // while demoted, or for a hang.
  OverrunVerdict Record(Nanos overrun);

  bool demoted() const { return demoted_; }
  // Mean overrun per bubble over the current window (0 when empty).
  Nanos WindowMean() const;
  int window_count() const { return count_; }

 private:
  OverrunBudgetConfig config_;
  std::array<Nanos, kMaxWindow> overruns_{};
  int count_ = 0, next_ = 0;
  Nanos sum_ = 0;
  bool demoted_ = false;
};

}  // namespace freeride
