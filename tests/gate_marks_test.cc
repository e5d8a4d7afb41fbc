// The gate marks' reader (src/channel/gate_marks.h): which begin and end
// marks each value of the gate word implies, whatever the watcher polling it
// saw or missed.
#include "channel/gate_marks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "channel/gate_mark_watcher.h"

#include "gate/gate_page.h"

namespace freeride {
namespace {

class Recorded {
 public:
  Recorded() {
    for (uint32_t b = 1; b <= 40; ++b) Put(b, 100 + b);
  }
  void Put(uint32_t bubble, uint32_t slot) {
    GateMarkRecord& r = records_[bubble % kGateMarkRecords];
    r.slot = slot;
    r.predicted_ns = 0;
    r.free_memory_bytes = 1000 + bubble;
    r.bubble.store(bubble);
  }
  const GateMarkRecord* data() const { return records_; }

 private:
  GateMarkRecord records_[kGateMarkRecords];
};

// "b3/105" for a begin of bubble 3 in slot 105 seen open, "b3/105?" when its
// open was missed; "e3" for an end.
std::string Show(const std::vector<GateMark>& marks) {
  std::string out;
  for (const GateMark& m : marks) {
    if (!out.empty()) out += " ";
    if (m.kind == GateMarkKind::kBegin)
      out += "b" + std::to_string(m.bubble) + "/" + std::to_string(m.slot) + (m.seen_open ? "" : "?");
    else
      out += "e" + std::to_string(m.bubble);
  }
  return out;
}

struct Watch {
  explicit Watch(uint32_t last_opened = 0) : reader(last_opened) {}
  std::string See(uint32_t word, uint32_t enqueued) {
    std::vector<GateMark> marks;
    reader.Observe(word, enqueued, records.data(), [&](const GateMark& m) { marks.push_back(m); });
    return Show(marks);
  }
  GateMarkReader reader;
  Recorded records;
};

TEST(GateMarks, EachOpenAndCloseSeenIsABeginAndAnEndWithTheRecordedSlot) {
  Watch w;
  EXPECT_EQ(w.See(GateClosedValue(0), 0), "") << "a new page, nothing enqueued";
  EXPECT_EQ(w.See(GateOpenValue(1), 1), "b1/101");
  EXPECT_EQ(w.See(GateOpenValue(1), 1), "") << "still open";
  EXPECT_EQ(w.See(GateClosedValue(1), 1), "e1");
  EXPECT_EQ(w.See(GateClosedValue(1), 2), "") << "seen already; bubble 2 not reached yet";
  EXPECT_EQ(w.See(GateOpenValue(2), 2), "b2/102");
  EXPECT_EQ(w.reader.open(), 2u);
  EXPECT_EQ(w.See(GateOpenValue(3), 3), "e2 b3/103") << "the next bubble's open ends the last";
  EXPECT_EQ(w.reader.skipped(), 0u);
}

TEST(GateMarks, ABubbleSeenOnlyClosedOrNotAtAllIsMarkedInItsPlaceWithLengthZero) {
  Watch w;
  EXPECT_EQ(w.See(GateClosedValue(1), 1), "b1/101? e1") << "opened and closed between two reads";
  EXPECT_EQ(w.See(GateOpenValue(5), 6), "b2/102? e2 b3/103? e3 b4/104? e4 b5/105");
  EXPECT_EQ(w.See(GateClosedValue(6), 6), "e5 b6/106? e6");
}

TEST(GateMarks, AWordFromAnotherStageOrAlreadyMarkedImpliesNothing) {
  Watch w(/*last_opened=*/10);  // this stage opened 10 bubbles before its first gated mark
  EXPECT_EQ(w.See(GateClosedValue(57), 10), "") << "an earlier stage's word, past what was enqueued";
  EXPECT_EQ(w.See(GateClosedValue(10), 11), "") << "before this reader";
  EXPECT_EQ(w.See(GateOpenValue(11), 11), "b11/111");
  EXPECT_EQ(w.See(GateClosedValue(11), 11), "e11");
  EXPECT_EQ(w.See(GateOpenValue(11), 12), "") << "a bubble already ended cannot open again";
}

TEST(GateMarks, ABubbleWhoseRecordWasReusedIsSkippedAndCounted) {
  Watch w;
  w.records.Put(1 + kGateMarkRecords, 7);  // the training thread a whole ring ahead
  EXPECT_EQ(w.See(GateOpenValue(2), 2), "b2/102");
  EXPECT_EQ(w.reader.skipped(), 1u);
}

TEST(GateMarks, AForcedEndEndsTheOpenBubbleOnlyOnce) {
  Watch w;
  std::vector<GateMark> marks;
  auto emit = [&](const GateMark& m) { marks.push_back(m); };
  EXPECT_EQ(w.See(GateOpenValue(1), 1), "b1/101");
  w.reader.ForceEnd(1, emit);
  EXPECT_EQ(Show(marks), "e1");
  w.reader.ForceEnd(1, emit);
  EXPECT_EQ(Show(marks), "e1") << "once";
  EXPECT_EQ(w.See(GateOpenValue(1), 1), "") << "the word still shows it open: the close never ran";
  EXPECT_TRUE(w.reader.Ended(1)) << "so its watcher closes the word";
  EXPECT_EQ(w.See(GateOpenValue(2), 2), "b2/102");
}

TEST(GateMarks, AnEndForcedBeforeTheOpenWasSeenEndsTheBubbleAtItsBegin) {
  Watch w;
  std::vector<GateMark> marks;
  EXPECT_EQ(w.See(GateClosedValue(0), 1), "");
  w.reader.ForceEnd(1, [&](const GateMark& m) { marks.push_back(m); });  // the CPU runs ahead
  EXPECT_TRUE(marks.empty()) << "not begun yet";
  EXPECT_EQ(w.See(GateOpenValue(1), 1), "b1/101 e1") << "no close will come from the stream";
  EXPECT_TRUE(w.reader.Ended(1)) << "its watcher closes the word";
  EXPECT_EQ(w.See(GateOpenValue(2), 2), "b2/102") << "the next bubble as usual";
  EXPECT_FALSE(w.reader.Ended(2));
}

TEST(GateMarks, ANewPagesWordZeroImpliesNothingEvenAcrossTheWrap) {
  const uint32_t last = GateMarkReader::kBubbleMask;
  Watch w(last - 1);
  w.records.Put(last, 9);
  EXPECT_EQ(w.See(GateOpenValue(last), 1), "b2147483647/9");
  EXPECT_EQ(w.See(GateClosedValue(0), 1), "") << "a restarted daemon's new page";
  EXPECT_EQ(w.reader.open(), last);
  EXPECT_EQ(w.See(GateOpenValue(1), 1), "e2147483647 b1/101");
}

TEST(GateMarks, BubbleNumbersWrapPastZero) {
  const uint32_t last = GateMarkReader::kBubbleMask;  // 2^31 - 1
  EXPECT_EQ(GateMarkReader::Next(last), 1u) << "0 means none, and the stage skips it too";
  Watch w(last - 1);
  w.records.Put(last, 9);
  EXPECT_EQ(w.See(GateOpenValue(last), last), "b2147483647/9");
  EXPECT_EQ(w.See(GateOpenValue(1), 1), "e2147483647 b1/101");
}

// A watcher whose marks the test reads, on a word the test writes as the GPU.
// Asleep it waits for a wake-up only (with `sleep_limit` -1), so a lost one
// hangs it and fails the test's bounded waits.
struct Watched {
  explicit Watched(Nanos sleep_limit = -1) : sleep_limit(sleep_limit) {}
  const Nanos sleep_limit;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<GateMark> marks;
  std::atomic<uint32_t> word{GateClosedValue(0)};
  GateMarkWatcher watcher{Env::Default(), 10 * kMicrosecond, 0,
                          [this](const GateMark& m) {
                            std::lock_guard<std::mutex> lock(mutex);
                            marks.push_back(m);
                            changed.notify_all();
                          },
                          sleep_limit};
  // Waits for the marks to read `expected`; the bound only ends a broken run.
  std::string Await(const std::string& expected) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, std::chrono::seconds(60), [&] { return Show(marks) == expected; });
    return Show(marks);
  }
  // Waits for the word to read `expected`, as for the marks.
  uint32_t AwaitWord(uint32_t expected) {
    for (int i = 0; i < 60000 && word.load() != expected; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return word.load();
  }
};

// The watcher's thread against a word that, like a GPU's, shows each write
// some time after the stage enqueued it: it keeps reading while the word is
// behind, sleeps once it shows the last write, and is woken by the next.
TEST(GateMarkWatcher, ReadsTheWordWhileItLagsTheWritesAndMarksEachChangeInOrder) {
  Watched w;
  w.watcher.Record(1, 4, 0, 77);
  w.watcher.Wrote(&w.word, GateOpenValue(1), 1);      // enqueued; the "GPU" is not there yet
  w.watcher.Wrote(&w.word, GateClosedValue(1), 1);
  w.word.store(GateOpenValue(1));                   // the GPU reaches the open
  EXPECT_EQ(w.Await("b1/4"), "b1/4");
  w.word.store(GateClosedValue(1));                 // ... and the close
  EXPECT_EQ(w.Await("b1/4 e1"), "b1/4 e1");
  // Caught up: the thread sleeps until the next write is enqueued.
  w.watcher.Record(2, 5, 0, 78);
  w.word.store(GateOpenValue(2));                   // a write that lands at once, like the fake driver's
  w.watcher.Wrote(&w.word, GateOpenValue(2), 2);
  EXPECT_EQ(w.Await("b1/4 e1 b2/5"), "b1/4 e1 b2/5");
  w.watcher.ForceEnd(2);                            // its close could not be enqueued
  EXPECT_EQ(w.Await("b1/4 e1 b2/5 e2"), "b1/4 e1 b2/5 e2");
  w.watcher.Stop();
  EXPECT_EQ(Show(w.marks), "b1/4 e1 b2/5 e2");
  EXPECT_EQ(w.marks[0].free_memory_bytes, 77u);
  EXPECT_EQ(w.watcher.skipped(), 0u);
}

// The thread sleeps once it caught up, and the next write wakes it.
TEST(GateMarkWatcher, ASleepingThreadIsWokenByTheNextWrite) {
  Watched w;
  w.watcher.Record(1, 4, 0, 0);
  w.watcher.Wrote(&w.word, GateOpenValue(1), 1);
  w.word.store(GateOpenValue(1));
  ASSERT_EQ(w.Await("b1/4"), "b1/4");
  for (int i = 0; i < 60000 && !w.watcher.asleep(); ++i)  // a hang guard: it sleeps in microseconds
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(w.watcher.asleep());
  w.word.store(GateClosedValue(1));
  w.watcher.Wrote(&w.word, GateClosedValue(1), 1);
  EXPECT_EQ(w.Await("b1/4 e1"), "b1/4 e1");
  EXPECT_EQ(w.watcher.wakeups(), 1u);
  w.watcher.Stop();
}

// A bubble whose open lands after its close (the two on unordered streams),
// or whose close could not be enqueued, would leave the gate open with no
// bubble marked: the watcher closes the word itself.
TEST(GateMarkWatcher, ClosesAGateWordLeftOpenByABubbleAlreadyEnded) {
  Watched w(/*sleep_limit=*/kMillisecond);  // the late open comes with no write to wake it
  w.watcher.Record(1, 4, 0, 0);
  w.watcher.Wrote(&w.word, GateOpenValue(1), 1);
  w.watcher.Wrote(&w.word, GateClosedValue(1), 1);
  w.word.store(GateClosedValue(1));  // the close landed first
  EXPECT_EQ(w.Await("b1/4? e1"), "b1/4? e1");
  w.word.store(GateOpenValue(1));    // then the open
  EXPECT_EQ(w.AwaitWord(GateClosedValue(1)), GateClosedValue(1));
  w.watcher.Record(2, 5, 0, 0);
  w.watcher.Wrote(&w.word, GateOpenValue(2), 2);
  w.word.store(GateOpenValue(2));
  EXPECT_EQ(w.Await("b1/4? e1 b2/5"), "b1/4? e1 b2/5");
  w.watcher.ForceEnd(2);               // its close could not be enqueued
  EXPECT_EQ(w.Await("b1/4? e1 b2/5 e2"), "b1/4? e1 b2/5 e2");
  EXPECT_EQ(w.AwaitWord(GateClosedValue(2)), GateClosedValue(2)) << "the gate closed where the stream could not";
  w.watcher.Stop();
}

}  // namespace
}  // namespace freeride
