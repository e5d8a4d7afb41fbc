// The thread, in the training stage's own process, that turns the lane's gate
// word into the stage's bubble marks (what it implies: gate_marks.h), so
// that the trainer's stream gets no host function: a trainer that
// synchronises its device after each exchange (megatron-core does) waits
// for every host function queued before, tens of microseconds each, and
// lost 5% of a 54 ms iteration to them on one H200
// (bench/results/marks_cost_gpu.md).
//
// While the stage has enqueued gate writes the word does not show yet, the
// thread reads the word every poll interval (FREERIDE_GATE_MARK_POLL_US,
// default 20 us, with a timer slack of 1 us), backing off to 4 times that
// while the word stays the same; otherwise it sleeps until the next write is
// enqueued.  A mark is timed when the thread sees the word change, so it is
// late by up to the interval plus the thread's wake-up.  The cost is that
// thread's CPU time (it is named freeride-marks): on a loaded 2-core
// machine, a core's 10-40% while the stage's CPU runs ahead of its GPU; on
// an H200 node, 5-9% of a core while the stage marks a wait every 0.2-3 ms
// (asleep between runs).  Waking it is a futex call on the
// training thread, which costs no measurable time: keeping the thread
// reading for 50 ms after it caught up, so that no write needed a wake-up,
// saved nothing and cost half as much CPU again
// (bench/results/gated_marks_cost_h200.md).  Reading on only while the
// word shows the gate open, so that a close stored from the host (after a
// synchronising wait) needed no wake-up, took about 0.6 of +3.4% off 0.2 ms
// exchanges and nothing measurable off 3 ms ones, for polling through every
// bubble; not kept (bench/results/gate_tuning_h200.md).
//
// The thread also closes the gate, with a compare-and-swap on the word, where
// the stream will not: a bubble whose close could not be enqueued
// (ForceEnd), or whose open landed after its close (the two on unordered
// streams).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "base/clock.h"
#include "base/env.h"
#include "channel/gate_marks.h"

namespace freeride {

class GateMarkWatcher {
 public:
  // Called on the watcher's thread, one at a time, in order.
  using Sink = std::function<void(const GateMark&)>;

  // `last_opened`: the stage's last bubble number opened before this
  // watcher (0: none).  `env` and the sink outlive the watcher.  The thread
  // starts at the first Wrote.  Asleep, it looks at the word again at least
  // every `sleep_limit` (negative: only when woken), for a word changed by
  // someone other than the stage's stream (a daemon closing a silent
  // stage's gate, an open that landed after its close).
  GateMarkWatcher(Env* env, Nanos poll_interval, uint32_t last_opened, Sink sink,
                  Nanos sleep_limit = kSecond);
  // Stop().
  ~GateMarkWatcher();

  // The poll interval FREERIDE_GATE_MARK_POLL_US asks for (1 us to 10 ms),
  // else 20 us (with a warning on stderr for a value that is not one).
  static Nanos PollIntervalFromEnvironment();

  // Training thread, before the stream write that opens `bubble` is
  // enqueued: what its begin mark carries.
  void Record(uint32_t bubble, uint32_t slot, int64_t predicted_ns, uint64_t free_memory_bytes);
  // Training thread, after a stream write of `value` to `word` (the host
  // address of the lane's gate word, which stays mapped for the process's
  // life) was enqueued; `opened` is the stage's last opened bubble.
  void Wrote(std::atomic<uint32_t>* word, uint32_t value, uint32_t opened);
  // Training thread: the open of `bubble` recorded could not be enqueued.
  void Forget(uint32_t bubble);
  // Training thread: the close of `bubble` could not be enqueued; the
  // watcher ends it now if it has seen it begin (else the next bubble's
  // begin ends it).
  void ForceEnd(uint32_t bubble);
  // Reads the word once more, marks what it shows, and joins the thread.
  // Training thread; idempotent.
  void Stop();

  // Bubbles that could not be marked (their record was reused): for tests
  // and diagnostics.  Any thread, after Stop.
  uint64_t skipped() const { return reader_.skipped(); }
  // How many times a Wrote, ForceEnd or Stop had to wake the sleeping
  // thread (a futex call on the caller's thread).  Any thread.
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }
  // Whether the thread sleeps until woken (or `sleep_limit`).  Any thread.
  bool asleep() const { return sleeping_.load(std::memory_order_seq_cst); }

 private:
  void Run();
  // Reads the word (into *seen) and marks what it implies; false before
  // the first write.
  bool ObserveOnce(uint32_t* seen);
  void Wake();

  Env* const env_;
  const Nanos poll_interval_;
  const Nanos sleep_limit_;
  Sink sink_;
  GateMarkReader reader_;  // the thread's alone (and Stop's, after the join)
  std::array<GateMarkRecord, kGateMarkRecords> records_{};
  std::atomic<std::atomic<uint32_t>*> word_{nullptr};
  std::atomic<uint32_t> last_written_{0};
  std::atomic<uint32_t> opened_{0};
  std::atomic<uint32_t> force_end_{0};
  std::atomic<uint32_t> wakes_{0};  // moved by every Wrote, ForceEnd and Stop
  std::atomic<bool> sleeping_{false};
  std::atomic<uint64_t> wakeups_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace freeride
