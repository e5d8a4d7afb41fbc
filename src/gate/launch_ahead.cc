#include "gate/launch_ahead.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <pthread.h>

namespace freeride::gate {

namespace {
thread_local bool t_on_submitter = false;

// Looks at `ready` until it holds or `spin_for` has passed; whether it held.
// A wake through a condition variable costs the waker a system call and the
// woken thread tens of microseconds, as much as the piece of work each wake
// hands over, so both sides look a while before they sleep.
template <typename Ready>
bool SpinUntil(std::chrono::nanoseconds spin_for, Ready ready) {
  if (spin_for.count() <= 0) return ready();
  const auto until = std::chrono::steady_clock::now() + spin_for;
  for (int looks = 0;; ++looks) {
    if (ready()) return true;
    if ((looks & 63) == 63 && std::chrono::steady_clock::now() >= until) return false;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}
}  // namespace

LaunchAhead::LaunchAhead(size_t most_queued, std::chrono::nanoseconds spin_for)
    : most_queued_(std::clamp(most_queued, kLeastQueued, kMostQueued)), spin_for_(spin_for) {}

LaunchAhead::~LaunchAhead() {
  std::unique_lock lock(mutex_);
  ++barriers_asleep_;
  drained_.wait(lock, [&] { return done_ == taken_; });
  --barriers_asleep_;
  stopping_ = true;
  work_.notify_all();
  lock.unlock();
  if (submitter_.joinable()) submitter_.join();
}

bool LaunchAhead::OnSubmitter() { return t_on_submitter; }

void LaunchAhead::Defer(std::function<CuResult()> piece) {
  std::unique_lock lock(mutex_);
  if (queue_.size() >= most_queued_) {
    ++counters_.full_waits;
    ++full_waiters_;
    room_.wait(lock, [&] { return queue_.size() < most_queued_; });
    --full_waiters_;
  }
  if (!submitter_.joinable()) submitter_ = std::thread([this] { Submit(); });
  queue_.push_back(std::move(piece));
  ++taken_;
  queued_.store(queue_.size(), std::memory_order_release);
  idle_.store(false, std::memory_order_release);
  ++counters_.deferred;
  counters_.most_queued = std::max(counters_.most_queued, queue_.size());
  if (submitter_asleep_) {
    ++counters_.wakes;
    work_.notify_one();
  }
}

void LaunchAhead::Barrier() {
  if (idle_.load(std::memory_order_acquire)) return;
  std::unique_lock lock(mutex_);
  const uint64_t mine = taken_;
  if (done_ >= mine) return;
  ++counters_.barriers_waited;
  lock.unlock();
  if (SpinUntil(spin_for_, [&] { return done_seen_.load(std::memory_order_acquire) >= mine; })) return;
  lock.lock();
  ++barriers_asleep_;
  drained_.wait(lock, [&] { return done_ >= mine; });
  --barriers_asleep_;
}

bool LaunchAhead::Idle() const { return idle_.load(std::memory_order_acquire); }

CuResult LaunchAhead::TakeError() {
  std::lock_guard lock(mutex_);
  return std::exchange(first_error_, kCudaSuccess);
}

LaunchAheadCounters LaunchAhead::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void LaunchAhead::Submit() {
  t_on_submitter = true;
  pthread_setname_np(pthread_self(), "freeride-ahead");
  std::unique_lock lock(mutex_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      lock.unlock();
      SpinUntil(spin_for_, [&] { return queued_.load(std::memory_order_acquire) > 0; });
      lock.lock();
    }
    submitter_asleep_ = true;
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    submitter_asleep_ = false;
    if (queue_.empty()) return;  // stopping, and nothing left
    std::function<CuResult()> piece = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_release);
    if (full_waiters_ > 0) room_.notify_one();
    lock.unlock();
    // The piece runs unlocked: the gate may hold this thread in it until a
    // bubble admits the piece, while the program queues more.
    const CuResult result = piece();
    lock.lock();
    ++done_;
    ++counters_.submitted;
    if (result != kCudaSuccess) {
      ++counters_.failed;
      if (first_error_ == kCudaSuccess) first_error_ = result;
    }
    done_seen_.store(done_, std::memory_order_release);
    if (done_ == taken_) idle_.store(true, std::memory_order_release);
    if (barriers_asleep_ > 0 || stopping_) drained_.notify_all();
  }
}

}  // namespace freeride::gate
