#include "channel/gate_mark_watcher.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <system_error>

#include "base/settings.h"
#include "gate/gate_page.h"

namespace freeride {

namespace {
constexpr Nanos kDefaultPollInterval = 20 * kMicrosecond;
}  // namespace

GateMarkWatcher::GateMarkWatcher(Env* env, Nanos poll_interval, uint32_t last_opened, Sink sink,
                                 Nanos sleep_limit)
    : env_(env),
      poll_interval_(poll_interval),
      sleep_limit_(sleep_limit),
      sink_(std::move(sink)),
      reader_(last_opened) {}

GateMarkWatcher::~GateMarkWatcher() { Stop(); }

Nanos GateMarkWatcher::PollIntervalFromEnvironment() {
  return static_cast<Nanos>(WholeNumberSetting("freeride", "FREERIDE_GATE_MARK_POLL_US",
                                               kDefaultPollInterval / kMicrosecond, 1, 10000, "microseconds")) *
         kMicrosecond;
}

void GateMarkWatcher::Record(uint32_t bubble, uint32_t slot, int64_t predicted_ns,
                             uint64_t free_memory_bytes) {
  GateMarkRecord& record = records_[bubble % kGateMarkRecords];
  record.bubble.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  record.slot = slot;
  record.predicted_ns = predicted_ns;
  record.free_memory_bytes = free_memory_bytes;
  record.bubble.store(bubble, std::memory_order_release);
}

void GateMarkWatcher::Forget(uint32_t bubble) {
  records_[bubble % kGateMarkRecords].bubble.store(0, std::memory_order_release);
}

void GateMarkWatcher::Wrote(std::atomic<uint32_t>* word, uint32_t value, uint32_t opened) {
  word_.store(word, std::memory_order_release);
  opened_.store(opened, std::memory_order_release);
  last_written_.store(value, std::memory_order_seq_cst);
  if (!thread_.joinable() && !stop_.load()) {
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
      // No thread: no marks (the stage's begin_gated keeps trying).
    }
    return;
  }
  Wake();
}

void GateMarkWatcher::Wake() {
  wakes_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    env_->WakeAll(&wakes_);
  }
}

void GateMarkWatcher::ForceEnd(uint32_t bubble) {
  force_end_.store(bubble, std::memory_order_seq_cst);
  Wake();
}

void GateMarkWatcher::Stop() {
  if (stop_.exchange(true)) return;
  if (!thread_.joinable()) return;
  Wake();
  thread_.join();
}

bool GateMarkWatcher::ObserveOnce(uint32_t* seen) {
  std::atomic<uint32_t>* word = word_.load(std::memory_order_acquire);
  if (!word) return false;
  const uint32_t opened = opened_.load(std::memory_order_acquire);
  *seen = word->load(std::memory_order_acquire);
  reader_.Observe(*seen, opened, records_.data(), sink_);
  const uint32_t force = force_end_.exchange(0, std::memory_order_acq_rel);
  if (force != 0) reader_.ForceEnd(force, sink_);
  // Open for a bubble already ended: no close will come from the stream.
  if (GateIsOpen(*seen) && reader_.Ended(*seen >> 1)) {
    uint32_t expected = *seen;
    if (word->compare_exchange_strong(expected, GateClosedValue(*seen >> 1))) *seen = GateClosedValue(*seen >> 1);
  }
  return true;
}

void GateMarkWatcher::Run() {
  // nanosleep's default slack (50 us) would make every poll that long.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  pthread_setname_np(pthread_self(), "freeride-marks");  // for top and /proc: its CPU time is ours
  Nanos interval = poll_interval_;
  uint32_t last_seen = 0;
  for (;;) {
    const bool stopping = stop_.load(std::memory_order_acquire);
    const uint32_t written = last_written_.load(std::memory_order_seq_cst);
    uint32_t seen = 0;
    const bool read = ObserveOnce(&seen);
    if (stopping) return;
    // Sleep only once the word as read (and marked) shows the last write:
    // a change after that read is marked at the next.
    if (read && seen != written) {
      // Back off while the word stays the same, up to 4 times the interval.
      interval = seen == last_seen ? std::min(2 * interval, 4 * poll_interval_) : poll_interval_;
      last_seen = seen;
      std::this_thread::sleep_for(std::chrono::nanoseconds(interval));
      continue;
    }
    interval = poll_interval_;
    // The word shows the last write enqueued: nothing to see until the next
    // write, forced end or stop, each of which moves `wakes_` after its own
    // change and wakes a sleeper (an event count: a change made after the
    // checks below moves `wakes_` past `wakes`, so the wait returns at once).
    sleeping_.store(true, std::memory_order_seq_cst);
    const uint32_t wakes = wakes_.load(std::memory_order_seq_cst);
    if (last_written_.load(std::memory_order_seq_cst) == written && !stop_.load() &&
        force_end_.load(std::memory_order_seq_cst) == 0)
      env_->Wait(&wakes_, wakes, sleep_limit_);
    sleeping_.store(false, std::memory_order_relaxed);
  }
}

}  // namespace freeride
