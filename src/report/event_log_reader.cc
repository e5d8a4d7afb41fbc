#include "report/event_log_reader.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/files.h"
#include "events/event_reader.h"
#include "report/repeated_records.h"

namespace freeride::report {
namespace {

namespace dom = simdjson::dom;

// The longest line an event log may have.  The daemon's longest events (a
// task's end with its stderr tail) are kilobytes; without a bound, a file
// with no newline (/dev/zero, a binary) was read as one line until memory
// ran out.
constexpr size_t kMaxLineBytes = size_t{16} << 20;

enum class LineRead { kLine, kEnd, kTooLong };

// std::getline with a bound: reads the next line of `in` into *line
// (without its newline).  A last line without a newline is a line.  Read in
// chunks through istream::getline, which stops at a chunk's end with
// failbit: a character at a time was 6 times slower than std::getline.
LineRead ReadBoundedLine(std::istream& in, std::string* line) {
  line->clear();
  char chunk[1 << 16];
  for (;;) {
    in.getline(chunk, sizeof chunk);
    const auto got = static_cast<size_t>(in.gcount());  // with the newline, if one was taken
    if (in.fail() && !in.eof() && got == sizeof chunk - 1) {  // the chunk filled: more of the line
      line->append(chunk, got);
      if (line->size() > kMaxLineBytes) return LineRead::kTooLong;
      in.clear();
      continue;
    }
    if (got == 0 && in.eof()) return line->empty() ? LineRead::kEnd : LineRead::kLine;
    line->append(chunk, in.eof() ? got : got - 1);
    return line->size() > kMaxLineBytes ? LineRead::kTooLong : LineRead::kLine;
  }
}

using events::DoubleFieldOr;
using events::IntField;
using events::IntFieldOr;
using events::StringFieldOr;

void ReadOverhead(dom::object o, EventLogData* out) {
  const int lane = static_cast<int>(IntField(o, "lane"));
  OverheadRecord& r = out->last_overhead[lane];
  const uint64_t changes = r.guard_changes;
  r = {};
  r.lane = lane;
  r.cycles = static_cast<int>(IntField(o, "cycles"));
  r.min_cycles = static_cast<int>(IntFieldOr(o, "min_cycles", 0));
  dom::element v;
  if (o["slowdown"].get(v) == simdjson::SUCCESS && v.is_number()) {
    r.slowdown = DoubleFieldOr(o, "slowdown", 0);
    r.slowdown_low = DoubleFieldOr(o, "slowdown_low", 0);
    r.slowdown_high = DoubleFieldOr(o, "slowdown_high", 0);
  }
  r.withheld_iterations = IntFieldOr(o, "withheld_iterations", 0);
  r.guard = StringFieldOr(o, "guard");
  r.guard_changes = changes + (o["guard_from"].get(v) == simdjson::SUCCESS ? 1 : 0);
}

void ReadTransition(dom::object o, EventLogData* out) {
  const events::TransitionEvent e = events::ReadTransitionEvent(o);
  TaskMeta& t = out->tasks[e.task_id];
  t.id = e.task_id;
  if (!e.name.empty()) t.name = e.name;
  if (events::HasNumberField(o, "lane")) t.lane = e.lane;
  if (!e.unit.empty()) t.unit = e.unit;
  // A state this reader does not know (a newer daemon's) is shown as written.
  t.last_state = e.to ? StateName(*e.to) : StringFieldOr(o, "to");
  if (e.to == TaskState::kCreated) {
    t.started = true;
    t.start_progress = e.progress;
    t.start_steps = e.steps;
    t.steps_before_start = out->steps.size();
  }
  t.last_reason = e.reason;
  // Progress is written with every transition (null when not finite), the
  // alone rate only when known: otherwise the last known figure stays.
  if (events::HasNumberField(o, "progress")) {
    t.progress = e.progress;
    if (!t.first_progress) t.first_progress = e.progress;
  }
  if (e.alone_rate_per_s > 0) t.alone_rate_per_s = e.alone_rate_per_s;
}

}  // namespace

namespace {

// Adds one line of the log to *out.  Blank lines are ignored; lines that are
// not a known event's shape are counted as skipped.
void AddLine(std::string_view line, simdjson::dom::parser& parser, EventLogData* out) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  ++out->lines;
  try {
    dom::object o = parser.parse(line.data(), line.size()).get_object().value();
    std::string_view type = o["type"].get_string().value();
    if (type == "bubble") out->bubbles.push_back(events::ReadBubbleEvent(o));
    else if (type == "step") out->steps.push_back(events::ReadStepEvent(o));
    else if (type == "transition") ReadTransition(o, out);
    else if (type == "overhead") ReadOverhead(o, out);
    // Other event types (launch, daemon, lane_start, ...) carry nothing
    // the report needs.
  } catch (const simdjson::simdjson_error& e) {
    if (out->skipped_lines++ == 0) {
      out->first_skipped_line = out->lines;
      out->first_skip_reason = e.what();
    }
  }
}

}  // namespace

EventLogData ParseEventLog(std::string_view text, const std::string& path) {
  EventLogData out;
  out.path = path;
  dom::parser parser;
  while (!text.empty()) {
    size_t newline = std::min(text.find('\n'), text.size());
    AddLine(text.substr(0, newline), parser, &out);
    text.remove_prefix(std::min(newline + 1, text.size()));
  }
  DropRepeatedRecords(&out);
  return out;
}

std::optional<EventLogData> ReadEventLog(const std::string& path, std::string* error) {
  std::vector<std::string> files = RotatedFilesOldestFirst(path);
  if (files.empty() || files.back() != path) files.push_back(path);  // its error is the one to give
  EventLogData out;
  out.path = path;
  dom::parser parser;
  std::string line;
  for (const std::string& file : files) {
    // Line by line: a day's log can be gigabytes, and only the parsed
    // records are kept.
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      *error = fmt::format("cannot read event log {}: {}", file, std::strerror(errno));
      return std::nullopt;
    }
    for (int64_t number = 1;; ++number) {
      LineRead read = ReadBoundedLine(in, &line);
      if (read == LineRead::kEnd) break;
      if (read == LineRead::kTooLong) {
        *error = fmt::format("{} is not a FreeRide event log: line {} is longer than {} MiB", file, number,
                             kMaxLineBytes >> 20);
        return std::nullopt;
      }
      AddLine(line, parser, &out);
    }
    if (in.bad()) {
      *error = fmt::format("error while reading event log {}", file);
      return std::nullopt;
    }
  }
  // A log the daemon wrote has events on most lines (a cut last line at
  // most is bad); one with none is another file (a trace, a config): its
  // empty report would pass for a run in which nothing happened.
  if (out.lines > 0 && out.skipped_lines == out.lines) {
    *error = fmt::format("{} is not a FreeRide event log: none of its {} line(s) is an event (line {}: {}); "
                         "give the daemon's state directory or its events.jsonl",
                         path, out.lines, out.first_skipped_line, out.first_skip_reason);
    return std::nullopt;
  }
  DropRepeatedRecords(&out);
  return out;
}

}  // namespace freeride::report
