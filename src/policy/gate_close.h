// When a lane closes its GPU gate ahead of the bubble's end mark.  A kernel
// that has started cannot be stopped, so the gate lets work through only
// while what starts is predicted to finish inside the bubble: it closes at
// the forecast end less a margin (the length of the task's longest likely
// piece of work plus the closer's own wake-up delay).  Pure; no clock.
#pragma once
#include <algorithm>

#include "base/clock.h"
#include "policy/admission.h"

namespace freeride {

// The time to close the gate of a bubble that began at `begin_ns`, whose
// forecast length is `forecast_ns` (0: unknown) and whose admission is
// `admission`.  A bubble with no forecast, or one that admits no side work
// (a withheld window, a paused guard), closes at once; so does one whose
// usable time would be under `margin_ns`.  A withheld window that starts
// inside the bubble ends the usable time there (admission.deadline).
inline Nanos GateCloseAt(Nanos begin_ns, Nanos forecast_ns, Nanos margin_ns,
                         const Admission& admission) {
  if (forecast_ns <= 0 || !admission.serve) return begin_ns;
  Nanos end = std::min(begin_ns + forecast_ns, admission.deadline > 0 ? admission.deadline
                                                                      : begin_ns + forecast_ns);
  return std::max(begin_ns, end - margin_ns);
}

}  // namespace freeride
