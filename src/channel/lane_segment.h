// The bubble channel: one shared-memory segment per lane.
//
// Writers: the training stage writes bubble marks (begin/end) and its
// heartbeat; the daemon writes its own liveness and the effective prediction
// for the open bubble.  Readers: the lane dispatcher and the lane's side
// tasks (mapped read-only there).
//
// bubble_seq is both a seqlock and a futex word: odd while a bubble is open,
// even otherwise.  The stage stores the mark fields, then bumps bubble_seq,
// then wakes sleepers if any wait for that kind of mark, so the hot path is
// a few stores and, only when someone waits for it, one non-blocking
// FUTEX_WAKE.  Begin and end marks wake with different bits: an armed task
// sleeps through end marks, and a lane that accounts for bubbles in batches
// sleeps through both.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/env.h"
#include "channel/shared_mapping.h"
#include "policy/admission.h"

namespace freeride {

constexpr uint64_t kLaneSegmentMagic = 0x4652454552494445ULL;  // "FREERIDE"
constexpr uint32_t kLaneSegmentVersion = 10;
// The wake-up bits of the two marks (see FutexWait), and of an armed task
// that hands back a bubble with enough left for another task.
constexpr uint32_t kWakeOnBegin = 1u;
constexpr uint32_t kWakeOnEnd = 2u;
constexpr uint32_t kWakeOnHandBack = 4u;

// Closed bubbles remembered, so that a reader that fell several marks behind
// (a lane waiting for a step that overran, or one that sleeps through begin
// marks, or accounts for them in batches) still learns each bubble's whole
// mark.
constexpr uint32_t kClosedBubbleRing = 256;

struct ClosedBubble {
  std::atomic<uint32_t> seq;  // the bubble's (odd) begin sequence; 0 while being written
  std::atomic<uint32_t> slot;
  std::atomic<int64_t> begin_ns;
  std::atomic<int64_t> end_ns;
  std::atomic<int64_t> hint_ns;
  std::atomic<uint64_t> free_memory_bytes;
  std::atomic<int64_t> stage_pid;  // the layout's stage_pid when it closed: the attached process
};

// Slots with their own published forecast; higher slots share the last one
// (as in BubblePredictor's default configuration).
constexpr uint32_t kPublishedSlots = 1024;

struct LaneSegmentLayout {
  uint64_t magic;
  uint32_t version;
  int32_t lane;
  uint64_t size_bytes;

  // --- written by the training stage ---
  alignas(64) std::atomic<uint32_t> bubble_seq;
  // Sleepers on bubble_seq that a begin (an end) mark must wake; the only
  // counters the stage reads (the sleepers write them).
  std::atomic<uint32_t> begin_waiters;
  std::atomic<uint32_t> end_waiters;
  std::atomic<uint32_t> slot;
  std::atomic<int64_t> begin_ns;
  std::atomic<int64_t> hint_ns;  // stage's own length estimate, 0 if none
  std::atomic<uint64_t> free_memory_bytes;  // UINT64_MAX when unknown
  std::atomic<int64_t> end_ns;  // end of the most recent closed bubble
  // The open bubble's seq once its end mark has begun (WriteEndNow stores it
  // before reading the clock for end_ns), so that a task's check that finds
  // its bubble still open (LaneSegment::StillOpen) came before the end's
  // time: a step timed before such a check starts inside its bubble.
  std::atomic<uint32_t> closing_seq;
  std::atomic<int64_t> stage_pid;
  std::atomic<int64_t> stage_heartbeat_ns;
  // Slot (seq / 2) % kClosedBubbleRing holds bubble `seq` once it has ended.
  ClosedBubble closed[kClosedBubbleRing];

