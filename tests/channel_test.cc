#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <thread>
#include <vector>

#include "base/paths.h"
#include "channel/lane_segment.h"
#include "channel/stage_handle.h"
#include "channel/task_segment.h"
#include "freeride/freeride.h"
#include "sdk/task_channel.h"
#include "fake_env.h"
#include "test_util.h"

namespace freeride {
namespace {

// A lane segment as the daemon creates it, and the stage's writable view.
class StageAndDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(daemon.CreateOrOpen(path, 0, &error)) << error;
    ASSERT_TRUE(stage.Open(path, true, &error)) << error;
    daemon.set_env(&env);
    stage.set_env(&env);
  }
  TempDir dir;
  std::string path = dir.path() + "/lane0";
  FakeEnv env;
  LaneSegment daemon, stage;
};

TEST_F(StageAndDaemon, StageMarksAreReadConsistently) {
  stage.WriteBegin(7, 1000, 500, 4096);
  BubbleMark mark = daemon.Read();
  EXPECT_TRUE(mark.open());
  EXPECT_EQ(mark.slot, 7u);
  EXPECT_EQ(mark.begin_ns, 1000);
  EXPECT_EQ(mark.hint_ns, 500);
  EXPECT_EQ(mark.free_memory_bytes, 4096u);
  stage.WriteEnd(1600);
  mark = daemon.Read();
  EXPECT_FALSE(mark.open());
  EXPECT_EQ(mark.end_ns, 1600);
  // A second begin without an end closes the first bubble implicitly.
  stage.WriteBegin(1, 2000, 0, 1);
  stage.WriteBegin(2, 3000, 0, 1);
  mark = daemon.Read();
  EXPECT_TRUE(mark.open());
  EXPECT_EQ(mark.slot, 2u);
  EXPECT_EQ(mark.end_ns, 3000);
}

// A lane that waited out a long overrun, or slept through begin marks, reads
// each bubble's whole mark although the stage has marked several bubbles
// since; only bubbles older than the ring are forgotten, and an open bubble
// has no end yet.
TEST_F(StageAndDaemon, MarksOfEarlierBubblesStayReadable) {
  std::vector<uint32_t> seqs;
  for (int i = 0; i < 10; ++i) {
    stage.WriteBegin(i % 3, 1000 * (i + 1), 50 + i, 7000 + i);
    seqs.push_back(daemon.Read().seq);
    stage.WriteEnd(1000 * (i + 1) + 300 + i);
  }
  BubbleMark mark;
  ASSERT_TRUE(daemon.ClosedBubbleMark(seqs[2], &mark));
  EXPECT_EQ(mark.seq, seqs[2]);
  EXPECT_EQ(mark.slot, 2u);
  EXPECT_EQ(mark.begin_ns, 3000);
  EXPECT_EQ(mark.end_ns, 3302);
  EXPECT_EQ(mark.hint_ns, 52);
  EXPECT_EQ(mark.free_memory_bytes, 7002u);
  ASSERT_TRUE(daemon.ClosedBubbleMark(seqs[9], &mark));
  EXPECT_EQ(mark.end_ns, 10309);
  EXPECT_EQ(mark.slot, 0u);
  stage.WriteBegin(0, 20000, 0, 1);
  EXPECT_FALSE(daemon.ClosedBubbleMark(daemon.Read().seq, &mark)) << "still open";
  for (uint32_t i = 0; i < kClosedBubbleRing; ++i) {
    stage.WriteEnd(30000 + i);
    stage.WriteBegin(0, 30001 + i, 0, 1);
  }
  EXPECT_FALSE(daemon.ClosedBubbleMark(seqs[0], &mark)) << "overwritten by a later bubble";
}

