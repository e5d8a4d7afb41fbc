#include "gate/launch_ahead.h"

#include <algorithm>
#include <utility>
#include <pthread.h>

namespace freeride::gate {

namespace {
thread_local bool t_on_submitter = false;
}  // namespace

LaunchAhead::LaunchAhead(size_t most_queued)
    : most_queued_(std::clamp(most_queued, kLeastQueued, kMostQueued)) {}

LaunchAhead::~LaunchAhead() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [&] { return done_ == taken_; });
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
    room_.wait(lock, [&] { return queue_.size() < most_queued_; });
  }
  if (!submitter_.joinable()) submitter_ = std::thread([this] { Submit(); });
  queue_.push_back(std::move(piece));
  ++taken_;
  idle_.store(false, std::memory_order_release);
  ++counters_.deferred;
  counters_.most_queued = std::max(counters_.most_queued, queue_.size());
  work_.notify_one();
}

void LaunchAhead::Barrier() {
  if (idle_.load(std::memory_order_acquire)) return;
  std::unique_lock lock(mutex_);
  const uint64_t mine = taken_;
  if (done_ >= mine) return;
  ++counters_.barriers_waited;
  drained_.wait(lock, [&] { return done_ >= mine; });
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
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    std::function<CuResult()> piece = std::move(queue_.front());
    queue_.pop_front();
    room_.notify_one();
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
    if (done_ == taken_) idle_.store(true, std::memory_order_release);
    drained_.notify_all();
  }
}

}  // namespace freeride::gate
