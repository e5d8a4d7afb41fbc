#include "gate/gate_page.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace freeride {

namespace {

bool Valid(const GatePageLayout& layout) {
  return layout.magic == kGatePageMagic && layout.version == kGatePageVersion;
}

}  // namespace

bool GatePage::CreateOrOpen(const std::string& path, int lane, std::string* error) {
  Close();
  if (!mapping_.Map(path, kGatePageBytes, /*writable=*/true, /*create=*/true, error)) return false;
  layout_ = static_cast<GatePageLayout*>(mapping_.data());
  if (layout_->magic == kGatePageMagic && layout_->version != kGatePageVersion) {
    // A page of another version: processes of an older build may still map
    // it and would read this layout as theirs.  A new file leaves them their
    // own page, whose gate no stage opens any more (their work is held, never
    // run ungated).
    Close();
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      *error = fmt::format("{}: a gate page of version other than {} could not be removed: {}", path,
                           kGatePageVersion, std::strerror(errno));
      return false;
    }
    if (!mapping_.Map(path, kGatePageBytes, /*writable=*/true, /*create=*/true, error)) return false;
    layout_ = static_cast<GatePageLayout*>(mapping_.data());
  }
  if (!Valid(*layout_) || layout_->lane != lane) {
    layout_->admit_bubble.store(0);
    layout_->admit_until_ns.store(0);
    layout_->early_closes.store(0);
    layout_->forced_closes.store(0);
    layout_->interposers_attached.store(0);
    layout_->stage_pid.store(0);
    for (GateTaskSlot& slot : layout_->tasks) {
      slot.pid.store(0);
      slot.ClearFields();
    }
    layout_->lane = lane;
    layout_->version = kGatePageVersion;
    layout_->magic = kGatePageMagic;
  }
  ForceClose();
  PublishAhead({});  // nor a forecast of the bubbles of a stage it has not seen
  return true;
}

bool GatePage::Open(const std::string& path, std::string* error) {
  Close();
  if (!mapping_.Map(path, kGatePageBytes, /*writable=*/true, /*create=*/false, error)) return false;
  layout_ = static_cast<GatePageLayout*>(mapping_.data());
  if (!Valid(*layout_)) {
    *error = path + " is not a FreeRide gate page of this version";
    Close();
    return false;
  }
  return true;
}

bool GatePage::CloseEarly(uint32_t bubble) {
  uint32_t expected = GateOpenValue(bubble);
  return layout_->word.compare_exchange_strong(expected, GateClosedValue(bubble));
}

void GatePage::PublishAdmission(uint32_t bubble, int64_t until_ns) {
  layout_->admit_bubble.store(kAdmissionBeingWritten, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  layout_->admit_until_ns.store(until_ns, std::memory_order_relaxed);
  layout_->admit_bubble.store(bubble, std::memory_order_release);
}

void PublishAheadAdmission(GatePageLayout* layout, const AheadAdmission& ahead) {
  layout->ahead_bubble.store(kAdmissionBeingWritten, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  layout->ahead_from_ns.store(ahead.from_ns, std::memory_order_relaxed);
  layout->ahead_begin_ns.store(ahead.begin_ns, std::memory_order_relaxed);
  layout->ahead_until_ns.store(ahead.until_ns, std::memory_order_relaxed);
  layout->ahead_flags.store(ahead.watch_only ? kAheadWatchOnly : 0u, std::memory_order_relaxed);
  if (ahead.bubble != kAdmissionBeingWritten)
    layout->ahead_bubble.store(ahead.bubble, std::memory_order_release);
}

GateTaskSlot* GatePage::ClaimTaskSlot(int64_t pid) {
  for (GateTaskSlot& slot : layout_->tasks)
    if (slot.pid.load(std::memory_order_acquire) == pid) return &slot;
  for (GateTaskSlot& slot : layout_->tasks) {
    int64_t free = 0;
    if (slot.pid.compare_exchange_strong(free, pid)) {
      slot.ClearFields();
      return &slot;
    }
  }
  return nullptr;
}

bool GatePage::ForceClose() {
  uint32_t word = layout_->word.load();
  while (GateIsOpen(word)) {
    if (layout_->word.compare_exchange_weak(word, word & ~1u)) return true;
  }
  return false;
}

}  // namespace freeride
