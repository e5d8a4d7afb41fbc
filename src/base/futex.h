// Process-shared futex wait/wake on a 32-bit word in shared memory.
#pragma once
#include <atomic>
#include <cstdint>

#include "base/clock.h"

namespace freeride {

// Every waiter matches a wake-up that carries these bits.
constexpr uint32_t kFutexAnyWake = 0xffffffffu;

// Sleeps while *word == expected, for at most timeout (negative: forever).
// Only a wake-up whose bits intersect `wake_bits` ends the sleep early, so a
// waiter can sleep through the wake-ups meant for others on the same word.
// Returns false on timeout, true on wake-up or a value change (spurious
// wake-ups are possible; callers re-check their condition).  `wake_bits`
// must not be 0: the kernel refuses it and the call returns true at once.
// Any thread; the word may be in memory shared between processes.
bool FutexWait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
               uint32_t wake_bits = kFutexAnyWake);

// Wakes every waiter on word whose wake bits intersect `bits`.  Never blocks.
// Any thread or process that maps the word.
void FutexWakeAll(std::atomic<uint32_t>* word, uint32_t bits = kFutexAnyWake);

}  // namespace freeride
