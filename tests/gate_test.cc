// The GPU gate on CPU: the per-process gate logic against a fake driver
// table, the names it answers, the page's early and forced closes, and the
// whole interposer (libfreeride_gate.so) preloaded into a client that
// drives a fake libcuda.so.1 the way a CUDA runtime does.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/paths.h"
#include "channel/lane_segment.h"
#include "gate/gate_page.h"
#include "gate/late_work.h"
#include "gate/launch_gate.h"
#include "gate/piece_admission.h"
#include "gate/symbol_table.h"
#include "gate/work_lengths.h"
#include "policy/gate_close.h"
#include "test_util.h"

namespace freeride::gate {
namespace {

// The host's clock for the hold, on fake time: a sleep moves it on and
// runs `on_sleep` (where a test plays the stage and the daemon).
struct FakeClock {
  static inline int64_t now = 0;
  static inline int sleeps = 0;
  static inline int watches = 0;  // close watches of the word (spins, on a real clock)
  static inline int watches_of_another_value = 0;  // watches told to wait while the word held no longer `seen`
  static inline std::function<void()> on_sleep;
  static void Reset() {
    now = 1'000'000'000;
    sleeps = 0;
    watches = 0;
    watches_of_another_value = 0;
    on_sleep = nullptr;
  }
  // A watch is taken as lasting its whole `ns` (the word changes only in
  // on_sleep, as time passes), which is the most it may last.
  static HostClock Clock() {
    HostClock clock;
    clock.now_ns = [] { return now; };
    clock.sleep_ns = [](int64_t ns) {
      now += ns;
      ++sleeps;
      if (on_sleep) on_sleep();
    };
    clock.watch_ns = [](const std::atomic<uint32_t>* word, uint32_t seen, int64_t ns) {
      // A real watch of a value the word no longer holds would return at once.
      if (word->load() != seen) ++watches_of_another_value;
      now += ns;
      ++watches;
      if (on_sleep) on_sleep();
    };
    return clock;
  }
};
int64_t FakeClockNow() { return FakeClock::now; }

// A fake driver table: records waits, answers registration as told.
struct FakeDriver {
  struct Wait {
    CuStream stream;
    CuDevicePtr address;
    uint32_t value;
    unsigned flags;
  };
  static inline std::vector<Wait> waits;
  static inline std::vector<int64_t> wait_times;  // FakeClock::now at each wait
  static inline CuStream capturing = nullptr;
  static inline CuResult capturing_result = kCudaSuccess;  // what asking whether a stream captures returns
  static inline CuResult register_result = kCudaSuccess;
  static inline CuResult wait_result = kCudaSuccess;
  static inline int registrations = 0;
  // Events: a number each; an event is "ended" once its stream is released.
  static inline std::vector<std::pair<intptr_t, CuStream>> recorded;
  // Whether each record was a pass: made on a stream whose last call was a wait.
  static inline std::vector<bool> recorded_pass;
  static inline std::map<CuStream, bool> waited_last;
  static inline bool events_done = false;
  // When set, an event's state is this of its number (and whether its last
  // record was a pass), instead of events_done.
  static inline std::function<bool(intptr_t event, bool pass)> event_done;
  static inline std::map<intptr_t, bool> last_record_pass;
  static inline std::function<void()> on_wait;  // called as a wait is queued
  static inline float elapsed_ms = 0;
  // When set, the time between two events is this of the start event's
  // record time (FakeClock), instead of elapsed_ms.
  static inline std::function<float(int64_t recorded_at)> elapsed_of;
  static inline std::map<intptr_t, int64_t> record_time;
  static inline int live_events = 0;
  static inline std::map<intptr_t, unsigned> event_flags;

  static void Reset() {
    recorded.clear();
    recorded_pass.clear();
    waited_last.clear();
    last_record_pass.clear();
    on_wait = nullptr;
    event_done = nullptr;
    events_done = false;
    elapsed_ms = 0;
    elapsed_of = nullptr;
    record_time.clear();
    live_events = 0;
    event_flags.clear();
    waits.clear();
    wait_times.clear();
    capturing = nullptr;
    capturing_result = kCudaSuccess;
    register_result = kCudaSuccess;
    wait_result = kCudaSuccess;
    registrations = 0;
  }
  static DriverApi Api() {
    DriverApi api;
    api.stream_wait_value32 = [](CuStream s, CuDevicePtr a, uint32_t v, unsigned f) {
      if (wait_result == kCudaSuccess) waits.push_back({s, a, v, f});
      if (wait_result == kCudaSuccess) waited_last[s] = true;
      if (on_wait) on_wait();
      if (wait_result == kCudaSuccess) wait_times.push_back(FakeClockNow());
      return wait_result;
    };
    api.stream_is_capturing = [](CuStream s, int* status) {
      *status = (capturing && s == capturing) ? 1 : 0;
      return capturing_result;
    };
    api.mem_host_register = [](void*, size_t, unsigned) {
      ++registrations;
      return register_result;
    };
    api.mem_host_get_device_pointer = [](CuDevicePtr* d, void* p, unsigned) {
      *d = reinterpret_cast<CuDevicePtr>(p);
      return kCudaSuccess;
    };
    api.event_create = [](CuEvent* e, unsigned flags) {
      static intptr_t next = 1;
      event_flags[next] = flags;
      *e = reinterpret_cast<CuEvent>(next++);
      ++live_events;
      return kCudaSuccess;
    };
    api.event_record = [](CuEvent e, CuStream s) {
      recorded.push_back({reinterpret_cast<intptr_t>(e), s});
      recorded_pass.push_back(waited_last[s]);
      last_record_pass[reinterpret_cast<intptr_t>(e)] = waited_last[s];
      record_time[reinterpret_cast<intptr_t>(e)] = FakeClockNow();
      waited_last[s] = false;
      return kCudaSuccess;
    };
    api.event_query = [](CuEvent e) {
      const intptr_t n = reinterpret_cast<intptr_t>(e);
      const bool done = event_done ? event_done(n, last_record_pass[n]) : events_done;
      return done ? kCudaSuccess : kCudaErrorNotReady;
    };
    api.event_elapsed_time = [](float* ms, CuEvent start, CuEvent) {
      *ms = elapsed_of ? elapsed_of(record_time[reinterpret_cast<intptr_t>(start)]) : elapsed_ms;
      return kCudaSuccess;
    };
    api.event_destroy = [](CuEvent) {
      --live_events;
      return kCudaSuccess;
    };
    return api;
  }
};

bool IsTimingEvent(intptr_t event) { return (FakeDriver::event_flags[event] & 0x2) == 0; }

// The wrapper's AfterWork: its fence, made after the work, is no pass
// (the fake tells passes by their following a wait on their stream).
void AfterWorkOf(LaunchGate& gate, const WorkSample& sample) {
  FakeDriver::waited_last.clear();
  gate.AfterWork(sample);
}

// Queues `n` asynchronous pieces on `stream` as the interposer's wrapper
// does (BeforeWork, the work, AfterWork); fails at the first refused one.
::testing::AssertionResult QueuePieces(LaunchGate& gate, CuStream stream, int n = 1) {
  for (int i = 0; i < n; ++i) {
    WorkSample sample;
    const CuResult r = gate.BeforeWork(stream, false, &sample);
    if (r != kCudaSuccess) return ::testing::AssertionFailure() << "piece " << i << ": CUDA error " << r;
    AfterWorkOf(gate, sample);
  }
  return ::testing::AssertionSuccess();
}

class LaunchGateTest : public ::testing::Test {
 protected:
  // Bubble 1 is open and admits work without a deadline, unless a test says
  // otherwise.
  void SetUp() override {
    FakeDriver::Reset();
    FakeClock::Reset();
    Open(1, INT64_MAX);
  }
  void TearDown() override { FakeClock::on_sleep = nullptr; }
  GatePageLayout& layout() { return *reinterpret_cast<GatePageLayout*>(page_); }
  // The stage's stream opens bubble `bubble`; the daemon publishes its deadline.
  void Open(uint32_t bubble, int64_t until_ns) {
    layout().word.store(GateOpenValue(bubble));
    layout().admit_until_ns.store(until_ns);
    layout().admit_bubble.store(bubble);
  }
  void Shut(uint32_t bubble) { layout().word.store(GateClosedValue(bubble)); }
  // Bubble 1 shut; bubble 2 forecast to begin 3 ms on, for 1 ms, with a
  // 100 us lead: what the daemon publishes at bubble 1's end.
  AheadAdmission ShutAndForecastBubbleTwo() {
    Shut(1);
    const int64_t begin = FakeClock::now + 3'000'000;
    AheadAdmission ahead;
    ahead.bubble = 2;
    ahead.from_ns = begin - 100'000;
    ahead.begin_ns = begin;
    ahead.until_ns = begin + 1'000'000;
    PublishAheadAdmission(&layout(), ahead);
    return ahead;
  }
  // The daemon publishes bubble `bubble`'s deadline (none) once the fake
  // clock reaches `at`, as the held thread sleeps; then the one piece queued
  // must have waited for it.
  void PublishAtAndExpectTheWaitAfter(LaunchGate& gate, uint32_t bubble, int64_t at) {
    FakeClock::on_sleep = [this, bubble, at] {
      if (FakeClock::now >= at && layout().admit_bubble.load() != bubble) Open(bubble, INT64_MAX);
    };
    EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
    ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
    EXPECT_GE(FakeDriver::wait_times[0], at);
  }
  // Bubble `shut` has ended; bubble `next` is forecast to begin at `begin`
  // and last `length`, watched only (an iteration's first), with a lead.
  void ShutWithForecast(uint32_t shut, uint32_t next, int64_t begin, int64_t length) {
    Shut(shut);
    PublishAheadAdmission(&layout(), {next, begin - kForecastLeadNs, begin, begin + length, /*watch_only=*/true});
  }
  static constexpr int64_t kForecastLeadNs = 300'000;
  // As the held thread sleeps: the stage's stream opens bubble `bubble` once
  // the fake clock reaches `opens_at`, and the daemon publishes its deadline
  // (none) at `published_at`.
  void OpenAtThenPublish(uint32_t bubble, int64_t opens_at, int64_t published_at) {
    FakeClock::on_sleep = [this, bubble, opens_at, published_at] {
      if (FakeClock::now >= opens_at) layout().word.store(GateOpenValue(bubble));
      if (FakeClock::now >= published_at) Open(bubble, INT64_MAX);
    };
  }
  // What RunBubblesOf1ms saw: each bubble's opening time, and the bubble
  // open at each emptying of the gate's common window.
  struct BubbleLog {
    std::vector<int64_t> opened;
    std::vector<uint32_t> forgot_in;
  };
  // Nothing of the program's is queued (every event reached) and bubble 1
  // is open with `first_left` ns to its deadline, this thread never having
  // seen it shut (a look in it does not count as at an opening).  Then, as
  // the held thread sleeps: bubbles of 1 ms, each after 2 ms shut, the
  // deadline (the bubble's end) published `publish_after` ns after each
  // opens, as the daemon does once it has the stage's mark (from bubble
  // `admit_all_from` on, none: a gate that never lets a piece go fails
  // there rather than hangs).  With `look_late`, the stage's stream opened
  // each bubble that long before the word reads open on the host: its
  // deadline is that much sooner.
  std::shared_ptr<BubbleLog> RunBubblesOf1ms(LaunchGate& gate, uint32_t admit_all_from, int64_t publish_after = 0,
                                             int64_t first_left = 1'000'000, int64_t look_late = 0) {
    FakeDriver::events_done = true;
    Open(1, FakeClock::now + first_left);
    auto log = std::make_shared<BubbleLog>();
    const int64_t start = FakeClock::now;
    auto bubble = std::make_shared<uint32_t>(1);
    FakeClock::on_sleep = [this, &gate, log, start, bubble, admit_all_from, publish_after, look_late] {
      while (log->forgot_in.size() < gate.counters().windows_forgotten) log->forgot_in.push_back(*bubble);
      const int64_t t = (FakeClock::now - start) % 3'000'000;
      const bool open = t >= 2'000'000;
      if (open && !GateIsOpen(layout().word.load())) {
        ++*bubble;
        layout().word.store(GateOpenValue(*bubble));
        log->opened.push_back(FakeClock::now);
      } else if (!open && GateIsOpen(layout().word.load())) {
        Shut(*bubble);
      }
      if (open && t >= 2'000'000 + publish_after && layout().admit_bubble.load() != *bubble)
        Open(*bubble, *bubble < admit_all_from ? FakeClock::now - (t - 2'000'000) - look_late + 1'000'000 : INT64_MAX);
    };
    return log;
  }
  // Queues the piece held by RunBubblesOf1ms's bubbles and checks that the
  // common window was emptied once, that `opened` bubbles had opened since
  // bubble 1 (`which`: the bubbles that counted), and that the piece was
  // queued within 100 us of `after` ns past the last opening.
  void ExpectTheWindowEmptiedOnceThenThePieceQueued(LaunchGate& gate, const BubbleLog& log, size_t opened,
                                                    int64_t after, const char* which) {
    ASSERT_TRUE(QueuePieces(gate, stream_));
    EXPECT_EQ(gate.counters().windows_forgotten, 1u);
    ASSERT_EQ(log.opened.size(), opened) << which;
    ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
    EXPECT_GE(FakeDriver::wait_times[0], log.opened.back() + after);
    EXPECT_LT(FakeDriver::wait_times[0], log.opened.back() + after + 100'000);
    FakeClock::on_sleep = nullptr;
  }
  // Queues the piece held by RunBubblesOf1ms's bubbles (admit_all_from 30)
  // and checks that it was held until bubble 30 admitted anything, with the
  // window kept at `p95_ns`.
  void ExpectHeldUntilBubble30WithTheWindowKept(LaunchGate& gate, const BubbleLog& log, const GateTaskSlot& slot,
                                                int64_t p95_ns) {
    ASSERT_TRUE(QueuePieces(gate, stream_));
    EXPECT_EQ(log.opened.size(), 29u) << "held until bubble 30 admits anything";
    ExpectTheWindowKept(gate, slot, p95_ns);
  }
  // The common window was never emptied and still stands at `p95_ns`; the
  // bubble generator is stopped.
  static void ExpectTheWindowKept(LaunchGate& gate, const GateTaskSlot& slot, int64_t p95_ns) {
    EXPECT_EQ(gate.counters().windows_forgotten, 0u);
    EXPECT_EQ(slot.work_p95_ns.load(), p95_ns);
    FakeClock::on_sleep = nullptr;
  }
  alignas(4096) char page_[4096] = {};
  CuStream stream_ = reinterpret_cast<CuStream>(0x1000);
};

TEST_F(LaunchGateTest, EachPieceOfWorkWaitsForTheGateWordToBeOpenOnItsOwnStream) {
  LaunchGate gate(FakeDriver::Api(), page_, "");
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  ASSERT_EQ(FakeDriver::waits.size(), 2u);
  for (const auto& wait : FakeDriver::waits) {
    EXPECT_EQ(wait.stream, stream_);
    EXPECT_EQ(wait.address, reinterpret_cast<CuDevicePtr>(page_));  // the page's first word
    EXPECT_EQ(wait.value, 1u);                                      // the open bit
    EXPECT_EQ(wait.flags, kStreamWaitValueAnd);
  }
  EXPECT_EQ(FakeDriver::registrations, 1);  // armed once
  EXPECT_EQ(gate.state(), GateState::kArmed);
  EXPECT_EQ(gate.counters().waits, 2u);
}

TEST_F(LaunchGateTest, TheDefaultStreamOfAPerThreadEntryPointIsTheThreadsOwn) {
  LaunchGate gate(FakeDriver::Api(), page_, "");
  gate.BeforeWork(nullptr, true);
  gate.BeforeWork(nullptr, false);
  ASSERT_EQ(FakeDriver::waits.size(), 2u);
  EXPECT_EQ(FakeDriver::waits[0].stream, kPerThreadStream);
  EXPECT_EQ(FakeDriver::waits[1].stream, nullptr);  // the legacy default stream
}

TEST_F(LaunchGateTest, WorkCapturedIntoAGraphGetsNoWaitOfItsOwn) {
  LaunchGate gate(FakeDriver::Api(), page_, "");
  FakeDriver::capturing = stream_;
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  EXPECT_TRUE(FakeDriver::waits.empty());
  EXPECT_EQ(gate.counters().captured, 1u);
}

// The legacy stream while a blocking stream captures: asking fails with
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.  A long copy is not cut then
// (Capturing: it would fail all the same), but a piece is gated as usual:
// its wait is refused while that capture lasts, and if the capture ends
// meanwhile the piece still waits for the gate.
TEST_F(LaunchGateTest, WorkOnTheLegacyStreamDuringAnotherStreamsCaptureIsStillGated) {
  LaunchGate gate(FakeDriver::Api(), page_, "");
  Open(1, INT64_MAX);
  FakeDriver::capturing_result = kCudaErrorStreamCaptureImplicit;
  EXPECT_TRUE(gate.Capturing(nullptr, false));
  EXPECT_EQ(gate.BeforeWork(nullptr, false), kCudaSuccess);
  EXPECT_EQ(FakeDriver::waits.size(), 1u);
  EXPECT_EQ(gate.counters().captured, 0u);
  FakeDriver::capturing_result = kCudaErrorInvalidValue;  // any other failure: not capturing
  EXPECT_FALSE(gate.Capturing(nullptr, false));
}

TEST_F(LaunchGateTest, AWaitTheDriverRefusesIsReturnedSoTheWorkIsNotSubmitted) {
  LaunchGate gate(FakeDriver::Api(), page_, "");
  FakeDriver::wait_result = 400;  // CUDA_ERROR_INVALID_HANDLE
  EXPECT_EQ(gate.BeforeWork(stream_, false), 400);
  EXPECT_EQ(gate.counters().failed_waits, 1u);
}

TEST_F(LaunchGateTest, AGateThatCannotBeArmedRefusesAllWorkForGood) {
  FakeDriver::register_result = 2;  // out of memory
  LaunchGate gate(FakeDriver::Api(), page_, "");
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaErrorNotPermitted);
  FakeDriver::register_result = kCudaSuccess;  // it is not retried: one answer for the process
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaErrorNotPermitted);
  EXPECT_EQ(gate.state(), GateState::kRefused);
  EXPECT_NE(gate.refusal().find("cuMemHostRegister"), std::string::npos);
  EXPECT_EQ(FakeDriver::registrations, 1);
  EXPECT_TRUE(FakeDriver::waits.empty());
  EXPECT_EQ(gate.counters().refused, 2u);
}

TEST_F(LaunchGateTest, NoPageMeansNoWorkAndSaysWhy) {
  LaunchGate gate(FakeDriver::Api(), nullptr, "FREERIDE_GATE_PAGE is not set");
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaErrorNotPermitted);
  EXPECT_EQ(gate.refusal(), "FREERIDE_GATE_PAGE is not set");
}

TEST_F(LaunchGateTest, ADriverWithoutStreamMemoryOperationsIsRefused) {
  DriverApi api = FakeDriver::Api();
  api.stream_wait_value32 = nullptr;
  LaunchGate gate(api, page_, "");
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaErrorNotPermitted);
  EXPECT_NE(gate.refusal().find("stream memory operations"), std::string::npos);
}

TEST_F(LaunchGateTest, OnePieceInSixteenIsTimedAndItsLengthPublishedOnceItEnds) {
  GateTaskSlot slot{};
  {
    LaunchGate gate(FakeDriver::Api(), page_, "", &slot);
    FakeDriver::elapsed_ms = 1.5f;
    int sampled = 0;
    for (uint64_t i = 0; i < LaunchGate::kSampleEvery * 3; ++i) {
      WorkSample sample;
      ASSERT_EQ(gate.BeforeWork(stream_, false, &sample), kCudaSuccess);
      sampled += sample.start != nullptr;
      AfterWorkOf(gate, sample);
    }
    EXPECT_EQ(sampled, 3);
    int timing = 0;
    for (const auto& [event, stream] : FakeDriver::recorded) {
      EXPECT_EQ(stream, stream_);  // every event on the work's own stream
      timing += IsTimingEvent(event);
    }
    EXPECT_EQ(timing, 6);  // a start and an end each
    EXPECT_EQ(gate.unfinished_pieces(), LaunchGate::kSampleEvery * 3);
    EXPECT_EQ(slot.work_p95_ns.load(), 0);  // none has ended: nothing is published
    FakeDriver::events_done = true;
    // Read back at one of the next kCollectEvery pieces.
    for (uint64_t i = 0; i < LaunchGate::kCollectEvery && slot.work_p95_ns.load() == 0; ++i)
      ASSERT_TRUE(QueuePieces(gate, stream_));
    EXPECT_EQ(slot.work_p95_ns.load(), 1'500'000);
    EXPECT_EQ(slot.samples.load(), 3u);
    EXPECT_EQ(gate.unfinished_pieces(), 0u);
  }
  EXPECT_EQ(FakeDriver::live_events, 0);  // every event was destroyed, the spare fences with the gate
}

