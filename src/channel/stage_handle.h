// The stage handle behind the C ABI's freeride_stage, shared by the
// immediate marks (stage_api.cc) and the stream-ordered ones
// (stream_marks.cc).  The training thread makes every call; the marks
// themselves may be written from the stream marks' host functions (on the
// CUDA driver's thread) or the gate marks' watcher, which take marks_mutex
// around each, as freeride_bubble_begin and _end do.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/env.h"
#include "channel/gate_mark_watcher.h"
#include "channel/lane_segment.h"
#include "freeride/freeride.h"
#include "gate/gate_page.h"

namespace freeride {

// What a mark enqueued on a CUDA stream will write when the stream gets
// there.  Kept in the handle because the host function runs later, on the
// driver's thread.
struct PendingMark {
  freeride_stage* stage;
  bool begin;  // else an end mark
  uint32_t slot;
  int64_t predicted_ns;
  uint64_t free_memory_bytes;
};

inline constexpr size_t kPendingMarks = 1024;

}  // namespace freeride

struct freeride_stage {
  // Time and wake-ups: Env::Default(), or a test's fake given to OpenStage.
  freeride::Env* env = freeride::Env::Default();
  std::string segment_path;
  bool disabled = false;
  freeride::LaneSegment segment;
  freeride::Nanos next_check_ns = 0;
  // A ring: a record is reused kPendingMarks marks later, by when the
  // stream has long run its host function.
  std::array<freeride::PendingMark, freeride::kPendingMarks> pending_marks{};
  uint64_t next_pending_mark = 0;
  // The lane's GPU gate, registered with the driver at the first gate mark
  // (gate_state: 0 untried, 1 ready, -1 unavailable until the next retry).
  freeride::GatePage gate_page;
  // Pages whose files were removed: kept mapped and registered (GateReady).
  std::vector<std::unique_ptr<freeride::GatePage>> retired_gate_pages;
  unsigned long long gate_word = 0;  // its device address
  int gate_state = 0;
  freeride::Nanos gate_retry_ns = 0;
  uint32_t gate_bubble = 0;  // the last bubble this stage opened on the gate
  // How gate values are written (freeride_gate_write_mode; EnqueueGateValue):
  // FREERIDE_GATE_WRITES or freeride_stage_set_gate_writes.
  int gate_write_mode = FREERIDE_GATE_WRITE_AUTO;
  // Where the gate values written on a stream since the last host store may
  // still be pending: a host store waits for that stream to be done (no
  // earlier value may land after a later one).  Once they went on two
  // streams, or into a graph being captured, they are untracked for good and
  // every write is a stream write.
  enum class GateWrites {
    kLanded,     // none written on a stream since the last host store (or none at all)
    kOnStream,   // written on gate_pending_stream, perhaps still pending
    kUntracked,  // written on two streams, or on one that could not be asked
  };
  GateWrites gate_writes = GateWrites::kLanded;
  void* gate_pending_stream = nullptr;  // while kOnStream
  uint64_t gate_writes_on_stream = 0;
  uint64_t gate_writes_from_host = 0;
  // Marks read from the gate word (freeride_bubble_begin_gated), made at the
  // first gated mark; FREERIDE_GATE_MARKS=0 turns them off.
  std::unique_ptr<freeride::GateMarkWatcher> mark_watcher;
  // The process that opened the stage: a child forked from it has no
  // watcher thread and is not the stage (its gated calls do nothing).
  int64_t owner_pid = 0;
  // Held while a mark is written to the lane segment, or the segment is
  // mapped again or looked at: the marks are not atomic with each other, and
  // besides the training thread, host functions and the gate marks' watcher
  // write them (and re-attach the segment).
  mutable std::mutex marks_mutex;
};

namespace freeride {

// freeride_stage_open with the Env the stage's clock and wake-ups use (a
// test's fake; freeride_stage_open passes Env::Default()).  `env` outlives
// the stage.  Null only when out of memory; without a daemon the handle
// does nothing until one appears.  Any thread.
freeride_stage* OpenStage(int lane, const char* socket_path, Env* env);

}  // namespace freeride
