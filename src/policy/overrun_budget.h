// How much a side task may overrun its bubbles before it is demoted, and
// then killed.
//
// An overrun is step time past a bubble's end: the trainer's next kernel
// waits for (or shares the GPU with) the side task, and in a pipeline one
// late rank delays every rank.  The budget is a share of the bubble time the
// task was given: over its last `window` bubbles, its overruns may add up to
// at most `max_fraction` of those bubbles' length.  A task over budget is
// first demoted (it then runs only where twice its step estimate fits, after
// every other task); if it is over budget again while demoted, it is killed.
// A demoted task that keeps within budget for `restore_after` bubbles is
// restored, at most `max_restores` times, so that one slow step (a stall of
// its process) does not cost it the short bubbles for good, while a task
// that keeps overrunning ends demoted, then killed.  Because the
// total is judged from the `min_bubbles`-th bubble on, a task overrunning by
// tens of milliseconds is stopped within a handful of bubbles, while one
// that overruns by microseconds now and then never is.  (A step far past its
// bubble, a hang, is the lane's to kill while it waits for it: `hang`.)
// Pure policy: the lane feeds it, the task manager acts on it.
#pragma once
#include <array>
#include <cstdint>

#include "base/clock.h"

namespace freeride {

struct OverrunBudgetConfig {
  // Overrun allowed, as a share of the bubble time in the window; 0 disables
  // demotion and killing for overruns.
  double max_fraction = 0.05;
  int window = 32;
  int min_bubbles = 4;  // judged once this many bubbles are in the window
  // Overruns adding up to less than this in the window are never over
  // budget, whatever their share: a loaded host delays steps by a few
  // milliseconds now and then (CI killed healthy CPU tasks at 7.6 ms in 18
  // bubbles), while a misbehaving task passes this in two or three bubbles.
  Nanos min_overrun = 25 * kMillisecond;
  // The first bubbles a task steps in are not judged: its first steps are
  // slow while CUDA loads its kernels and the allocator grows.
  int warmup_bubbles = 2;
  // A step this far past its bubble's end is a hang: the lane kills it while
  // it waits.  Long enough that a host stalled on memory or I/O is not
  // mistaken for one.
  Nanos hang = 10 * kSecond;
  // Bubbles stepped in, in a row within budget, that restore a demoted task
  // (0: never), and how many times a task may be restored.
  int restore_after = 128;
  int max_restores = 2;
};

enum class OverrunVerdict { kWithin, kDemote, kKill, kRestore };
const char* OverrunVerdictName(OverrunVerdict verdict);

// A verdict and the window it was reached on, for the task's message.
struct OverrunJudgement {
  OverrunVerdict verdict = OverrunVerdict::kWithin;
  int bubbles = 0;       // in the window judged
  Nanos overrun = 0;     // their overruns together
  Nanos bubble_time = 0; // their lengths together
};

class OverrunBudget {
 public:
  static constexpr int kMaxWindow = 256;

  explicit OverrunBudget(OverrunBudgetConfig config = {});

  // Records the task's overrun in one bubble of length `bubble` that it
  // stepped in (0 when it ended in time).  The verdict is kDemote when the
  // window is over budget (the window then starts afresh), kKill when it is
  // over budget while demoted, and kRestore when a demoted task has kept
  // within budget for restore_after bubbles in a row (at most max_restores
  // times; the judgement then carries no window figures).
  OverrunJudgement Record(Nanos overrun, Nanos bubble);

  bool demoted() const { return demoted_; }
  int window_count() const { return count_; }

 private:
  OverrunBudgetConfig config_;
  std::array<Nanos, kMaxWindow> overruns_{};
  std::array<Nanos, kMaxWindow> bubbles_{};
  int count_ = 0, next_ = 0;
  int seen_ = 0;  // bubbles recorded, warm-up included
  Nanos overrun_sum_ = 0, bubble_sum_ = 0;
  bool demoted_ = false;
  int within_while_demoted_ = 0;  // bubbles in a row within budget since the demotion
  int restores_ = 0;
};

}  // namespace freeride
