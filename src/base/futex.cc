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

bool FutexWait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout) {
  timespec ts;
  timespec* tsp = nullptr;
  if (timeout >= 0) {
    ts.tv_sec = timeout / kSecond;
    ts.tv_nsec = timeout % kSecond;
    tsp = &ts;
  }
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT,
                    expected, tsp, nullptr, 0);
  if (rc == -1 && errno == ETIMEDOUT) return false;
  return true;
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

}  // namespace freeride
