// The fake Env's virtual time: what the lane tests on it rely on.
#include <gtest/gtest.h>

#include <thread>

#include "fake_env.h"

namespace freeride {
namespace {

// Once every counted thread sleeps, time jumps to the earliest deadline, so
// each wait ends exactly at its own deadline, in order.
TEST(FakeEnv, VirtualTimeJumpsToEachDeadlineInTurn) {
  FakeEnv env(kSecond);
  env.RunVirtualTime(2);
  std::atomic<uint32_t> never_a{0}, never_b{0};
  Nanos woke_a = 0, woke_b = 0;
  std::thread a([&] {
    EXPECT_FALSE(env.Wait(&never_a, 0, 5 * kMillisecond));
    woke_a = env.Now();
    env.Leave();
  });
  std::thread b([&] {
    EXPECT_FALSE(env.Wait(&never_b, 0, 8 * kMillisecond));
    woke_b = env.Now();
    env.Leave();
  });
  a.join();
  b.join();
  EXPECT_EQ(woke_a, kSecond + 5 * kMillisecond);
  EXPECT_EQ(woke_b, kSecond + 8 * kMillisecond);
}

// Time does not move while a counted thread is still running.
TEST(FakeEnv, VirtualTimeWaitsForEveryCountedThread) {
  FakeEnv env(kSecond);
  env.RunVirtualTime(2);
  std::atomic<uint32_t> never{0};
  std::thread sleeper([&] {
    env.Wait(&never, 0, kMillisecond);
    env.Leave();
  });
  ASSERT_TRUE(env.AwaitSleepers(&never, 1));
  EXPECT_EQ(env.Now(), kSecond) << "time moved with one counted thread awake";
  env.Leave();  // this thread stops counting: the sleeper is the last
  sleeper.join();
  EXPECT_EQ(env.Now(), kSecond + kMillisecond);
}

// Counted threads that all sleep with no deadline would hang the test: it
// aborts and says why.
TEST(FakeEnvDeathTest, AllCountedThreadsSleepingWithNoDeadlineAborts) {
  EXPECT_DEATH(
      {
        FakeEnv env;
        env.RunVirtualTime(1);
        std::atomic<uint32_t> never{0};
        env.Wait(&never, 0, -1);
      },
      "sleep with no deadline");
}

}  // namespace
}  // namespace freeride
