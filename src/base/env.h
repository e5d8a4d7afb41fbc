// Env: the seam between FreeRide's mechanism and the operating system, in
// LevelDB's style: the monotonic clock, futex wait and wake, and process
// liveness.  Signals to tasks go through ProcessSupervisor::Signal (process
// group first), the one place that knows how a task is signalled.  Production code uses Env::Default(); tests pass a fake
// (tests/fake_env.h) whose time moves only when told to, so that waits and
// intervals are tested without sleeping.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "base/clock.h"
#include "base/futex.h"

namespace freeride {

class Env {
 public:
  virtual ~Env() = default;

  // CLOCK_MONOTONIC nanoseconds (shared by every process on the host).
  // Any thread; never blocks.
  virtual Nanos Now() = 0;

  // Sleeps while *word == expected, for at most `timeout` of this Env's time
  // (negative: no limit), unless woken by WakeAll with bits that intersect
  // `wake_bits`.  Returns false on timeout; true on a wake-up or a changed
  // value.  Spurious returns are possible: callers re-check.  Any thread.
  virtual bool Wait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
                    uint32_t wake_bits = kFutexAnyWake) = 0;

  // Wakes every waiter on `word` whose bits intersect `bits`.  Never blocks.
  virtual void WakeAll(std::atomic<uint32_t>* word, uint32_t bits = kFutexAnyWake) = 0;

  // Whether process `pid` exists (a zombie counts until it is reaped).
  virtual bool ProcessAlive(pid_t pid) = 0;

  // The process group of process `pid`, or -1 when it does not exist.  A
  // task is launched as its group's leader, so its children's group is its
  // pid.  Any thread; never blocks.
  virtual pid_t ProcessGroupOf(pid_t pid) = 0;

  // The real one: CLOCK_MONOTONIC, process-shared futexes, kill(2).  Never
  // destroyed; thread-safe.
  static Env* Default();
};

}  // namespace freeride
