// LaunchAhead (gate/launch_ahead.h): deferred pieces run on the submitter in
// the order they were deferred, a barrier returns once those before it ran,
// a full queue holds the caller, and a piece's failure is kept for a later call.
#include "gate/launch_ahead.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace freeride::gate {
namespace {

TEST(LaunchAhead, PiecesRunInTheirOrderOnTheSubmitterAndABarrierReturnsOnceTheyHave) {
  LaunchAhead ahead(64);
  EXPECT_TRUE(ahead.Idle());
  ahead.Barrier();  // nothing queued: returns at once
  std::vector<int> ran;  // written by the submitter only, read after the barrier
  std::atomic<int> off_submitter{0};
  for (int i = 0; i < 1000; ++i)
    ahead.Defer([&, i] {
      if (!LaunchAhead::OnSubmitter()) off_submitter.fetch_add(1);
      ran.push_back(i);
      return kCudaSuccess;
    });
  ahead.Barrier();
  EXPECT_TRUE(ahead.Idle());
  ASSERT_EQ(ran.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(ran[i], i);
  EXPECT_EQ(off_submitter.load(), 0);
  EXPECT_FALSE(LaunchAhead::OnSubmitter());
  const LaunchAheadCounters c = ahead.counters();
  EXPECT_EQ(c.deferred, 1000u);
  EXPECT_EQ(c.submitted, 1000u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_LE(c.most_queued, 64u);
  EXPECT_EQ(ahead.TakeError(), kCudaSuccess);
}

TEST(LaunchAhead, AFullQueueHoldsTheCallerUntilThePieceAheadIsTaken) {
  LaunchAhead ahead(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first_started{false};
  std::vector<char> ran;
  ahead.Defer([&] {
    first_started.store(true);
    released.wait();  // the submitter is held here, as the gate would hold it
    ran.push_back('a');
    return kCudaSuccess;
  });
  while (!first_started.load()) std::this_thread::yield();
  ahead.Defer([&] {  // the queue is empty again: taken at once
    ran.push_back('b');
    return kCudaSuccess;
  });
  std::thread third([&] {
    ahead.Defer([&] {  // the queue holds 'b': this caller waits for room
      ran.push_back('c');
      return kCudaSuccess;
    });
  });
  while (ahead.counters().full_waits == 0) std::this_thread::yield();
  EXPECT_FALSE(ahead.Idle());
  release.set_value();
  third.join();
  ahead.Barrier();
  EXPECT_EQ(std::string(ran.begin(), ran.end()), "abc");
  EXPECT_EQ(ahead.counters().full_waits, 1u);
  EXPECT_EQ(ahead.counters().most_queued, 1u);
}

TEST(LaunchAhead, ABarrierWaitsForAPieceTheSubmitterIsHeldIn) {
  LaunchAhead ahead(8);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> started{false}, done{false};
  ahead.Defer([&] {
    started.store(true);
    released.wait();
    done.store(true);
    return kCudaSuccess;
  });
  while (!started.load()) std::this_thread::yield();
  std::atomic<bool> barrier_returned{false};
  std::thread waiter([&] {
    ahead.Barrier();
    barrier_returned.store(true);
  });
  while (ahead.counters().barriers_waited == 0) std::this_thread::yield();
  EXPECT_FALSE(barrier_returned.load());
  release.set_value();
  waiter.join();
  EXPECT_TRUE(done.load()) << "the barrier returned before its piece had run";
}

TEST(LaunchAhead, TheFirstFailureIsKeptForTheNextCallerAndClearedThere) {
  LaunchAhead ahead(8);
  for (CuResult r : {kCudaSuccess, CuResult{2}, CuResult{3}, kCudaSuccess}) ahead.Defer([r] { return r; });
  ahead.Barrier();
  EXPECT_EQ(ahead.TakeError(), 2);
  EXPECT_EQ(ahead.TakeError(), kCudaSuccess);
  EXPECT_EQ(ahead.counters().failed, 2u);
  EXPECT_EQ(ahead.counters().submitted, 4u);
}

TEST(LaunchAhead, ItsQueueBoundIsTakenIntoRange) {
  EXPECT_EQ(LaunchAhead(0).most_queued(), LaunchAhead::kLeastQueued);
  EXPECT_EQ(LaunchAhead(1u << 30).most_queued(), LaunchAhead::kMostQueued);
}

// Hand-offs with and without the look before sleeping (0: every hand-off
// through the condition variables; 50 us: mostly through the looks; 1 ns:
// a look that always runs out, so each side goes to sleep just as the other
// may be waking it).  Four threads each defer a run of pieces and then wait
// at a barrier, again and again: every piece runs once, each thread's in its
// order, and no barrier is left asleep (a lost wake-up would hang the test).
class LaunchAheadHandOffs : public ::testing::TestWithParam<int64_t> {};

TEST_P(LaunchAheadHandOffs, NoPieceOrBarrierIsLostWhicheverSideSleeps) {
  LaunchAhead ahead(8, std::chrono::nanoseconds(GetParam()));
  constexpr int kThreads = 4, kRounds = 300;
  std::vector<std::vector<int>> ran(kThreads);  // each written by the submitter alone
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      int next = 0;
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < round % 11; ++i)  // runs of 0 to 10, some longer than the queue
          ahead.Defer([&, t, n = next++] {
            ran[t].push_back(n);
            return kCudaSuccess;
          });
        ahead.Barrier();
        ASSERT_EQ(static_cast<int>(ran[t].size()), next) << "a barrier returned before its pieces ran";
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < static_cast<int>(ran[t].size()); ++i) ASSERT_EQ(ran[t][i], i) << "thread " << t;
  const LaunchAheadCounters c = ahead.counters();
  EXPECT_EQ(c.submitted, c.deferred);
  EXPECT_TRUE(ahead.Idle());
}

INSTANTIATE_TEST_SUITE_P(SpinFor, LaunchAheadHandOffs, ::testing::Values(0, 1, 50'000));

}  // namespace
}  // namespace freeride::gate