// The segments are named from the socket's one spelling: a trainer told
// `run/fr.sock` in the daemon's directory, `run/./fr.sock`, `run//fr.sock`,
// `x/../run/fr.sock` or a symlinked directory reaches the same socket, and
// must find the same lane; a daemon at `fr.sock` elsewhere must not.
TEST(SegmentPaths, EverySpellingOfOneSocketNamesTheSameSegmentsAndOtherSocketsOthers) {
  TempDir dir;
  ASSERT_EQ(mkdir((dir.path() + "/run").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir.path() + "/x").c_str(), 0700), 0);
  ASSERT_EQ(symlink((dir.path() + "/run").c_str(), (dir.path() + "/link").c_str()), 0);
  const std::string absolute = dir.path() + "/run/fr.sock";
  const std::string lane = LaneSegmentPath(absolute, 0);
  char old_cwd[4096];
  ASSERT_NE(getcwd(old_cwd, sizeof old_cwd), nullptr);
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  for (const std::string& spelling : {std::string("run/fr.sock"), std::string("./run/fr.sock"),
                                      std::string("run//fr.sock"), std::string("x/../run/fr.sock"),
                                      std::string("link/fr.sock"), dir.path() + "/link/fr.sock"}) {
    EXPECT_EQ(LaneSegmentPath(spelling, 0), lane) << spelling;
    EXPECT_EQ(TaskSegmentPath(spelling, 7), TaskSegmentPath(absolute, 7)) << spelling;
  }
  EXPECT_NE(LaneSegmentPath("fr.sock", 0), lane) << "another directory's socket";
  EXPECT_NE(LaneSegmentPath(absolute, 1), lane);
  ASSERT_EQ(chdir(old_cwd), 0);
}

TEST(LaneSegment, ABubbleGoesSilentWithoutHeartbeatsOrWithGarbageOnes) {
  const Nanos now = 100 * kSecond, timeout = kSecond;
  EXPECT_FALSE(BubbleSilent(now - 2 * kSecond, now - kMillisecond, now, timeout)) << "fresh heartbeat";
  EXPECT_FALSE(BubbleSilent(now - kMillisecond, 0, now, timeout)) << "just begun, no heartbeat yet";
  EXPECT_TRUE(BubbleSilent(now - 3 * kSecond, now - 2 * kSecond, now, timeout)) << "stale";
  EXPECT_TRUE(BubbleSilent(now - kSecond, now + 3600 * kSecond, now, timeout)) << "from the future";
  EXPECT_TRUE(BubbleSilent(-5, -1, now, timeout)) << "before boot";
  EXPECT_FALSE(BubbleSilent(now - 2 * kSecond, now + 100 * kMillisecond, now, timeout))
      << "clocks a little apart are not garbage";
}

TEST(LaneSegment, SecondLooksArePublishedInOneWordPerSlot) {
  auto layout = std::make_unique<LaneSegmentLayout>();
  Nanos after = 0, length = 0;
  EXPECT_FALSE(PublishedSecondLook(*layout, 3, &after, &length)) << "none published";
  layout->second_look_us[3].store(PackSecondLook(150 * kMicrosecond, 41 * kMillisecond));
  ASSERT_TRUE(PublishedSecondLook(*layout, 3, &after, &length));
  EXPECT_EQ(after, 150 * kMicrosecond);
  EXPECT_EQ(length, 41 * kMillisecond);
  // Slots past the published ones share the last, as forecasts do.
  layout->second_look_us[kPublishedSlots - 1].store(PackSecondLook(1, 2 * kMillisecond));
  EXPECT_TRUE(PublishedSecondLook(*layout, 5000, &after, &length));
  EXPECT_EQ(length, 2 * kMillisecond);
  // A point at or past the forecast end is no second look (a corrupt word).
  layout->second_look_us[4].store(PackSecondLook(5 * kMillisecond, 5 * kMillisecond));
  EXPECT_FALSE(PublishedSecondLook(*layout, 4, &after, &length));
}

TEST(LaneSegment, RestartedDaemonKeepsWhatTheStageWrote) {
  TempDir dir;
  std::string path = dir.path() + "/lane0";
  std::string error;
  LaneSegment stage;
  {
    LaneSegment first;
    ASSERT_TRUE(first.CreateOrOpen(path, 0, &error));
    ASSERT_TRUE(stage.Open(path, true, &error));
    stage.WriteBegin(3, 10, 0, 99);
  }
  LaneSegment second;
  ASSERT_TRUE(second.CreateOrOpen(path, 0, &error));
  EXPECT_EQ(second.Read().slot, 3u);
  EXPECT_TRUE(second.Read().open());
  EXPECT_EQ(second.layout()->daemon_generation.load(), 2u);
}

