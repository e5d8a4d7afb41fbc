#include "channel/lane_segment.h"

#include <fmt/format.h>
#include <unistd.h>

#include <new>

#include "base/futex.h"

namespace freeride {

namespace {
constexpr int kMaxReadRetries = 64;
}

bool LaneSegment::CreateOrOpen(const std::string& path, int lane, std::string* error) {
  Close();
  if (!mapping_.Map(path, sizeof(LaneSegmentLayout), /*writable=*/true, /*create=*/true, error))
    return false;
  auto* layout = static_cast<LaneSegmentLayout*>(mapping_.data());
  bool valid = layout->magic == kLaneSegmentMagic && layout->version == kLaneSegmentVersion &&
               layout->lane == lane && layout->size_bytes == sizeof(LaneSegmentLayout);
  if (!valid) {
    // Fresh or foreign content: start clean.  The file is ours (0600).
    layout = new (mapping_.data()) LaneSegmentLayout{};
    layout->version = kLaneSegmentVersion;
    layout->lane = lane;
    layout->size_bytes = sizeof(LaneSegmentLayout);
    layout->free_memory_bytes.store(UINT64_MAX);
    std::atomic_thread_fence(std::memory_order_release);
    layout->magic = kLaneSegmentMagic;
  }
  // Nobody sleeps on a segment whose daemon is gone (its tasks died with it).
  layout->begin_waiters.store(0);
  layout->end_waiters.store(0);
  layout->armed_task_id.store(0);
  layout->handback_wake_ns.store(INT64_MAX);
  layout->idle_handback_wake_ns.store(INT64_MAX);
  layout->daemon_pid.store(getpid());
  layout->daemon_generation.fetch_add(1);
  layout_ = layout;
  return true;
}

bool LaneSegment::Open(const std::string& path, bool writable, std::string* error) {
  Close();
  if (!mapping_.Map(path, sizeof(LaneSegmentLayout), writable, /*create=*/false, error))
    return false;
  auto* layout = static_cast<LaneSegmentLayout*>(mapping_.data());
  if (layout->magic != kLaneSegmentMagic || layout->version != kLaneSegmentVersion ||
      layout->size_bytes != sizeof(LaneSegmentLayout)) {
    *error = fmt::format("{} is not a FreeRide lane segment of version {}", path,
                         kLaneSegmentVersion);
    mapping_.Reset();
    return false;
  }
  layout_ = layout;
  return true;
}

void LaneSegment::WriteBegin(uint32_t slot, Nanos now, Nanos hint, uint64_t free_memory) {
  LaneSegmentLayout* l = layout_;
  if ((l->bubble_seq.load(std::memory_order_relaxed) & 1u) != 0) WriteEnd(now);
  l->slot.store(slot, std::memory_order_relaxed);
  l->begin_ns.store(now, std::memory_order_relaxed);
  l->hint_ns.store(hint, std::memory_order_relaxed);
  l->free_memory_bytes.store(free_memory, std::memory_order_relaxed);
  // end_ns keeps the previous bubble's end, so a reader that missed that
  // end mark can still learn when the previous bubble closed.
  l->stage_heartbeat_ns.store(now, std::memory_order_relaxed);
  // seq_cst pairs with the sleeper's increment of its counter (Dekker-style)
  // so a wake-up is never missed.
  l->bubble_seq.fetch_add(1, std::memory_order_seq_cst);
  if (l->begin_waiters.load(std::memory_order_seq_cst) != 0)
    env_->WakeAll(&l->bubble_seq, kWakeOnBegin);
}

void LaneSegment::WriteEnd(Nanos now) {
  LaneSegmentLayout* l = layout_;
  uint32_t seq = l->bubble_seq.load(std::memory_order_relaxed);
  if ((seq & 1u) == 0) return;
  ClosedBubble& closed = l->closed[(seq >> 1) % kClosedBubbleRing];
  closed.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  closed.slot.store(l->slot.load(std::memory_order_relaxed), std::memory_order_relaxed);
  closed.begin_ns.store(l->begin_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  closed.end_ns.store(now, std::memory_order_relaxed);
  closed.hint_ns.store(l->hint_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  closed.free_memory_bytes.store(l->free_memory_bytes.load(std::memory_order_relaxed),
                                 std::memory_order_relaxed);
  closed.stage_pid.store(l->stage_pid.load(std::memory_order_relaxed), std::memory_order_relaxed);
  closed.seq.store(seq, std::memory_order_release);
  l->end_ns.store(now, std::memory_order_relaxed);
  l->stage_heartbeat_ns.store(now, std::memory_order_relaxed);
  l->bubble_seq.fetch_add(1, std::memory_order_seq_cst);
  if (l->end_waiters.load(std::memory_order_seq_cst) != 0) env_->WakeAll(&l->bubble_seq, kWakeOnEnd);
}

void LaneSegment::WriteEndNow() {
  LaneSegmentLayout* l = layout_;
  const uint32_t seq = l->bubble_seq.load(std::memory_order_relaxed);
  if ((seq & 1u) == 0) return;
  // seq_cst, a full fence on the store: the clock is read after every task
  // can see that the end has begun.
  l->closing_seq.store(seq, std::memory_order_seq_cst);
  WriteEnd(env_->Now());
}

void LaneSegment::WriteBeginNow(uint32_t slot, Nanos hint, uint64_t free_memory) {
  WriteEndNow();
  WriteBegin(slot, env_->Now(), hint, free_memory);
}

bool LaneSegment::StillOpen(uint32_t seq) const {
  const LaneSegmentLayout* l = layout_;
  return l->closing_seq.load(std::memory_order_seq_cst) != seq &&
         l->bubble_seq.load(std::memory_order_seq_cst) == seq;
}

BubbleMark LaneSegment::Read() const {
  const LaneSegmentLayout* l = layout_;
  BubbleMark mark;
  for (int attempt = 0; attempt < kMaxReadRetries; ++attempt) {
    uint32_t before = l->bubble_seq.load(std::memory_order_acquire);
    mark.seq = before;
    mark.slot = l->slot.load(std::memory_order_relaxed);
    mark.begin_ns = l->begin_ns.load(std::memory_order_relaxed);
    mark.hint_ns = l->hint_ns.load(std::memory_order_relaxed);
    mark.free_memory_bytes = l->free_memory_bytes.load(std::memory_order_relaxed);
    mark.end_ns = l->end_ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (l->bubble_seq.load(std::memory_order_relaxed) == before) break;
  }
  return mark;
}

bool LaneSegment::ClosedBubbleMark(uint32_t seq, BubbleMark* mark) const {
  const ClosedBubble& closed = layout_->closed[(seq >> 1) % kClosedBubbleRing];
  if (closed.seq.load(std::memory_order_acquire) != seq) return false;
  BubbleMark read;
  read.seq = seq;
  read.slot = closed.slot.load(std::memory_order_relaxed);
  read.begin_ns = closed.begin_ns.load(std::memory_order_relaxed);
  read.end_ns = closed.end_ns.load(std::memory_order_relaxed);
  read.hint_ns = closed.hint_ns.load(std::memory_order_relaxed);
  read.free_memory_bytes = closed.free_memory_bytes.load(std::memory_order_relaxed);
  read.stage_pid = closed.stage_pid.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (closed.seq.load(std::memory_order_relaxed) != seq) return false;  // rewritten meanwhile
  *mark = read;
  return true;
}

uint32_t LaneSegment::WaitForChange(uint32_t seen, Nanos timeout, uint32_t wake_on) const {
  auto* l = layout_;
  uint32_t now = l->bubble_seq.load(std::memory_order_seq_cst);
  if (now != seen) return now;
  const bool on_begin = (wake_on & kWakeOnBegin) != 0, on_end = (wake_on & kWakeOnEnd) != 0;
  if (on_begin) l->begin_waiters.fetch_add(1, std::memory_order_seq_cst);
  if (on_end) l->end_waiters.fetch_add(1, std::memory_order_seq_cst);
  now = l->bubble_seq.load(std::memory_order_seq_cst);
  if (now == seen) env_->Wait(&l->bubble_seq, seen, timeout, wake_on);
  if (on_begin) l->begin_waiters.fetch_sub(1, std::memory_order_seq_cst);
  if (on_end) l->end_waiters.fetch_sub(1, std::memory_order_seq_cst);
  return l->bubble_seq.load(std::memory_order_acquire);
}

}  // namespace freeride
