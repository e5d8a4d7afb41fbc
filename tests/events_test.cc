#include "events/events.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <string>

#include "events/event_reader.h"

namespace freeride::events {
namespace {

simdjson::dom::object Parse(simdjson::dom::parser& parser, const std::string& line) {
  return parser.parse(line).get_object().value();
}

template <typename Event>
std::string Line(const Event& event) {
  fmt::memory_buffer out;
  AppendEvent(out, event);
  return fmt::to_string(out);
}

// One event of each kind with every field set, for the tests below.
BubbleEvent SampleBubble() {
  return {.ts_ns = 10, .lane = 3, .slot = 7, .seq = 41, .begin_ns = 1000, .end_ns = 9000,
          .predicted_end_ns = 8000, .first_grant_ns = 1100, .hint_ns = 500,
          .free_memory_bytes = 1ull << 40, .ended_by = BubbleEnd::kStageGone,
          .verdict = DispatchVerdict::kNoTimeFit, .steps = 4, .step_records_lost = 1,
          .harvested_ns = 6000, .allowed_ns = 200, .overrun_ns = 30,
          .unix_ns = 1795417195343064487};
}

StepEvent SampleStep() {
  return {.ts_ns = 5, .lane = 1, .task_id = 12, .bubble_seq = 9, .start_ns = 100, .end_ns = 250,
          .units = 0.125, .overrun_ns = 7, .unix_ns = 99};
}

TransitionEvent SampleTransition() {
  return {.ts_ns = 1, .unix_ns = 2, .task_id = 3, .name = "pr", .lane = 0,
          .from = TaskState::kPaused, .to = TaskState::kFailed, .reason = "exit 1",
          .progress = 12.5, .steps = 40, .unit = "edges", .alone_rate_per_s = 350.25};
}

TEST(Events, ABubbleReadsBackAsItWasWritten) {
  BubbleEvent b = SampleBubble();
  const std::string line = Line(b);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  simdjson::dom::parser parser;
  simdjson::dom::object o = Parse(parser, line);
  EXPECT_EQ(std::string_view(o["type"].get_string().value()), "bubble");
  BubbleEvent read = ReadBubbleEvent(o);
  EXPECT_EQ(read.ts_ns, b.ts_ns);
  EXPECT_EQ(read.lane, b.lane);
  EXPECT_EQ(read.slot, b.slot);
  EXPECT_EQ(read.seq, b.seq);
  EXPECT_EQ(read.begin_ns, b.begin_ns);
  EXPECT_EQ(read.end_ns, b.end_ns);
  EXPECT_EQ(read.predicted_end_ns, b.predicted_end_ns);
  EXPECT_EQ(read.first_grant_ns, b.first_grant_ns);
  EXPECT_EQ(read.hint_ns, b.hint_ns);
  EXPECT_EQ(read.free_memory_bytes, b.free_memory_bytes);
  EXPECT_EQ(read.ended_by, b.ended_by);
  EXPECT_EQ(read.verdict, b.verdict);
  EXPECT_EQ(read.steps, b.steps);
  EXPECT_EQ(read.step_records_lost, b.step_records_lost);
  EXPECT_EQ(read.harvested_ns, b.harvested_ns);
  EXPECT_EQ(read.allowed_ns, b.allowed_ns);
  EXPECT_EQ(read.overrun_ns, b.overrun_ns);
  EXPECT_EQ(read.unix_ns, b.unix_ns);

  b.free_memory_bytes.reset();
  EXPECT_FALSE(ReadBubbleEvent(Parse(parser, Line(b))).free_memory_bytes) << Line(b);
}

TEST(Events, AStepReadsBackAsItWasWrittenWithItsFlags) {
  StepEvent s = SampleStep();
  simdjson::dom::parser parser;
  for (bool late : {false, true}) {
    for (bool allowed : {false, true}) {
      s.late = late;
      s.allowed = allowed;
      StepEvent read = ReadStepEvent(Parse(parser, Line(s)));
      EXPECT_EQ(read.task_id, 12);
      EXPECT_EQ(read.lane, 1);
      EXPECT_EQ(read.bubble_seq, 9u);
      EXPECT_EQ(read.start_ns, 100);
      EXPECT_EQ(read.end_ns, 250);
      EXPECT_DOUBLE_EQ(read.units, 0.125);
      EXPECT_EQ(read.overrun_ns, 7);
      EXPECT_EQ(read.late, late);
      EXPECT_EQ(read.allowed, allowed);
      EXPECT_EQ(read.unix_ns, 99);
    }
  }
  s.units = std::nan("");
  EXPECT_EQ(ReadStepEvent(Parse(parser, Line(s))).units, 0) << "NaN is written as null";
}

TEST(Events, ATransitionKeepsTextThatNeedsEscaping) {
  TransitionEvent t = SampleTransition();
  t.name = "resnet \"small\"\n\\ run";
  t.reason = "exit 1: \"CUDA\" out of memory\t(line 2)";
  t.unit = "images \"224px\"";
  simdjson::dom::parser parser;
  TransitionEvent read = ReadTransitionEvent(Parse(parser, Line(t)));
  EXPECT_EQ(read.name, t.name);
  EXPECT_EQ(read.reason, t.reason);
  EXPECT_EQ(read.unit, t.unit);
  EXPECT_EQ(read.from, TaskState::kPaused);
  EXPECT_EQ(read.to, TaskState::kFailed);
  EXPECT_DOUBLE_EQ(read.progress, 12.5);
  EXPECT_EQ(read.steps, 40u);
  EXPECT_DOUBLE_EQ(read.alone_rate_per_s, 350.25);

  TransitionEvent submitted;
  submitted.task_id = 4;
  submitted.to = TaskState::kSubmitted;
  const std::string line = Line(submitted);
  EXPECT_NE(line.find(R"("from":"")"), std::string::npos) << line;
  EXPECT_EQ(line.find("unit"), std::string::npos) << "no unit declared: none written";
  EXPECT_FALSE(ReadTransitionEvent(Parse(parser, line)).from.has_value());
}

// The exact text, key order included: tools outside this repository (jq
// scripts, dashboards) read these lines.
TEST(Events, TheLinesAreTheDocumentedSchemaByteForByte) {
  EXPECT_EQ(Line(SampleBubble()),
            R"({"type":"bubble","ts_ns":10,"lane":3,"slot":7,"seq":41,"begin_ns":1000,)"
            R"("end_ns":9000,"predicted_end_ns":8000,"first_grant_ns":1100,"hint_ns":500,)"
            R"("free_memory_bytes":1099511627776,"ended_by":"stage_gone",)"
            R"("verdict":"no task's step fits the rest of the bubble","steps":4,)"
            R"("step_records_lost":1,"harvested_ns":6000,"allowed_ns":200,"overrun_ns":30,)"
            R"("unix_ns":1795417195343064487})");
  StepEvent late = SampleStep();
  late.late = true;
  EXPECT_EQ(Line(late),
            R"({"type":"step","ts_ns":5,"lane":1,"task_id":12,"bubble_seq":9,"start_ns":100,)"
            R"("end_ns":250,"units":0.125,"overrun_ns":7,"late":true,"unix_ns":99})");
  EXPECT_EQ(Line(SampleTransition()),
            R"({"type":"transition","ts_ns":1,"unix_ns":2,"task_id":3,"name":"pr","lane":0,)"
            R"("from":"PAUSED","to":"FAILED","reason":"exit 1","progress":12.5,"steps":40,)"
            R"("unit":"edges","alone_rate_per_s":350.25})");
}

TEST(Events, MalformedEventsAreRefusedAndUnknownNamesAreLeftUnset) {
  simdjson::dom::parser parser;
  EXPECT_THROW(ReadBubbleEvent(Parse(parser, R"({"type":"bubble","lane":0,"slot":0,"seq":1,)"
                                             R"("begin_ns":50,"end_ns":10})")),
               simdjson::simdjson_error)
      << "an end before its begin";
  EXPECT_THROW(ReadStepEvent(Parse(parser, R"({"type":"step","lane":0,"start_ns":1,"end_ns":2})")),
               simdjson::simdjson_error)
      << "no task_id";
  TransitionEvent newer_state =
      ReadTransitionEvent(Parse(parser, R"({"task_id":1,"from":"PAUSED","to":"DANCING"})"));
  EXPECT_EQ(newer_state.from, TaskState::kPaused);
  EXPECT_FALSE(newer_state.to.has_value()) << "a state this reader does not know";
  BubbleEvent newer = ReadBubbleEvent(
      Parse(parser, R"({"lane":0,"slot":0,"seq":1,"begin_ns":1,"end_ns":2,)"
                    R"("ended_by":"eclipse","verdict":"gated","future_key":[1,2]})"));
  EXPECT_FALSE(newer.ended_by.has_value());
  EXPECT_FALSE(newer.verdict.has_value());
}

}  // namespace
}  // namespace freeride::events
