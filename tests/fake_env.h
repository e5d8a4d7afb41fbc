// An Env for tests: time moves only when the test says so (Advance), or, in
// virtual time, whenever every thread taking part sleeps; waits end on a
// matching wake-up or when fake time passes their deadline.  A word is known
// as the kernel's futex knows it: by the file and offset of a shared
// mapping (two mappings of one segment are one word), else by its address.
// So waits, timeouts and intervals are tested without sleeping, and "did not
// wake" is a count, not a pause.
#pragma once
#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <cstdint>
#include <list>
#include <mutex>
#include <map>
#include <set>
#include <tuple>

#include "base/env.h"

namespace freeride {

class FakeEnv final : public Env {
 public:
  explicit FakeEnv(Nanos start = kSecond) : now_(start) {}

  // Calls the hook set by OnNow (if any) first, outside the Env's lock: a
  // test sees what other threads could see at the instant a clock is read.
  Nanos Now() override;
  void OnNow(std::function<void()> hook);
  bool Wait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
            uint32_t wake_bits = kFutexAnyWake) override;
  void WakeAll(std::atomic<uint32_t>* word, uint32_t bits = kFutexAnyWake) override;
  // False unless the test declared the process alive (SetAlive).
  bool ProcessAlive(pid_t pid) override;
  // The group SetProcessGroup declared, else the process's own pid (each
  // process its own group's leader) if it is alive, else -1.
  pid_t ProcessGroupOf(pid_t pid) override;
  void SetProcessGroup(pid_t pid, pid_t group);

  // Moves time on by `by`, ending the waits whose deadline it passes.
  void Advance(Nanos by);
  // Virtual time: from now on, whenever `threads` threads sleep in Wait (none
  // woken, none past its deadline), time jumps to the earliest of their
  // deadlines.  So threads that talk through the Env run as they would in
  // real time, with no time lost to computing, and a test of seconds of
  // serving takes milliseconds.  Every thread that waits on this Env must be
  // counted; a counted thread that ends calls Leave.  Counted threads that
  // all sleep with no deadline would never wake: the test aborts, saying so.
  void RunVirtualTime(int threads);
  void Leave();
  // Blocks until `count` threads sleep on `word`, for at most 10 s of real
  // time (a bound for a broken test, not a timing); false if they did not.
  bool AwaitSleepers(const std::atomic<uint32_t>* word, int count);
  // Threads sleeping on `word` now: neither woken nor past their deadline,
  // whether or not their thread has run since (so "not woken" is exact).
  int Sleepers(const std::atomic<uint32_t>* word);
  // WakeAll calls so far, whether or not they woke anyone.
  int wake_calls();
  void SetAlive(pid_t pid, bool alive);

 private:
  // (device, inode, offset) of a shared file mapping; (0, 0, address) else.
  using WordKey = std::tuple<uint64_t, uint64_t, uint64_t>;
  static WordKey KeyOf(const void* word);
  struct Sleeper {
    WordKey word;
    uint32_t bits;
    Nanos deadline;  // -1: none
    bool woken = false;
  };
  bool SleepingLocked(const Sleeper& s) const {
    return !s.woken && (s.deadline < 0 || now_ < s.deadline);
  }
  // In virtual time, jumps to the earliest deadline once every counted
  // thread sleeps.  Under mu_.
  void AdvanceIfAllSleepLocked();
  std::mutex mu_;
  std::condition_variable changed_;
  Nanos now_;
  std::list<Sleeper*> sleepers_;
  int wake_calls_ = 0;
  int virtual_threads_ = 0;  // 0: time moves only by Advance
  std::function<void()> on_now_;  // set while no other thread reads the clock
  std::set<pid_t> alive_;
  std::map<pid_t, pid_t> groups_;
};

}  // namespace freeride
