#include "report/event_log_reader.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/files.h"

namespace freeride::report {
namespace {

namespace dom = simdjson::dom;

// Throws simdjson_error when the key is missing or has the wrong type: the
// caller turns that into one skipped line.
int64_t Int(dom::object o, std::string_view key) {
  dom::element v = o[key].value();
  if (v.is_int64()) return v.get_int64().value();
  if (v.is_uint64()) return static_cast<int64_t>(v.get_uint64().value());
  return static_cast<int64_t>(v.get_double().value());
}

int64_t IntOr(dom::object o, std::string_view key, int64_t fallback) {
  dom::element v;
  if (o[key].get(v) != simdjson::SUCCESS || v.is_null()) return fallback;
  return Int(o, key);
}

double DoubleOr(dom::object o, std::string_view key, double fallback) {
  dom::element v;
  if (o[key].get(v) != simdjson::SUCCESS || !v.is_number()) return fallback;
  return v.get_double().value();
}

std::string StringOr(dom::object o, std::string_view key) {
  dom::element v;
  if (o[key].get(v) != simdjson::SUCCESS || !v.is_string()) return {};
  return std::string(v.get_string().value());
}

void ReadBubble(dom::object o, EventLogData* out) {
  BubbleRecord b;
  b.lane = static_cast<int>(Int(o, "lane"));
  b.slot = static_cast<uint32_t>(Int(o, "slot"));
  b.seq = static_cast<uint64_t>(Int(o, "seq"));
  b.begin_ns = Int(o, "begin_ns");
  b.end_ns = Int(o, "end_ns");
  if (b.end_ns < b.begin_ns) throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
  b.predicted_end_ns = IntOr(o, "predicted_end_ns", 0);
  dom::element memory;
  if (o["free_memory_bytes"].get(memory) == simdjson::SUCCESS && memory.is_number())
    b.free_memory_bytes = static_cast<uint64_t>(Int(o, "free_memory_bytes"));
  b.harvested_ns = IntOr(o, "harvested_ns", 0);
  b.allowed_ns = IntOr(o, "allowed_ns", 0);
  b.overrun_ns = IntOr(o, "overrun_ns", 0);
  b.steps = static_cast<uint64_t>(IntOr(o, "steps", 0));
  b.ended_by = StringOr(o, "ended_by");
  b.verdict = StringOr(o, "verdict");
  out->bubbles.push_back(std::move(b));
}

void ReadStep(dom::object o, EventLogData* out) {
  StepRecord s;
  s.lane = static_cast<int>(Int(o, "lane"));
  s.task_id = Int(o, "task_id");
  s.bubble_seq = static_cast<uint64_t>(IntOr(o, "bubble_seq", 0));
  s.start_ns = Int(o, "start_ns");
  s.end_ns = Int(o, "end_ns");
  if (s.end_ns < s.start_ns) throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
  s.units = DoubleOr(o, "units", 0);
  s.overrun_ns = IntOr(o, "overrun_ns", 0);
  dom::element late;
  s.late = o["late"].get(late) == simdjson::SUCCESS && late.is_bool() && late.get_bool().value();
  dom::element allowed;
  s.allowed = o["allowed"].get(allowed) == simdjson::SUCCESS && allowed.is_bool() &&
              allowed.get_bool().value();
  out->steps.push_back(s);
}

void ReadOverhead(dom::object o, EventLogData* out) {
  const int lane = static_cast<int>(Int(o, "lane"));
  OverheadRecord& r = out->last_overhead[lane];
  const uint64_t changes = r.guard_changes;
  r = {};
  r.lane = lane;
  r.cycles = static_cast<int>(Int(o, "cycles"));
  r.min_cycles = static_cast<int>(IntOr(o, "min_cycles", 0));
  dom::element v;
  if (o["slowdown"].get(v) == simdjson::SUCCESS && v.is_number()) {
    r.slowdown = DoubleOr(o, "slowdown", 0);
    r.slowdown_low = DoubleOr(o, "slowdown_low", 0);
    r.slowdown_high = DoubleOr(o, "slowdown_high", 0);
  }
  r.withheld_iterations = IntOr(o, "withheld_iterations", 0);
  r.guard = StringOr(o, "guard");
  r.guard_changes = changes + (o["guard_from"].get(v) == simdjson::SUCCESS ? 1 : 0);
}

void ReadTransition(dom::object o, EventLogData* out) {
  int64_t id = Int(o, "task_id");
  TaskMeta& t = out->tasks[id];
  t.id = id;
  if (std::string name = StringOr(o, "name"); !name.empty()) t.name = name;
  t.lane = static_cast<int>(IntOr(o, "lane", t.lane));
  if (std::string unit = StringOr(o, "unit"); !unit.empty()) t.unit = unit;
  t.last_state = StringOr(o, "to");
  if (t.last_state == "CREATED") {
    t.started = true;
    t.start_progress = DoubleOr(o, "progress", 0);
    t.start_steps = static_cast<uint64_t>(IntOr(o, "steps", 0));
    t.steps_before_start = out->steps.size();
  }
  t.last_reason = StringOr(o, "reason");
  t.progress = DoubleOr(o, "progress", t.progress);
  t.alone_rate_per_s = DoubleOr(o, "alone_rate_per_s", t.alone_rate_per_s);
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
    if (type == "bubble") ReadBubble(o, out);
    else if (type == "step") ReadStep(o, out);
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
    while (std::getline(in, line)) AddLine(line, parser, &out);
    if (in.bad()) {
      *error = fmt::format("error while reading event log {}", file);
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace freeride::report
