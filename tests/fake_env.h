// An Env for tests: time moves only when the test says so, waits end on a
// matching wake-up or when fake time passes their deadline, and processes
// are a set the test controls.  Two mappings of one shared word have two
// addresses, so a wake-up reaches the sleepers on its own address and those
// whose word no longer holds the value they went to sleep on, as a futex
// keyed by the page would.  So waits, timeouts and intervals are tested
// without sleeping, and "did not wake" is a count, not a pause.
#pragma once
#include <condition_variable>
#include <list>
#include <mutex>
#include <set>

#include "base/env.h"

namespace freeride {

class FakeEnv final : public Env {
 public:
  explicit FakeEnv(Nanos start = kSecond) : now_(start) {}

  Nanos Now() override;
  bool Wait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
            uint32_t wake_bits = kFutexAnyWake) override;
  void WakeAll(std::atomic<uint32_t>* word, uint32_t bits = kFutexAnyWake) override;
  bool Signal(pid_t pid, int signal) override;
  bool ProcessAlive(pid_t pid) override;

  // Moves time on by `by`, ending the waits whose deadline it passes.
  void Advance(Nanos by);
  // Blocks until `count` threads sleep on `word`, for at most 10 s of real
  // time (a bound for a broken test, not a timing); false if they did not.
  bool AwaitSleepers(const std::atomic<uint32_t>* word, int count);
  // Threads sleeping on `word` now.
  int Sleepers(const std::atomic<uint32_t>* word);
  // WakeAll calls so far, whether or not they woke anyone.
  int wake_calls();

  void SetAlive(pid_t pid, bool alive);
  int last_signal() const { return last_signal_; }

 private:
  struct Sleeper {
    const std::atomic<uint32_t>* word;
    uint32_t expected;
    uint32_t bits;
    Nanos deadline;  // -1: none
    bool woken = false;
  };
  std::mutex mu_;
  std::condition_variable changed_;
  Nanos now_;
  std::list<Sleeper*> sleepers_;
  int wake_calls_ = 0;
  std::set<pid_t> alive_;
  int last_signal_ = 0;
};

}  // namespace freeride
