#include "events/events.h"

#include <fmt/compile.h>

#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

namespace freeride::events {

const char* BubbleEndName(BubbleEnd end) {
  switch (end) {
    case BubbleEnd::kMark: return "mark";
    case BubbleEnd::kStale: return "stale";
    case BubbleEnd::kStageGone: return "stage_gone";
  }
  return "?";
}

std::optional<BubbleEnd> ParseBubbleEnd(std::string_view name) {
  for (BubbleEnd end : {BubbleEnd::kMark, BubbleEnd::kStale, BubbleEnd::kStageGone})
    if (name == BubbleEndName(end)) return end;
  return std::nullopt;
}

std::optional<DispatchVerdict> ParseVerdict(std::string_view name) {
  for (DispatchVerdict verdict : {DispatchVerdict::kRun, DispatchVerdict::kNoCandidates,
                                  DispatchVerdict::kNoMemoryFit, DispatchVerdict::kNoTimeFit})
    if (name == VerdictName(verdict)) return verdict;
  return std::nullopt;
}

void AppendJsonNumber(fmt::memory_buffer& out, double value) {
  if (std::isfinite(value)) fmt::format_to(std::back_inserter(out), "{}", value);
  else fmt::format_to(std::back_inserter(out), "null");
}

std::string JsonNumber(double value) {
  fmt::memory_buffer out;
  AppendJsonNumber(out, value);
  return fmt::to_string(out);
}

std::string JsonString(std::string_view text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AppendEvent(fmt::memory_buffer& out, const BubbleEvent& e) {
  auto to = std::back_inserter(out);
  fmt::format_to(
      to,
      FMT_COMPILE(R"({{"type":"bubble","ts_ns":{},"lane":{},"slot":{},"seq":{},"begin_ns":{},)"
                  R"("end_ns":{},"predicted_end_ns":{},"first_grant_ns":{},"hint_ns":{},)"
                  R"("free_memory_bytes":)"),
      e.ts_ns, e.lane, e.slot, e.seq, e.begin_ns, e.end_ns, e.predicted_end_ns, e.first_grant_ns,
      e.hint_ns);
  if (e.free_memory_bytes) fmt::format_to(to, FMT_COMPILE("{}"), *e.free_memory_bytes);
  else fmt::format_to(to, "null");
  fmt::format_to(
      to,
      FMT_COMPILE(R"(,"ended_by":"{}","verdict":"{}","steps":{},"step_records_lost":{},)"
                  R"("harvested_ns":{},"allowed_ns":{},"overrun_ns":{},"unix_ns":{}}})"),
      e.ended_by ? BubbleEndName(*e.ended_by) : "unknown",
      e.verdict ? VerdictName(*e.verdict) : "unknown", e.steps, e.step_records_lost,
      e.harvested_ns, e.allowed_ns, e.overrun_ns, e.unix_ns);
}

void AppendEvent(fmt::memory_buffer& out, const StepEvent& e) {
  auto to = std::back_inserter(out);
  fmt::format_to(to,
                 FMT_COMPILE(R"({{"type":"step","ts_ns":{},"lane":{},"task_id":{},"bubble_seq":{},)"
                             R"("start_ns":{},"end_ns":{},"units":)"),
                 e.ts_ns, e.lane, e.task_id, e.bubble_seq, e.start_ns, e.end_ns);
  AppendJsonNumber(out, e.units);
  fmt::format_to(to, FMT_COMPILE(R"(,"overrun_ns":{}{}{},"unix_ns":{}}})"), e.overrun_ns,
                 e.late ? R"(,"late":true)" : "", e.allowed ? R"(,"allowed":true)" : "", e.unix_ns);
}

void AppendEvent(fmt::memory_buffer& out, const TransitionEvent& e) {
  auto to = std::back_inserter(out);
  fmt::format_to(to,
                 R"({{"type":"transition","ts_ns":{},"unix_ns":{},"task_id":{},"name":{},"lane":{},)"
                 R"("from":"{}","to":"{}","reason":{},"progress":)",
                 e.ts_ns, e.unix_ns, e.task_id, JsonString(e.name), e.lane, e.from ? StateName(*e.from) : "",
                 e.to ? StateName(*e.to) : "", JsonString(e.reason));
  AppendJsonNumber(out, e.progress);
  fmt::format_to(to, R"(,"steps":{})", e.steps);
  if (!e.unit.empty()) fmt::format_to(to, R"(,"unit":{})", JsonString(e.unit));
  if (e.alone_rate_per_s > 0) {
    fmt::format_to(to, R"(,"alone_rate_per_s":)");
    AppendJsonNumber(out, e.alone_rate_per_s);
  }
  fmt::format_to(to, "}}");
}

}  // namespace freeride::events