TEST_F(LaunchGateTest, WorkOnTheLegacyDefaultStreamIsTimedButSynchronousAndCapturedWorkIsNot) {
  LaunchGate gate(FakeDriver::Api(), page_, "");  // no slot: it still learns its pieces' length
  FakeDriver::capturing = stream_;
  FakeDriver::elapsed_ms = 2.0f;
  int sampled = 0;
  for (uint64_t i = 0; i < LaunchGate::kSampleEvery * 2; ++i) {
    WorkSample legacy, captured;
    gate.BeforeWork(nullptr, false, &legacy);  // PyTorch's default stream: asynchronous work
    gate.BeforeWork(stream_, false, &captured);  // being captured into a graph
    gate.BeforeWork(nullptr, false);  // a synchronous copy: the wrapper passes no sample
    sampled += legacy.start != nullptr;
    EXPECT_EQ(captured.start, nullptr);
    EXPECT_FALSE(captured.queued);
    AfterWorkOf(gate, legacy);
    AfterWorkOf(gate, captured);
  }
  EXPECT_GT(sampled, 0);
  int fences = 0;
  for (const auto& [event, stream] : FakeDriver::recorded) {
    EXPECT_EQ(stream, nullptr);  // none on the captured stream
    fences += !IsTimingEvent(event);
  }
  // The legacy pieces' only (none has ended, so none was timed: each got a
  // pass after its wait, and its fence).
  EXPECT_EQ(fences, static_cast<int>(2 * LaunchGate::kSampleEvery * 2));
  EXPECT_EQ(gate.unfinished_pieces(), LaunchGate::kSampleEvery * 2);
  EXPECT_EQ(gate.work_p95_ns(), 0);  // nothing published without a slot...
  FakeDriver::events_done = true;
  gate.BeforeWork(nullptr, false);
  EXPECT_EQ(gate.unfinished_pieces(), 0u);
}

// --- holding pieces on the host: no wait is left pending through busy time --

// The gate page showing `word`, with the daemon's deadline still bubble 4's
// and a forecast for bubble 5: queued from `from`, beginning at `begin`,
// work to end by `until`.
GateView ForecastOfBubble5(uint32_t word, int64_t from, int64_t begin, int64_t until) {
  GateView view;
  view.word = word;
  view.admit_bubble = 4;
  view.ahead_bubble = 5;
  view.ahead_from_ns = from;
  view.ahead_begin_ns = begin;
  view.ahead_until_ns = until;
  return view;
}

TEST(PieceAdmission, APieceIsQueuedOnlyInAnOpenBubbleWhenItCanEndByTheDeadline) {
  GateView view{GateOpenValue(4), 4, 1000};
  EXPECT_EQ(JudgePiece(view, 500, 0, 400, 0), PieceVerdict::kQueue);
  EXPECT_EQ(JudgePiece(view, 500, 100, 400, 0), PieceVerdict::kQueue);  // ends at 1000 exactly
  EXPECT_EQ(JudgePiece(view, 500, 200, 400, 0), PieceVerdict::kWaitForQueue);  // after the queue drains
  EXPECT_EQ(JudgePiece(view, 700, 0, 400, 0), PieceVerdict::kWaitForBubble);  // cannot end in this one
  EXPECT_EQ(JudgePiece(view, 700, 300, 400, 0), PieceVerdict::kWaitForBubble);  // not even once drained
  view.word = GateClosedValue(4);
  EXPECT_EQ(JudgePiece(view, 0, 0, 1, 0), PieceVerdict::kWaitForBubble);
  view = {GateOpenValue(5), 4, 1000};  // bubble 5's deadline is not published yet
  EXPECT_EQ(JudgePiece(view, 0, 0, 1, 0), PieceVerdict::kWaitForQueue);
}

TEST(PieceAdmission, BehindTheShutGateAPieceIsQueuedOnlyInTheNextBubblesLeadIfItFitsItsForecast) {
  GateView view = ForecastOfBubble5(GateClosedValue(4), 900, 1000, 1500);  // a lead of 100
  EXPECT_EQ(JudgePiece(view, 899, 0, 100, 0), PieceVerdict::kWaitForBubble);  // before the lead
  EXPECT_EQ(JudgePiece(view, 900, 0, 100, 0), PieceVerdict::kQueue);
  EXPECT_EQ(JudgePiece(view, 950, 400, 100, 0), PieceVerdict::kQueue);  // starts at the begin: ends at 1500
  EXPECT_EQ(JudgePiece(view, 950, 401, 100, 0), PieceVerdict::kWaitForBubble);
  EXPECT_EQ(JudgePiece(view, 1000, 0, 100, 0), PieceVerdict::kQueue);
  // Still shut past the forecast begin: the bubble is late this time, and a
  // wait queued for it might be left pending through the busy time.
  EXPECT_EQ(JudgePiece(view, 1001, 0, 100, 0), PieceVerdict::kWaitForBubble);
  view.ahead_bubble = 6;  // a forecast for another bubble than the next
  EXPECT_EQ(JudgePiece(view, 950, 0, 100, 0), PieceVerdict::kWaitForBubble);
  view.ahead_bubble = 4;  // the one that just ended
  EXPECT_EQ(JudgePiece(view, 950, 0, 100, 0), PieceVerdict::kWaitForBubble);
}

// Before the daemon publishes an open bubble's deadline, the forecast's
// length is counted from the last time the judging thread saw the gate shut
// just before the bubble: the bubble began after that, so it ends no sooner
// than that plus its length.
TEST(PieceAdmission, AnOpenBubbleWhoseDeadlineIsNotPublishedYetIsJudgedByItsForecastFromTheLastShutSighting) {
  GateView view = ForecastOfBubble5(GateOpenValue(5), 900, 1000, 1500);  // 500 long, not published yet
  // Seen shut at the forecast begin: it began after, and ends no sooner than the forecast's end.
  EXPECT_EQ(JudgePiece(view, 1200, 200, 100, 1000), PieceVerdict::kQueue);  // ends at 1500
  EXPECT_EQ(JudgePiece(view, 1200, 201, 100, 1000), PieceVerdict::kWaitForQueue);
  // Open before its forecast begin, seen shut at 940: counted from then, not from the later begin.
  EXPECT_EQ(JudgePiece(view, 950, 0, 490, 940), PieceVerdict::kQueue);
  EXPECT_EQ(JudgePiece(view, 950, 0, 491, 940), PieceVerdict::kWaitForQueue);
  // Last seen shut long before (the thread was elsewhere): it may have opened just after, so
  // its end is counted from then, here 1100, not the forecast's 1500.
  EXPECT_EQ(JudgePiece(view, 1050, 0, 50, 600), PieceVerdict::kQueue);
  EXPECT_EQ(JudgePiece(view, 1050, 0, 51, 600), PieceVerdict::kWaitForQueue);
  // Never seen shut before this bubble: it may have opened any time; wait for the daemon.
  EXPECT_EQ(JudgePiece(view, 1200, 0, 1, 0), PieceVerdict::kWaitForQueue);
  // Open before the forecast's lead: the forecast was wrong; wait for the daemon's deadline.
  EXPECT_EQ(JudgePiece(view, 899, 0, 1, 890), PieceVerdict::kWaitForQueue);
  view.ahead_bubble = 4;  // no forecast for this bubble: wait for the daemon
  EXPECT_EQ(JudgePiece(view, 1200, 0, 1, 1000), PieceVerdict::kWaitForQueue);
  // Once published, the daemon's deadline rules, not the forecast.
  view.admit_bubble = 5;
  view.admit_until_ns = 1250;
  view.ahead_bubble = 5;
  EXPECT_EQ(JudgePiece(view, 1200, 0, 100, 1000), PieceVerdict::kWaitForBubble);
}

// An iteration's first bubble: published watched only, so nothing waits
// behind the shut gate for it, but an open gate is judged by the forecast
// before the daemon's deadline comes.
TEST(PieceAdmission, AnIterationsFirstBubbleQueuesNothingAheadButIsJudgedByItsForecastOnceOpen) {
  GateView view = ForecastOfBubble5(GateClosedValue(4), 900, 1000, 1500);  // a lead of 100
  view.ahead_watch_only = true;
  for (int64_t now : {899, 900, 950, 1000, 1001, 1200})
    EXPECT_EQ(JudgePiece(view, now, 0, 100, now), PieceVerdict::kWaitForBubble) << "shut at " << now;
  view.word = GateOpenValue(5);  // the daemon has not seen it begin yet
  EXPECT_EQ(JudgePiece(view, 1001, 399, 100, 1000), PieceVerdict::kQueue) << "ends at 1500";
  EXPECT_EQ(JudgePiece(view, 1001, 400, 100, 1000), PieceVerdict::kWaitForQueue);
  // Open before the forecast begin (the host's mark, which comes after the stream's open), seen
  // shut at 980: counted from then, so it ends by 1480.
  EXPECT_EQ(JudgePiece(view, 990, 0, 490, 980), PieceVerdict::kQueue);
  EXPECT_EQ(JudgePiece(view, 990, 0, 491, 980), PieceVerdict::kWaitForQueue);
  EXPECT_EQ(JudgePiece(view, 899, 0, 1, 890), PieceVerdict::kWaitForQueue)
      << "open before its window: the forecast was wrong; wait for the daemon";
  // What made the first try of this unsafe: a bubble that opened at 700, earlier than its
  // forecast, first looked at once the window opened.  Judged from the forecast begin it would
  // end at 1500, 300 after its real end; judged from the last sighting (650), at 1150.
  EXPECT_EQ(JudgePiece(view, 1001, 0, 149, 650), PieceVerdict::kQueue);
  EXPECT_EQ(JudgePiece(view, 1001, 0, 150, 650), PieceVerdict::kWaitForQueue);
}

