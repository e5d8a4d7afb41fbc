#include "base/env.h"

#include <signal.h>

#include <cerrno>

namespace freeride {
namespace {

class SystemEnv final : public Env {
 public:
  Nanos Now() override { return MonotonicNow(); }
  bool Wait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout,
            uint32_t wake_bits) override {
    return FutexWait(word, expected, timeout, wake_bits);
  }
  void WakeAll(std::atomic<uint32_t>* word, uint32_t bits) override { FutexWakeAll(word, bits); }
  bool ProcessAlive(pid_t pid) override {
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
  }
  pid_t ProcessGroupOf(pid_t pid) override { return pid > 0 ? getpgid(pid) : -1; }
};

}  // namespace

Env* Env::Default() {
  // Never destroyed: a CUDA callback thread may still mark a bubble while
  // the process exits.
  static Env* const env = new SystemEnv;
  return env;
}

}  // namespace freeride
