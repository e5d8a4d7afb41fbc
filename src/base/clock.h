// Clock: the seam between FreeRide's logic and time.  Policy code takes a
// Clock so the runtime, the tests and the simulator share one implementation.
#pragma once
#include <atomic>
#include <cstdint>

namespace freeride {

using Nanos = int64_t;  // nanoseconds on CLOCK_MONOTONIC unless stated

constexpr Nanos kMicrosecond = 1000;
constexpr Nanos kMillisecond = 1000 * kMicrosecond;
constexpr Nanos kSecond = 1000 * kMillisecond;

class Clock {
 public:
  virtual ~Clock() = default;
  // Current time in nanoseconds.  Monotonic, comparable across processes
  // on the same host for the system clock.  Any thread; never blocks.
  virtual Nanos Now() const = 0;
};

// CLOCK_MONOTONIC, shared by every process on the host, so a mark written by
// the training stage can be compared with a time read by a side task.
class SystemClock final : public Clock {
 public:
  Nanos Now() const override;
  // The process-wide instance; lives for the whole process.  Any thread.
  static const SystemClock& Instance();
};

// A clock that moves only when told to; for tests and the simulator.  Its
// time is atomic: any thread may read, set or advance it.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = 0) : now_(start) {}
  Nanos Now() const override { return now_.load(std::memory_order_relaxed); }
  void Set(Nanos t) { now_.store(t, std::memory_order_relaxed); }
  void Advance(Nanos d) { now_.fetch_add(d, std::memory_order_relaxed); }

 private:
  std::atomic<Nanos> now_;
};

// Reads CLOCK_MONOTONIC directly; cheap (vDSO), never blocks.  Any thread.
Nanos MonotonicNow();
// Wall-clock time in nanoseconds since the epoch, for journals and logs.
// It can jump, so intervals use MonotonicNow.  Any thread.
Nanos WallNow();

}  // namespace freeride
