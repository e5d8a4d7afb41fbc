// Whether side work may run in a bubble now, and by what margin: the
// overhead probe's withheld windows and the overhead guard's restrictions,
// as the lane publishes them.  Pure: the lane segment reads the published
// values into an AdmissionGate (channel/lane_segment.h, AdmissionFor), the
// simulator passes an open one.
#pragma once
#include <cstdint>

#include "base/clock.h"

namespace freeride {

struct AdmissionGate {
  bool paused = false;          // the guard keeps all side work out
  uint32_t serve_every = 1;     // the guard serves one bubble in this many (by bubble number)
  Nanos withhold_start_ns = 0;  // the probe's withheld window [start, end); empty when equal
  Nanos withhold_end_ns = 0;
  double fit_factor = 1.0;      // the guard's: step estimates are multiplied by it
};

struct Admission {
  bool serve = true;        // false: no side work now
  Nanos deadline = 0;       // the forecast end, cut at a withheld window's start
  double fit_factor = 1.0;  // step estimates are multiplied by this
};

// The admission at `now` for the bubble numbered `bubble_seq` (its begin
// mark's sequence), whose forecast end is `predicted_end`.
inline Admission AdmitAt(const AdmissionGate& gate, uint32_t bubble_seq, Nanos now,
                         Nanos predicted_end) {
  Admission admission;
  admission.deadline = predicted_end;
  admission.fit_factor = gate.fit_factor;
  if (gate.paused || (gate.serve_every > 1 && (bubble_seq / 2) % gate.serve_every != 0)) {
    admission.serve = false;
    return admission;
  }
  if (gate.withhold_start_ns <= now && now < gate.withhold_end_ns) {
    admission.serve = false;
  } else if (now < gate.withhold_start_ns && gate.withhold_start_ns < predicted_end) {
    admission.deadline = gate.withhold_start_ns;
  }
  return admission;
}

}  // namespace freeride
