// Reads a daemon event log (STATE_DIR/events.jsonl, schema in
// docs/event-log.md) into typed records for `freeride report` and
// `freeride timeline`.  Lines that are not valid events (a line cut short by
// a SIGKILL, a hand-edited file) are skipped and counted, never fatal; so are
// records that repeat another (report/repeated_records.h).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "events/events.h"

namespace freeride::report {

using BubbleRecord = events::BubbleEvent;
using StepRecord = events::StepEvent;

// What the log says about one task across its transitions.
struct TaskMeta {
  int64_t id = 0;
  std::string name;
  int lane = -1;
  std::string unit;              // from the last transition that carried one
  std::string last_state;        // e.g. RUNNING, FINISHED
  std::string last_reason;
  double progress = 0;           // the daemon's own progress figure, when logged
  std::optional<double> first_progress;  // ... at the first transition this log holds
  double alone_rate_per_s = 0;   // from the submission (`submit --profile`); 0: unknown
  // Its latest start (the transition to CREATED): the work it started from
  // (its checkpoint's), and how many of the log's step records came before.
  // Steps before it are superseded: what they did is in the figures, or was
  // lost with the process and done again.
  bool started = false;
  double start_progress = 0;
  uint64_t start_steps = 0;
  size_t steps_before_start = 0;
};

// A lane's live overhead estimate, as of one closed probe cycle.
struct OverheadRecord {
  int lane = 0;
  int cycles = 0, min_cycles = 0;
  std::optional<double> slowdown, slowdown_low, slowdown_high;  // unset: too few cycles
  int64_t withheld_iterations = 0;
  std::string guard;  // the guard's level after this cycle
  uint64_t guard_changes = 0;  // on this lane, up to and including this cycle
};

struct EventLogData {
  std::string path;
  std::vector<BubbleRecord> bubbles;  // in file order, each bubble once
  std::vector<StepRecord> steps;      // in file order, each step once
  std::map<int64_t, TaskMeta> tasks;
  std::map<int, OverheadRecord> last_overhead;  // by lane: the newest
  uint64_t lines = 0;
  uint64_t skipped_lines = 0;  // not JSON, or not a known event's shape
  uint64_t first_skipped_line = 0;
  std::string first_skip_reason;
  // Records left out because they repeat others (a log with lines in it
  // twice), and the first of each kind in file order: each would count the
  // same idle time or work again.
  uint64_t dropped_bubbles = 0;
  BubbleRecord first_dropped_bubble;
  uint64_t dropped_steps = 0;
  StepRecord first_dropped_step;
};

// Parses the JSON-lines text of an event log.  `path` only labels messages.
// Both readers leave out repeated records (DropRepeatedRecords).
EventLogData ParseEventLog(std::string_view text, const std::string& path);

// Reads and parses the log at path, after its older rotated files (PATH.N
// ... PATH.1) when there are any.  Returns nullopt and sets *error (which
// names the file) when one cannot be read, or when none of their lines is an
// event (another kind of file).
std::optional<EventLogData> ReadEventLog(const std::string& path, std::string* error);

}  // namespace freeride::report