// A piece goes without its wait only where the time to the deadline is at
// least room_pct percent of the queue and the piece (200 by default), for at
// most max_in_row pieces in a row; a bubble with no deadline does not overflow.
TEST(PieceAdmission, APieceGoesUnwaitedOnlyWithItsRoomToTheDeadline) {
  // 600 us of queue and piece, 1 ms to the deadline.
  EXPECT_FALSE(MayGoUnwaited(0, 500'000, 100'000, 1'000'000, 0));
  EXPECT_TRUE(MayGoUnwaited(0, 400'000, 100'000, 1'000'000, 0)) << "exactly twice";
  static_assert(kUnwaitedRoomPct == 200 && GateTuning{}.room_pct == kUnwaitedRoomPct);
  EXPECT_TRUE(MayGoUnwaited(0, 500'000, 100'000, 1'000'000, 0, kMaxUnwaitedInRow, 150));
  EXPECT_FALSE(MayGoUnwaited(0, 600'000, 100'000, 1'000'000, 0, kMaxUnwaitedInRow, 150));
  EXPECT_TRUE(MayGoUnwaited(0, 900'000, 100'000, 1'000'000, 0, kMaxUnwaitedInRow, 100));
  EXPECT_FALSE(MayGoUnwaited(0, 900'001, 100'000, 1'000'000, 0, kMaxUnwaitedInRow, 100));
  EXPECT_FALSE(MayGoUnwaited(0, 0, 100'000, 1'000'000, kMaxUnwaitedInRow)) << "the run is full";
  EXPECT_TRUE(MayGoUnwaited(1'000, 1'000'000'000, 100'000, INT64_MAX, 0, kMaxUnwaitedInRow, GateTuning::kMostRoomPct));
}

// Through a watched bubble's window a held thread looks at the gate every
// kWatchPollNs, so that it sees the gate open within that; before the window
// it sleeps until it opens, and once the bubble is as late past its forecast
// begin as the window opened before it, it looks at the usual pace.
TEST(PieceAdmission, AWatchedBubblesShutGateIsLookedAtCloselyThroughItsWindow) {
  GateView view = ForecastOfBubble5(GateClosedValue(4), 700'000, 1'000'000, 3'000'000);  // a lead of 300 us
  view.ahead_watch_only = true;
  EXPECT_EQ(ShutPollNs(view, 600'000, 50'000), 50'000);
  EXPECT_EQ(ShutPollNs(view, 680'000, 50'000), 20'000) << "wakes as the window opens";
  for (int64_t now : {700'000, 999'000, 1'000'000, 1'300'000})
    EXPECT_EQ(ShutPollNs(view, now, 50'000), kWatchPollNs) << "at " << now;
  EXPECT_EQ(ShutPollNs(view, 1'300'001, 50'000), 50'000) << "late by the lead: maybe a pause";
  view.ahead_watch_only = false;  // queued for in its window, not polled
  EXPECT_EQ(ShutPollNs(view, 800'000, 50'000), 50'000);
  view.ahead_watch_only = true;
  view.ahead_bubble = 6;  // a forecast of another bubble than the next
  EXPECT_EQ(ShutPollNs(view, 800'000, 50'000), 50'000);
}

// A lane with a long lead (--gate-lead-us 5000): a watched bubble is looked
// at closely for kMostWatchNs either side of its forecast begin, no longer.
TEST(PieceAdmission, AWatchedBubbleIsLookedAtCloselyForABoundedStretchWhateverTheLead) {
  GateView view = ForecastOfBubble5(GateClosedValue(4), 5'000'000, 10'000'000, 12'000'000);  // a lead of 5 ms
  view.ahead_watch_only = true;
  EXPECT_EQ(ShutPollNs(view, 5'000'000, 50'000), 50'000) << "the window opens, but the watch not yet";
  EXPECT_EQ(ShutPollNs(view, 8'980'000, 50'000), 20'000) << "wakes as the watch begins";
  EXPECT_EQ(ShutPollNs(view, 9'000'000, 50'000), kWatchPollNs);
  EXPECT_EQ(ShutPollNs(view, 10'000'000 + kMostWatchNs, 50'000), kWatchPollNs);
  EXPECT_EQ(ShutPollNs(view, 10'000'001 + kMostWatchNs, 50'000), 50'000);
}

TEST(PieceAdmission, AShutGateIsLookedAtAgainWhenTheNextBubblesLeadBegins) {
  GateView view;
  view.word = GateClosedValue(4);
  EXPECT_EQ(ShutPollNs(view, 0, 50'000), 50'000);  // no forecast
  view.ahead_bubble = 5;
  view.ahead_from_ns = 20'000;
  view.ahead_begin_ns = 120'000;
  EXPECT_EQ(ShutPollNs(view, 0, 50'000), 20'000);
  EXPECT_EQ(ShutPollNs(view, 19'999, 50'000), 1'000);  // never less than 1 us
  EXPECT_EQ(ShutPollNs(view, 200'000, 50'000), 50'000);
}

TEST_F(LaunchGateTest, APieceThatFitsTheNextBubblesForecastIsQueuedBehindTheShutGateInItsLead) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  const AheadAdmission ahead = ShutAndForecastBubbleTwo();
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  // Queued in the lead, behind the shut gate: the GPU starts it when the stage opens bubble 2.
  EXPECT_EQ(FakeDriver::wait_times[0], ahead.from_ns);
  EXPECT_FALSE(GateIsOpen(layout().word.load()));
  EXPECT_EQ(gate.counters().held, 1u);
}

TEST_F(LaunchGateTest, APieceIsHeldOnTheHostWhileTheGateIsShutAndQueuedOnceItOpens) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  Shut(1);
  const int64_t opens_at = FakeClock::now + 3'000'000;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now >= opens_at && !GateIsOpen(layout().word.load())) Open(2, opens_at + 5'000'000);
  };
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  ASSERT_EQ(FakeDriver::waits.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], opens_at);  // nothing was queued while it was shut
  EXPECT_EQ(gate.counters().held, 1u);
  EXPECT_EQ(gate.counters().waits, 1u);
}

// A deadline caught mid-write (the daemon republishes it when a bubble
// outlasts its slot's second look) is read again, not replaced by the
// bubble's forecast, which still says the first forecast's deadline.
TEST_F(LaunchGateTest, ADeadlineBeingWrittenIsReadAgainNotReplacedByTheForecast) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  layout().word.store(GateOpenValue(2));
  layout().admit_bubble.store(kAdmissionBeingWritten);
  PublishAheadAdmission(&layout(), {2, FakeClock::now - 1'000'000, FakeClock::now - 500'000,
                                    FakeClock::now + 50'000'000});  // the forecast would admit it
  PublishAtAndExpectTheWaitAfter(gate, 2, FakeClock::now + 30'000);
}

// An iteration's first bubble (watched only: nothing queued behind the
// shut gate): the held thread looks at the gate closely through the window
// and queues the piece as soon as it sees the gate open, by the forecast,
// with no deadline from the daemon yet; whether the stream opens it before
// the forecast begin (the host's mark comes after the stream's open) or
// later than forecast.
TEST_F(LaunchGateTest, AWatchedGateSeenShutAndThenOpenIsJudgedByItsForecastBeforeTheDaemonsDeadline) {
  // (Past the watch, 500 us late, it is still judged by the forecast, at the usual pace.)
  for (int64_t opens_after_begin : {-120'000, 0, 200'000, 500'000}) {
    SCOPED_TRACE(opens_after_begin);
    FakeDriver::wait_times.clear();
    FakeDriver::waits.clear();
    LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
    const int64_t begin = FakeClock::now + 3'000'000;
    ShutWithForecast(1, 2, begin, 1'000'000);
    const int64_t opens_at = begin + opens_after_begin;
    OpenAtThenPublish(2, opens_at, opens_at + 1'000'000);  // the daemon's deadline, much later
    EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
    ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
    EXPECT_GE(FakeDriver::wait_times[0], opens_at) << "nothing queued behind the shut gate";
    const int64_t pace = opens_after_begin <= kForecastLeadNs ? kWatchPollNs : LaunchGate::kShutPollNs;
    EXPECT_LE(FakeDriver::wait_times[0], opens_at + pace) << "at its first look at the open gate";
    EXPECT_EQ(layout().admit_bubble.load(), 1u) << "queued before the daemon published bubble 2's deadline";
    Shut(2);
    FakeClock::on_sleep = nullptr;
  }
}

// Told to spin (FREERIDE_GATE_WATCH=spin), a held thread spins on the gate
// word through a watched bubble's window, and only there: before the window
// it sleeps.  By default (watch_spins false) it sleeps throughout.
TEST_F(LaunchGateTest, AWatchedBubblesWindowIsWatchedBySpinningOnlyWhenToldTo) {
  EXPECT_FALSE(GateTuning{}.watch_spins) << "an experiment, off by default";
  for (bool spins : {true, false}) {
    SCOPED_TRACE(spins);
    FakeClock::Reset();
    LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock(), false, QueueEstimate::kP95,
                    GateTuning{.watch_spins = spins});
    const int64_t begin = FakeClock::now + 3'000'000;
    ShutWithForecast(1, 2, begin, 1'000'000);
    const int64_t opens_at = begin + 100'000;
    const int64_t window = begin - kForecastLeadNs;
    int watches_outside = 0, sleeps_inside = 0;
    int watches = 0;
    int64_t look_began = FakeClock::now;  // the clock moves only in looks
    FakeClock::on_sleep = [&] {
      const bool watched = FakeClock::watches != watches;
      watches = FakeClock::watches;
      const int64_t began = std::exchange(look_began, FakeClock::now);
      // (The look that ends as the window opens may spin: it is under kWatchPollNs.)
      if (watched && began < window - kWatchPollNs) ++watches_outside;
      if (!watched && began >= window && began < opens_at) ++sleeps_inside;
      if (FakeClock::now >= opens_at) layout().word.store(GateOpenValue(2));
    };
    EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
    ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
    EXPECT_GE(FakeDriver::wait_times[0], opens_at);
    EXPECT_LE(FakeDriver::wait_times[0], opens_at + kWatchPollNs);
    EXPECT_EQ(FakeClock::watches_of_another_value, 0) << "each watch waits on the value last read";
    if (spins) {
      // 400 us of window at one watch per 5 us.
      EXPECT_GE(FakeClock::watches, (opens_at - window) / kWatchPollNs);
      EXPECT_EQ(watches_outside, 0) << "the thread slept until the window";
      EXPECT_EQ(sleeps_inside, 0);
    } else {
      EXPECT_EQ(FakeClock::watches, 0);
      EXPECT_GE(sleeps_inside, (opens_at - window) / kWatchPollNs - 1);
    }
    Shut(2);
    FakeClock::on_sleep = nullptr;
    FakeDriver::wait_times.clear();
    FakeDriver::waits.clear();
  }
}

// The real watch returns once the word holds another value than `seen`
// (here with an hour to run, so the test ends only if the change is seen),
// and with the word unchanged not before its time is out.
TEST(HostClockTest, TheRealWatchReturnsWhenTheWordChangesAndNotBeforeItsTimeOtherwise) {
  const HostClock clock = RealHostClock();
  ASSERT_NE(clock.watch_ns, nullptr);
  std::atomic<uint32_t> word{GateClosedValue(1)};
  std::thread opener([&] { word.store(GateOpenValue(2)); });
  clock.watch_ns(&word, GateClosedValue(1), 3'600'000'000'000);
  opener.join();
  EXPECT_EQ(word.load(), GateOpenValue(2));
  const int64_t before = clock.now_ns();
  clock.watch_ns(&word, GateOpenValue(2), 2'000'000);
  EXPECT_GE(clock.now_ns() - before, 2'000'000);
  clock.watch_ns(&word, GateClosedValue(1), 3'600'000'000'000);  // already another value: at once
}

// A watched bubble much later than forecast (the trainer paused between
// iterations, say): past its window the thread looks at the usual pace.
TEST_F(LaunchGateTest, AWatchedBubbleLaterThanItsWindowIsLookedAtTheUsualPace) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  const int64_t begin = FakeClock::now + 3'000'000;
  ShutWithForecast(1, 2, begin, 1'000'000);
  const int64_t opens_at = begin + 10'000'000;
  int looks_while_late = 0;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now > begin + kForecastLeadNs && FakeClock::now < opens_at) ++looks_while_late;
    if (FakeClock::now >= opens_at) Open(2, opens_at + 1'000'000);
  };
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], opens_at);
  // 9.7 ms late at one look per 50 us: about 194 looks, not the 1,940 of close watching.
  EXPECT_LE(looks_while_late, (opens_at - begin - kForecastLeadNs) / LaunchGate::kShutPollNs + 2);
}

// A sighting counts only for the bubble right after the one seen shut, and
// only for the gate that made it.
TEST_F(LaunchGateTest, AShutSightingOfAnEarlierBubbleOrAnotherGateDoesNotBoundAnOpenOne) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  const int64_t begin = FakeClock::now + 1'000'000;
  ShutWithForecast(1, 3, begin, 10'000'000);
  // Seen shut after bubble 1; meanwhile bubble 2 opens and closes unseen, and bubble 3 opens.
  const int64_t published_at = begin + 500'000;
  OpenAtThenPublish(3, begin + 100'000, published_at);
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], published_at) << "bubble 2 may have hidden bubble 3's early open";

  // The same gate sees bubble 3 shut, then 4 open: its own sighting bounds bubble 4, no
  // deadline needed.  Then another gate of the process (another task's, say) sees the page's
  // bubble 4 open: the sighting was the first gate's, so it waits for the deadline.
  ShutWithForecast(3, 4, FakeClock::now, 10'000'000);
  FakeClock::on_sleep = [&] { layout().word.store(GateOpenValue(4)); };
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  EXPECT_EQ(layout().admit_bubble.load(), 3u) << "queued by the forecast, before bubble 4's deadline";
  FakeDriver::wait_times.clear();
  FakeDriver::waits.clear();
  LaunchGate other(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  PublishAtAndExpectTheWaitAfter(other, 4, FakeClock::now + 40'000);
}

// The same forecast, but the thread never saw the gate shut before the
// bubble: it may have opened any time before, so the forecast cannot bound
// its end, and the piece waits for the daemon's deadline.
TEST_F(LaunchGateTest, AnOpenGateNeverSeenShutWaitsForTheDaemonsDeadlineDespiteAForecast) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  const int64_t begin = FakeClock::now - 10'000;
  layout().word.store(GateOpenValue(2));
  PublishAheadAdmission(&layout(), {2, begin + 1, begin, begin + 1'000'000});  // it would admit the piece
  PublishAtAndExpectTheWaitAfter(gate, 2, FakeClock::now + 40'000);
}

TEST_F(LaunchGateTest, NothingIsQueuedBeforeTheDaemonPublishesTheBubblesDeadline) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  layout().word.store(GateOpenValue(2));  // the stream opened bubble 2; the deadline is bubble 1's
  PublishAtAndExpectTheWaitAfter(gate, 2, FakeClock::now + 40'000);
}

TEST_F(LaunchGateTest, APieceThatCannotEndByTheDeadlineWaitsForTheNextBubble) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  // Bubble 1 has 50 us left; an untimed piece is predicted to take 100 us.
  Open(1, FakeClock::now + LaunchGate::kUnknownPieceNs / 2);
  const int64_t next_at = FakeClock::now + 2'000'000;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now >= next_at && layout().admit_bubble.load() == 1) Open(2, next_at + 1'000'000);
  };
  EXPECT_EQ(gate.BeforeWork(stream_, false), kCudaSuccess);
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], next_at);
  EXPECT_EQ(gate.counters().held, 1u);
}

TEST_F(LaunchGateTest, QueuedPiecesCountAgainstTheDeadlineUntilTheirFencesAreReached) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  // Room for three untimed pieces (100 us each) and a half.
  Open(1, FakeClock::now + 350'000);
  auto piece = [&] { EXPECT_TRUE(QueuePieces(gate, stream_)); };
  for (int i = 0; i < 3; ++i) piece();
  EXPECT_EQ(gate.counters().held, 0u);
  EXPECT_EQ(gate.unfinished_pieces(), 3u);
  EXPECT_EQ(gate.counters().waits, 3u);  // none timed yet: none goes without its wait
  // The fourth is held until the GPU has reached the queued pieces' fences.
  const int64_t drained_at = FakeClock::now + 30'000;
  FakeClock::on_sleep = [&] { FakeDriver::events_done = FakeClock::now >= drained_at; };
  piece();
  EXPECT_GE(FakeClock::now, drained_at);
  EXPECT_EQ(gate.counters().held, 1u);
  EXPECT_EQ(gate.counters().waits + gate.counters().unwaited, 4u);
}

// Time a thread is held while the gate reads open is counted by why, and
// published in the process's slot: where an open gate's time goes unused.
void ExpectHeldOpen(const LaunchGate& gate, const GateTaskSlot& slot, int64_t unpublished, int64_t drain,
                    int64_t fit) {
  const GateCounters c = gate.counters();
  EXPECT_EQ(c.held_unpublished_ns, unpublished);
  EXPECT_EQ(c.held_drain_ns, drain);
  EXPECT_EQ(c.held_fit_ns, fit);
  EXPECT_EQ(slot.held_unpublished_ns.load(), unpublished);
  EXPECT_EQ(slot.held_drain_ns.load(), drain);
  EXPECT_EQ(slot.held_fit_ns.load(), fit);
}

TEST_F(LaunchGateTest, HeldTimeWhileTheDeadlineIsNotPublishedIsCountedAsUnpublished) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  layout().word.store(GateOpenValue(2));  // the stream opened bubble 2; the deadline is bubble 1's
  const int64_t start = FakeClock::now;
  PublishAtAndExpectTheWaitAfter(gate, 2, start + 4 * LaunchGate::kDrainPollNs);
  ExpectHeldOpen(gate, slot, 4 * LaunchGate::kDrainPollNs, 0, 0);
}

// Seen shut, then open with a forecast too short for the piece: held, and
// counted as waiting for the deadline, until the daemon publishes it.
TEST_F(LaunchGateTest, HeldTimeWhileTheForecastDoesNotAdmitThePieceAndNoDeadlineIsOutIsCountedAsUnpublished) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  const int64_t begin = FakeClock::now + 2 * LaunchGate::kShutPollNs;
  ShutWithForecast(1, 2, begin, LaunchGate::kUnknownPieceNs / 2);  // the untimed piece does not fit it
  OpenAtThenPublish(2, begin, begin + 4 * LaunchGate::kDrainPollNs);
  ASSERT_TRUE(QueuePieces(gate, stream_));
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], begin + 4 * LaunchGate::kDrainPollNs);
  ExpectHeldOpen(gate, slot, 4 * LaunchGate::kDrainPollNs, 0, 0);  // the time shut is not counted
}

TEST_F(LaunchGateTest, HeldTimeWhileQueuedWorkDrainsIsCountedAsDrain) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  Open(1, FakeClock::now + 350'000);  // room for three untimed pieces and a half
  ASSERT_TRUE(QueuePieces(gate, stream_, 3));
  const int64_t start = FakeClock::now;
  const int64_t drained_at = start + 3 * LaunchGate::kDrainPollNs;
  FakeClock::on_sleep = [&] { FakeDriver::events_done = FakeClock::now >= drained_at; };
  ASSERT_TRUE(QueuePieces(gate, stream_));
  ExpectHeldOpen(gate, slot, 0, 3 * LaunchGate::kDrainPollNs, 0);
}

TEST_F(LaunchGateTest, HeldTimeOfAPieceThatCannotEndByTheDeadlineIsCountedAsFitToThePollTheGateShutIn) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  // Bubble 1 has 50 us left; an untimed piece is predicted to take 100 us.
  Open(1, FakeClock::now + LaunchGate::kUnknownPieceNs / 2);
  const int64_t start = FakeClock::now;
  // The gate shuts partway through a poll: counted to that poll's end.
  const int64_t shut_at = start + 100 * LaunchGate::kDrainPollNs + LaunchGate::kDrainPollNs / 2;
  const int64_t poll_end = start + 101 * LaunchGate::kDrainPollNs;
  const int64_t next_at = shut_at + 20 * LaunchGate::kShutPollNs;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now >= shut_at && layout().word.load() == GateOpenValue(1)) Shut(1);
    if (FakeClock::now >= next_at && layout().admit_bubble.load() == 1) Open(2, INT64_MAX);
  };
  ASSERT_TRUE(QueuePieces(gate, stream_));
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], next_at);
  ExpectHeldOpen(gate, slot, 0, 0, poll_end - start);  // the time shut is not counted
}

// The event recorded as the first pass (0: none).
intptr_t FirstPass() {
  for (size_t i = 0; i < FakeDriver::recorded.size(); ++i)
    if (FakeDriver::recorded_pass[i]) return FakeDriver::recorded[i].first;
  return 0;
}

int FenceCount() {
  int fences = 0;
  for (size_t i = 0; i < FakeDriver::recorded.size(); ++i)
    fences += !IsTimingEvent(FakeDriver::recorded[i].first) && !FakeDriver::recorded_pass[i];
  return fences;
}


// Events no longer end at once, and the driver calls made so far are forgotten.
void ForgetTheDriverCalls() {
  FakeDriver::events_done = false;
  FakeDriver::recorded.clear();
  FakeDriver::recorded_pass.clear();
  FakeDriver::waits.clear();
  FakeDriver::wait_times.clear();
}

