#include "channel/step_accounting.h"

#include <algorithm>
#include <cmath>

namespace freeride {

bool PlausibleStep(const StepRecord& step) { return step.start_ns > 0 && step.end_ns >= step.start_ns; }

bool PlausibleUnits(double units) { return std::isfinite(units) && units >= 0; }

StepShare ShareOfStep(const StepRecord& step, int64_t begin, int64_t end) {
  StepShare share;
  if (!PlausibleStep(step) || end < begin) return share;
  // Differences of two int64 can overflow; they are taken in 128 bits and
  // clamped back.
  auto clamp = [](__int128 v) {
    return static_cast<int64_t>(std::clamp<__int128>(v, 0, INT64_MAX));
  };
  __int128 from = std::max<__int128>(step.start_ns, begin);
  __int128 to = std::min<__int128>(step.end_ns, end);
  share.inside = clamp(to - from);
  share.overrun = clamp(static_cast<__int128>(step.end_ns) - end);
  return share;
}

uint64_t CollectSteps(const StepRecord* ring, uint64_t ring_size, uint64_t head, uint64_t* tail,
                      std::vector<StepRecord>* out) {
  if (ring_size == 0 || head <= *tail) {
    *tail = std::max(*tail, head);
    return 0;
  }
  uint64_t lost = 0;
  uint64_t from = *tail;
  if (head - from > ring_size) {
    lost = head - from - ring_size;
    from = head - ring_size;
  }
  if (out)
    for (uint64_t i = from; i < head; ++i) out->push_back(ring[i % ring_size]);
  *tail = head;
  return lost;
}

}  // namespace freeride
