#include "channel/gate_marks.h"

namespace freeride {

GateMarkReader::GateMarkReader(uint32_t last_opened) : next_(Next(last_opened & kBubbleMask)) {}

bool GateMarkReader::Record(uint32_t bubble, const GateMarkRecord* records, GateMark* begin) {
  const GateMarkRecord& record = records[bubble % kGateMarkRecords];
  if (record.bubble.load(std::memory_order_acquire) != bubble) {
    ++skipped_;
    return false;
  }
  begin->slot = record.slot;
  begin->predicted_ns = record.predicted_ns;
  begin->free_memory_bytes = record.free_memory_bytes;
  // Read again: a training thread a whole ring ahead may have reused it.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (record.bubble.load(std::memory_order_relaxed) != bubble) {
    ++skipped_;
    return false;
  }
  return true;
}

}  // namespace freeride