// Runs pieces that end at once until one has been timed (at 62.5 us), then
// forgets the driver calls they made: a piece may go without its wait only
// once the program's pieces have a measured length.
void LearnAPieceLength(LaunchGate& gate, const GateTaskSlot& slot, CuStream stream) {
  FakeDriver::events_done = true;
  FakeDriver::elapsed_ms = 0.0625f;  // exact in binary
  for (int i = 0; i < 64 && slot.work_p95_ns.load() == 0; ++i) ASSERT_TRUE(QueuePieces(gate, stream));
  ASSERT_EQ(slot.work_p95_ns.load(), 62'500);
  ASSERT_EQ(gate.unfinished_pieces(), 0u);
  ForgetTheDriverCalls();
}

// Pieces of two lengths, 62.5 us and 500 us, timed in turn, until 32 are.
void LearnMixedPieceLengths(LaunchGate& gate, CuStream stream) {
  FakeDriver::events_done = true;
  for (int i = 0; i < 64 * static_cast<int>(LaunchGate::kSampleEvery); ++i) {
    FakeDriver::elapsed_ms = (i / LaunchGate::kSampleEvery) % 2 == 0 ? 0.0625f : 0.5f;
    ASSERT_TRUE(QueuePieces(gate, stream));
  }
  ASSERT_EQ(gate.unfinished_pieces(), 0u);
  FakeDriver::events_done = false;
  FakeDriver::waits.clear();
  FakeDriver::wait_times.clear();
}

// A fresh gate with `estimate`, its pieces' lengths learned (62.5 us and
// 500 us in turn: p95 500 us, mean about 281 us), bubble 1 open.
std::unique_ptr<LaunchGate> MixedLengthsGate(char* page, GateTaskSlot* slot, QueueEstimate estimate, bool strict,
                                             CuStream stream) {
  FakeDriver::Reset();
  FakeClock::Reset();
  auto gate = std::make_unique<LaunchGate>(FakeDriver::Api(), page, "", slot, FakeClock::Clock(), strict, estimate);
  LearnMixedPieceLengths(*gate, stream);
  EXPECT_EQ(gate->work_p95_ns(), 500'000);
  EXPECT_NEAR(gate->work_mean_ns(), 281'250, 10'000);  // half of each, to a sample
  return gate;
}

// FREERIDE_GATE_QUEUE_ESTIMATE=mean: the queue ahead of a piece counts at
// the pieces' mean, the piece itself at their 95th percentile.  Three
// pieces queued with 1.7 ms to the deadline: at the 95th percentile
// (500 us each) the fourth does not fit (2 ms) and waits for the queue to
// drain; at the mean (about 281 us) it fits (3 x 281 + 500 us) and goes at once.
TEST_F(LaunchGateTest, AtTheMeanEstimateAQueueOfMixedPiecesLeavesRoomThatTheP95EstimateDoesNot) {
  for (QueueEstimate estimate : {QueueEstimate::kP95, QueueEstimate::kMean}) {
    Open(1, INT64_MAX);
    GateTaskSlot slot{};
    auto learned = MixedLengthsGate(page_, &slot, estimate, /*strict=*/true, stream_);
    LaunchGate& gate = *learned;
    Open(1, FakeClock::now + 1'700'000);
    ASSERT_TRUE(QueuePieces(gate, stream_, 3));
    const uint64_t held_before = gate.counters().held;
    const int64_t drained_at = FakeClock::now + 100'000;
    FakeClock::on_sleep = [&] { FakeDriver::events_done = FakeClock::now >= drained_at; };
    ASSERT_TRUE(QueuePieces(gate, stream_));
    if (estimate == QueueEstimate::kP95) {
      EXPECT_EQ(gate.counters().held, held_before + 1);
      EXPECT_GE(FakeClock::now, drained_at);
    } else {
      EXPECT_EQ(gate.counters().held, held_before);
      EXPECT_LT(FakeClock::now, drained_at);
    }
    FakeClock::on_sleep = nullptr;
  }
}

// The mean estimate is JudgePiece's alone: whether a piece may go without
// its GPU wait is still judged with each counted piece at the 95th
// percentile.  Three pieces queued (without waits) and 3.3 ms to the
// deadline: the fourth fits either way, but twice the queue and the piece at
// the 95th percentile (4 ms) do not, so it gets its wait under both.
TEST_F(LaunchGateTest, TheMeanEstimateDoesNotLetAPieceGoWithoutTheWaitThatTheP95WouldGiveIt) {
  for (QueueEstimate estimate : {QueueEstimate::kP95, QueueEstimate::kMean}) {
    Open(1, INT64_MAX);
    GateTaskSlot slot{};
    auto learned = MixedLengthsGate(page_, &slot, estimate, /*strict=*/false, stream_);
    LaunchGate& gate = *learned;
    Open(1, FakeClock::now + 3'300'000);
    ASSERT_TRUE(QueuePieces(gate, stream_, 3));
    const GateCounters before = gate.counters();
    ASSERT_TRUE(QueuePieces(gate, stream_));
    EXPECT_EQ(gate.counters().held, before.held) << "it fits: queued at once";
    EXPECT_EQ(gate.counters().waits, before.waits + 1) << (estimate == QueueEstimate::kMean ? "mean" : "p95");
    EXPECT_EQ(gate.counters().unwaited, before.unwaited);
  }
}

// Queues `n` asynchronous pieces of kind `key` (gate/piece_key.h) on
// `stream`, as the interposer's wrapper does.
::testing::AssertionResult QueueKindPieces(LaunchGate& gate, CuStream stream, uint64_t key, int n = 1) {
  for (int i = 0; i < n; ++i) {
    WorkSample sample;
    sample.key = key;
    const CuResult r = gate.BeforeWork(stream, false, &sample);
    if (r != kCudaSuccess) return ::testing::AssertionFailure() << "piece " << i << ": CUDA error " << r;
    AfterWorkOf(gate, sample);
  }
  return ::testing::AssertionSuccess();
}

// Times 120 pieces of no kind at `common_ms` (the common percentile), then
// pieces of kind `key` at `kind_ms` until that kind's length is back (a gate
// that learns no kinds, `by_kind` false, gets none); every piece ends at
// once.  Then forgets the driver calls made.
void LearnCommonAndKind(LaunchGate& gate, CuStream stream, float common_ms, uint64_t key, float kind_ms,
                        bool by_kind = true) {
  FakeDriver::events_done = true;
  FakeDriver::elapsed_ms = common_ms;
  ASSERT_TRUE(QueuePieces(gate, stream, 120 * static_cast<int>(LaunchGate::kSampleEvery)));
  FakeDriver::elapsed_ms = kind_ms;
  for (int i = 0; by_kind && i < 64 && gate.kind_ns(key) == 0; ++i) ASSERT_TRUE(QueueKindPieces(gate, stream, key));
  // The timings read back (the fake's length is the one at reading; the last may be pending).
  ASSERT_TRUE(QueueKindPieces(gate, stream, key, 2 * static_cast<int>(LaunchGate::kCollectEvery)));
  ASSERT_EQ(gate.kind_ns(key), by_kind ? static_cast<int64_t>(kind_ms * 1e6) : 0);
  ASSERT_EQ(gate.work_p95_ns(), static_cast<int64_t>(common_ms * 1e6)) << "the kind's few are above the 95th";
  ASSERT_EQ(gate.unfinished_pieces(), 0u);
  ForgetTheDriverCalls();
}

constexpr uint64_t kLongKind = 0x1234, kShortKind = 0x5678;

// A gate that predicts pieces by their kind's learned length (unless
// `by_kind` is false), strict (every piece waits and is fenced) unless told.
std::unique_ptr<LaunchGate> GateByKind(char* page, GateTaskSlot* slot, bool by_kind = true, bool strict = true,
                                       uint64_t sample_every = GateTuning{}.sample_every) {
  GateTuning tuning;
  tuning.lengths_by_kind = by_kind;
  tuning.sample_every = sample_every;
  return std::make_unique<LaunchGate>(FakeDriver::Api(), page, "", slot, FakeClock::Clock(), strict,
                                      QueueEstimate::kP95, tuning);
}

// The fakes afresh, bubble 1 open with no deadline, and a GateByKind that
// has learned the common length and kind `key`'s (LearnCommonAndKind).
std::unique_ptr<LaunchGate> LearnedGateByKind(char* page, CuStream stream, GateTaskSlot* slot, bool by_kind,
                                              float common_ms, uint64_t key, float kind_ms) {
  FakeDriver::Reset();
  FakeClock::Reset();
  auto& layout = *reinterpret_cast<GatePageLayout*>(page);
  layout.word.store(GateOpenValue(1));
  layout.admit_until_ns.store(INT64_MAX);
  layout.admit_bubble.store(1);
  auto gate = GateByKind(page, slot, by_kind);
  LearnCommonAndKind(*gate, stream, common_ms, key, kind_ms, by_kind);
  return gate;
}

// Pieces of 62.5 us mostly, of one kind 1 ms, and 500 us to the deadline:
// a piece of that kind is held for the next bubble (predicted at 1 ms),
// where the common percentile would have queued it; a piece of no kind goes.
// With FREERIDE_GATE_LENGTHS=common (lengths_by_kind false) it goes too.
TEST_F(LaunchGateTest, APieceOfALearnedKindIsPredictedByItsKindsLengthNotTheCommonPercentile) {
  for (const bool by_kind : {true, false}) {
    GateTaskSlot slot{};
    auto made = LearnedGateByKind(page_, stream_, &slot, by_kind, 0.0625f, kLongKind, 1.0f);
    LaunchGate& gate = *made;
    Open(1, FakeClock::now + 500'000);
    ASSERT_TRUE(QueuePieces(gate, stream_));
    EXPECT_EQ(gate.counters().held, 0u);
    FakeDriver::events_done = true;  // the queue has drained
    const int64_t next_bubble_at = FakeClock::now + 2'000'000;
    FakeClock::on_sleep = [&] {
      if (FakeClock::now >= next_bubble_at) Open(2, FakeClock::now + 5'000'000);
      else if (FakeClock::now >= next_bubble_at - 1'000'000) Shut(1);
    };
    ASSERT_TRUE(QueueKindPieces(gate, stream_, kLongKind));
    ASSERT_EQ(FakeDriver::wait_times.size(), 2u);
    if (by_kind) {
      EXPECT_EQ(gate.counters().held, 1u);
      EXPECT_GE(FakeDriver::wait_times[1], next_bubble_at) << "held for the next bubble";
      EXPECT_GT(gate.counters().held_fit_ns, 0);
    } else {
      EXPECT_EQ(gate.counters().held, 0u) << "at the common 62.5 us it fits";
    }
    FakeClock::on_sleep = nullptr;
  }
}

// Pieces of 500 us mostly, of one kind 62.5 us, and 700 us to the deadline:
// four pieces of that kind are queued at once (the queue counts them at
// their kind's length: 4 x 62.5 us), where at the common percentile the
// second would have waited for the first to drain; a piece of no kind after
// them (250 + 500 us) waits for the queue.
TEST_F(LaunchGateTest, QueuedPiecesOfALearnedKindCountAtTheirKindsLength) {
  for (const bool by_kind : {true, false}) {
    GateTaskSlot slot{};
    auto made = LearnedGateByKind(page_, stream_, &slot, by_kind, 0.5f, kShortKind, 0.0625f);
    LaunchGate& gate = *made;
    Open(1, FakeClock::now + 700'000);
    const int64_t drained_at = FakeClock::now + 30'000;
    FakeClock::on_sleep = [&] { FakeDriver::events_done = FakeClock::now >= drained_at; };
    ASSERT_TRUE(QueueKindPieces(gate, stream_, kShortKind, 4));
    if (!by_kind) {
      EXPECT_GT(gate.counters().held, 0u) << "each counted at the common 500 us";
      continue;
    }
    EXPECT_EQ(gate.counters().held, 0u);
    EXPECT_EQ(gate.unfinished_pieces(), 4u);
    ASSERT_TRUE(QueuePieces(gate, stream_));
    EXPECT_EQ(gate.counters().held, 1u);
    EXPECT_GE(FakeClock::now, drained_at);
    EXPECT_GT(gate.counters().held_drain_ns, 0);
    FakeClock::on_sleep = nullptr;
  }
}

// A kind learned at 10 ms where bubbles last 1 ms: the piece, held since
// the gate was shut, does not fit at its first look in two bubbles; its kind
// is then forgotten and it goes at the common 62.5 us in the second, instead
// of holding the program for good (a kind that never runs is never timed
// again).  A look made late in a bubble does not count.
TEST_F(LaunchGateTest, AKindLearnedTooLongForAnyBubbleIsForgottenAfterTwoBubbles) {
  GateTaskSlot slot{};
  auto made = GateByKind(page_, &slot);
  LaunchGate& gate = *made;
  LearnCommonAndKind(gate, stream_, 0.0625f, kLongKind, 10.0f);
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/10);
  const std::vector<int64_t>& opened = log->opened;
  ASSERT_TRUE(QueueKindPieces(gate, stream_, kLongKind));
  EXPECT_EQ(gate.counters().kinds_forgotten, 1u);
  EXPECT_EQ(gate.kind_ns(kLongKind), 0) << "forgotten: learned afresh";
  ASSERT_EQ(opened.size(), 2u) << "bubble 1 (looked at late) does not count; bubbles 2 and 3 do";
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], opened[1]);
  EXPECT_LT(FakeDriver::wait_times[0], opened[1] + 100'000) << "queued at once, at the common percentile";
  FakeClock::on_sleep = nullptr;
}

// The same kind, in fact 10 ms long: let in at the common percentile once
// forgotten, it is timed and learned again at 10 ms, and the next time it is
// held it is forgotten only after four bubbles (twice as many), not two, so
// a kernel longer than every bubble overruns ever more rarely.
TEST_F(LaunchGateTest, AKindForgottenAgainWithoutFittingIsHeldTwiceAsManyBubbles) {
  GateTaskSlot slot{};
  auto made = GateByKind(page_, &slot);
  LaunchGate& gate = *made;
  LearnCommonAndKind(gate, stream_, 0.0625f, kLongKind, 10.0f);
  EXPECT_EQ(LaunchGate::KindTooLongBubbles(0), 2u);
  EXPECT_EQ(LaunchGate::KindTooLongBubbles(1), 4u);
  EXPECT_EQ(LaunchGate::KindTooLongBubbles(99), 64u) << "at most kMostBubblesTooLong << kMostWindowBackoff";
  {
    const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/100);
    ASSERT_TRUE(QueueKindPieces(gate, stream_, kLongKind));
    ASSERT_EQ(gate.counters().kinds_forgotten, 1u);
    ASSERT_EQ(log->opened.size(), 2u) << "bubble 1 (looked at late) does not count; bubbles 2 and 3 do";
  }
  // Learned again: its next piece is timed for its kind (10 ms), read back at
  // pieces of no kind, with the gate open and no deadline.
  FakeClock::on_sleep = nullptr;
  Open(1, INT64_MAX);
  FakeDriver::events_done = true;
  FakeDriver::elapsed_ms = 10.0f;
  for (int i = 0; i < 64 && gate.kind_ns(kLongKind) == 0; ++i) {
    ASSERT_TRUE(QueueKindPieces(gate, stream_, kLongKind));
    ASSERT_TRUE(QueuePieces(gate, stream_, static_cast<int>(LaunchGate::kCollectEvery)));
  }
  ASSERT_EQ(gate.kind_ns(kLongKind), 10'000'000);
  ASSERT_EQ(gate.work_p95_ns(), 62'500) << "the common window kept";
  FakeDriver::wait_times.clear();
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/100);
  ASSERT_TRUE(QueueKindPieces(gate, stream_, kLongKind));
  EXPECT_EQ(gate.counters().kinds_forgotten, 2u);
  ASSERT_EQ(log->opened.size(), 4u) << "bubble 1 does not count; bubbles 2 to 5 do";
  ASSERT_EQ(FakeDriver::wait_times.size(), 1u);
  EXPECT_GE(FakeDriver::wait_times[0], log->opened[3]);
  FakeClock::on_sleep = nullptr;
}

// A gate judging pieces by the common percentile, which it has learned at
// `ms` (pieces timed from now take the same), in bubble 1, open with no deadline.
std::unique_ptr<LaunchGate> GateWithAWindowOf(float ms, GateTaskSlot* slot, char* page, CuStream stream) {
  auto gate = GateByKind(page, slot, /*by_kind=*/false);
  auto& layout = *reinterpret_cast<GatePageLayout*>(page);
  layout.word.store(GateOpenValue(1));
  layout.admit_until_ns.store(INT64_MAX);
  layout.admit_bubble.store(1);
  LearnCommonAndKind(*gate, stream, ms, kLongKind, 0.0625f, /*by_kind=*/false);
  FakeDriver::elapsed_ms = ms;
  return gate;
}

// Pieces timed at 10 ms where bubbles last 1 ms: a piece judged by that
// percentile, held since the gate was shut, does not fit at the opening of
// sixteen bubbles; the window is then emptied and the piece goes at
// kUnknownPieceNs in the sixteenth, instead of holding the program for good
// (no piece held by the window runs to bring it down).
TEST_F(LaunchGateTest, ACommonPercentileTooLongForAnyBubbleIsEmptiedAfterSixteenBubbles) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(10.0f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  ASSERT_EQ(slot.work_p95_ns.load(), 10'000'000);
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/30);
  // Queued at once in bubble 17, at kUnknownPieceNs.
  ExpectTheWindowEmptiedOnceThenThePieceQueued(gate, *log, 16, 0,
                                               "bubble 1 (looked at late) does not count; bubbles 2 to 17 do");
  EXPECT_EQ(slot.work_p95_ns.load(), 0) << "emptied: published as none";
}

// Pieces timed at 995 us where bubbles last 1 ms, each opened by the stage's
// stream 20 us before the host reads the word open (as a shut poll lands
// anywhere after an opening on a GPU): the piece would fit only begun at
// the opening itself, so it never fits at a look, and it would fit begun
// when the thread last saw the gate shut, so it never counts at a look
// either.  Each bubble the thread saw open promptly and never fitted counts
// at its end, so the window is emptied at the end of the sixteenth (bubble
// 17), and the piece goes at kUnknownPieceNs in the next; before, such a
// program was held for good (pageable copies' pieces timed at 1.7 ms against
// a zero-bubble schedule's 2 ms bubbles, on an H200:
// bench/results/e2e_gpu_2gpu_stop_check.md).
TEST_F(LaunchGateTest, APieceThatFitsOnlyBegunAtTheOpeningCountsTowardsEmptyingTheWindow) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(0.995f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/40, /*publish_after=*/0, /*first_left=*/500'000,
                                   /*look_late=*/20'000);
  // Queued at once in bubble 18, at kUnknownPieceNs.
  ExpectTheWindowEmptiedOnceThenThePieceQueued(
      gate, *log, 17, 0, "bubble 1 (never seen shut) does not count; bubbles 2 to 17 do, at their ends");
}

// The same where the deadline comes out 200 us after each opening (the
// daemon's answer to the stage's mark) and pieces are timed at 950 us: begun
// at the opening a piece would end 50 us before the deadline, but the
// thread learns the deadline only 200 us in, when it no longer fits.
TEST_F(LaunchGateTest, APieceThatFitsOnlyBeforeTheDeadlineIsOutCountsTowardsEmptyingTheWindow) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(0.95f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/40, /*publish_after=*/200'000, /*first_left=*/500'000);
  // Queued once bubble 18's deadline is out.
  ExpectTheWindowEmptiedOnceThenThePieceQueued(gate, *log, 17, 200'000, "bubbles 2 to 17 count, at their ends");
}

// Pieces of 10 ms, and an iteration of fifteen bubbles of 1 ms and one of
// 20 ms, each after 2 ms shut: a piece fits only the long one.  A piece whose
// thread first looks 15 ms into a long bubble (it was busy on the CPU) does
// not fit its rest, but that look is not at the bubble's opening and does not
// count: with it, the fifteen short bubbles after would make sixteen and the
// window would be emptied, letting 10 ms pieces into 1 ms bubbles.
TEST_F(LaunchGateTest, ALookMadeLateInABubbleDoesNotCountTowardsEmptyingTheWindow) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(10.0f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  FakeDriver::events_done = true;
  Shut(1);
  uint32_t bubble = 1;
  int64_t next_change = FakeClock::now + 2'000'000;
  std::vector<uint32_t> long_bubbles;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now < next_change) return;
    if (GateIsOpen(layout().word.load())) {
      Shut(bubble);
      next_change = FakeClock::now + 2'000'000;
    } else {
      ++bubble;
      const int64_t length = bubble % 16 == 0 ? 20'000'000 : 1'000'000;
      if (length > 1'000'000) long_bubbles.push_back(bubble);
      Open(bubble, FakeClock::now + length);
      next_change = FakeClock::now + length;
    }
  };
  ASSERT_TRUE(QueuePieces(gate, stream_));
  ASSERT_EQ(long_bubbles.size(), 1u);
  EXPECT_EQ(layout().word.load() >> 1, 16u) << "queued in the long bubble";
  FakeClock::now += 15'000'000;  // the program computes on the CPU
  ASSERT_TRUE(QueuePieces(gate, stream_));
  EXPECT_EQ(layout().word.load() >> 1, 32u) << "held through the rest of bubble 16 and bubbles 17-31";
  ExpectTheWindowKept(gate, slot, 10'000'000);
}

