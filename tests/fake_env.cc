#include "fake_env.h"

#include <algorithm>
#include <chrono>

namespace freeride {

Nanos FakeEnv::Now() {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

bool FakeEnv::Wait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
                   uint32_t wake_bits) {
  std::unique_lock<std::mutex> lock(mu_);
  if (word->load(std::memory_order_seq_cst) != expected) return true;
  Sleeper sleeper{word, wake_bits, timeout < 0 ? -1 : now_ + timeout};
  sleepers_.push_back(&sleeper);
  changed_.notify_all();  // for AwaitSleepers
  changed_.wait(lock, [&] {
    return sleeper.woken || (sleeper.deadline >= 0 && now_ >= sleeper.deadline);
  });
  sleepers_.remove(&sleeper);
  changed_.notify_all();
  return sleeper.woken;
}

void FakeEnv::WakeAll(std::atomic<uint32_t>* word, uint32_t bits) {
  std::lock_guard<std::mutex> lock(mu_);
  ++wake_calls_;
  for (Sleeper* s : sleepers_) {
    const bool same_word = s->word == word || same_words_.count({s->word, word}) != 0;
    if (same_word && (s->bits & bits) != 0) s->woken = true;
  }
  changed_.notify_all();
}

bool FakeEnv::ProcessAlive(pid_t) { return false; }

void FakeEnv::SameWord(const std::atomic<uint32_t>* a, const std::atomic<uint32_t>* b) {
  std::lock_guard<std::mutex> lock(mu_);
  same_words_.insert({a, b});
  same_words_.insert({b, a});
}

void FakeEnv::Advance(Nanos by) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ += by;
  changed_.notify_all();
}

bool FakeEnv::AwaitSleepers(const std::atomic<uint32_t>* word, int count) {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, std::chrono::seconds(10), [&] {
    return std::count_if(sleepers_.begin(), sleepers_.end(),
                         [&](const Sleeper* s) { return s->word == word; }) >= count;
  });
}

int FakeEnv::Sleepers(const std::atomic<uint32_t>* word) {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count_if(sleepers_.begin(), sleepers_.end(), [&](const Sleeper* s) {
    return s->word == word && !s->woken && (s->deadline < 0 || now_ < s->deadline);
  }));
}

int FakeEnv::wake_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  return wake_calls_;
}

}  // namespace freeride
