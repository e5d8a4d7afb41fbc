// Process-shared futex wait/wake on a 32-bit word in shared memory.
#pragma once
#include <atomic>
#include <cstdint>

#include "base/clock.h"

namespace freeride {

// Sleeps while *word == expected, for at most timeout (negative: forever).
// Returns false on timeout, true on wake-up or a value change (spurious
// wake-ups are possible; callers re-check their condition).
bool FutexWait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout);

// Wakes every waiter on word.  Never blocks.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace freeride
