// An Env for tests: time moves only when the test says so, waits end on a
// matching wake-up or when fake time passes their deadline, and processes
// are none (ProcessAlive is false).  Two mappings of one
// shared word have two addresses: SameWord tells the fake they are one, as
// the kernel's futex, keyed by the page, knows.  So waits, timeouts and intervals are tested
// without sleeping, and "did not wake" is a count, not a pause.
#pragma once
#include <condition_variable>
#include <list>
#include <mutex>
#include <set>
#include <utility>

#include "base/env.h"

namespace freeride {

class FakeEnv final : public Env {
 public:
  explicit FakeEnv(Nanos start = kSecond) : now_(start) {}

  Nanos Now() override;
  bool Wait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
            uint32_t wake_bits = kFutexAnyWake) override;
  void WakeAll(std::atomic<uint32_t>* word, uint32_t bits = kFutexAnyWake) override;
  bool ProcessAlive(pid_t pid) override;

  // Moves time on by `by`, ending the waits whose deadline it passes.
  void Advance(Nanos by);
  // Blocks until `count` threads sleep on `word`, for at most 10 s of real
  // time (a bound for a broken test, not a timing); false if they did not.
  bool AwaitSleepers(const std::atomic<uint32_t>* word, int count);
  // Threads sleeping on `word` now: neither woken nor past their deadline,
  // whether or not their thread has run since (so "not woken" is exact).
  int Sleepers(const std::atomic<uint32_t>* word);
  // WakeAll calls so far, whether or not they woke anyone.
  int wake_calls();

  // `a` and `b` are one shared word mapped twice: a wake-up on either
  // reaches sleepers on both.
  void SameWord(const std::atomic<uint32_t>* a, const std::atomic<uint32_t>* b);

 private:
  struct Sleeper {
    const std::atomic<uint32_t>* word;
    uint32_t bits;
    Nanos deadline;  // -1: none
    bool woken = false;
  };
  std::mutex mu_;
  std::condition_variable changed_;
  Nanos now_;
  std::list<Sleeper*> sleepers_;
  int wake_calls_ = 0;
  std::set<std::pair<const void*, const void*>> same_words_;
};

}  // namespace freeride
