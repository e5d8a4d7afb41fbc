#include "report/repeated_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace freeride::report {
namespace {

// Whether two records' monotonic times are of one clock.  Each record's wall
// time less its monotonic time (unix_ns - ts_ns) is its boot's wall time,
// give or take the moment between the two reads and NTP's slewing; two boots'
// differ by the first one's uptime at least, which is longer than the
// monotonic times their records share.  Records without both times
// (hand-written logs) are taken to share one clock.
bool SameClock(const BubbleRecord& a, const BubbleRecord& b) {
  constexpr int64_t kTolerance = int64_t{60} * 1'000'000'000;
  if (a.unix_ns <= 0 || a.ts_ns <= 0 || b.unix_ns <= 0 || b.ts_ns <= 0) return true;
  const int64_t offset_a = a.unix_ns - a.ts_ns, offset_b = b.unix_ns - b.ts_ns;
  return (offset_a > offset_b ? offset_a - offset_b : offset_b - offset_a) < kTolerance;
}

// Whether `later` (beginning no earlier than `kept`) is the same bubble as
// `kept` on their lane: the same begin mark, or times that overlap.  Bubbles
// that only touch (one's end mark is the next one's begin) are two.
bool SameBubble(const BubbleRecord& kept, const BubbleRecord& later) {
  if (!SameClock(kept, later)) return false;
  // Bubbles a lane missed are closed back to back at one instant, so two
  // records may begin at the same time and be distinct: only the same
  // bubble number and slot make a copy.
  if (kept.begin_ns == later.begin_ns) return kept.seq == later.seq && kept.slot == later.slot;
  // Without its end mark, `kept` ends where the dispatcher gave up on it,
  // which can be after `later` began.
  const bool end_unmarked = kept.ended_by == events::BubbleEnd::kStale ||
                            kept.ended_by == events::BubbleEnd::kStageGone;
  return !end_unmarked && later.begin_ns < kept.end_ns;
}

// Flags in `drop` the bubbles that repeat one kept on their lane.
std::vector<bool> RepeatedBubbles(const std::vector<BubbleRecord>& bubbles) {
  std::map<int, std::vector<size_t>> by_lane;
  for (size_t i = 0; i < bubbles.size(); ++i) by_lane[bubbles[i].lane].push_back(i);
  std::vector<bool> drop(bubbles.size(), false);
  for (auto& [lane, order] : by_lane) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return bubbles[a].begin_ns < bubbles[b].begin_ns;
    });
    // Kept records that a later-beginning one can still overlap: one or
    // two, more only where a log spans reboots (several clocks).
    std::vector<size_t> open;
    for (size_t i : order) {
      const BubbleRecord& b = bubbles[i];
      std::erase_if(open, [&](size_t k) {
        return bubbles[k].end_ns <= b.begin_ns && bubbles[k].begin_ns != b.begin_ns;
      });
      drop[i] = std::any_of(open.begin(), open.end(),
                            [&](size_t k) { return SameBubble(bubbles[k], b); });
      if (!drop[i]) open.push_back(i);
    }
  }
  return drop;
}

// Flags the steps identical to a later one.
std::vector<bool> RepeatedSteps(const std::vector<StepRecord>& steps) {
  auto key = [&](size_t i) {
    const StepRecord& s = steps[i];
    return std::tie(s.task_id, s.start_ns, s.end_ns, s.lane, s.bubble_seq, s.units, s.overrun_ns,
                    s.late, s.allowed, s.ts_ns, s.unix_ns);
  };
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<bool> drop(steps.size(), false);
  for (size_t i = 0; i + 1 < order.size(); ++i)
    drop[order[i]] = key(order[i]) == key(order[i + 1]);  // a later copy follows it
  return drop;
}

// Removes the flagged records in place (a day's log holds millions),
// counting them and keeping the first; returns, for each old index, how many
// records before it were kept (size + 1 entries).
template <typename Record>
std::vector<size_t> Compact(std::vector<Record>* records, const std::vector<bool>& drop,
                            uint64_t* dropped, Record* first_dropped) {
  std::vector<size_t> kept_before(records->size() + 1, 0);
  size_t kept = 0;
  for (size_t i = 0; i < records->size(); ++i) {
    kept_before[i] = kept;
    if (drop[i]) {
      if ((*dropped)++ == 0) *first_dropped = (*records)[i];
    } else {
      if (kept != i) (*records)[kept] = std::move((*records)[i]);
      ++kept;
    }
  }
  kept_before[records->size()] = kept;
  records->resize(kept);
  return kept_before;
}

}  // namespace

void DropRepeatedRecords(EventLogData* log) {
  Compact(&log->bubbles, RepeatedBubbles(log->bubbles), &log->dropped_bubbles,
          &log->first_dropped_bubble);
  const std::vector<size_t> steps_kept_before =
      Compact(&log->steps, RepeatedSteps(log->steps), &log->dropped_steps, &log->first_dropped_step);
  for (auto& [id, task] : log->tasks)
    if (task.steps_before_start < steps_kept_before.size())
      task.steps_before_start = steps_kept_before[task.steps_before_start];
}

std::string DroppedRecordsMessage(const EventLogData& log) {
  if (log.dropped_bubbles == 0 && log.dropped_steps == 0) return "";
  std::vector<std::string> parts;
  if (log.dropped_bubbles > 0) {
    const BubbleRecord& b = log.first_dropped_bubble;
    parts.push_back(fmt::format("{} bubble record(s) that repeat or overlap in time another on the "
                                "same lane (the first: lane {}, slot {}, seq {}, begin_ns {})",
                                log.dropped_bubbles, b.lane, b.slot, b.seq, b.begin_ns));
  }
  if (log.dropped_steps > 0) {
    const StepRecord& s = log.first_dropped_step;
    parts.push_back(fmt::format("{} step record(s) identical to another (the first: task {}, lane {}, "
                                "start_ns {})",
                                log.dropped_steps, s.task_id, s.lane, s.start_ns));
  }
  return fmt::format("{}: left out {}, as a log with lines in it twice has: each is counted once",
                     log.path, fmt::join(parts, " and "));
}

}  // namespace freeride::report
