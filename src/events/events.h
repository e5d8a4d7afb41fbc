// The daemon's event log, typed: the bubble, step and transition events
// that `freeride report`, `freeride timeline` and the tests read (schema in
// docs/event-log.md).  One writer (AppendEvent) and one reader
// (events/event_reader.h) share these types, so the schema lives here and in
// the docs only.  Other event kinds (launch, overhead, lane_start, ...) are
// rare and written as JSON objects by EventLog::Emit.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "events/task_state.h"
#include "policy/dispatch_policy.h"

namespace freeride::events {

// How a bubble's serving ended.
enum class BubbleEnd {
  kMark,       // the stage's end mark
  kStale,      // the stage is alive but stopped marking
  kStageGone,  // the stage's process is gone
};
const char* BubbleEndName(BubbleEnd end);
std::optional<BubbleEnd> ParseBubbleEnd(std::string_view name);
std::optional<DispatchVerdict> ParseVerdict(std::string_view name);

struct BubbleEvent {
  int64_t ts_ns = 0;  // CLOCK_MONOTONIC, when it was written (its end)
  int lane = 0;
  uint32_t slot = 0;
  uint64_t seq = 0;
  int64_t begin_ns = 0, end_ns = 0;
  int64_t predicted_end_ns = 0;  // 0: nothing was forecast
  int64_t first_grant_ns = 0;    // 0: nobody was told to run
  int64_t hint_ns = 0;           // the stage's own estimate; 0: none
  std::optional<uint64_t> free_memory_bytes;  // unset: unknown
  // Unset only when read from a log whose name this reader does not know
  // (a newer daemon's); written as "unknown".
  std::optional<BubbleEnd> ended_by = BubbleEnd::kMark;
  std::optional<DispatchVerdict> verdict = DispatchVerdict::kNoCandidates;  // the last choice's
  uint64_t steps = 0;              // step records, those lost included
  uint64_t step_records_lost = 0;  // overwritten in a task's ring unread
  int64_t harvested_ns = 0;        // step time inside the bubble
  int64_t allowed_ns = 0;          // imperative tasks let run: not work, not harvested
  int64_t overrun_ns = 0;
  int64_t unix_ns = 0;
};

struct StepEvent {
  int64_t ts_ns = 0;
  int lane = 0;
  int64_t task_id = 0;
  uint64_t bubble_seq = 0;
  int64_t start_ns = 0, end_ns = 0;
  double units = 0;
  int64_t overrun_ns = 0;  // past its bubble's end
  bool late = false;       // read after its bubble closed; not in that bubble's harvest
  bool allowed = false;    // an imperative task let run: in allowed_ns, not harvested_ns
  int64_t unix_ns = 0;
};

struct TransitionEvent {
  int64_t ts_ns = 0, unix_ns = 0;
  int64_t task_id = 0;
  std::string name;
  int lane = -1;
  std::optional<TaskState> from;  // unset: a new submission (written as ""), or a name unknown here
  std::optional<TaskState> to = TaskState::kSubmitted;  // unset only for a name unknown here
  std::string reason;
  double progress = 0;
  uint64_t steps = 0;
  std::string unit;              // empty: none declared yet
  double alone_rate_per_s = 0;   // 0: unknown
};

// Appends the event as one JSON object, without a newline, to `out`.  Fast:
// bubbles and steps are written hundreds of times a second.  Any thread.
void AppendEvent(fmt::memory_buffer& out, const BubbleEvent& event);
void AppendEvent(fmt::memory_buffer& out, const StepEvent& event);
void AppendEvent(fmt::memory_buffer& out, const TransitionEvent& event);

// JSON text pieces for writers: a double (null when not finite: JSON has no
// NaN), and a quoted, escaped string (invalid UTF-8 replaced).
void AppendJsonNumber(fmt::memory_buffer& out, double value);
std::string JsonNumber(double value);
std::string JsonString(std::string_view text);

}  // namespace freeride::events
