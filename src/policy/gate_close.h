// When a lane stops admitting side work to a bubble, ahead of its end mark.
// A kernel that has started cannot be stopped, so work is queued only while
// it is predicted to finish inside the bubble: by the admission deadline,
// the forecast end less a margin (the lane's wake-up delay and the release
// of queued work); each task's interposer adds its own pieces' length
// (gate/piece_admission.h).  Pure; no clock.
#pragma once
#include <algorithm>

#include "base/clock.h"
#include "policy/admission.h"

namespace freeride {

// How long before the forecast end the lane's longest task queues its last
// piece: the base margin plus the longest 95th-percentile piece of work any
// gated task on the lane has published (shown in `freeride status`).
inline Nanos GateMargin(Nanos base, Nanos longest_work_p95) {
  return base + std::max<Nanos>(0, longest_work_p95);
}

// The admission deadline of a bubble that began at `begin_ns`, whose
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
