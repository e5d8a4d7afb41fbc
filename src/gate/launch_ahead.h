// Launch ahead: a side program's asynchronous pieces of GPU work are taken
// off its own threads and submitted, in the order they were made, by one
// thread of the interposer's (the submitter), which the gate holds instead.
//
// Why: most of a short bubble's harvest is lost to the program's host pace
// (bench/results/gate_margin_sweep_h200.md: `compiled`'s kernels are shorter
// than its launches, and even alone its GPU waits on its host most of the
// time it is idle).  Held on the host while the gate is shut, such a program
// does nothing through the training's busy time, and in the bubble its GPU
// again waits on its launches.  With its launches deferred, its host goes on
// making pieces through the busy time; no wait is left pending on the GPU
// (the pieces stay on the host, in this queue), and in the bubble the
// submitter releases them as fast as the gate admits them.
//
// What may be deferred is the interposer's choice (launch_ahead's callers):
// only work whose arguments can be copied whole and whose stream means the
// same from any thread.  Everything else that is ordered against the
// queued work (a synchronisation, an event, a free, a capture, any piece not
// deferred) first calls Barrier(), which returns once every piece deferred
// before it has been submitted.  So the program sees its work in its own
// order, only later.
//
// Errors: a deferred piece's failure cannot be returned by the call that
// made it (that call returned success).  The first one is kept and returned
// by TakeError(), which the interposer calls after each barrier, so a later
// synchronisation reports it, as an asynchronous error would be.
//
// Hand-offs: the submitter, its queue empty, looks for new pieces for a
// while (kSpinFor) before it sleeps, and a Barrier looks for its pieces'
// submission as long before it sleeps; Defer wakes the submitter only where it sleeps.
// A condition variable's wake costs as much as the launch it hands over.
//
// Threading: Defer, Barrier and TakeError from any thread at once.  Pieces
// run on the submitter thread, one at a time, in the order Defer took them
// (a thread's own order; pieces of threads racing each other in the order
// they reached the queue).  Defer blocks while `most_queued` pieces wait;
// Barrier blocks while pieces deferred before it remain.  Neither may be
// called from a piece (OnSubmitter() says where a caller is).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "gate/driver_types.h"

namespace freeride::gate {

struct LaunchAheadCounters {
  uint64_t deferred = 0;         // pieces taken into the queue
  uint64_t submitted = 0;        // pieces the submitter has run
  uint64_t failed = 0;           // pieces whose submission failed (the first is TakeError's)
  uint64_t barriers_waited = 0;  // barriers that found pieces queued, and waited
  uint64_t full_waits = 0;       // Defers that found the queue full, and waited
  uint64_t wakes = 0;            // Defers that woke the submitter from its sleep
  size_t most_queued = 0;        // the longest the queue has been
};

class LaunchAhead {
 public:
  // The queue's bounds: a deferred piece is a few hundred bytes, so even the
  // largest is a few MiB; a smaller one only lets the program run less far ahead.
  static constexpr size_t kLeastQueued = 1;
  static constexpr size_t kMostQueued = 65536;
  // How long the submitter and a barrier look before they sleep, by default.
  static constexpr std::chrono::microseconds kSpinFor{50};
  static constexpr std::chrono::microseconds kMostSpin{1000};

  // `most_queued` (taken into [kLeastQueued, kMostQueued]): pieces waiting
  // at most before Defer blocks; `spin_for`: how long the submitter and a
  // barrier look before they sleep (0: they sleep at once).  The submitter
  // thread starts at the first Defer.
  explicit LaunchAhead(size_t most_queued, std::chrono::nanoseconds spin_for = kSpinFor);
  // Not meant to be destroyed while pieces remain (the interposer never
  // destroys its own): waits for the queue to empty, then stops the submitter.
  ~LaunchAhead();
  LaunchAhead(const LaunchAhead&) = delete;
  LaunchAhead& operator=(const LaunchAhead&) = delete;

  // Queues `piece` (which submits one piece of work and returns the driver's
  // result) behind every piece queued before it.  Blocks while the queue is full.
  void Defer(std::function<CuResult()> piece);
  // Returns once every piece deferred before this call has run.  Cheap when
  // none is queued (one atomic load).
  void Barrier();
  // Whether no piece is queued or running now.
  bool Idle() const;
  // The first failed piece's result since the last call (kCudaSuccess: none),
  // cleared by the call.
  CuResult TakeError();
  LaunchAheadCounters counters() const;
  size_t most_queued() const { return most_queued_; }

  // Whether the calling thread is a submitter (inside a piece): its work is
  // submitted there and then, not deferred again.
  static bool OnSubmitter();

 private:
  void Submit();

  const size_t most_queued_;
  const std::chrono::nanoseconds spin_for_;
  mutable std::mutex mutex_;
  std::condition_variable work_;   // the submitter waits for pieces
  std::condition_variable room_;   // Defer waits for room
  std::condition_variable drained_;  // Barrier waits for its pieces
  std::deque<std::function<CuResult()>> queue_;  // under mutex_
  uint64_t taken_ = 0;    // pieces deferred, in all; under mutex_
  uint64_t done_ = 0;     // pieces run, in all; under mutex_
  std::atomic<bool> idle_{true};  // taken_ == done_, for Barrier's cheap look
  std::atomic<size_t> queued_{0};      // queue_.size(), for the submitter's look before it sleeps
  std::atomic<uint64_t> done_seen_{0};  // done_, for a barrier's look before it sleeps
  bool submitter_asleep_ = false;  // in work_.wait; under mutex_
  int barriers_asleep_ = 0;        // threads in drained_.wait; under mutex_
  int full_waiters_ = 0;           // Defers in room_.wait; under mutex_
  bool stopping_ = false;  // under mutex_
  CuResult first_error_ = kCudaSuccess;  // under mutex_
  LaunchAheadCounters counters_;  // under mutex_
  std::thread submitter_;  // started at the first Defer; under mutex_
};

}  // namespace freeride::gate