TEST_F(StageAndDaemon, WaiterWakesOnBeginWithoutPolling) {
  uint32_t seen = daemon.layout()->bubble_seq.load();
  std::atomic<uint32_t> woke_at_seq{0};
  std::thread waiter([&] { woke_at_seq = daemon.WaitForChange(seen, 10 * kSecond); });
  ASSERT_TRUE(env.AwaitSleepers(&daemon.layout()->bubble_seq, 1));
  stage.WriteBegin(0, env.Now(), 0, 0);
  waiter.join();  // fake time never moves here: only the mark's wake-up ends the wait
  EXPECT_EQ(woke_at_seq.load(), seen + 1);
}

// The same through the kernel: two mappings of one file and the real futex.
// That the begin mark leaves an end waiter asleep is shown exactly on the
// fake above.  Here the waiter waits, as the gate's closer does, for the end
// of a bubble already open: a begin written between its registration and
// its futex call would end its wait (the word moved), which a loaded machine
// makes likely, so the begin comes first.
TEST(LaneSegment, TheRealFutexWakesAnEndWaiterAcrossMappings) {
  TempDir dir;
  const std::string path = dir.path() + "/lane0";
  std::string error;
  LaneSegment daemon, stage;
  ASSERT_TRUE(daemon.CreateOrOpen(path, 0, &error)) << error;
  ASSERT_TRUE(stage.Open(path, true, &error)) << error;
  stage.WriteBegin(0, MonotonicNow(), 0, 0);
  const uint32_t seen = daemon.layout()->bubble_seq.load();  // the open bubble's
  std::atomic<uint32_t> woke_at_seq{0};
  const Nanos started = MonotonicNow();
  // The wait's timeout is far beyond any stall of a loaded machine, so ending
  // well before it means the end mark woke it.
  std::thread waiter([&] { woke_at_seq = daemon.WaitForChange(seen, 240 * kSecond, kWakeOnEnd); });
  while (daemon.layout()->end_waiters.load() == 0) std::this_thread::yield();
  stage.WriteEnd(MonotonicNow());
  waiter.join();
  EXPECT_EQ(woke_at_seq.load(), seen + 1) << "returned before the end mark";
  EXPECT_LT(MonotonicNow() - started, 120 * kSecond) << "woken by the end mark, not the timeout";
}

TEST_F(StageAndDaemon, AWaitEndsAtItsTimeoutWhenNoMarkComes) {
  uint32_t seen = daemon.layout()->bubble_seq.load();
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    daemon.WaitForChange(seen, 10 * kSecond);
    woke = true;
  });
  ASSERT_TRUE(env.AwaitSleepers(&daemon.layout()->bubble_seq, 1));
  env.Advance(9 * kSecond);
  EXPECT_EQ(env.Sleepers(&daemon.layout()->bubble_seq), 1) << "woke before its timeout";
  env.Advance(1 * kSecond);
  waiter.join();
  EXPECT_TRUE(woke.load());
  EXPECT_EQ(daemon.layout()->begin_waiters.load(), 0u) << "the waiter uncounted itself";
}

// A lane whose armed task has it to itself waits for end marks only: the
// begin mark wakes the task, not the lane, and the end mark wakes the lane.
TEST_F(StageAndDaemon, AnEndWaiterSleepsThroughTheBeginMark) {
  std::atomic<uint32_t>* word = &daemon.layout()->bubble_seq;
  uint32_t seen = word->load();
  std::atomic<uint32_t> woke_at_seq{0};
  std::thread waiter([&] { woke_at_seq = daemon.WaitForChange(seen, 10 * kSecond, kWakeOnEnd); });
  ASSERT_TRUE(env.AwaitSleepers(word, 1));
  EXPECT_EQ(daemon.layout()->begin_waiters.load(), 0u) << "the begin mark need not call the kernel";
  stage.WriteBegin(0, env.Now(), 0, 0);
  EXPECT_EQ(env.wake_calls(), 0) << "the begin mark called for a wake-up nobody needs";
  EXPECT_EQ(env.Sleepers(word), 1) << "the begin mark woke a waiter for ends";
  stage.WriteEnd(env.Now());
  waiter.join();
  EXPECT_EQ(env.wake_calls(), 1);
  EXPECT_EQ(woke_at_seq.load(), seen + 2);
}