  // --- written by the daemon ---
  alignas(64) std::atomic<int64_t> daemon_pid;
  std::atomic<uint32_t> daemon_generation;
  // The task that takes the next bubble without waiting for the dispatcher
  // (0: none).  It sleeps on bubble_seq itself, saving one wake-up hop.
  std::atomic<int64_t> armed_task_id;
  // An armed task that hands back a bubble (or finishes) with at least this
  // much of the forecast left wakes the lane with kWakeOnHandBack, so that
  // the rest is offered to the other tasks; INT64_MAX: none could use it.
  std::atomic<int64_t> handback_wake_ns;
  // The same for a hand-back that leaves all of the rest (the armed task
  // found nothing to do, or finished: TaskSegmentLayout::rest_free_bubble_seq),
  // which any other task may use, not only one with a shorter step.
  std::atomic<int64_t> idle_handback_wake_ns;
  // The stage process (stage_pid) whose bubbles the forecasts below were
  // learned from; 0: none yet.  While another process is attached, the
  // forecasts are not its bubbles' and read as none.
  std::atomic<int64_t> forecast_stage_pid;
  // The dispatcher's forecast of each slot's bubble length (0: no history,
  // use the stage's hint), so an armed task computes the same deadline.
  std::atomic<int64_t> predicted_len_ns[kPublishedSlots];
  // Each slot's second look (policy/bubble_predictor.h) in microseconds,
  // `after` in the high half and `length` in the low one, so that one load
  // gives a consistent pair; 0: none.
  std::atomic<uint64_t> second_look_us[kPublishedSlots];
  // The overhead probe's next withheld window (policy/overhead_probe.h):
  // no side work in [withhold_start_ns, withhold_end_ns).  The end is
  // stored before the start, so a reader that sees a new start sees its end.
  std::atomic<int64_t> withhold_start_ns;
  std::atomic<int64_t> withhold_end_ns;
  // The overhead guard's restrictions (policy/overhead_guard.h): a step's
  // estimate times guard_fit_permille / 1000 must fit (0 reads as 1000);
  // only bubbles whose seq / 2 is a multiple of guard_serve_every are
  // served; no side work at all while guard_paused.
  std::atomic<uint32_t> guard_fit_permille;
  std::atomic<uint32_t> guard_serve_every;
  std::atomic<uint32_t> guard_paused;
};

// Whether a bubble that began at `begin_ns` has gone silent at `now`: no
// heartbeat from its stage for `timeout`.  The segment is the stage's to
// write, so a heartbeat from the future or before boot is garbage, not a sign
// of life, and ends the bubble rather than holding it open.  Pure.
inline bool BubbleSilent(Nanos begin_ns, Nanos heartbeat_ns, Nanos now, Nanos timeout) {
  Nanos last = begin_ns > heartbeat_ns ? begin_ns : heartbeat_ns;
  if (last <= 0 || last > now + kSecond) return true;
  return now - last > timeout;
}

// The forecast an armed task uses for `mark`, identical to the dispatcher's:
// the slot's published length, else the stage's hint, else 0.  Wait-free;
// any thread or process with the segment mapped.
inline Nanos PublishedForecast(const LaneSegmentLayout& layout, const struct BubbleMark& mark);

// A consistent copy of one bubble mark.
struct BubbleMark {
  uint32_t seq = 0;
  uint32_t slot = 0;
  Nanos begin_ns = 0;
  Nanos hint_ns = 0;
  uint64_t free_memory_bytes = UINT64_MAX;
  Nanos end_ns = 0;
  int64_t stage_pid = 0;  // of a closed bubble read from the ring: the process attached then
  bool open() const { return (seq & 1u) != 0; }
};

// Whether the published forecasts were learned from the attached stage
// process: false from a new process's attach until the lane has forgotten
// the last one's.  Wait-free; any thread or process.
inline bool ForecastsFollowTheStage(const LaneSegmentLayout& layout) {
  // Pairs with the lane's release store after it cleared the old forecasts.
  const int64_t learned_from = layout.forecast_stage_pid.load(std::memory_order_acquire);
  const int64_t attached = layout.stage_pid.load(std::memory_order_relaxed);
  return learned_from == 0 || attached <= 0 || learned_from == attached;
}

inline Nanos PublishedForecast(const LaneSegmentLayout& layout, const BubbleMark& mark) {
  uint32_t index = mark.slot < kPublishedSlots ? mark.slot : kPublishedSlots - 1;
  Nanos learned = ForecastsFollowTheStage(layout)
                      ? layout.predicted_len_ns[index].load(std::memory_order_relaxed)
                      : 0;
  return learned > 0 ? learned : (mark.hint_ns > 0 ? mark.hint_ns : 0);
}

// The lane's published probe window and guard restrictions.  Every task
// and the lane itself judge by these, so that a withheld window or a guard
// level holds for all of them alike.  Wait-free; any thread or process with
// the segment mapped.
inline AdmissionGate PublishedGate(const LaneSegmentLayout& layout) {
  AdmissionGate gate;
  uint32_t permille = layout.guard_fit_permille.load(std::memory_order_relaxed);
  if (permille > 0) gate.fit_factor = permille / 1000.0;
  gate.serve_every = layout.guard_serve_every.load(std::memory_order_relaxed);
  gate.paused = layout.guard_paused.load(std::memory_order_relaxed) != 0;
  gate.withhold_start_ns = layout.withhold_start_ns.load(std::memory_order_acquire);
  gate.withhold_end_ns = layout.withhold_end_ns.load(std::memory_order_relaxed);
  return gate;
}

// The admission at `now` for `mark`, whose forecast end is `predicted_end`
// (policy/admission.h).  Wait-free; any thread or process.
inline Admission AdmissionFor(const LaneSegmentLayout& layout, const BubbleMark& mark, Nanos now,
                              Nanos predicted_end) {
  return AdmitAt(PublishedGate(layout), mark.seq, now, predicted_end);
}

// The published second look of `slot`: when a bubble still open `*after_ns`
// after its begin is forecast to last `*length_ns`; false when there is none
// (or it is past the forecast end).  Wait-free; any thread or process.
inline bool PublishedSecondLook(const LaneSegmentLayout& layout, uint32_t slot, Nanos* after_ns,
                                Nanos* length_ns) {
  uint32_t index = slot < kPublishedSlots ? slot : kPublishedSlots - 1;
  uint64_t packed = layout.second_look_us[index].load(std::memory_order_relaxed);
  if (packed == 0 || !ForecastsFollowTheStage(layout)) return false;
  *after_ns = static_cast<Nanos>(packed >> 32) * kMicrosecond;
  *length_ns = static_cast<Nanos>(packed & 0xffffffffu) * kMicrosecond;
  return *after_ns < *length_ns;  // else the point is past the bubble's end
}

// The packed form of a second look for LaneSegmentLayout::second_look_us
// (lengths beyond 32 bits of microseconds, over an hour, saturate).
inline uint64_t PackSecondLook(Nanos after_ns, Nanos length_ns) {
  auto us = [](Nanos ns) {
    return static_cast<uint64_t>(std::clamp<Nanos>(ns / kMicrosecond, 0, 0xffffffffLL));
  };
  return us(after_ns) << 32 | us(length_ns);
}

// One process's mapping of a lane segment.  The object itself is not
// synchronised: Open, Close and set_env are its owner's, with no other call
// in flight; the layout's fields are atomics, shared as described above.
class LaneSegment {
 public:
  // Daemon side: opens the segment if it exists and is valid (keeping what
  // a still-running stage wrote), else creates it fresh.  Either way it
  // clears the waiter counts and the armed task, and records this process as
  // the daemon.  False with *error when the file cannot be mapped.
  bool CreateOrOpen(const std::string& path, int lane, std::string* error);
  // Stage (writable) or task (read-only) side: opens an existing segment and
  // validates its header.  A missing or corrupt segment is an error.
  bool Open(const std::string& path, bool writable, std::string* error);
  // Unmaps the segment; layout() is then null.
  void Close() { mapping_.Reset(); layout_ = nullptr; }

