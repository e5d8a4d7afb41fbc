// What the daemon reads from shared memory that others write: a stage's
// lane segment and a side task's segment, filled with arbitrary bytes (a
// corrupted or hostile segment).  The daemon-side readers must give
// bounded, sane figures: marks with a clamped forecast index, second looks
// inside their bubble, at most a
// ring's worth of step records, shares of steps that are never negative
// and never exceed the bubble.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "channel/lane_segment.h"
#include "channel/step_accounting.h"
#include "channel/task_segment.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace freeride;
  static auto* lane = new LaneSegmentLayout();
  static auto* task = new TaskSegmentLayout();
  std::memset(static_cast<void*>(lane), 0, sizeof(*lane));
  std::memset(static_cast<void*>(task), 0, sizeof(*task));
  // The first bytes become the lane segment, the rest the task segment.
  size_t lane_bytes = std::min(size, sizeof(*lane));
  std::memcpy(static_cast<void*>(lane), data, lane_bytes);
  std::memcpy(static_cast<void*>(task), data + lane_bytes, std::min(size - lane_bytes, sizeof(*task)));

  BubbleMark mark;
  mark.seq = lane->bubble_seq.load();
  mark.slot = lane->slot.load();
  mark.begin_ns = lane->begin_ns.load();
  mark.hint_ns = lane->hint_ns.load();
  mark.end_ns = lane->end_ns.load();
  Check(PublishedForecast(*lane, mark) >= 0);
  // A second look, if any, is a point inside a bubble of positive length.
  Nanos after = -1, length = -1;
  if (PublishedSecondLook(*lane, mark.slot, &after, &length))
    Check(after >= 0 && after < length);
  // A stage's garbage heartbeat must end a bubble, never overflow the check.
  const Nanos now = 1000 * kSecond;
  const Nanos heartbeat = lane->stage_heartbeat_ns.load();
  if (heartbeat > now + kSecond) Check(BubbleSilent(mark.begin_ns, heartbeat, now, kSecond));

  uint64_t tail = task->ring_head.load() > 3 ? task->ring_head.load() - 3 : 0;
  if (size > 8) tail ^= data[size - 1];  // a tail ahead of or behind head as well
  uint64_t before = tail;
  std::vector<StepRecord> steps;
  CollectSteps(task->ring, kStepRingSize, task->ring_head.load(), &tail, &steps);
  Check(steps.size() <= kStepRingSize);
  Check(tail >= before);
  int64_t begin = mark.begin_ns, end = mark.end_ns;
  for (const StepRecord& step : steps) {
    StepShare share = ShareOfStep(step, begin, end);
    Check(share.inside >= 0 && share.overrun >= 0);
    if (end >= begin && static_cast<__int128>(end) - begin <= INT64_MAX)
      Check(share.inside <= end - begin);
    if (!PlausibleStep(step)) Check(share.inside == 0 && share.overrun == 0);
  }
  return 0;
}
