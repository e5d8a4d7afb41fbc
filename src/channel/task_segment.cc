#include "channel/task_segment.h"

#include <fmt/format.h>

#include <bit>
#include <new>

#include "base/futex.h"
#include "channel/step_accounting.h"

namespace freeride {

bool TaskSegment::Create(const std::string& path, int64_t task_id, std::string* error) {
  Close();
  if (!mapping_.Map(path, sizeof(TaskSegmentLayout), true, true, error)) return false;
  auto* layout = new (mapping_.data()) TaskSegmentLayout{};
  layout->version = kTaskSegmentVersion;
  layout->ring_size = kStepRingSize;
  layout->task_id = task_id;
  std::atomic_thread_fence(std::memory_order_release);
  layout->magic = kTaskSegmentMagic;
  layout_ = layout;
  return true;
}

bool TaskSegment::Open(const std::string& path, std::string* error) {
  Close();
  if (!mapping_.Map(path, sizeof(TaskSegmentLayout), true, false, error)) return false;
  auto* layout = static_cast<TaskSegmentLayout*>(mapping_.data());
  if (layout->magic != kTaskSegmentMagic || layout->version != kTaskSegmentVersion ||
      layout->ring_size != kStepRingSize) {
    *error = fmt::format("{} is not a FreeRide task segment of version {}", path,
                         kTaskSegmentVersion);
    mapping_.Reset();
    return false;
  }
  layout_ = layout;
  return true;
}

void TaskSegment::Grant(uint32_t bubble_seq, Nanos deadline) {
  auto* l = layout_;
  l->granted_bubble_seq.store(bubble_seq, std::memory_order_relaxed);
  l->grant_deadline_ns.store(deadline, std::memory_order_relaxed);
  l->grant_active.store(1, std::memory_order_relaxed);
  l->grant_seq.fetch_add(1, std::memory_order_seq_cst);
  if (l->task_sleeping.load(std::memory_order_seq_cst) != 0) env_->WakeAll(&l->grant_seq);
}

void TaskSegment::Revoke() {
  auto* l = layout_;
  l->grant_active.store(0, std::memory_order_relaxed);
  l->grant_seq.fetch_add(1, std::memory_order_seq_cst);
  if (l->task_sleeping.load(std::memory_order_seq_cst) != 0) env_->WakeAll(&l->grant_seq);
}

void TaskSegment::SendCommand(TaskCommand command) {
  auto* l = layout_;
  l->command.store(static_cast<uint32_t>(command), std::memory_order_relaxed);
  l->grant_seq.fetch_add(1, std::memory_order_seq_cst);
  env_->WakeAll(&l->grant_seq);
}

void TaskSegment::SetArmed(bool armed) {
  auto* l = layout_;
  l->armed.store(armed ? 1 : 0, std::memory_order_relaxed);
  l->grant_seq.fetch_add(1, std::memory_order_seq_cst);
  env_->WakeAll(&l->grant_seq);
}

namespace {
uint32_t WaitOn(Env* env, std::atomic<uint32_t>* word, std::atomic<uint32_t>* sleeping,
                uint32_t seen, Nanos timeout) {
  uint32_t now = word->load(std::memory_order_seq_cst);
  if (now != seen) return now;
  sleeping->fetch_add(1, std::memory_order_seq_cst);
  now = word->load(std::memory_order_seq_cst);
  if (now == seen) env->Wait(word, seen, timeout);
  sleeping->fetch_sub(1, std::memory_order_seq_cst);
  return word->load(std::memory_order_acquire);
}
}  // namespace

uint32_t TaskSegment::WaitForAck(uint32_t seen, Nanos timeout) const {
  return WaitOn(env_, &layout_->ack_seq, &layout_->daemon_sleeping, seen, timeout);
}

uint32_t TaskSegment::WaitForGrant(uint32_t seen, Nanos timeout) const {
  return WaitOn(env_, &layout_->grant_seq, &layout_->task_sleeping, seen, timeout);
}

void TaskSegment::Acknowledge() {
  auto* l = layout_;
  l->ack_seq.fetch_add(1, std::memory_order_seq_cst);
  if (l->daemon_sleeping.load(std::memory_order_seq_cst) != 0) env_->WakeAll(&l->ack_seq);
}

void TaskSegment::RecordStep(Nanos start, Nanos end, double units, uint32_t bubble_seq) {
  auto* l = layout_;
  uint64_t head = l->ring_head.load(std::memory_order_relaxed);
  l->ring[head % kStepRingSize] = StepRecord{start, end, units, bubble_seq, 0};
  l->ring_head.store(head + 1, std::memory_order_release);
  l->steps_done.fetch_add(1, std::memory_order_relaxed);
  AddProgress(units);
}

void TaskSegment::AddProgress(double units) {
  // A NaN (a loss returned as units) would stick in the total for good, and
  // a negative count would undo work: both count as 0, as the daemon counts
  // such a step.
  if (!PlausibleUnits(units)) return;
  auto* l = layout_;
  // Single writer (the task), so load-add-store is enough.
  double total = std::bit_cast<double>(l->progress_bits.load(std::memory_order_relaxed)) + units;
  l->progress_bits.store(std::bit_cast<uint64_t>(total), std::memory_order_relaxed);
}

double TaskSegment::progress() const {
  return std::bit_cast<double>(layout_->progress_bits.load(std::memory_order_relaxed));
}

}  // namespace freeride
