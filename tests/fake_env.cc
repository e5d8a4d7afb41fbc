#include "fake_env.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace freeride {

FakeEnv::WordKey FakeEnv::KeyOf(const void* word) {
  const auto address = reinterpret_cast<uintptr_t>(word);
  // A shared mapping of a file: the kernel keys its futexes by the page, so
  // every mapping of the segment reaches the same waiters.
  if (FILE* maps = std::fopen("/proc/self/maps", "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, maps)) {
      unsigned long start = 0, end = 0, offset = 0, inode = 0;
      unsigned major = 0, minor = 0;
      char perms[8] = {};
      if (std::sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &offset, &major,
                      &minor, &inode) != 7)
        continue;
      if (address < start || address >= end) continue;
      std::fclose(maps);
      if (perms[3] != 's' || inode == 0) return {0, 0, address};
      return {(uint64_t{major} << 32) | minor, inode, offset + (address - start)};
    }
    std::fclose(maps);
  }
  return {0, 0, address};
}

Nanos FakeEnv::Now() {
  if (on_now_) on_now_();
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

void FakeEnv::OnNow(std::function<void()> hook) { on_now_ = std::move(hook); }

bool FakeEnv::Wait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
                   uint32_t wake_bits) {
  const WordKey key = KeyOf(word);
  std::unique_lock<std::mutex> lock(mu_);
  if (word->load(std::memory_order_seq_cst) != expected) return true;
  Sleeper sleeper{key, wake_bits, timeout < 0 ? -1 : now_ + timeout};
  sleepers_.push_back(&sleeper);
  changed_.notify_all();  // for AwaitSleepers
  AdvanceIfAllSleepLocked();
  changed_.wait(lock, [&] { return !SleepingLocked(sleeper); });
  sleepers_.remove(&sleeper);
  changed_.notify_all();
  // A woken sleeper holds time until it has gone: if the others all went to
  // sleep meanwhile, the look they took ended at it, and time must move now
  // (this thread runs, so only a thread that ends uncounted lets it move).
  AdvanceIfAllSleepLocked();
  return sleeper.woken;
}

void FakeEnv::WakeAll(std::atomic<uint32_t>* word, uint32_t bits) {
  const WordKey key = KeyOf(word);
  std::lock_guard<std::mutex> lock(mu_);
  ++wake_calls_;
  for (Sleeper* s : sleepers_)
    if (s->word == key && (s->bits & bits) != 0) s->woken = true;
  changed_.notify_all();
}

bool FakeEnv::ProcessAlive(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  return alive_.count(pid) != 0;
}

pid_t FakeEnv::ProcessGroupOf(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = groups_.find(pid); it != groups_.end()) return it->second;
  return alive_.count(pid) != 0 ? pid : -1;
}

void FakeEnv::SetProcessGroup(pid_t pid, pid_t group) {
  std::lock_guard<std::mutex> lock(mu_);
  groups_[pid] = group;
}

void FakeEnv::SetAlive(pid_t pid, bool alive) {
  std::lock_guard<std::mutex> lock(mu_);
  if (alive) alive_.insert(pid);
  else alive_.erase(pid);
}

void FakeEnv::Advance(Nanos by) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ += by;
  changed_.notify_all();
}

void FakeEnv::RunVirtualTime(int threads) {
  std::lock_guard<std::mutex> lock(mu_);
  virtual_threads_ = threads;
  AdvanceIfAllSleepLocked();
}

void FakeEnv::Leave() {
  std::lock_guard<std::mutex> lock(mu_);
  --virtual_threads_;
  AdvanceIfAllSleepLocked();
}

void FakeEnv::AdvanceIfAllSleepLocked() {
  if (virtual_threads_ <= 0) return;
  int sleeping = 0;
  Nanos earliest = -1;
  for (const Sleeper* s : sleepers_) {
    if (!SleepingLocked(*s)) return;  // a thread is about to run
    ++sleeping;
    if (s->deadline >= 0 && (earliest < 0 || s->deadline < earliest)) earliest = s->deadline;
  }
  if (sleeping < virtual_threads_) return;
  if (earliest < 0) {
    std::fprintf(stderr, "FakeEnv: all %d threads of virtual time sleep with no deadline\n",
                 virtual_threads_);
    std::abort();
  }
  now_ = earliest;
  changed_.notify_all();
}

bool FakeEnv::AwaitSleepers(const std::atomic<uint32_t>* word, int count) {
  const WordKey key = KeyOf(word);
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, std::chrono::seconds(10), [&] {
    return std::count_if(sleepers_.begin(), sleepers_.end(),
                         [&](const Sleeper* s) { return s->word == key; }) >= count;
  });
}

int FakeEnv::Sleepers(const std::atomic<uint32_t>* word) {
  const WordKey key = KeyOf(word);
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count_if(sleepers_.begin(), sleepers_.end(), [&](const Sleeper* s) {
    return s->word == key && SleepingLocked(*s);
  }));
}

int FakeEnv::wake_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  return wake_calls_;
}

}  // namespace freeride
