#include "gate/gate_page.h"

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
  if (!Valid(*layout_) || layout_->lane != lane) {
    layout_->early_closes.store(0);
    layout_->forced_closes.store(0);
    layout_->interposers_attached.store(0);
    layout_->stage_pid.store(0);
    layout_->lane = lane;
    layout_->version = kGatePageVersion;
    layout_->magic = kGatePageMagic;
  }
  ForceClose();
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

bool GatePage::ForceClose() {
  uint32_t word = layout_->word.load();
  while (GateIsOpen(word)) {
    if (layout_->word.compare_exchange_weak(word, word & ~1u)) return true;
  }
  return false;
}

}  // namespace freeride