// The end mark's time is read only once a task can see that the end has
// begun, so a task's clock read before a check that finds its bubble open is
// earlier than the bubble's end: its step starts inside the bubble.  (A time
// read before the bubble is seen closing left a window where a step timed
// after the end passed the check: a clean run's harness caught one 635 ns
// after its bubble's end.)
TEST_F(StageAndDaemon, AnEndMarkTakesItsTimeOnlyOnceTasksSeeTheBubbleClosing) {
  std::string error;
  LaneSegment task;
  ASSERT_TRUE(task.Open(path, /*writable=*/false, &error)) << error;
  stage.WriteBegin(3, env.Now(), 0, 0);
  const uint32_t seq = task.layout()->bubble_seq.load();
  ASSERT_TRUE(task.StillOpen(seq));
  env.Advance(5 * kMillisecond);
  int clock_reads = 0;
  bool open_at_clock_read = true;
  env.OnNow([&] {
    ++clock_reads;
    open_at_clock_read = task.StillOpen(seq);
  });
  stage.WriteEndNow();
  EXPECT_EQ(clock_reads, 1);
  EXPECT_FALSE(open_at_clock_read) << "a task still saw the bubble open when its end was timed";
  EXPECT_FALSE(task.StillOpen(seq));
  // A closed lane's end is a no-op: no clock read, no second close.
  stage.WriteEndNow();
  EXPECT_EQ(clock_reads, 1);
  env.OnNow(nullptr);
  EXPECT_EQ(task.layout()->bubble_seq.load(), seq + 1);
  BubbleMark closed;
  ASSERT_TRUE(task.ClosedBubbleMark(seq, &closed));
  EXPECT_EQ(closed.end_ns, env.Now());
  // The next bubble is open, whatever the previous one's close left.
  stage.WriteBegin(3, env.Now(), 0, 0);
  EXPECT_TRUE(task.StillOpen(seq + 2));
  EXPECT_FALSE(task.StillOpen(seq));
}

// A task's check that the next step fits (TaskChannel::NextStepFits, which
// a step is timed before) says no once the stage has begun ending the
// bubble, before the end mark is published: the stage reads its end time
// after that, so a step that passed the check started inside the bubble.
TEST_F(StageAndDaemon, ATaskSeesItsGrantEndOnceTheStageBeginsEndingTheBubble) {
  std::string error;
  TaskSegment task_segment;
  task_segment.set_env(&env);
  ASSERT_TRUE(task_segment.Create(dir.path() + "/task1", 1, &error)) << error;
  TaskChannel::Endpoints endpoints;
  endpoints.task_segment = dir.path() + "/task1";
  endpoints.lane_segment = path;
  endpoints.step_hint = kMillisecond;
  std::unique_ptr<TaskChannel> channel = TaskChannel::Attach(endpoints, &env, &error);
  ASSERT_NE(channel, nullptr) << error;
  channel->Ready();
  stage.WriteBegin(0, env.Now(), 0, UINT64_MAX);
  const uint32_t seq = daemon.layout()->bubble_seq.load();
  task_segment.Grant(seq, env.Now() + 100 * kMillisecond);
  ASSERT_EQ(channel->WaitForGrant(kSecond), TaskChannel::Wake::kGranted);
  EXPECT_TRUE(channel->NextStepFits()) << "a 1 ms step in a bubble with 100 ms left";
  // The stage has announced the end (WriteEndNow's first store) but not yet
  // read its clock nor published the mark.
  stage.layout()->closing_seq.store(seq);
  EXPECT_EQ(daemon.layout()->bubble_seq.load(), seq) << "the end mark is not published yet";
  EXPECT_FALSE(channel->NextStepFits()) << "a step timed now would start after the bubble's end time";
  EXPECT_EQ(channel->StepBudget(), 0);
}

