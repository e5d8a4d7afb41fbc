#include "events/event_reader.h"

#include <algorithm>

namespace freeride::events {
namespace {

namespace dom = simdjson::dom;

[[noreturn]] void Malformed() { throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE); }

bool BoolFieldOr(dom::object o, std::string_view key, bool fallback) {
  dom::element v;
  if (o[key].get(v) != simdjson::SUCCESS || !v.is_bool()) return fallback;
  return v.get_bool().value();
}


// A count or rate that no writer makes negative: a crafted or damaged line
// would otherwise give a harvest below 0 (or above 100% of what was done).
double NonNegative(double value) {
  if (!(value >= 0)) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
  return value;
}
int64_t NonNegative(int64_t value) {
  if (value < 0) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
  return value;
}

}  // namespace

int64_t IntField(dom::object o, std::string_view key) {
  dom::element v = o[key].value();
  if (v.is_int64()) return v.get_int64().value();
  // Above INT64_MAX: kept bit for bit, so that an unsigned field reads back.
  if (v.is_uint64()) return static_cast<int64_t>(v.get_uint64().value());
  // A damaged log's double may not fit; converting it would be undefined.
  const double d = v.get_double().value();
  if (!(d >= -9.2e18 && d <= 9.2e18)) Malformed();
  return static_cast<int64_t>(d);
}

bool HasNumberField(dom::object o, std::string_view key) {
  dom::element v;
  return o[key].get(v) == simdjson::SUCCESS && v.is_number();
}

int64_t IntFieldOr(dom::object o, std::string_view key, int64_t fallback) {
  dom::element v;
  if (o[key].get(v) != simdjson::SUCCESS || v.is_null()) return fallback;
  return IntField(o, key);
}

double DoubleFieldOr(dom::object o, std::string_view key, double fallback) {
  dom::element v;
  if (o[key].get(v) != simdjson::SUCCESS || !v.is_number()) return fallback;
  return v.get_double().value();
}

std::string StringFieldOr(dom::object o, std::string_view key) {
  dom::element v;
  if (o[key].get(v) != simdjson::SUCCESS || !v.is_string()) return {};
  return std::string(v.get_string().value());
}

BubbleEvent ReadBubbleEvent(dom::object o) {
  BubbleEvent b;
  b.ts_ns = IntFieldOr(o, "ts_ns", 0);
  b.lane = static_cast<int>(IntField(o, "lane"));
  b.slot = static_cast<uint32_t>(IntField(o, "slot"));
  b.seq = static_cast<uint64_t>(IntField(o, "seq"));
  b.begin_ns = IntField(o, "begin_ns");
  b.end_ns = IntField(o, "end_ns");
  if (b.end_ns < b.begin_ns) Malformed();
  b.predicted_end_ns = IntFieldOr(o, "predicted_end_ns", 0);
  b.first_grant_ns = IntFieldOr(o, "first_grant_ns", 0);
  b.hint_ns = IntFieldOr(o, "hint_ns", 0);
  dom::element memory;
  if (o["free_memory_bytes"].get(memory) == simdjson::SUCCESS && memory.is_number())
    b.free_memory_bytes = static_cast<uint64_t>(IntField(o, "free_memory_bytes"));
  // A name this reader does not know is a newer writer's: left unset.
  b.ended_by = ParseBubbleEnd(StringFieldOr(o, "ended_by"));
  b.verdict = ParseVerdict(StringFieldOr(o, "verdict"));
  b.steps = static_cast<uint64_t>(IntFieldOr(o, "steps", 0));
  b.step_records_lost = static_cast<uint64_t>(IntFieldOr(o, "step_records_lost", 0));
  b.harvested_ns = NonNegative(IntFieldOr(o, "harvested_ns", 0));
  b.allowed_ns = NonNegative(IntFieldOr(o, "allowed_ns", 0));
  b.overrun_ns = NonNegative(IntFieldOr(o, "overrun_ns", 0));
  b.unix_ns = IntFieldOr(o, "unix_ns", 0);
  return b;
}

StepEvent ReadStepEvent(dom::object o) {
  StepEvent s;
  s.ts_ns = IntFieldOr(o, "ts_ns", 0);
  s.lane = static_cast<int>(IntField(o, "lane"));
  s.task_id = IntField(o, "task_id");
  s.bubble_seq = static_cast<uint64_t>(IntFieldOr(o, "bubble_seq", 0));
  s.start_ns = IntField(o, "start_ns");
  s.end_ns = IntField(o, "end_ns");
  if (s.end_ns < s.start_ns) Malformed();
  s.units = NonNegative(DoubleFieldOr(o, "units", 0));
  s.overrun_ns = NonNegative(IntFieldOr(o, "overrun_ns", 0));
  s.late = BoolFieldOr(o, "late", false);
  s.allowed = BoolFieldOr(o, "allowed", false);
  s.unix_ns = IntFieldOr(o, "unix_ns", 0);
  return s;
}

TransitionEvent ReadTransitionEvent(dom::object o) {
  TransitionEvent t;
  t.ts_ns = IntFieldOr(o, "ts_ns", 0);
  t.unix_ns = IntFieldOr(o, "unix_ns", 0);
  t.task_id = IntField(o, "task_id");
  t.name = StringFieldOr(o, "name");
  t.lane = static_cast<int>(IntFieldOr(o, "lane", -1));
  t.from = ParseState(StringFieldOr(o, "from"));
  t.to = ParseState(StringFieldOr(o, "to"));
  t.reason = StringFieldOr(o, "reason");
  // A log an older daemon wrote may hold a negative progress (a regex's
  // capture of "3-100"): counted as none, and the line's states are kept.
  t.progress = std::max(0.0, DoubleFieldOr(o, "progress", 0));
  t.steps = static_cast<uint64_t>(IntFieldOr(o, "steps", 0));
  t.unit = StringFieldOr(o, "unit");
  t.alone_rate_per_s = NonNegative(DoubleFieldOr(o, "alone_rate_per_s", 0));
  return t;
}

}  // namespace freeride::events
