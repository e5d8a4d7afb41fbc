#include "base/futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace freeride {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "futex words must be plain 32-bit integers");

bool FutexWait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
               uint32_t wake_bits) {
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline.
  timespec deadline;
  timespec* deadline_ptr = nullptr;
  if (timeout >= 0) {
    Nanos at = MonotonicNow() + timeout;
    deadline.tv_sec = at / kSecond;
    deadline.tv_nsec = at % kSecond;
    deadline_ptr = &deadline;
  }
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_BITSET, expected,
                    deadline_ptr, nullptr, wake_bits);
  if (rc == -1 && errno == ETIMEDOUT) return false;
  return true;
}

void FutexWakeAll(std::atomic<uint32_t>* word, uint32_t bits) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_BITSET, INT_MAX, nullptr,
          nullptr, bits);
}

}  // namespace freeride