// The same with the deadline published 200 us after each bubble opens (the
// daemon's answer to the stage's mark, as on a GPU): the look that sees it
// is not at the opening, but a piece that would not fit even begun before
// the opening counts all the same.
TEST_F(LaunchGateTest, ADeadlinePublishedAfterTheOpeningStillCountsTowardsEmptyingTheWindow) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(10.0f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/30, /*publish_after=*/200'000);
  // Queued once bubble 17's deadline is out.
  ExpectTheWindowEmptiedOnceThenThePieceQueued(gate, *log, 16, 200'000, "bubbles 2 to 17");
}

// A timing begun before the window was emptied (one of the long pieces
// that filled it, read back only later) is not added to the emptied
// window: it would fill it again at once.  Pieces timed before the
// emptying took 10 ms, those after 62.5 us.
TEST_F(LaunchGateTest, ATimingBegunBeforeTheWindowWasEmptiedDoesNotRefillIt) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(10.0f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  bool timings_back = false;
  FakeDriver::event_done = [&](intptr_t event, bool) { return !IsTimingEvent(event) || timings_back; };
  const int64_t emptied_after = FakeClock::now + 1;
  FakeDriver::elapsed_of = [&](int64_t recorded_at) { return recorded_at < emptied_after ? 10.0f : 0.0625f; };
  ASSERT_TRUE(QueuePieces(gate, stream_, static_cast<int>(LaunchGate::kSampleEvery)));  // one timed, not back
  FakeClock::now = emptied_after;
  RunBubblesOf1ms(gate, /*admit_all_from=*/100);
  ASSERT_TRUE(QueuePieces(gate, stream_));
  ASSERT_EQ(gate.counters().windows_forgotten, 1u);
  ASSERT_EQ(slot.work_p95_ns.load(), 0);
  timings_back = true;
  for (int i = 0; i < 200 && slot.work_p95_ns.load() == 0; ++i) ASSERT_TRUE(QueuePieces(gate, stream_));
  EXPECT_EQ(slot.work_p95_ns.load(), 62'500) << "the stale 10 ms timing was dropped";
  EXPECT_EQ(gate.counters().windows_forgotten, 1u);
  FakeClock::on_sleep = nullptr;
}

// A demoted task's pieces count twice their length, so a 750 us piece is
// held out of 1 ms bubbles (their deadlines come 1 ms after they open); but
// its own length fits them, and its window is not emptied for the demotion.
TEST_F(LaunchGateTest, ADemotedTasksDoubledLengthDoesNotEmptyAWindowThatFits) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(0.75f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  slot.demoted.store(1);
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/30, /*publish_after=*/200'000,
                                   /*first_left=*/500'000);  // no room for the piece
  ExpectHeldUntilBubble30WithTheWindowKept(gate, *log, slot, 750'000);
}

// Bubbles that admit nothing (a withheld window, the overhead guard's
// pause: the deadline is the stage's mark, 150 us after the opening here,
// out 200 us after it) do not count towards emptying the window, whatever
// the piece's length: pieces of 20 us, which fit every bubble that admits
// anything, are held until bubble 30 with their window kept.
TEST_F(LaunchGateTest, BubblesThatAdmitNothingDoNotCountTowardsEmptyingTheWindow) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(0.02f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  const int64_t learned = slot.work_p95_ns.load();
  ASSERT_GT(learned, 0);
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/30, /*publish_after=*/200'000, /*first_left=*/0,
                                   /*look_late=*/850'000);
  ExpectHeldUntilBubble30WithTheWindowKept(gate, *log, slot, learned);
}

// Bubbles of 1 ms, the deadline out 200 us after each opening, and pieces
// of 850 us, each bubble forecast at the close before it: either as an
// iteration's first (2 ms shut, watched only from 300 us before its begin:
// no queueing ahead), or within an iteration (250 us shut, queued ahead from
// 300 us before its begin).  Undemoted, a piece is queued by the forecast at
// the opening, or ahead of it; demoted (1.7 ms), it is held, but its own
// length would have been queued, so no bubble counts and the window is kept
// (a length that fits is not forgotten for the demotion).  Within an
// iteration the next bubble's ahead window is open at the first look after
// a close: the bubble that closed is judged before that look's verdict.
TEST_F(LaunchGateTest, ADemotedPieceWhoseOwnLengthTheForecastAdmitsDoesNotEmptyTheWindow) {
  for (const bool ahead : {false, true}) {
    for (const bool demoted : {false, true}) {
      SCOPED_TRACE(std::string(ahead ? "queued ahead, " : "an iteration's first, ") +
                   (demoted ? "demoted" : "not demoted"));
      FakeDriver::Reset();
      FakeClock::Reset();
      GateTaskSlot slot{};
      auto made = GateWithAWindowOf(0.85f, &slot, page_, stream_);
      LaunchGate& gate = *made;
      slot.demoted.store(demoted ? 1 : 0);
      FakeDriver::events_done = true;
      Open(1, FakeClock::now);  // no room in bubble 1
      std::vector<int64_t> opened;
      const int64_t start = FakeClock::now;
      const int64_t shut_for = ahead ? 250'000 : 2'000'000;
      uint32_t bubble = 1;
      FakeClock::on_sleep = [&] {
        const int64_t t = (FakeClock::now - start) % (shut_for + 1'000'000);
        const int64_t open_at = FakeClock::now - t + shut_for;  // this cycle's opening
        const bool open = t >= shut_for;
        if (open && !GateIsOpen(layout().word.load())) {
          ++bubble;
          layout().word.store(GateOpenValue(bubble));
          opened.push_back(FakeClock::now);
        } else if (!open && GateIsOpen(layout().word.load())) {
          Shut(bubble);
          PublishAheadAdmission(&layout(), {bubble + 1, open_at - 300'000, open_at, open_at + 1'000'000,
                                            /*watch_only=*/!ahead});
        }
        if (open && t >= shut_for + 200'000 && layout().admit_bubble.load() != bubble)
          Open(bubble, bubble < 30 ? open_at + 1'000'000 : INT64_MAX);
      };
      ASSERT_TRUE(QueuePieces(gate, stream_));
      EXPECT_EQ(opened.size(), demoted ? 29u : ahead ? 0u : 1u) << "demoted: held until bubble 30 admits anything";
      ExpectTheWindowKept(gate, slot, 850'000);
    }
  }
}

// A bubble that admits nothing does not count the first way either, however
// long the piece: pieces of 10 ms, held through bubbles whose deadline (the
// stage's mark, 150 us in) is out 200 us after the opening, keep their
// window until bubble 30 admits anything.
TEST_F(LaunchGateTest, ALongPieceHeldThroughBubblesThatAdmitNothingKeepsItsWindow) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(10.0f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/30, /*publish_after=*/200'000, /*first_left=*/0,
                                   /*look_late=*/850'000);
  ExpectHeldUntilBubble30WithTheWindowKept(gate, *log, slot, 10'000'000);
}

// A program whose pieces are in fact 10 ms, with bubbles of 1 ms: each
// emptying lets pieces go (and overrun) until a timing is back, so the next
// needs twice as many bubbles: 16 (bubbles 2-17), then 32 (17-48), then 64
// (48-111), a bubble's opening counting for whichever piece is held in it.
// Then pieces of 62.5 us: once one is queued by their timings, the count is
// back at 16, and when the pieces are 10 ms again the window is emptied in
// the sixteenth bubble (111-126), not the 128th.
TEST_F(LaunchGateTest, EachEmptyingOfTheCommonWindowInARowNeedsTwiceTheBubblesOfTheLast) {
  GateTaskSlot slot{};
  auto made = GateWithAWindowOf(10.0f, &slot, page_, stream_);
  LaunchGate& gate = *made;
  const auto log = RunBubblesOf1ms(gate, /*admit_all_from=*/200);
  std::vector<uint32_t>& forgot_in = log->forgot_in;
  for (int i = 0; i < 1000 && gate.counters().windows_forgotten < 3; ++i) ASSERT_TRUE(QueuePieces(gate, stream_));
  ASSERT_EQ(gate.counters().windows_forgotten, 3u);
  FakeDriver::elapsed_ms = 0.0625f;
  for (int i = 0; i < 400 && slot.work_p95_ns.load() != 62'500; ++i) ASSERT_TRUE(QueuePieces(gate, stream_));
  ASSERT_EQ(slot.work_p95_ns.load(), 62'500);
  ASSERT_TRUE(QueuePieces(gate, stream_));  // queued by the short pieces' percentile
  FakeDriver::elapsed_ms = 10.0f;
  for (int i = 0; i < 1000 && gate.counters().windows_forgotten < 4; ++i) ASSERT_TRUE(QueuePieces(gate, stream_));
  ASSERT_EQ(gate.counters().windows_forgotten, 4u);
  if (forgot_in.size() < 4) forgot_in.push_back(layout().word.load() >> 1);  // no sleep since it to note it
  EXPECT_EQ(forgot_in, (std::vector<uint32_t>{17, 48, 111, 126}));
  EXPECT_GT(gate.counters().held, 0u);
  FakeClock::on_sleep = nullptr;
}

// A program's start-up meets many kinds (each weight's copy is one by its
// size), each timed at once to learn it: those timings must not enter the
// common percentile, which stands for the program's pieces (one in
// sample_every) and judges every piece of no learned kind.  On two H200s,
// with them in, start-up's copies made it 25 ms, every piece judged by it
// was held, nothing more ran to bring it down, and a `generate` loop
// stalled for good.
TEST_F(LaunchGateTest, TimingsToLearnAKindDoNotEnterTheCommonPercentile) {
  GateTaskSlot slot{};
  auto made = GateByKind(page_, &slot);
  LaunchGate& gate = *made;
  FakeDriver::events_done = true;
  FakeDriver::elapsed_ms = 0.0625f;
  ASSERT_TRUE(QueuePieces(gate, stream_, 120 * static_cast<int>(LaunchGate::kSampleEvery)));
  ASSERT_EQ(gate.work_p95_ns(), 62'500);
  // 50 kinds met once each: about 3 of them are the common percentile's one
  // in 16 (2% of its window, under the 5% above its 95th); the rest are timed
  // to learn their kind alone.
  FakeDriver::elapsed_ms = 10.0f;
  for (uint64_t kind = 1; kind <= 50; ++kind) ASSERT_TRUE(QueueKindPieces(gate, stream_, 0x9000 + kind));
  FakeDriver::elapsed_ms = 0.0625f;
  ASSERT_TRUE(QueuePieces(gate, stream_, 2 * static_cast<int>(LaunchGate::kCollectEvery)));
  EXPECT_EQ(gate.kind_ns(0x9000 + 25), 10'000'000) << "each kind learned";
  EXPECT_EQ(gate.work_p95_ns(), 62'500) << "the common percentile as its own pieces made it";
  EXPECT_EQ(slot.work_p95_ns.load(), 62'500);
}

// Timing one piece in 4096 would leave a kind seen now and then unlearned:
// the first two pieces of a kind with no length back are timed whatever the
// rate, no more, and none once its length is back.
TEST_F(LaunchGateTest, TheFirstPiecesOfANewKindAreTimedWhateverTheSampleRate) {
  GateTaskSlot slot{};
  auto made = GateByKind(page_, &slot, /*by_kind=*/true, /*strict=*/false, GateTuning::kMostSampleEvery);
  LaunchGate& gate = *made;
  auto timing_records = [] {
    int n = 0;
    for (const auto& [event, stream] : FakeDriver::recorded) n += IsTimingEvent(event);
    return n;
  };
  FakeDriver::events_done = false;  // nothing comes back yet
  ASSERT_TRUE(QueueKindPieces(gate, stream_, kShortKind, 5));
  EXPECT_EQ(timing_records(), 2 * static_cast<int>(LaunchGate::kLearnKind));  // a start and an end each
  EXPECT_EQ(gate.kind_ns(kShortKind), 0);
  FakeDriver::events_done = true;
  FakeDriver::elapsed_ms = 0.0625f;
  ASSERT_TRUE(QueuePieces(gate, stream_, static_cast<int>(LaunchGate::kCollectEvery)));
  EXPECT_EQ(gate.kind_ns(kShortKind), 62'500);
  EXPECT_EQ(gate.counters().kinds, 1u);
  FakeDriver::recorded.clear();
  ASSERT_TRUE(QueueKindPieces(gate, stream_, kShortKind, 5));
  EXPECT_EQ(timing_records(), 0);
}

TEST_F(LaunchGateTest, NoPieceGoesWithoutItsWaitBeforeOneHasBeenTimed) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  ASSERT_TRUE(QueuePieces(gate, stream_, 10));
  EXPECT_EQ(gate.counters().unwaited, 0u);
  EXPECT_EQ(FenceCount(), 10);
}

TEST_F(LaunchGateTest, FarInsideAnOpenBubbleAPieceGoesWithoutItsWaitAtMostEightInARowAndFencedByTheEighth) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  LearnAPieceLength(gate, slot, stream_);
  const uint64_t waits_before = gate.counters().waits, unwaited_before = gate.counters().unwaited;
  ASSERT_TRUE(QueuePieces(gate, stream_, 2 * (kMaxUnwaitedInRow + 1)));
  EXPECT_EQ(gate.counters().unwaited - unwaited_before, 2u * kMaxUnwaitedInRow);
  EXPECT_EQ(gate.counters().waits - waits_before, 2u);  // the ninth of each run
  // Each run of eight is fenced by its eighth; each waited piece at once.
  static_assert(LaunchGate::kFenceEvery == kMaxUnwaitedInRow);
  EXPECT_EQ(FenceCount(), 4);
  EXPECT_EQ(gate.unfinished_pieces(), 2u * (kMaxUnwaitedInRow + 1));
  FakeDriver::events_done = true;
  EXPECT_EQ(gate.unfinished_pieces(), 0u);
}

TEST_F(LaunchGateTest, ATunedRunLetsThatManyPiecesGoWithoutTheirWaitAndOneFenceStandForThem) {
  GateTaskSlot slot{};
  constexpr uint32_t kRun = 20;
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock(), false, QueueEstimate::kP95,
                  GateTuning{.run = kRun});
  LearnAPieceLength(gate, slot, stream_);
  const uint64_t waits_before = gate.counters().waits, unwaited_before = gate.counters().unwaited;
  ASSERT_TRUE(QueuePieces(gate, stream_, 2 * (kRun + 1)));
  EXPECT_EQ(gate.counters().unwaited - unwaited_before, 2u * kRun);
  EXPECT_EQ(gate.counters().waits - waits_before, 2u);  // the 21st of each run
  EXPECT_EQ(FenceCount(), 4);  // each run's last, and each waited piece
  EXPECT_EQ(gate.unfinished_pieces(), 2u * (kRun + 1));
  FakeDriver::events_done = true;
  EXPECT_EQ(gate.unfinished_pieces(), 0u);
}

// With a deadline 1 ms on and 62.5 us pieces that have not ended, a piece
// goes without its wait while the room to the deadline is at least the
// tuned percent of the queue and itself: of the 16 that fit, at 200 the
// first 8, at 100 all 16 (the run long enough not to stop them).  A room
// under 100 is taken as 100 (under it, a piece would go at once, unwaited,
// that its deadline does not leave room for: the 17th is held, until bubble
// 3, with no deadline, opens at its first look), one over 800 as 800 (the
// first 2).
TEST_F(LaunchGateTest, ATunedRoomLetsPiecesGoWithoutTheirWaitNearerTheDeadlineWithinItsBounds) {
  for (auto [room, unwaited] : {std::pair{200, 8u}, {100, 16u}, {0, 16u}, {9'999, 2u}}) {
    SCOPED_TRACE(room);
    FakeDriver::Reset();
    GateTaskSlot slot{};
    LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock(), false, QueueEstimate::kP95,
                    GateTuning{.run = GateTuning::kMostRun, .room_pct = room});
    LearnAPieceLength(gate, slot, stream_);
    Open(2, FakeClock::now + 1'000'000);
    FakeDriver::events_done = false;
    FakeClock::sleeps = 0;
    FakeClock::on_sleep = [this] { Open(3, INT64_MAX); };
    const uint64_t waits_before = gate.counters().waits, unwaited_before = gate.counters().unwaited;
    ASSERT_TRUE(QueuePieces(gate, stream_, 16));
    EXPECT_EQ(gate.counters().unwaited - unwaited_before, unwaited);
    EXPECT_EQ(gate.counters().waits - waits_before, 16u - unwaited);
    EXPECT_EQ(FakeClock::sleeps, 0) << "all 16 fit";
    ASSERT_TRUE(QueuePieces(gate, stream_, 1));
    EXPECT_GT(FakeClock::sleeps, 0) << "the 17th piece was held, not let through";
    FakeClock::on_sleep = nullptr;
    FakeDriver::events_done = true;
    EXPECT_EQ(gate.unfinished_pieces(), 0u);
  }
}

TEST_F(LaunchGateTest, ATuningOutsideItsBoundsIsTakenAsTheNearestBound) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock(), false, QueueEstimate::kP95,
                  GateTuning{.run = 0, .sample_every = 0});
  LearnAPieceLength(gate, slot, stream_);  // timed at all: sample_every 0 is taken as 1, not a division by 0
  const uint64_t unwaited_before = gate.counters().unwaited;
  ASSERT_TRUE(QueuePieces(gate, stream_, 6));
  EXPECT_EQ(gate.counters().unwaited - unwaited_before, 3u) << "a run of 1: every other piece waits";
}

TEST_F(LaunchGateTest, ATunedSampleRateTimesThatShareOfPiecesAndTheirEventsAreReusedOnceReadBack) {
  GateTaskSlot slot{};
  {
    LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock(), false, QueueEstimate::kP95,
                    GateTuning{.run = 8, .sample_every = 4});
    FakeDriver::events_done = true;
    FakeDriver::elapsed_ms = 0.25f;
    auto timing_created = [] {
      int n = 0;
      for (const auto& [event, flags] : FakeDriver::event_flags) n += (flags & 0x2) == 0;
      return n;
    };
    int sampled = 0;
    for (int i = 0; i < 4 * 100; ++i) {
      WorkSample sample;
      ASSERT_EQ(gate.BeforeWork(stream_, false, &sample), kCudaSuccess);
      sampled += sample.start != nullptr;
      AfterWorkOf(gate, sample);
    }
    EXPECT_EQ(sampled, 100);
    EXPECT_EQ(slot.work_p95_ns.load(), 250'000);
    // Read back every kCollectEvery pieces, so at most that many pieces'
    // samples are pending at once: their events, and no more, were made.
    EXPECT_LE(timing_created(), static_cast<int>(2 * (LaunchGate::kCollectEvery / 4 + 1)));
  }
  EXPECT_EQ(FakeDriver::live_events, 0);  // the spares destroyed with the gate
}

TEST_F(LaunchGateTest, StrictEveryPieceWaitsAndIsFencedHoweverFarItsDeadline) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock(), /*wait_every_piece=*/true);
  ASSERT_TRUE(QueuePieces(gate, stream_, 10));
  EXPECT_EQ(gate.counters().waits, 10u);
  EXPECT_EQ(gate.counters().unwaited, 0u);
  EXPECT_EQ(FenceCount(), 10);
}

TEST_F(LaunchGateTest, ADemotedTasksPiecesCountTwiceTheirLengthAndAllWait) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  // Room for an untimed piece (100 us) with 50 us to spare: queued at once.
  Open(1, FakeClock::now + 150'000);
  WorkSample first;
  ASSERT_EQ(gate.BeforeWork(stream_, false, &first), kCudaSuccess);
  AfterWorkOf(gate, first);
  EXPECT_EQ(gate.counters().held, 0u);
  // Demoted, a piece counts as 200 us: it waits for the next bubble, and
  // even far inside that one it gets its GPU wait.
  slot.demoted.store(1);
  FakeDriver::events_done = true;
  const int64_t next_at = FakeClock::now + 1'000'000;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now >= next_at && layout().admit_bubble.load() == 1) Open(2, INT64_MAX);
  };
  WorkSample second;
  ASSERT_EQ(gate.BeforeWork(stream_, false, &second), kCudaSuccess);
  AfterWorkOf(gate, second);
  EXPECT_GE(FakeClock::now, next_at);
  EXPECT_EQ(gate.counters().held, 1u);
  EXPECT_EQ(gate.counters().unwaited, 0u);
  EXPECT_EQ(gate.counters().waits, 2u);
}

TEST_F(LaunchGateTest, TheThreadsOwnDefaultStreamAlwaysWaitsItCannotBeFencedFromAnotherThread) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  WorkSample sample;
  ASSERT_EQ(gate.BeforeWork(nullptr, /*per_thread=*/true, &sample), kCudaSuccess);
  AfterWorkOf(gate, sample);
  EXPECT_EQ(gate.counters().waits, 1u);
  EXPECT_EQ(FenceCount(), 1);
}

TEST_F(LaunchGateTest, UnfencedPiecesOfOneBubbleAreFencedBeforeAPieceOfTheNextIsQueued) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  LearnAPieceLength(gate, slot, stream_);
  ASSERT_TRUE(QueuePieces(gate, stream_, 3));
  EXPECT_EQ(FenceCount(), 0);  // three of bubble 1, far inside it
  Shut(1);
  Open(2, INT64_MAX);
  ASSERT_TRUE(QueuePieces(gate, stream_));
  // Bubble 1's three got their fence before bubble 2's piece was queued: a
  // fence stands for one bubble's pieces, so that their late work is told.
  ASSERT_EQ(FenceCount(), 1);
  EXPECT_EQ(FakeDriver::recorded.back().second, stream_);
  EXPECT_EQ(gate.unfinished_pieces(), 4u);
  EXPECT_EQ(FenceCount(), 2);  // the look fences bubble 2's piece too

}

TEST(LateWork, WorkUnfinishedAfterItsBubbleClosedIsTimedUntilItEnds) {
  LateWork late(1'000);
  EXPECT_EQ(late.Look(100, GateOpenValue(1), 1u), 0);  // its bubble is open: not late
  EXPECT_FALSE(late.late());
  EXPECT_EQ(late.Look(200, GateClosedValue(1), 1u), 0);  // closed with bubble 1's work left
  EXPECT_TRUE(late.late());
  EXPECT_EQ(late.Look(250, GateClosedValue(1), 1u), 0);
  EXPECT_EQ(late.Look(330, GateClosedValue(1), std::nullopt), 130);  // it ended
  EXPECT_EQ(late.late_ns(), 130);
  EXPECT_EQ(late.late_bubbles(), 1u);
  EXPECT_EQ(late.Look(400, GateClosedValue(1), std::nullopt), 0);
  EXPECT_EQ(late.late_bubbles(), 1u);
}

TEST(LateWork, WorkQueuedAheadForTheNextBubbleIsNotLateUntilThatBubbleCloses) {
  LateWork late(1'000);
  EXPECT_EQ(late.Look(100, GateClosedValue(1), 2u), 0);  // pending behind the shut gate, for bubble 2
  EXPECT_FALSE(late.late());
  EXPECT_EQ(late.Look(200, GateOpenValue(2), 2u), 0);
  EXPECT_FALSE(late.late());
  late.Look(300, GateClosedValue(2), 2u);
  EXPECT_TRUE(late.late());
  EXPECT_EQ(late.Look(340, GateOpenValue(3), 3u), 40);  // bubble 2's work ended; bubble 3's is on time
  EXPECT_FALSE(late.late());
}

TEST(LateWork, LateTimeIsBusyTimeOnlyWorkInsideALaterBubbleIsNotCounted) {
  LateWork late(1'000);
  late.Look(100, GateClosedValue(1), 1u);  // bubble 1 closed with its work unfinished
  EXPECT_TRUE(late.late());
  // Bubble 2 opens with it still unfinished (running, or pending behind the
  // gate): the stretch ends there.
  EXPECT_EQ(late.Look(160, GateOpenValue(2), 1u), 60);
  EXPECT_FALSE(late.late());
  late.Look(200, GateOpenValue(2), 1u);
  EXPECT_FALSE(late.late());
  // Still unfinished when bubble 2 closes: late again, a new stretch.
  EXPECT_EQ(late.Look(300, GateClosedValue(2), 1u), 0);
  EXPECT_TRUE(late.late());
  // Bubble 1's work ends; bubble 2's is left, and bubble 2 is over: one stretch goes on.
  EXPECT_EQ(late.Look(330, GateClosedValue(2), 2u), 0);
  EXPECT_EQ(late.Look(350, GateClosedValue(2), std::nullopt), 50);
  EXPECT_EQ(late.late_ns(), 110);
  EXPECT_EQ(late.late_bubbles(), 2u);
}

TEST(LateWork, BubbleNumbersAreComparedAcrossTheirWrap) {
  EXPECT_TRUE(BubbleBefore(1, 2));
  EXPECT_FALSE(BubbleBefore(2, 1));
  EXPECT_FALSE(BubbleBefore(5, 5));
  EXPECT_TRUE(BubbleBefore(0x7ffffffeu, 1));  // the word's 31-bit numbers wrap
  EXPECT_FALSE(BubbleBefore(1, 0x7ffffffeu));
  EXPECT_FALSE(BubbleBefore(0xffffffffu, 0x7fffffffu));  // one bubble, with and without bit 31
  // Bubble 0 closed after the wrap: bubble 0x7fffffff is over and its work late.
  LateWork late(1'000);
  late.Look(10, GateClosedValue(0), 0x7fffffffu);
  EXPECT_TRUE(late.late());
}

TEST(LateWork, AnEndSeenOnlyAfterTheLooksStoppedIsCountedAtMostAGapPastTheLastLook) {
  LateWork late(100);
  late.Look(1'000, GateClosedValue(1), 1u);  // late from here
  late.Look(1'050, GateClosedValue(1), 1u);  // still unfinished
  // No look for 10 us (the program computed on the CPU), then it has ended:
  // somewhere in between, counted up to 100 ns past the last look.
  EXPECT_EQ(late.Look(11'050, GateClosedValue(1), std::nullopt), 150);
  // A look from a thread whose clock read came earlier counts as this one's time.
  late.Look(12'000, GateClosedValue(2), 2u);
  EXPECT_EQ(late.Look(11'990, GateClosedValue(2), std::nullopt), 0);
  EXPECT_EQ(late.late_bubbles(), 2u);
  EXPECT_EQ(late.late_ns(), 150);
}

TEST_F(LaunchGateTest, APieceQueuedAheadBehindTheShutGateIsNotLate) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  ShutAndForecastBubbleTwo();
  WorkSample sample;
  ASSERT_EQ(gate.BeforeWork(stream_, false, &sample), kCudaSuccess);  // queued in the lead, for bubble 2
  AfterWorkOf(gate, sample);
  EXPECT_EQ(gate.unfinished_pieces(), 1u);
  // A second piece looks at the queue with the gate still shut at bubble 1,
  // then again once the first has ended: had the first counted as bubble 1's,
  // the 10 us between would be late work.
  FakeClock::now += 10'000;
  WorkSample second;
  ASSERT_EQ(gate.BeforeWork(stream_, false, &second), kCudaSuccess);
  AfterWorkOf(gate, second);
  FakeDriver::events_done = true;
  FakeClock::now += 10'000;
  WorkSample third;
  ASSERT_EQ(gate.BeforeWork(stream_, false, &third), kCudaSuccess);
  AfterWorkOf(gate, third);
  EXPECT_EQ(gate.late_ns(), 0);
  EXPECT_EQ(gate.late_bubbles(), 0u);
}

TEST_F(LaunchGateTest, WorkStillRunningAfterItsBubbleClosedIsTimedByAHeldThreadAndPublished) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  auto piece = [&] { EXPECT_TRUE(QueuePieces(gate, stream_)); };
  Open(1, FakeClock::now + 1'000'000'000);
  for (int i = 0; i < 3; ++i) piece();  // admitted to bubble 1, unfinished
  Shut(1);
  // The next piece is held while the gate is shut, looking every 50 us.
  // Bubble 1's pieces are past their waits (running); they end 120 us on;
  // bubble 2 opens 400 us on.
  const int64_t start = FakeClock::now;
  FakeClock::on_sleep = [&] {
    FakeDriver::events_done = FakeClock::now >= start + 120'000;
    if (FakeClock::now >= start + 400'000 && layout().word.load() == GateClosedValue(1))
      Open(2, FakeClock::now + 1'000'000'000);
  };
  FakeDriver::event_done = [](intptr_t, bool pass) { return pass || FakeDriver::events_done; };
  piece();
  // Seen late at the first look (start), seen ended at the look after 120 us.
  EXPECT_EQ(gate.late_ns(), 150'000);
  EXPECT_EQ(gate.late_bubbles(), 1u);
  EXPECT_EQ(slot.late_ns.load(), 150'000);
  EXPECT_EQ(slot.late_bubbles.load(), 1u);
  EXPECT_EQ(gate.pending_ns(), 0);
}

TEST_F(LaunchGateTest, WorkPendingOnItsWaitAfterItsBubbleClosedIsPendingTimeNotLateWork) {
  GateTaskSlot slot{};
  int64_t start = 0;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now >= start + 400'000 && layout().word.load() == GateClosedValue(1)) {
      Open(2, FakeClock::now + 1'000'000'000);
      FakeDriver::events_done = true;
    }
  };
  FakeDriver::event_done = [](intptr_t, bool) { return FakeDriver::events_done; };
  {
    LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
    Open(1, FakeClock::now + 1'000'000'000);
    // No piece timed yet: each waits on the GPU, and a pass follows its wait.
    ASSERT_TRUE(QueuePieces(gate, stream_, 2));
    EXPECT_EQ(gate.counters().passes, 2u);
    Shut(1);
    // The GPU reached the first piece's wait only after the close: neither
    // pass is reached until bubble 2 opens, 400 us on; then all ends.
    start = FakeClock::now;
    ASSERT_TRUE(QueuePieces(gate, stream_));
    EXPECT_EQ(gate.late_ns(), 0);
    EXPECT_EQ(gate.late_bubbles(), 0u);
    EXPECT_EQ(slot.late_ns.load(), 0);
    EXPECT_EQ(gate.pending_ns(), 400'000);  // from the first look (start) to the look that saw bubble 2 open
    EXPECT_EQ(slot.pending_ns.load(), 400'000);
    EXPECT_EQ(gate.unfinished_pieces(), 0u);
  }
  EXPECT_EQ(FakeDriver::live_events, 0) << "every fence and pass is destroyed with the gate";
}

TEST_F(LaunchGateTest, AGateEndedWithFencesAndPassesNotYetReachedDestroysThemAll) {
  {
    LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
    ASSERT_TRUE(QueuePieces(gate, stream_, 3));  // each waits: a pass and a fence each, none reached
    EXPECT_EQ(gate.counters().passes, 3u);
    EXPECT_EQ(FenceCount(), 3);
  }
  EXPECT_EQ(FakeDriver::live_events, 0);
}

// A piece refused at its wait, or whose launch the driver refused, is no
// longer on its way: the next piece's wait gets its pass.
TEST_F(LaunchGateTest, ARefusedWaitOrLaunchLeavesNoPieceCountedOnItsWay) {
  LaunchGate gate(FakeDriver::Api(), page_, "", nullptr, FakeClock::Clock());
  FakeDriver::wait_result = 400;  // CUDA_ERROR_INVALID_HANDLE
  WorkSample refused;
  EXPECT_EQ(gate.BeforeWork(stream_, false, &refused), 400);  // no AfterWork follows
  FakeDriver::wait_result = kCudaSuccess;
  ASSERT_TRUE(QueuePieces(gate, stream_));
  EXPECT_EQ(gate.counters().passes, 1u);
  WorkSample failed_launch;
  ASSERT_EQ(gate.BeforeWork(stream_, false, &failed_launch), kCudaSuccess);
  failed_launch.queued = false;  // as the wrapper does when the driver refuses the launch
  AfterWorkOf(gate, failed_launch);
  ASSERT_TRUE(QueuePieces(gate, stream_));
  EXPECT_EQ(gate.counters().passes, 3u);
}

// Where another piece is on its way to the stream (between its BeforeWork
// and AfterWork: another thread's launch) while a piece waits, that launch
// may land between the wait and its pass: no pass is recorded, and the
// stream's pieces count as running.
TEST_F(LaunchGateTest, AWaitWithAnotherLaunchOnItsWayGetsNoPassItsPiecesCountAsRunning) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  Open(1, FakeClock::now + 1'000'000'000);
  WorkSample on_its_way;
  ASSERT_EQ(gate.BeforeWork(stream_, false, &on_its_way), kCudaSuccess);  // its own pass: none on its way then
  ASSERT_TRUE(QueuePieces(gate, stream_));  // queued while the first is on its way
  AfterWorkOf(gate, on_its_way);
  // Another piece comes and goes while the next one's wait is being queued.
  bool inside = false;
  FakeDriver::on_wait = [&] {
    if (inside) return;
    inside = true;
    EXPECT_TRUE(QueuePieces(gate, stream_));
  };
  ASSERT_TRUE(QueuePieces(gate, stream_));
  FakeDriver::on_wait = nullptr;
  // Only the first piece's: each other had another on its way (the one
  // inside the wait, the one whose wait it came inside).
  EXPECT_EQ(gate.counters().passes, 1u);
  Shut(1);
  const int64_t start = FakeClock::now;
  FakeClock::on_sleep = [&] {
    if (FakeClock::now >= start + 400'000 && layout().word.load() == GateClosedValue(1)) {
      Open(2, FakeClock::now + 1'000'000'000);
      FakeDriver::events_done = true;
    }
  };
  // The first piece's pass is reached (it ran); the rest are unfinished.
  FakeDriver::event_done = [](intptr_t event, bool pass) {
    return FakeDriver::events_done || (pass && event == FirstPass());
  };
  ASSERT_TRUE(QueuePieces(gate, stream_));
  EXPECT_EQ(gate.pending_ns(), 0);
  EXPECT_EQ(gate.late_ns(), 400'000);
}

TEST_F(LaunchGateTest, PiecesBeforeAWaitAreFencedApartSoTheyCountAsRunningPastIt) {
  GateTaskSlot slot{};
  LaunchGate gate(FakeDriver::Api(), page_, "", &slot, FakeClock::Clock());
  LearnAPieceLength(gate, slot, stream_);
  const uint64_t passes_before = gate.counters().passes;  // the learning pieces' own
  Open(1, FakeClock::now + 1'000'000'000);
  ASSERT_TRUE(QueuePieces(gate, stream_, 3));  // far inside: no waits, no fence yet
  EXPECT_EQ(FenceCount(), 0);
  // Near the deadline the next piece gets its wait: the three before it are
  // fenced first, so a pass stands between them and it.
  Open(1, FakeClock::now + 400'000);
  ASSERT_TRUE(QueuePieces(gate, stream_));
  EXPECT_EQ(FenceCount(), 2);  // the three's, then the waited piece's own
  EXPECT_EQ(gate.counters().passes - passes_before, 1u);
  // Closed with the three running and the wait not passed: late work is the
  // three's, until they end 100 us on; the waited piece pends until bubble 2.
  Shut(1);
  const int64_t start = FakeClock::now;
  FakeDriver::event_done = [&](intptr_t event, bool pass) {
    if (FakeClock::now >= start + 300'000) return true;
    return !pass && event == FakeDriver::recorded[0].first && FakeClock::now >= start + 100'000;
  };
  FakeClock::on_sleep = [&] {
    if (FakeClock::now >= start + 300'000 && layout().word.load() == GateClosedValue(1))
      Open(2, FakeClock::now + 1'000'000'000);
  };
  ASSERT_TRUE(QueuePieces(gate, stream_));
  EXPECT_EQ(gate.late_ns(), 100'000);
  EXPECT_EQ(gate.pending_ns(), 200'000);
}

TEST(GatePage, TheAdmissionDeadlineIsReadWholeOrNotAtAll) {
  TempDir dir;
  GatePage page;
  std::string error;
  ASSERT_TRUE(page.CreateOrOpen(dir.path() + "/gate", 0, &error)) << error;
  uint32_t bubble = 0;
  int64_t until = 0;
  page.PublishAdmission(7, 123456);
  ASSERT_TRUE(ReadAdmission(*page.layout(), &bubble, &until));
  EXPECT_EQ(bubble, 7u);
  EXPECT_EQ(until, 123456);
  page.layout()->admit_bubble.store(kAdmissionBeingWritten);  // a writer in the middle
  EXPECT_FALSE(ReadAdmission(*page.layout(), &bubble, &until));
}

TEST(GatePage, TheNextBubblesForecastIsReadWholeOrNotAtAllAndANewDaemonWithdrawsIt) {
  TempDir dir;
  std::string error;
  AheadAdmission read;
  {
    GatePage page;
    ASSERT_TRUE(page.CreateOrOpen(dir.path() + "/gate", 0, &error)) << error;
    EXPECT_FALSE(ReadAheadAdmission(*page.layout(), &read));  // a new page forecasts nothing
    page.PublishAhead({8, 100, 200, 900});
    ASSERT_TRUE(ReadAheadAdmission(*page.layout(), &read));
    EXPECT_EQ(read.bubble, 8u);
    EXPECT_EQ(read.from_ns, 100);
    EXPECT_EQ(read.begin_ns, 200);
    EXPECT_EQ(read.until_ns, 900);
    page.PublishAhead({});  // withdrawn
    EXPECT_FALSE(ReadAheadAdmission(*page.layout(), &read));
    page.PublishAhead({9, 100, 200, 900});
  }
  GatePage restarted;
  ASSERT_TRUE(restarted.CreateOrOpen(dir.path() + "/gate", 0, &error)) << error;
  EXPECT_FALSE(ReadAheadAdmission(*restarted.layout(), &read));
}

TEST(WorkLengths, TheMeanOfTheWindow) {
  WorkLengths lengths;
  EXPECT_EQ(lengths.Mean(), 0);
  for (int64_t ns : {100, 200, 600}) lengths.Add(ns);
  lengths.Add(-5);  // ignored
  EXPECT_EQ(lengths.Mean(), 300);
  for (size_t i = 0; i < WorkLengths::kWindow; ++i) lengths.Add(50);  // the window moves on
  EXPECT_EQ(lengths.Mean(), 50);
}

TEST(WorkLengths, TheNinetyFifthPercentileOfTheWindow) {
  WorkLengths lengths;
  EXPECT_EQ(lengths.P95(), 0);
  for (int i = 1; i <= 100; ++i) lengths.Add(i * 1000);
  EXPECT_EQ(lengths.P95(), 96'000);  // rank 95 of 0..99
  for (int i = 0; i < 128; ++i) lengths.Add(7);  // the window forgets the old ones
  EXPECT_EQ(lengths.P95(), 7);
  lengths.Add(-5);  // ignored
  EXPECT_EQ(lengths.P95(), 7);
}

TEST(GateClose, TheGateClosesAMarginBeforeTheForecastEndOrAtOnce) {
  Admission serve;
  serve.deadline = 0;
  EXPECT_EQ(GateCloseAt(1000, 500, 100, serve), 1400);
  EXPECT_EQ(GateCloseAt(1000, 0, 100, serve), 1000);  // no forecast: nothing is let through
  EXPECT_EQ(GateCloseAt(1000, 80, 100, serve), 1000);  // less than the margin left
  Admission withheld;
  withheld.serve = false;
  EXPECT_EQ(GateCloseAt(1000, 500, 100, withheld), 1000);
  Admission window_inside;
  window_inside.deadline = 1300;  // a withheld window starts at 1300
  EXPECT_EQ(GateCloseAt(1000, 500, 100, window_inside), 1200);
  EXPECT_EQ(GateMargin(200, 700), 900);  // the tasks' longest work widens the margin
  EXPECT_EQ(GateMargin(200, -1), 200);
}

TEST(GatePage, EachProcessPublishesInASlotOfItsOwnAndDeadOnesAreForgotten) {
  TempDir dir;
  GatePage page;
  std::string error;
  ASSERT_TRUE(page.CreateOrOpen(dir.path() + "/gate", 0, &error));
  GateTaskSlot* a = page.ClaimTaskSlot(100);
  GateTaskSlot* b = page.ClaimTaskSlot(200);
  ASSERT_TRUE(a && b);
  EXPECT_NE(a, b);
  EXPECT_EQ(page.ClaimTaskSlot(100), a);  // its own again
  a->work_p95_ns.store(300);
  b->work_p95_ns.store(900);
  EXPECT_EQ(page.LongestTaskWork([](int64_t) { return true; }), 900);
  EXPECT_EQ(page.LongestTaskWork([](int64_t pid) { return pid != 200; }), 300);
  EXPECT_EQ(b->pid.load(), 0);  // 200 is gone: its slot is free
  for (int pid = 1; pid < kGateTaskSlots; ++pid) EXPECT_NE(page.ClaimTaskSlot(1000 + pid), nullptr);
  EXPECT_EQ(page.ClaimTaskSlot(5000), nullptr);  // all taken
}

TEST(GateSymbolTable, RuntimeLookupsFindTheVariantTheFlagsAskFor) {
  auto legacy = GatedByBaseName("cuLaunchKernel", 12000, 1);
  auto per_thread = GatedByBaseName("cuLaunchKernel", 12000, 2);
  ASSERT_TRUE(legacy && per_thread);
  EXPECT_EQ(legacy->function, GatedFunction::kLaunchKernel);
  EXPECT_FALSE(legacy->per_thread);
  EXPECT_TRUE(per_thread->per_thread);
  EXPECT_FALSE(GatedByBaseName("cuCtxSynchronize", 12000, 0));
  EXPECT_FALSE(GatedByBaseName("cuLaunchKernel_ptsz", 12000, 0));  // base names only
}

TEST(GateSymbolTable, ExportedNamesCarryTheirVersionAndVariant) {
  auto v2_ptds = GatedByExportName("cuMemcpyHtoD_v2_ptds");
  ASSERT_TRUE(v2_ptds);
  EXPECT_EQ(v2_ptds->function, GatedFunction::kMemcpyHtoD);
  EXPECT_TRUE(v2_ptds->per_thread);
  EXPECT_TRUE(GatedByExportName("cuGraphLaunch_ptsz"));
  EXPECT_FALSE(GatedByExportName("cuMemcpyHtoD"));  // the 32-bit v1 is not wrapped
  EXPECT_FALSE(GatedByExportName("malloc"));
}

TEST(GateSymbolTable, OldSignaturesAndUncoveredEntryPointsAreKnown) {
  EXPECT_TRUE(LookupRefusedForVersion("cuMemcpyHtoD", 3000));
  EXPECT_FALSE(LookupRefusedForVersion("cuMemcpyHtoD", 12000));
  EXPECT_FALSE(LookupRefusedForVersion("cuLaunchKernel", 3000));  // one signature since 4.0
  EXPECT_TRUE(UncoveredByName("cuStreamBatchMemOp"));
  EXPECT_TRUE(UncoveredByName("cuStreamBatchMemOp_v2_ptsz"));
  EXPECT_FALSE(UncoveredByName("cuMemcpyAsync"));
  EXPECT_FALSE(UncoveredByName("cuMemcpyBatchAsync"));
}

// cuMemPrefetchAsync took a device until 12.2 and a location since: each
// version's look-up gets its own wrapper, and the exported names theirs.
TEST(GateSymbolTable, APrefetchLookupGetsTheSignatureOfItsVersion) {
  auto old = GatedByBaseName("cuMemPrefetchAsync", 12000, 0);
  auto newer = GatedByBaseName("cuMemPrefetchAsync", 12020, 2);
  ASSERT_TRUE(old && newer);
  EXPECT_EQ(old->function, GatedFunction::kMemPrefetchAsync);
  EXPECT_EQ(newer->function, GatedFunction::kMemPrefetchAsyncV2);
  EXPECT_TRUE(newer->per_thread);
  EXPECT_FALSE(LookupRefusedForVersion("cuMemPrefetchAsync", 7000));  // before 8.0 the driver has none
  EXPECT_EQ(GatedByExportName("cuMemPrefetchAsync_v2_ptsz")->function, GatedFunction::kMemPrefetchAsyncV2);
  EXPECT_EQ(GatedByExportName("cuMemPrefetchAsync")->function, GatedFunction::kMemPrefetchAsync);
  EXPECT_EQ(GatedByExportName("cuMemsetD2D32_v2_ptds")->function, GatedFunction::kMemsetD2D32);
  EXPECT_TRUE(LookupRefusedForVersion("cuMemsetD2D8", 3000));  // the 32-bit-size form
  EXPECT_FALSE(GatedByBaseName("cuStreamWriteValue32", 12000, 0));  // a stage's gate writes: never gated
}

// cuMemcpyBatchAsync had one signature in CUDA 12.8 (with a failure index)
// and another from 13.0: a look-up gets the one its version asks for, and
// one older than both is refused.  So does cuMemcpy3DBatchAsync.
TEST(GateSymbolTable, ABaseNameWithTwoSignaturesGetsTheOneItsVersionAsksFor) {
  for (const auto& [name, v1, v2] :
       {std::tuple{"cuMemcpyBatchAsync", GatedFunction::kMemcpyBatchAsync, GatedFunction::kMemcpyBatchAsyncV2},
        std::tuple{"cuMemcpy3DBatchAsync", GatedFunction::kMemcpy3DBatchAsync,
                   GatedFunction::kMemcpy3DBatchAsyncV2}}) {
    auto old = GatedByBaseName(name, 12080, 0);
    auto newer = GatedByBaseName(name, 13000, 2);
    ASSERT_TRUE(old && newer) << name;
    EXPECT_EQ(old->function, v1);
    EXPECT_EQ(newer->function, v2);
    EXPECT_TRUE(newer->per_thread);
    EXPECT_FALSE(GatedByBaseName(name, 12000, 0));
    // Before 12.8 there was none: the driver, not the gate, says so.
    EXPECT_FALSE(LookupRefusedForVersion(name, 12000));
    EXPECT_FALSE(LookupRefusedForVersion(name, 12080));
    EXPECT_FALSE(LookupRefusedForVersion(name, 13000));
  }
  auto v2_export = GatedByExportName("cuMemcpyBatchAsync_v2_ptsz");
  ASSERT_TRUE(v2_export);
  EXPECT_EQ(v2_export->function, GatedFunction::kMemcpyBatchAsyncV2);
  EXPECT_TRUE(v2_export->per_thread);
  auto v1_export = GatedByExportName("cuMemcpyBatchAsync");
  ASSERT_TRUE(v1_export);
  EXPECT_EQ(v1_export->function, GatedFunction::kMemcpyBatchAsync);
}

TEST(GatePage, AnEarlyCloseClosesItsOwnBubbleOnlyAndAForcedCloseAnyOpenOne) {
  TempDir dir;
  GatePage daemon, stage;
  std::string error;
  const std::string path = dir.path() + "/gate";
  ASSERT_TRUE(daemon.CreateOrOpen(path, 3, &error)) << error;
  ASSERT_TRUE(stage.Open(path, &error)) << error;
  auto& word = stage.layout()->word;
  word.store(GateOpenValue(7));  // what the stage's stream writes at bubble 7's begin
  EXPECT_TRUE(daemon.CloseEarly(7));
  EXPECT_EQ(word.load(), GateClosedValue(7));
  EXPECT_FALSE(daemon.CloseEarly(7));  // already closed
  word.store(GateOpenValue(8));        // the next bubble opened before a late close of 7
  EXPECT_FALSE(daemon.CloseEarly(7));
  EXPECT_TRUE(GateIsOpen(word.load()));
  EXPECT_TRUE(daemon.ForceClose());  // the stage died with bubble 8 open
  EXPECT_EQ(word.load(), GateClosedValue(8));
  EXPECT_FALSE(daemon.ForceClose());
}

TEST(GatePage, ARestartedDaemonNeverInheritsAnOpenGate) {
  TempDir dir;
  const std::string path = dir.path() + "/gate";
  std::string error;
  {
    GatePage first;
    ASSERT_TRUE(first.CreateOrOpen(path, 0, &error));
    first.layout()->word.store(GateOpenValue(5));
  }
  GatePage second;
  ASSERT_TRUE(second.CreateOrOpen(path, 0, &error));
  EXPECT_FALSE(GateIsOpen(second.layout()->word.load()));
}

TEST(GatePage, APageOfAnotherVersionIsReplacedNotRewrittenUnderTheProcessesStillMappingIt) {
  TempDir dir;
  const std::string path = dir.path() + "/gate";
  std::string error;
  {
    GatePage old_build;
    ASSERT_TRUE(old_build.CreateOrOpen(path, 0, &error));
    old_build.layout()->version = kGatePageVersion - 1;  // as an older daemon left it
    old_build.layout()->tasks[0].pid.store(4242);         // an older interposer's slot
  }
  SharedMapping still_mapped;  // an older process that still has the page mapped
  ASSERT_TRUE(still_mapped.Map(path, kGatePageBytes, /*writable=*/true, /*create=*/false, &error)) << error;
  GatePage page;
  ASSERT_TRUE(page.CreateOrOpen(path, 0, &error)) << error;
  EXPECT_EQ(page.layout()->version, kGatePageVersion);
  EXPECT_EQ(page.layout()->tasks[0].pid.load(), 0);  // a new page
  const auto* old_layout = static_cast<const GatePageLayout*>(still_mapped.data());
  EXPECT_EQ(old_layout->version, kGatePageVersion - 1);  // the old one is left as it was
  EXPECT_EQ(old_layout->tasks[0].pid.load(), 4242);
  GatePage reader;
  EXPECT_TRUE(reader.Open(path, &error)) << error;  // the path now holds the new page
}

TEST(GatePage, AFileThatIsNotAGatePageIsRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/junk";
  std::ofstream(path) << std::string(4096, '\0');
  GatePage page;
  std::string error;
  EXPECT_FALSE(page.Open(path, &error));
  EXPECT_NE(error.find("not a FreeRide gate page"), std::string::npos);
}

// --- the interposer itself, preloaded, against the fake driver -------------

class InterposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    page_path_ = dir_.path() + "/gate";
    ASSERT_TRUE(page_.CreateOrOpen(page_path_, 0, &error)) << error;
    // A bubble is open with no deadline: the client's work is queued at once.
    page_.layout()->word.store(GateOpenValue(1));
    page_.PublishAdmission(1, INT64_MAX);
  }
  // `strict`: every piece gets its wait (FREERIDE_GATE_STRICT=1), so that
  // each entry point is seen to queue one; without it, work far inside the
  // open bubble goes without (LaunchGate's MayGoUnwaited).
  ShellResult Run(const std::string& scenario, bool with_page = true, bool strict = true) {
    return RunClient(GATE_CLIENT_BIN " " + scenario, with_page, strict);
  }
  // The client linked against the driver, calling it by name (gate_direct_client),
  // with the gate page and `env` (FREERIDE_GATE_AHEAD=N) set.
  ShellResult RunDirect(const std::string& scenario, const std::string& env = "") {
    return RunClient(env + " " GATE_DIRECT_CLIENT_BIN " " + scenario, /*with_page=*/true, /*strict=*/false);
  }
  ShellResult RunClient(const std::string& command, bool with_page, bool strict) {
    std::string env = "LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR " LD_PRELOAD=" GATE_LIBRARY " ";
    if (strict) env += "FREERIDE_GATE_STRICT=1 ";
    if (with_page) env += "FREERIDE_GATE_PAGE=" + page_path_ + " ";
    // The interposer's experiments, unset: the caller's environment must not choose them.
    return RunShell("env -u FREERIDE_GATE_PAGE -u FREERIDE_GATE_LENGTHS -u FREERIDE_GATE_QUEUE_ESTIMATE "
                    "-u FREERIDE_GATE_RUN -u FREERIDE_GATE_SAMPLE_EVERY -u FREERIDE_GATE_AHEAD "
                    "-u FREERIDE_GATE_STRICT " +
                        env + command,
                    dir_.path());
  }
  // Whether each of `lines` stands in `out`, in that order.
  static ::testing::AssertionResult InOrder(const std::string& out, const std::vector<std::string>& lines) {
    size_t at = 0;
    for (const std::string& line : lines) {
      const size_t found = out.find(line, at);
      if (found == std::string::npos)
        return ::testing::AssertionFailure() << "missing, or out of order: " << line << out;
      at = found + line.size();
    }
    return ::testing::AssertionSuccess();
  }
  TempDir dir_;
  std::string page_path_;
  GatePage page_;
};

TEST_F(InterposerTest, EveryLaunchGraphAndCopyWaitsOnItsStreamBeforeTheDriverRunsIt) {
  ShellResult r = Run("runtime");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string expected =
      "lookup cuLaunchKernel 12000 1\n"
      "register 4096 flags 3\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "launch 0x1000\n"
      "lookup cuLaunchKernel 12000 2\n"
      "wait 0x2 value 1 flags 2 addr-set\n"  // stream 0 of a _ptsz entry point: the thread's own
      "launch_ptsz (nil)\n"
      "lookup cuGraphLaunch 12000 1\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "graph 0x1000\n"
      "lookup cuMemcpyHtoD 12000 1\n"
      "wait (nil) value 1 flags 2 addr-set\n"  // a synchronous copy: the legacy stream
      "htod 1\n"
      "lookup cuCtxSynchronize 12000 1\n"
      "sync\n";  // not work: passed through untouched
  EXPECT_EQ(r.out.substr(0, expected.size()), expected) << r.out;
  EXPECT_NE(r.out.find("result 0\nresult 0\nresult 0\nresult 0\nresult 0\n"), std::string::npos);
  EXPECT_EQ(page_.layout()->interposers_attached.load(), 1u);
}

// Under launch ahead (FREERIDE_GATE_AHEAD=N, an experiment), a launch made
// while the gate is shut returns at once with its arguments copied (the
// client overwrites them before the gate opens), a library kernel's too, and is submitted by the
// interposer's own thread once the gate opens; the client's stream
// synchronisation is passed to the driver only after that submission.
TEST_F(InterposerTest, UnderLaunchAheadALaunchWhileShutReturnsAtOnceAndASyncComesAfterItsSubmission) {
  const std::string stats = dir_.path() + "/ahead.jsonl";
  ShellResult r = RunShell("env -u FREERIDE_GATE_STRICT -u FREERIDE_GATE_LENGTHS LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR
                           " LD_PRELOAD=" GATE_LIBRARY " FREERIDE_GATE_PAGE=" + page_path_ +
                               " FREERIDE_GATE_AHEAD=64 FREERIDE_GATE_STATS=" + stats + " " GATE_CLIENT_BIN " ahead",
                           dir_.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::vector<std::string> in_order = {
      "launch 0x1000 args 1 2\n", "stream sync 0x1000\n", "note returned with the gate shut\n",
      "launch 0x1000 args 7 9\n", "launch 0x1000 kernel arg 5\n", "stream sync 0x1000\n",
      "note synchronised\n"};
  ASSERT_TRUE(InOrder(r.out, in_order));
  EXPECT_EQ(r.out.find("args 0 0"), std::string::npos) << "the deferred launch read the overwritten arguments";
  EXPECT_NE(r.out.find("result 0\nresult 0\nresult 0\nresult 0\nresult 0\n"), std::string::npos) << r.out;
  std::ifstream in(stats);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << "no line in " << stats;
  const nlohmann::json counts = nlohmann::json::parse(line);
  EXPECT_EQ(counts["ahead"], 64) << line;
  // The first launch armed the gate on the client's thread; the library's
  // kernel, whose parameters only the kernel form of the query names, is
  // deferred with them (not with none, as the function form alone would say).
  EXPECT_EQ(counts["ahead_deferred"], 2) << line;
  EXPECT_EQ(counts["ahead_failed"], 0) << line;
}

// An update of an instantiated graph's nodes changes what the exec's next
// launch runs, and not one the driver already has: under launch ahead it
// must wait for a launch of the exec queued before it (XLA's command
// buffers update their execs in place between launches).
TEST_F(InterposerTest, UnderLaunchAheadAGraphExecUpdateWaitsForTheLaunchQueuedBeforeIt) {
  ShellResult r = RunClient("FREERIDE_GATE_AHEAD=64 " GATE_CLIENT_BIN " ahead-graph-update", /*with_page=*/true,
                            /*strict=*/false);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::vector<std::string> in_order = {"note graph launch returned\n", "note gate opening\n",
                                             "graph 0x1000\n", "exec kernel node set 0xe1 node 0xa0\n",
                                             "note updated\n"};
  ASSERT_TRUE(InOrder(r.out, in_order));
  EXPECT_NE(r.out.find("result 0\nresult 0\nresult 0\nresult 0\n"), std::string::npos) << r.out;
}

// Once a piece has been timed (the fake driver's events end at once),
// launches far inside the open bubble go without their wait; a graph never.
TEST_F(InterposerTest, FarInsideAnOpenBubbleAnAsynchronousLaunchGoesWithoutItsWaitUnlessStrict) {
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  ShellResult r = Run("many", true, /*strict=*/false);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(count(r.out, "launch 0x1000\n"), 64u) << r.out;
  EXPECT_EQ(count(r.out, "result 0\n"), 65u) << r.out;
  const size_t waits = count(r.out, "wait 0x1000");
  EXPECT_LT(waits, 40u) << r.out;
  EXPECT_NE(r.out.find("wait 0x1000 value 1 flags 2 addr-set\ngraph 0x1000\n"), std::string::npos) << r.out;
  ShellResult strict = Run("many", true, /*strict=*/true);
  ASSERT_EQ(strict.status, 0) << strict.err;
  EXPECT_EQ(count(strict.out, "wait 0x1000"), 65u) << strict.out;
}

// FREERIDE_GATE_SAMPLE_EVERY (and FREERIDE_GATE_RUN, read the same way) tune
// the interposer; a value it cannot take is named on stderr and the default
// used.  The fake driver's events end at once, so every timed piece is read
// back and counted in the process's slot.  (By default every piece is
// predicted by the common percentile: with FREERIDE_GATE_LENGTHS=kind the
// first pieces of each kind would be timed too, whatever the rate.)
TEST_F(InterposerTest, ATuningVariableIsReadAndABadOneIsNamedAndTheDefaultUsed) {
  auto samples_after = [&](const std::string& variables) {
    page_.layout()->tasks[0].samples.store(0);
    page_.layout()->tasks[0].pid.store(0);  // the slot of the last run's process, now dead
    ShellResult r = RunShell("env -u FREERIDE_GATE_STRICT -u FREERIDE_GATE_RUN -u FREERIDE_GATE_SAMPLE_EVERY "
                             "-u FREERIDE_GATE_LENGTHS "
                             "LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR " LD_PRELOAD=" GATE_LIBRARY
                             " FREERIDE_GATE_PAGE=" + page_path_ + " " + variables +
                                 " " GATE_CLIENT_BIN " many",
                             dir_.path());
    EXPECT_EQ(r.status, 0) << r.err;
    return std::make_pair(page_.layout()->tasks[0].samples.load(), r.err);
  };
  const auto [by_default, quiet] = samples_after("");
  const auto [every_fourth, tuned] = samples_after("FREERIDE_GATE_SAMPLE_EVERY=4 FREERIDE_GATE_RUN=32");
  const auto [bad, warned] = samples_after("FREERIDE_GATE_SAMPLE_EVERY=0 FREERIDE_GATE_RUN=lots");
  // 64 launches: one in 16 timed by default, one in 4 tuned (the last may be unread at exit).
  EXPECT_GE(by_default, 3u);
  EXPECT_LE(by_default, 4u);
  EXPECT_GE(every_fourth, 3 * by_default);  // read back every 16th piece: the last few unread at exit
  EXPECT_EQ(quiet.find("freeride-gate:"), std::string::npos) << quiet;
  EXPECT_EQ(tuned.find("freeride-gate:"), std::string::npos) << tuned;
  EXPECT_EQ(bad, by_default);
  EXPECT_NE(warned.find("freeride-gate: FREERIDE_GATE_SAMPLE_EVERY=0 is not a whole number from 1 to 4096; using 16"),
            std::string::npos) << warned;
  EXPECT_NE(warned.find("freeride-gate: FREERIDE_GATE_RUN=lots is not a whole number from 1 to 256; using 8"),
            std::string::npos) << warned;
}

// FREERIDE_GATE_STATS=FILE: at exit the interposer appends its counts to
// FILE as one JSON line (how a side program's pieces went through the gate).
TEST_F(InterposerTest, AtExitItsCountsAreAppendedToTheStatsFileAsOneJsonLine) {
  const std::string stats = dir_.path() + "/stats.jsonl";
  std::string env = "LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR " LD_PRELOAD=" GATE_LIBRARY " FREERIDE_GATE_PAGE=" +
                    page_path_ + " FREERIDE_GATE_STATS=" + stats + " FREERIDE_GATE_LENGTHS=kind ";
  ShellResult r = RunShell("env -u FREERIDE_GATE_STRICT -u FREERIDE_GATE_VERBOSE -u FREERIDE_GATE_QUEUE_ESTIMATE "
                           "-u FREERIDE_GATE_LENGTHS " +
                               env + GATE_CLIENT_BIN " many",
                           dir_.path());
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(stats);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << "no line in " << stats;
  const nlohmann::json counts = nlohmann::json::parse(line);
  EXPECT_EQ(counts["state"], "armed");
  EXPECT_EQ(counts["waits"].get<uint64_t>() + counts["unwaited"].get<uint64_t>(), 65u) << line;
  EXPECT_GT(counts["unwaited"].get<uint64_t>(), 0u) << line;
  EXPECT_EQ(counts["refused"], 0);
  // The gate stood open with no deadline: nothing was held.
  EXPECT_EQ(counts["held"], 0);
  EXPECT_EQ(counts["held_unpublished_ns"], 0);
  EXPECT_EQ(counts["held_drain_ns"], 0);
  EXPECT_EQ(counts["held_fit_ns"], 0);
  EXPECT_TRUE(counts.contains("passes")) << line;
  // With FREERIDE_GATE_LENGTHS=kind, two kinds of piece met (the wrapper
  // names each): the kernel's one launch shape and the graph.
  EXPECT_EQ(counts["kinds"], 2) << line;
  EXPECT_EQ(counts["kinds_forgotten"], 0) << line;
  EXPECT_EQ(counts["windows_forgotten"], 0) << line;
  EXPECT_FALSE(std::getline(in, line)) << "one line a process";
}

// Every piece is predicted by the common percentile unless the task's
// environment says FREERIDE_GATE_LENGTHS=kind (an experiment); a value that
// is neither is named on stderr and the default used.
TEST_F(InterposerTest, PiecesArePredictedByKindOnlyWhenTheEnvironmentAsks) {
  auto kinds_with = [&](const std::string& variables) {
    const std::string stats = dir_.path() + "/kinds.jsonl";
    std::remove(stats.c_str());
    ShellResult r = RunShell("env -u FREERIDE_GATE_STRICT -u FREERIDE_GATE_LENGTHS LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR
                             " LD_PRELOAD=" GATE_LIBRARY " FREERIDE_GATE_PAGE=" + page_path_ +
                                 " FREERIDE_GATE_STATS=" + stats + " " + variables + " " GATE_CLIENT_BIN " many",
                             dir_.path());
    EXPECT_EQ(r.status, 0) << r.err;
    std::ifstream in(stats);
    std::string line;
    EXPECT_TRUE(std::getline(in, line)) << "no line in " << stats;
    return std::make_pair(line.empty() ? -1 : nlohmann::json::parse(line)["kinds"].get<int>(), r.err);
  };
  const auto [by_default, quiet] = kinds_with("");
  const auto [by_kind, asked] = kinds_with("FREERIDE_GATE_LENGTHS=kind");
  const auto [bad, warned] = kinds_with("FREERIDE_GATE_LENGTHS=longest");
  EXPECT_EQ(by_default, 0);
  EXPECT_EQ(by_kind, 2) << "the kernel's one launch shape and the graph";
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(quiet.find("freeride-gate:"), std::string::npos) << quiet;
  EXPECT_EQ(asked.find("freeride-gate:"), std::string::npos) << asked;
  EXPECT_NE(warned.find("freeride-gate: FREERIDE_GATE_LENGTHS=longest is not common or kind; using common"),
            std::string::npos) << warned;
}

// A copy of 2.5 MiB (a weight from the host, say) is longer than a short
// bubble: it goes as pieces of 1, 1 and 0.5 MiB, each with its own wait, at
// its offsets; one of 2 MiB goes whole; so does one being captured into a
// graph (the graph is gated where it is launched).  A synchronous copy is
// cut the same way, on the legacy stream.
TEST_F(InterposerTest, ALongCopyIsCutIntoPiecesEachGatedUnlessItIsCaptured) {
  ShellResult r = Run("long-copies");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string expected =
      "lookup cuMemcpyHtoDAsync 12000 1\n"
      "register 4096 flags 3\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "htod_async 0x1000 dst 0x10000000 src 0x70000000 n 1048576\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "htod_async 0x1000 dst 0x10100000 src 0x70100000 n 1048576\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "htod_async 0x1000 dst 0x10200000 src 0x70200000 n 524288\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "htod_async 0x1000 dst 0x10000000 src 0x70000000 n 2097152\n"
      "htod_async 0x1000 dst 0x10000000 src 0x70000000 n 2621440\n"
      "lookup cuMemcpyHtoD 12000 1\n"
      "wait (nil) value 1 flags 2 addr-set\n"
      "htod 1048576\n"
      "wait (nil) value 1 flags 2 addr-set\n"
      "htod 1048576\n"
      "wait (nil) value 1 flags 2 addr-set\n"
      "htod 524288\n"
      "result 0\nresult 0\nresult 0\nresult 0\n";
  EXPECT_EQ(r.out, expected);
}

TEST_F(InterposerTest, CapturedWorkIsGatedWhereItsGraphIsLaunched) {
  ShellResult r = Run("capture");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("lookup cuLaunchKernel 12000 1\nregister 4096 flags 3\nlaunch 0x1000\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("wait 0x1000 value 1 flags 2 addr-set\ngraph 0x1000\n"), std::string::npos)
      << r.out;
}

TEST_F(InterposerTest, APreTwoPointThreeCopySignatureIsNotHandedOut) {
  ShellResult r = Run("old-version");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("lookup"), std::string::npos) << r.out;  // never reached the driver
  EXPECT_NE(r.out.find("result 801\nresult 0\nresult 2\n"), std::string::npos) << r.out;
}

TEST_F(InterposerTest, AnUncoveredEntryPointFailsWithAReasonInsteadOfRunning) {
  ShellResult r = Run("uncovered");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("batchmemop"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result 0\nresult 801\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("cuStreamBatchMemOp submits GPU work that the gate does not cover"),
            std::string::npos)
      << r.err;
}

// The same called by name, by a program linked against libcuda: the call
// binds to the interposer's refuser, not to the driver's entry point; the
// program run without the gate reaches the driver.
TEST_F(InterposerTest, AnUncoveredEntryPointCalledByNameFailsWithAReasonInsteadOfRunning) {
  ShellResult r = RunDirect("uncovered");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("batchmemop"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("htoa"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result 801\nresult 801\n"), std::string::npos) << r.out;
  for (const char* name : {"cuStreamBatchMemOp", "cuMemcpyHtoA"})
    EXPECT_NE(r.err.find(std::string(name) + " submits GPU work that the gate does not cover"), std::string::npos)
        << r.err;

  ShellResult ungated = RunShell("env -u LD_PRELOAD LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR " " GATE_DIRECT_CLIENT_BIN
                                 " uncovered",
                                 dir_.path());
  ASSERT_EQ(ungated.status, 0) << ungated.out << ungated.err;
  EXPECT_NE(ungated.out.find("batchmemop\nhtoa 0xa1 offset 0 n 16\nresult 0\nresult 0\n"), std::string::npos)
      << ungated.out;
  EXPECT_EQ(ungated.err.find("does not cover"), std::string::npos) << ungated.err;
}

// The interposer exports driver names this driver may lack; a program that
// probes for one with dlsym(RTLD_DEFAULT) finds it absent, as without the
// gate, and a name the driver has is still found.
TEST_F(InterposerTest, AProbeForANameTheDriverLacksFindsItAbsentUnderTheGate) {
  const std::string expected =
      "cuStreamSynchronize found\ncuCtxSynchronize found\ncuStreamBatchMemOp_v2 found\n"
      "cuCtxSynchronize_v2 absent\ncuGraphExecNodeSetParams absent\ncuLaunchGrid absent\n";
  for (const std::string ahead : {"", "FREERIDE_GATE_AHEAD=64"}) {
    ShellResult r = RunDirect("probe", ahead);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(expected), std::string::npos) << ahead << "\n" << r.out;
  }
  ShellResult ungated = RunShell("env -u LD_PRELOAD LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR " " GATE_DIRECT_CLIENT_BIN
                                 " probe",
                                 dir_.path());
  ASSERT_EQ(ungated.status, 0) << ungated.out << ungated.err;
  EXPECT_NE(ungated.out.find(expected), std::string::npos) << ungated.out;
}

// Batched copies (cudaMemcpyBatchAsync: cuDF, SGLang's KV cache, NCCL's
// copy-engine collectives) wait on the gate like any copy, under either
// signature: CUDA 13's, and 12.8's with its failure index.
// Refused by the gate (no gate page: it cannot be armed), a batched copy of
// CUDA 12.8's signature, and a batched decompression, say through their
// failure index that no one copy failed.
TEST_F(InterposerTest, ABatchedCopyTheGateRefusesSetsItsFailureIndexToNone) {
  ShellResult r = Run("batch-copies", /*with_page=*/false);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("batch_v"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("decompress"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fail index 18446744073709551615\nerror index 18446744073709551615\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("result 800\nresult 800\nresult 800\n"), std::string::npos) << r.out;
}

TEST_F(InterposerTest, BatchedCopiesWaitOnTheGateUnderEitherSignature) {
  ShellResult r = Run("batch-copies");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string expected =
      "lookup cuMemcpyBatchAsync 13000 1\n"
      "register 4096 flags 3\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "batch_v2 0x1000 count 2\n"
      "lookup cuMemcpyBatchAsync 12080 1\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "batch_v1 0x1000 count 3 fail-index-set\n"
      "lookup cuMemBatchDecompressAsync 12060 1\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "decompress 0x1000 count 4 error-index-set\n"
      "fail index 0\n"
      "error index 0\n"
      "result 0\nresult 0\nresult 0\n";
  EXPECT_EQ(r.out, expected);
}

// Managed memory prefetched on a stream (one range or a batch), a graph
// uploaded ahead of its launch, and a synchronous 2-D fill: each waits on
// the gate, and reaches the driver with its arguments as the program gave
// them (a location passed by value included).
TEST_F(InterposerTest, PrefetchesGraphUploadsAndTwoDimensionalFillsWaitOnTheGate) {
  ShellResult r = Run("prefetch-upload-fill");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string expected =
      "lookup cuMemPrefetchAsync 13000 1\n"
      "register 4096 flags 3\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "prefetch 0x1000 n 4096 to 1:0 flags 0\n"
      "lookup cuMemPrefetchBatchAsync 13000 1\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "prefetch_batch 0x1000 count 2 last 8192\n"
      "lookup cuGraphUpload 12000 1\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "upload 0x1000\n"
      "lookup cuMemsetD2D8 12000 1\n"
      "wait (nil) value 1 flags 2 addr-set\n"  // synchronous: the legacy stream
      "memset2d pitch 64 value 7 16x4\n"
      "result 0\nresult 0\nresult 0\nresult 0\n";
  EXPECT_EQ(r.out, expected);
}

// A graph instantiated with the flag that uploads it: the driver is asked
// to instantiate only (the caller's flags left as they were), and the upload
// goes through the gated cuGraphUpload on the named stream; without the
// flag, nothing is queued and nothing waits.
TEST_F(InterposerTest, AGraphInstantiatedWithItsUploadIsUploadedThroughTheGate) {
  ShellResult r = Run("instantiate");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string expected =
      "exec 0xe1 result 0 flags 3\n"
      "lookup cuGraphInstantiateWithParams 12000 1\n"
      "instantiate flags 1 upload-stream-set\n"
      "register 4096 flags 3\n"
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "upload 0x1000\n"
      "instantiate flags 1\n"
      "lookup cuGraphInstantiateWithParams 12000 2\n"
      "instantiate_ptsz\n"
      "instantiate flags 0\n"
      "wait 0x2 value 1 flags 2 addr-set\n"  // stream 0 of the per-thread variant: the thread's own
      "upload_ptsz (nil)\n"
      "instantiate flags 0 upload-stream-set\n"  // the exported name, bound by dlsym
      "wait 0x1000 value 1 flags 2 addr-set\n"
      "upload 0x1000\n"
      "result 0\nresult 0\nresult 0\nresult 0\n";
  EXPECT_EQ(r.out, expected);
}

// Its upload refused (the gate cannot be armed without a page), the call
// fails as one: the exec it made is destroyed, and the result says so.
TEST_F(InterposerTest, AGraphWhoseUploadTheGateRefusesLeavesNoExecBehind) {
  ShellResult r = Run("instantiate-refused", /*with_page=*/false);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("exec (nil) result 1 error node (nil) flags 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exec destroy 0xe1\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("upload 0x1000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result 800\n"), std::string::npos) << r.out;
}

TEST_F(InterposerTest, AProgramLinkedToTheDriverByNameIsGatedToo) {
  ShellResult r = Run("direct");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wait 0x1000 value 1 flags 2 addr-set\nlaunch 0x1000\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("wait 0x2 value 1 flags 2 addr-set\nlaunch_ptsz (nil)\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("result 0\nresult 0\n"), std::string::npos) << r.out;
}

// A program linked against libcuda binds the ordered entry points by name
// too; without launch ahead each reaches the driver as made, its arguments
// and its result (a failure included) unchanged.
TEST_F(InterposerTest, WithoutLaunchAheadAProgramLinkedToTheDriverReachesItsOrderedEntryPointsUnchanged) {
  ShellResult r = RunDirect("ordered");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out,
            "stream sync 0x1000\n"
            "stream sync 0xbad\n"
            "event record 0xe0001 on 0x1000\n"
            "stream sync_ptsz 0x1000\n"
            "sync\n"
            "result 0\nresult 400\nresult 0\nresult 0\nresult 0\n");
}

// Under launch ahead, launches the program's runtime looked up are queued; a
// synchronisation or event record that a library linked against libcuda
// makes by name after them must still reach the driver only after they were
// submitted (the gate opens 200 ms after each call), per-thread names and
// names with no per-thread form included.
TEST_F(InterposerTest, UnderLaunchAheadAnOrderedCallByNameWaitsForTheLaunchesQueuedBeforeIt) {
  ShellResult r = RunDirect("ahead", "FREERIDE_GATE_AHEAD=64");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::vector<std::string> ordered = {"stream sync 0x1000\n", "event record 0xe0001 on 0x1000\n",
                                            "stream sync_ptsz 0x1000\n", "sync\n"};
  std::vector<std::string> in_order = {"launch 0x1000 args 0 0\n", "stream sync 0x1000\n"};
  for (size_t i = 0; i < ordered.size(); ++i) {
    const std::string round = std::to_string(i + 1);
    for (const std::string& line : {"note queued " + round + "\n", "note gate opening " + round + "\n",
                                    "launch 0x1000 args " + round + " 0\n", ordered[i],
                                    "note returned " + round + "\n"})
      in_order.push_back(line);
  }
  ASSERT_TRUE(InOrder(r.out, in_order));
  std::string results;  // the arming launch and its sync, then each round's launch and call
  for (int i = 0; i < 10; ++i) results += "result 0\n";
  EXPECT_TRUE(r.out.ends_with(results)) << r.out;
}

TEST_F(InterposerTest, WithoutAGatePageNoWorkRunsAndTheReasonIsSaid) {
  ShellResult r = Run("runtime", /*with_page=*/false);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("launch"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("graph 0x1000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result 800\nresult 800\nresult 800\nresult 800\nresult 0\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("FREERIDE_GATE_PAGE is not set"), std::string::npos) << r.err;
}

TEST_F(InterposerTest, AFailedRegistrationRefusesTheProgramsWork) {
  ShellResult r = Run("register-fails");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("launch 0x1000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result 800\nresult 800\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("cuMemHostRegister of the gate page failed"), std::string::npos) << r.err;
}

// The stage's writes of its lane's gate, through libfreeride against the fake
// driver (whose stream write stores the value at once): each bubble's open
// and close carry its own number, and the page names the stage's process, so
// that the daemon leaves the word to it.
// A lane as the daemon makes it for the stage's side (its segment, and its
// gate page unless a test leaves it out), and the stage client run on it
// against the fake driver.
struct StageLane {
  explicit StageLane(int lane) : lane(lane) {
    std::string error;
    EXPECT_TRUE(segment.CreateOrOpen(LaneSegmentPath(socket, lane), lane, &error)) << error;
  }
  ~StageLane() {
    unlink(LaneSegmentPath(socket, lane).c_str());
    unlink((LaneSegmentPath(socket, lane) + "-gate").c_str());
  }
  void MakeGatePage() {
    std::string error;
    EXPECT_TRUE(page.CreateOrOpen(LaneSegmentPath(socket, lane) + "-gate", lane, &error)) << error;
  }
  // Runs the client in `mode` ("" for the gate alone) with `env` (VAR=value ...).
  ShellResult RunClient(const std::string& mode, const std::string& env = "") {
    return RunShell("env -u FREERIDE_DISABLE -u FREERIDE_GATE_WRITES LD_LIBRARY_PATH=" FAKE_LIBCUDA_DIR " " + env + " " +
                        STAGE_GATE_CLIENT_BIN + " " + socket + " " + std::to_string(lane) + " " + mode,
                    dir.path());
  }
  TempDir dir;
  const std::string socket = dir.path() + "/d.sock";
  const int lane;
  LaneSegment segment;
  GatePage page;
};

TEST(StageGate, EachBubbleIsOpenedAndClosedOnTheStreamWithItsOwnNumber) {
  StageLane lane(3);
  lane.MakeGatePage();
  ShellResult r = lane.RunClient("");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const std::string expected =
      "open_on_stream 0 word " + std::to_string(GateOpenValue(1)) + "\n" +
      "close_on_stream 0 word " + std::to_string(GateClosedValue(1)) + "\n" +
      "open_on_stream 0 word " + std::to_string(GateOpenValue(2)) + "\n" +
      "close_on_stream 0 word " + std::to_string(GateClosedValue(2)) + "\n" +
      "stage_pid matches 1\n" +
      "open_on_stream without a stage -1 word " + std::to_string(GateClosedValue(2)) + "\n";
  EXPECT_EQ(r.out, expected) << r.err;
}

// The gated marks: the stage's stream writes the gate word and nothing else;
// a thread of libfreeride in the stage's process reads the word and writes
// the marks, with the slots the training thread recorded.  The fake
// driver's writes land at once, so the thread may see every bubble or only
// the last word: the marks are the same either way (the bubbles it did not
// see open have length 0), and the stage's close ends the open one.
TEST(StageGate, GatedMarksReachTheLaneFromTheGateWordWithTheirSlots) {
  StageLane lane(2);
  LaneSegment& segment = lane.segment;
  GatePage& page = lane.page;

  // No gate page (a CPU lane, or a daemon without the gate): nothing gated,
  // the caller is told to mark otherwise.
  ShellResult none = lane.RunClient("gated");
  ASSERT_EQ(none.status, 0) << none.out << none.err;
  EXPECT_EQ(none.out, "end_gated before any begin -1\nbegin_gated -1\nend_gated -1\nbegin_gated -1\nend_gated -1\n"
                      "begin_gated -1\n");
  EXPECT_EQ(segment.layout()->bubble_seq.load(), 0u) << "no marks";

  lane.MakeGatePage();
  ShellResult off = lane.RunClient("gated", "FREERIDE_GATE_MARKS=0");
  ASSERT_EQ(off.status, 0) << off.out << off.err;
  EXPECT_EQ(off.out, none.out) << "FREERIDE_GATE_MARKS=0 turns them off";
  EXPECT_EQ(page.layout()->word.load(), 0u);

  ShellResult r = lane.RunClient("gated");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "") << "nothing to warn of";
  EXPECT_EQ(r.out, "end_gated before any begin -1\nbegin_gated 0\nend_gated 0\nbegin_gated 0\nend_gated 0\n"
                   "begin_gated 0\n");
  EXPECT_EQ(page.layout()->word.load(), GateClosedValue(3))
      << "the stream opened bubble 3 last, and the stage's close closed it";
  ASSERT_EQ(segment.layout()->bubble_seq.load(), 6u) << "three bubbles begun and ended";
  int64_t stage_pid = 0;
  for (uint32_t i = 0; i < 3; ++i) {
    BubbleMark mark;
    ASSERT_TRUE(segment.ClosedBubbleMark(2 * i + 1, &mark)) << "bubble " << i;
    EXPECT_EQ(mark.slot, 7 + i);
    EXPECT_EQ(mark.free_memory_bytes, 1007u + i);
    EXPECT_LE(mark.begin_ns, mark.end_ns);
    if (i == 0) stage_pid = mark.stage_pid;
    EXPECT_EQ(mark.stage_pid, stage_pid) << "marked as the stage's own";
  }
  EXPECT_GT(stage_pid, 0);
  EXPECT_NE(stage_pid, static_cast<int64_t>(getpid()));
}

// A gate write for a stream with no work left is stored from the host (no
// stream memory operation), but only when the stage's stream writes since
// its last host store went on that same stream, so no earlier value lands
// after a later one; a busy stream, one being captured (never queried: that
// would end the capture), a stage in stream mode, and one that wrote on two
// streams get stream writes.  The query runs in the relaxed capture mode,
// and the thread's mode is restored.  The marks are the same either way.
TEST(StageGate, AGateWriteForAStreamWithNoWorkLeftIsStoredFromTheHost) {
  StageLane lane(5);
  lane.MakeGatePage();
  ShellResult r = lane.RunClient("host-writes");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out,
            "begin a done 0 stream 0 host 1\n"
            "end a done 0 stream 0 host 2\n"
            "begin a busy 0 stream 1 host 2\n"
            "end a done, its write landed 0 stream 1 host 3\n"
            "begin a busy, memset 0 stream 2 host 3\n"
            "end a done, memset 0 stream 2 host 4\n"
            "begin a busy, mode 7 0 stream 3 host 4\n"
            "end a done, mode 7 0 stream 3 host 5\n"
            "begin a done, stream writes 0 stream 4 host 5\n"
            "end a done, stream writes 0 stream 5 host 5\n"
            "begin a capturing 0 stream 6 host 5\n"
            "end a done, after a capture 0 stream 7 host 5\n"
            "driver stream writes 5 memsets 2 capture mode 0 capturing queries 0\n")
      << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(lane.page.layout()->word.load(), GateClosedValue(6)) << "the last bubble closed";
  ASSERT_EQ(lane.segment.layout()->bubble_seq.load(), 12u) << "six bubbles begun and ended";
  for (uint32_t i = 0; i < 6; ++i) {
    BubbleMark mark;
    ASSERT_TRUE(lane.segment.ClosedBubbleMark(2 * i + 1, &mark)) << "bubble " << i;
    EXPECT_EQ(mark.slot, 1 + i);
  }

  // Writes on two streams: the stage asks only the stream it is given.
  StageLane two_lane(8);
  two_lane.MakeGatePage();
  ShellResult two = two_lane.RunClient("host-writes", "CLIENT_TWO_STREAMS=1");
  ASSERT_EQ(two.status, 0) << two.out << two.err;
  EXPECT_EQ(two.out,
            "begin a busy 0 stream 1 host 0\n"
            "end b done, a's write pending 0 stream 2 host 0\n"
            "begin a done, two streams 0 stream 3 host 0\n"
            "end a done, two streams 0 stream 4 host 0\n"
            "driver stream writes 4 memsets 0 capture mode 0 capturing queries 0\n")
      << two.err;

  // Stream writes from the environment: every write goes on its stream.
  StageLane stream_lane(6);
  stream_lane.MakeGatePage();
  ShellResult stream = stream_lane.RunClient("host-writes", "FREERIDE_GATE_WRITES=stream");
  ASSERT_EQ(stream.status, 0) << stream.out << stream.err;
  // (until the client sets a mode itself)
  EXPECT_EQ(stream.out.rfind("begin a done 0 stream 1 host 0\nend a done 0 stream 2 host 0\n", 0), 0u) << stream.out;

  // A mode that is not one is warned of, and auto used.
  StageLane bad_lane(7);
  bad_lane.MakeGatePage();
  ShellResult bad = bad_lane.RunClient("host-writes", "FREERIDE_GATE_WRITES=fast");
  ASSERT_EQ(bad.status, 0) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("FREERIDE_GATE_WRITES=fast is not auto, stream or memset; using auto"),
            std::string::npos)
      << bad.err;
  EXPECT_NE(bad.out.find("begin a done 0 stream 0 host 1\n"), std::string::npos) << bad.out;
}

// A poll interval that is not one is said so, and the default used: the
// marks still reach the lane.
TEST(StageGate, AnInvalidGateMarkPollIntervalIsWarnedOfAndTheDefaultUsed) {
  StageLane lane(4);
  lane.MakeGatePage();
  ShellResult r = lane.RunClient("gated", "FREERIDE_GATE_MARK_POLL_US=0.5ms");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("FREERIDE_GATE_MARK_POLL_US=0.5ms is not a whole number of microseconds from 1 to 10000; using 20"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(lane.segment.layout()->bubble_seq.load(), 6u) << "three bubbles marked all the same";
}

// A gated bubble whose close cannot be enqueued (a broken context) is ended
// from the host and its gate closed by the stage's thread, not left open for
// side work; a child forked from the stage closes its copy of the handle
// without touching its parent's thread or lane, whose marks go on.
TEST(StageGate, AGatedBubbleWhoseCloseFailsIsEndedAndItsGateClosedAndAForkedChildLeavesTheLaneAlone) {
  StageLane lane(1);
  lane.MakeGatePage();
  LaneSegment& segment = lane.segment;
  ShellResult r = lane.RunClient("failing-close");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "begin_gated 0\nend_gated -1\ngate closed 1\nchild 0\nbegin_gated 0\nend_gated 0\n") << r.err;
  EXPECT_EQ(lane.page.layout()->word.load(), GateClosedValue(2)) << "no gate left open";
  ASSERT_EQ(segment.layout()->bubble_seq.load(), 4u) << "two bubbles begun and ended, none by the child";
  BubbleMark first, second;
  ASSERT_TRUE(segment.ClosedBubbleMark(1, &first));
  ASSERT_TRUE(segment.ClosedBubbleMark(3, &second));
  EXPECT_EQ(first.slot, 5u);
  EXPECT_EQ(second.slot, 8u) << "the child's bubble (slot 6) was never marked";
  EXPECT_EQ(first.stage_pid, second.stage_pid) << "the child did not detach the parent's stage";
  EXPECT_GT(second.stage_pid, 0);
}

}  // namespace
}  // namespace freeride::gate
