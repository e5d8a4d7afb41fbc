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
// It also times one piece of work in kSampleEvery (events around it, on its
// stream, read back later on the program's own threads) and publishes the
// 95th percentile of those lengths in its slot of the gate page, so that the
// daemon closes the gate early enough for the work it let through to end
// inside the bubble (policy/gate_close.h).
//
// Threading: BeforeWork and AfterWork are called from any of the program's
// threads at once; arming happens once (the first caller arms, the others
// wait for it).
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gate/driver_types.h"
#include "gate/gate_page.h"
#include "gate/work_lengths.h"

namespace freeride::gate {

enum class GateState { kUnarmed, kArmed, kRefused };

struct GateCounters {
  uint64_t waits = 0;          // pieces of work that got a wait
  uint64_t captured = 0;       // pieces recorded into a graph (gated at its launch)
  uint64_t failed_waits = 0;   // waits the driver refused (the work was not submitted)
  uint64_t refused = 0;        // pieces refused because the gate could not be armed
};

// A piece of work chosen for timing: its events, recorded around it.
struct WorkSample {
  CuEvent start = nullptr;
  CuEvent end = nullptr;
  CuStream stream = nullptr;
};

// Where the gate word is: a page of shared memory, mapped by the caller.
class LaunchGate {
 public:
  static constexpr uint64_t kSampleEvery = 16;

  // `page` is the mapped gate page (its first word is the gate), or null
  // when it could not be mapped, with `page_error` saying why.  `slot` is
  // where this process publishes its work's length (null: nowhere).
  LaunchGate(const DriverApi& api, void* page, std::string page_error,
             GateTaskSlot* slot = nullptr);

  // Called before the program's piece of work on `stream` (as the program
  // passed it; `per_thread` when the entry point is the per-thread-stream
  // variant, so that stream 0 means the thread's own default stream).
  // kCudaSuccess: submit the work.  Anything else: do not submit it, and
  // return this to the program.
  // When `sample` is given and this piece is chosen for timing, its start
  // event is recorded and `sample` filled; the caller then calls AfterWork
  // once the work is submitted.
  CuResult BeforeWork(CuStream stream, bool per_thread, WorkSample* sample = nullptr);
  // Records the end of a sampled piece (a no-op for one not sampled).
  void AfterWork(const WorkSample& sample);
  // The published 95th percentile of the timed pieces (0: none yet).
  int64_t work_p95_ns() const;

  GateState state() const { return state_.load(std::memory_order_acquire); }
  const std::string& refusal() const { return refusal_; }
  GateCounters counters() const;
  CuDevicePtr word_address() const { return word_; }

 private:
  CuResult Arm();
  void StartSample(CuStream stream, WorkSample* sample);
  // Reads back the timed pieces that have ended; at most one caller at once.
  void CollectSamples();

  DriverApi api_;
  void* page_;
  std::string refusal_;
  std::mutex arm_mutex_;
  std::atomic<GateState> state_{GateState::kUnarmed};
  CuDevicePtr word_ = 0;
  std::atomic<uint64_t> waits_{0}, captured_{0}, failed_waits_{0}, refused_{0};
  GateTaskSlot* slot_;
  std::mutex samples_mutex_;
  std::vector<WorkSample> pending_;  // recorded, not yet read back (oldest first)
  std::atomic<size_t> pending_count_{0};
  WorkLengths lengths_;
};

}  // namespace freeride::gate