// A begin mark while a bubble is still open (its end never came) ends that
// bubble first, the same way an end mark does: its end time is read only
// once tasks can see it closing.
TEST(StageApi, ABeginThatClosesAnUnclosedBubbleTimesItsEndOnceTasksSeeItClosing) {
  TempDir dir;
  const std::string socket = dir.path() + "/d.sock";
  std::string error;
  LaneSegment daemon, task;
  ASSERT_TRUE(daemon.CreateOrOpen(LaneSegmentPath(socket, 0), 0, &error)) << error;
  ASSERT_TRUE(task.Open(LaneSegmentPath(socket, 0), /*writable=*/false, &error)) << error;
  FakeEnv env;
  freeride_stage* stage = OpenStage(0, socket.c_str(), &env);
  ASSERT_NE(stage, nullptr);
  freeride_bubble_begin(stage, 1, 0, UINT64_MAX);
  const uint32_t first = task.layout()->bubble_seq.load();
  ASSERT_TRUE(task.StillOpen(first));
  std::vector<bool> open_at_reads;
  env.Advance(kMillisecond);
  env.OnNow([&] { open_at_reads.push_back(task.StillOpen(first)); });
  freeride_bubble_begin(stage, 2, 0, UINT64_MAX);  // no end mark in between
  env.OnNow(nullptr);
  ASSERT_FALSE(open_at_reads.empty());
  // Every clock read after the first (the attachment check) is the closed
  // bubble's end time or the new one's begin: neither may see it open.
  EXPECT_EQ(open_at_reads, (std::vector<bool>{true, false, false}));
  BubbleMark closed;
  ASSERT_TRUE(task.ClosedBubbleMark(first, &closed));
  EXPECT_EQ(closed.slot, 1u);
  EXPECT_TRUE(task.StillOpen(first + 2)) << "the new bubble is open";
  freeride_stage_close(stage);
}

TEST(LaneSegment, CorruptOrForeignSegmentsAreRejected) {
  TempDir dir;
  std::string path = dir.path() + "/lane0";
  std::string error;
  {
    std::ofstream out(path, std::ios::binary);
    std::string junk(sizeof(LaneSegmentLayout), '\x5a');
    out << junk;
  }
  LaneSegment reader;
  EXPECT_FALSE(reader.Open(path, false, &error));
  EXPECT_NE(error.find("not a FreeRide lane segment"), std::string::npos) << error;
  std::ofstream(path, std::ios::trunc) << "short";
  EXPECT_FALSE(reader.Open(path, false, &error));
  EXPECT_FALSE(reader.Open(dir.path() + "/missing", false, &error));
}

TEST(StageApi, IsANoOpWithoutADaemonAndPicksOneUpOncePerInterval) {
  TempDir dir;
  std::string socket = dir.path() + "/d.sock";
  FakeEnv env;
  freeride_stage* stage = OpenStage(0, socket.c_str(), &env);
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(freeride_stage_attached(stage), 0);
  freeride_bubble_begin(stage, 0, 0, UINT64_MAX);
  freeride_bubble_end(stage);

  // A daemon appears.  Calls right away do not look for it: the hot path
  // tries to attach at most once per second, not once per call.
  LaneSegment daemon;
  std::string error;
  ASSERT_TRUE(daemon.CreateOrOpen(LaneSegmentPath(socket, 0), 0, &error)) << error;
  uint32_t seq = daemon.layout()->bubble_seq.load();
  for (int i = 0; i < 1000; ++i) {
    freeride_bubble_begin(stage, 1, 0, UINT64_MAX);
    freeride_bubble_end(stage);
  }
  EXPECT_EQ(freeride_stage_attached(stage), 0);
  EXPECT_EQ(daemon.layout()->bubble_seq.load(), seq) << "no mark reached the new daemon yet";

  // After the retry interval the next mark attaches and arrives.
  env.Advance(900 * kMillisecond);
  freeride_bubble_begin(stage, 1, 0, UINT64_MAX);
  EXPECT_EQ(freeride_stage_attached(stage), 0) << "attached before the interval";
  env.Advance(200 * kMillisecond);
  freeride_bubble_begin(stage, 2, 0, 42);
  EXPECT_EQ(freeride_stage_attached(stage), 1);
  BubbleMark mark = daemon.Read();
  EXPECT_TRUE(mark.open());
  EXPECT_EQ(mark.slot, 2u);
  EXPECT_EQ(mark.free_memory_bytes, 42u);
  freeride_stage_close(stage);
  unlink(LaneSegmentPath(socket, 0).c_str());

  freeride_stage_close(nullptr);
  freeride_bubble_begin(nullptr, 0, 0, 0);
  freeride_bubble_end(nullptr);
}

