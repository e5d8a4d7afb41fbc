// When a side program's next piece of GPU work may be queued behind the
// gate.  A wait left pending on a stream costs the training even while it
// only waits: on two H200s under MPS, one pending wait on a closed gate
// slowed a real 1F1B pipeline by 1.4% (the gate word in device memory) to
// 2.1% (in host memory), while a process that only spun on the CPU cost
// nothing (bench/results/gate_pending_wait_2gpu.md).  So a piece is queued
// only while the gate is open and only when it, and what the program has
// queued before it, are predicted to end by the bubble's admission deadline
// (the forecast end less the lane's margin, which the daemon publishes in
// the gate page).  Nothing is then left waiting on the GPU when the stage
// closes the gate, unless a prediction was wrong.  Pure; no clock.
#pragma once
#include <cstdint>

namespace freeride::gate {

// What the gate page says of the current bubble, read on the host.
struct GateView {
  uint32_t word = 0;             // (bubble << 1) | open, as the stage's stream wrote it
  uint32_t admit_bubble = 0;     // the bubble the deadline below is for
  int64_t admit_until_ns = 0;    // CLOCK_MONOTONIC: queued work must end by then
};

enum class PieceVerdict {
  kQueue,           // queue it now (behind its GPU wait, which passes at once)
  kWaitForQueue,    // the gate is open; wait for queued work to drain, or the deadline
  kWaitForBubble,   // the gate is shut, or the piece cannot end in this bubble
};

// The verdict on a piece predicted to take `piece_ns`, with `queued_ns` of
// the program's earlier work predicted still to run, at `now_ns`.  Before
// the daemon has published this bubble's deadline (its mark comes tens of
// microseconds after the stage's stream opened the gate) the piece waits.
inline PieceVerdict JudgePiece(const GateView& view, int64_t now_ns, int64_t queued_ns, int64_t piece_ns) {
  if ((view.word & 1u) == 0) return PieceVerdict::kWaitForBubble;
  if (view.admit_bubble != (view.word >> 1)) return PieceVerdict::kWaitForQueue;
  if (now_ns + queued_ns + piece_ns <= view.admit_until_ns) return PieceVerdict::kQueue;
  // Worth waiting for the queue only while the piece alone could still end in time.
  return queued_ns > 0 && now_ns + piece_ns <= view.admit_until_ns ? PieceVerdict::kWaitForQueue
                                                                   : PieceVerdict::kWaitForBubble;
}

}  // namespace freeride::gate
