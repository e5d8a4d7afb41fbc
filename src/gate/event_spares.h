// Driver events of one kind (their creation flags) kept for reuse: taking a
// spare saves the launching thread a cuEventCreate, keeping one a
// cuEventDestroy.  The gate keeps two: its fences and passes (no timing),
// and its timed pieces' start and end events.  Not synchronised: its owner
// serialises the calls (and holds its lock across the driver calls made here).
#pragma once
#include <cstddef>
#include <vector>

#include "gate/driver_types.h"

namespace freeride::gate {

class EventSpares {
 public:
  // Events made with `flags`; at most `most` spares kept (room reserved for
  // them, so that keeping one never allocates).
  EventSpares(unsigned flags, size_t most) : flags_(flags), most_(most) { spares_.reserve(most); }

  // A spare, else a new event from `api` (null if none can be made).
  CuEvent Take(const DriverApi& api) {
    if (!spares_.empty()) {
      CuEvent event = spares_.back();
      spares_.pop_back();
      return event;
    }
    CuEvent event = nullptr;
    return api.event_create(&event, flags_) == kCudaSuccess ? event : nullptr;
  }
  // Keeps `event` (whole: not in error) for a later Take, or destroys it
  // past `most` spares.
  void Keep(const DriverApi& api, CuEvent event) {
    if (spares_.size() < most_) {
      spares_.push_back(event);
    } else {
      api.event_destroy(event);
    }
  }
  // Destroys every spare (when the events' owner ends).
  void DestroyAll(const DriverApi& api) {
    for (CuEvent event : spares_) api.event_destroy(event);
    spares_.clear();
  }

 private:
  const unsigned flags_;
  const size_t most_;
  std::vector<CuEvent> spares_;
};

}  // namespace freeride::gate