TEST(StageApi, AttachesToADaemonSegment) {
  TempDir dir;
  std::string socket = dir.path() + "/d.sock";
  LaneSegment daemon;
  std::string error;
  ASSERT_TRUE(daemon.CreateOrOpen(LaneSegmentPath(socket, 1), 1, &error)) << error;
  freeride_stage* stage = freeride_stage_open(1, socket.c_str());
  ASSERT_EQ(freeride_stage_attached(stage), 1);
  EXPECT_EQ(daemon.layout()->stage_pid.load(), getpid());
  freeride_bubble_begin(stage, 5, 1234, 777);
  EXPECT_TRUE(daemon.Read().open());
  EXPECT_EQ(daemon.Read().free_memory_bytes, 777u);
  freeride_stage_close(stage);
  EXPECT_FALSE(daemon.Read().open()) << "closing ends an open bubble";
  EXPECT_EQ(daemon.layout()->stage_pid.load(), 0) << "and clears its own pid";
  // A close touches the lane only if it is still its own: a stage that took
  // the lane since keeps its pid (the lane does not show "no stage") and
  // its open bubble.
  stage = freeride_stage_open(1, socket.c_str());
  ASSERT_EQ(freeride_stage_attached(stage), 1);
  daemon.layout()->stage_pid.store(424242);
  LaneSegment other_stage;
  ASSERT_TRUE(other_stage.Open(LaneSegmentPath(socket, 1), /*writable=*/true, &error)) << error;
  other_stage.WriteBeginNow(7, 0, 0);
  freeride_stage_close(stage);
  EXPECT_EQ(daemon.layout()->stage_pid.load(), 424242);
  EXPECT_TRUE(daemon.Read().open()) << "the other stage's bubble is not ended by this close";
  unlink(LaneSegmentPath(socket, 1).c_str());
}

// CI has no usable CUDA driver, and no process here has called cuInit: a
// stream mark cannot be enqueued, which the caller is told (so that it can
// mark at once), and nothing is written.
TEST(StageApi, StreamMarksThatCannotBeEnqueuedAreReportedNotWritten) {
  TempDir dir;
  std::string socket = dir.path() + "/d.sock";
  LaneSegment daemon;
  std::string error;
  ASSERT_TRUE(daemon.CreateOrOpen(LaneSegmentPath(socket, 2), 2, &error)) << error;
  freeride_stage* stage = freeride_stage_open(2, socket.c_str());
  ASSERT_EQ(freeride_stage_attached(stage), 1);
  EXPECT_EQ(freeride_bubble_begin_on_stream(stage, nullptr, 3, 0, 777), -1);
  EXPECT_FALSE(daemon.Read().open());
  EXPECT_EQ(freeride_bubble_end_on_stream(stage, nullptr), -1);
  EXPECT_EQ(freeride_bubble_begin_on_stream(nullptr, nullptr, 0, 0, 0), 0) << "no stage: a no-op";
  freeride_stage_close(stage);
  unlink(LaneSegmentPath(socket, 2).c_str());
}

