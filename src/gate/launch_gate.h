// The gate of one side-task process: before each piece of GPU work the
// program submits (a kernel, a graph, a copy or a fill), a wait on its own
// stream for the lane's gate word to be open.  The wait runs on the GPU, so
// the work starts within microseconds of the stage's stream opening the
// gate, and never while it is closed; the program's host threads are not
// held.
//
// Armed lazily, at the first piece of work (a CUDA context is current then):
// the lane's gate page is registered as mapped host memory.  If that fails
// the gate is refused for good: every later piece of work fails with
// CUDA_ERROR_NOT_PERMITTED and the reason is written to stderr once, so a
// program that cannot be gated never runs ungated.
//
// Work a stream is capturing into a graph gets no wait of its own: the
// graph is gated where it is launched.
//
// Threading: BeforeWork is called from any of the program's threads at
// once; arming happens once (the first caller arms, the others wait for it).
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "gate/driver_types.h"

namespace freeride::gate {

enum class GateState { kUnarmed, kArmed, kRefused };

struct GateCounters {
  uint64_t waits = 0;          // pieces of work that got a wait
  uint64_t captured = 0;       // pieces recorded into a graph (gated at its launch)
  uint64_t failed_waits = 0;   // waits the driver refused (the work was not submitted)
  uint64_t refused = 0;        // pieces refused because the gate could not be armed
};

// Where the gate word is: a page of shared memory, mapped by the caller.
class LaunchGate {
 public:
  // `page` is the mapped gate page (its first word is the gate), or null
  // when it could not be mapped, with `page_error` saying why.
  LaunchGate(const DriverApi& api, void* page, std::string page_error);

  // Called before the program's piece of work on `stream` (as the program
  // passed it; `per_thread` when the entry point is the per-thread-stream
  // variant, so that stream 0 means the thread's own default stream).
  // kCudaSuccess: submit the work.  Anything else: do not submit it, and
  // return this to the program.
  CuResult BeforeWork(CuStream stream, bool per_thread);

  GateState state() const { return state_.load(std::memory_order_acquire); }
  const std::string& refusal() const { return refusal_; }
  GateCounters counters() const;
  CuDevicePtr word_address() const { return word_; }

 private:
  CuResult Arm();

  DriverApi api_;
  void* page_;
  std::string refusal_;
  std::mutex arm_mutex_;
  std::atomic<GateState> state_{GateState::kUnarmed};
  CuDevicePtr word_ = 0;
  std::atomic<uint64_t> waits_{0}, captured_{0}, failed_waits_{0}, refused_{0};
};

}  // namespace freeride::gate