  bool is_open() const { return layout_ != nullptr; }
  LaneSegmentLayout* layout() const { return layout_; }
  const SharedMapping& mapping() const { return mapping_; }

  // Stage side.  Begin opens a bubble (closing an unclosed one first, at
  // `now`); End closes it (a no-op when none is open).  Both are wait-free
  // and never allocate.  One writer at a time: the stage's marks are not
  // atomic with each other.
  void WriteBegin(uint32_t slot, Nanos now, Nanos hint, uint64_t free_memory);
  void WriteEnd(Nanos now);
  // The stage's marks, timed by env(): End with the time read after the
  // close is announced (closing_seq), and Begin after such an end of an
  // unclosed bubble.  WriteEnd(now) with a time read earlier leaves a
  // window in which a task sees the bubble open after its end time.
  void WriteEndNow();
  void WriteBeginNow(uint32_t slot, Nanos hint, uint64_t free_memory);

  // Task side: whether bubble `seq` is still open, its end not yet begun.
  // A clock read before a true answer is earlier than the bubble's end_ns
  // when the stage ends it with WriteEndNow.  Any thread or process.
  bool StillOpen(uint32_t seq) const;

  // Reads a consistent snapshot of the current mark (retries while a writer
  // is mid-update; gives up after a bounded number of tries and returns the
  // last read, which callers treat as advisory).  Any thread or process.
  BubbleMark Read() const;
  // The whole mark of the bubble that began with sequence `seq`, its end
  // included, when it has ended and is still among the last
  // kClosedBubbleRing; false otherwise.  Any thread or process.
  bool ClosedBubbleMark(uint32_t seq, BubbleMark* mark) const;

  // Sleeps until bubble_seq differs from `seen` (or the timeout passes, or a
  // wake-up in `wake_on` comes), counting itself meanwhile among the waiters
  // of the marks in `wake_on`.  It sleeps on through marks not in `wake_on`:
  // the sequence moves on without it.  Needs a writable mapping; an armed
  // task (read-only mapping) sleeps on bubble_seq directly and the
  // dispatcher counts it in `begin_waiters` on its behalf.  Returns the new
  // bubble_seq.  Any thread.
  uint32_t WaitForChange(uint32_t seen, Nanos timeout,
                         uint32_t wake_on = kWakeOnBegin | kWakeOnEnd) const;

  // The Env whose waits and wake-ups the marks and WaitForChange use
  // (Env::Default() unless a test sets a fake).  Set before any other thread
  // uses the segment; it must outlive the segment's use.
  void set_env(Env* env) { env_ = env; }
  Env* env() const { return env_; }

 private:
  SharedMapping mapping_;
  LaneSegmentLayout* layout_ = nullptr;
  Env* env_ = Env::Default();
};

}  // namespace freeride