TEST(TaskSegment, GrantAndAcknowledgeRoundTrip) {
  TempDir dir;
  std::string path = dir.path() + "/task";
  TaskSegment daemon, task;
  std::string error;
  ASSERT_TRUE(daemon.Create(path, 9, &error));
  ASSERT_TRUE(task.Open(path, &error));
  uint32_t seen_grant = task.layout()->grant_seq.load();
  uint32_t seen_ack = daemon.layout()->ack_seq.load();
  std::thread side([&] {
    task.WaitForGrant(seen_grant, 120 * kSecond);  // a hang guard: the grant is already there
    task.RecordStep(100, 200, 2.5, 1);
    task.set_state(TaskProcessState::kYielded);
    task.Acknowledge();
  });
  daemon.Grant(3, 5000);
  EXPECT_NE(daemon.WaitForAck(seen_ack, 120 * kSecond), seen_ack);  // a hang guard
  side.join();
  EXPECT_EQ(daemon.state(), TaskProcessState::kYielded);
  EXPECT_EQ(daemon.layout()->ring_head.load(), 1u);
  EXPECT_DOUBLE_EQ(daemon.progress(), 2.5);
  EXPECT_EQ(daemon.layout()->ring[0].end_ns, 200);
}

// A step's units are the task's own figure: a NaN (a loss returned as units)
// stuck in the progress total for good, and a negative one undid work.  The
// steps are still recorded (their time counts); their units add nothing.
TEST(TaskSegment, UnitsBelowZeroOrNotANumberAddNothingToTheProgress) {
  TempDir dir;
  TaskSegment segment;
  std::string error;
  ASSERT_TRUE(segment.Create(dir.path() + "/task", 9, &error)) << error;
  segment.RecordStep(100, 200, 2.5, 1);
  segment.RecordStep(200, 300, std::nan(""), 1);
  segment.RecordStep(300, 400, -5, 1);
  segment.AddProgress(std::numeric_limits<double>::infinity());
  segment.RecordStep(400, 500, 1, 1);
  EXPECT_DOUBLE_EQ(segment.progress(), 3.5);
  EXPECT_EQ(segment.layout()->ring_head.load(), 4u);
}

// task-profile's FREERIDE_STANDALONE_SECONDS, read alike by the C++ runner
// and Python's (tests/python/pace_test.py has the same table): a value one
// of them refused and the other took would pass one check and fail the next.
// freeride.h: every task call takes a NULL task and does nothing; a wait
// says -1 (stop), so that a loop until -1 ends (it said 0, a timeout, and
// such a loop spun).
TEST(TaskApi, ANullTaskIsNothingToWaitForAndEveryCallTakesIt) {
  freeride_task* none = nullptr;
  EXPECT_EQ(freeride_task_wait_grant(none, -1), -1);
  EXPECT_EQ(freeride_task_wait_grant(none, 0), -1);
  EXPECT_EQ(freeride_task_next_step_fits(none), 0);
  EXPECT_EQ(freeride_task_second_look(none), 0);
  freeride_task_set_unit(none, "edges");
  freeride_task_ready(none);
  freeride_task_record_step(none, 1, 2, 3);
  freeride_task_add_progress(none, 1);
  freeride_task_yield(none);
  freeride_task_yield_idle(none);
  EXPECT_EQ(freeride_task_step_estimate_ns(none), 0);
  EXPECT_STREQ(freeride_task_checkpoint_dir(none), "");
  freeride_task_finished(none, 1);
  freeride_task_detach(none);
}

TEST(StandaloneSeconds, DecimalSecondsAboveZeroAndNothingElse) {
  for (auto [text, seconds] : std::vector<std::pair<const char*, double>>{
           {"0.2", 0.2}, {"5", 5.0}, {"1e1", 10.0}, {".5", 0.5}, {"5.", 5.0}})
    EXPECT_EQ(ParseStandaloneSeconds(text), seconds) << text;
  for (const char* text : {"", " 0.2", "0.2 ", "1_0", "0x0.4p0", "-1", "+1", "0", "1e-400", "nan", "inf", "1e400",
                           "abc", "1e", ".."})
    EXPECT_FALSE(ParseStandaloneSeconds(text)) << text;
}

}  // namespace
}  // namespace freeride
