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
// closes the gate, unless a prediction was wrong.
//
// Held on the host alone, a piece would start only after the stage's host
// mark, the daemon's deadline and the host's poll: about 200 us after the
// gate opened (bench/results/gate_latency_host_hold.json).  So the daemon
// also forecasts the next bubble, its begin and its deadline
// (policy/next_bubble.h), and a piece that fits it is queued a short lead
// before the forecast begin: its wait is left pending for about that lead,
// and the GPU starts it when the stage's stream opens the gate.  An
// iteration's first bubble is published as watched only (a trainer may
// pause between iterations): nothing waits for it behind the shut gate, but
// through its lead window (at most kMostWatchNs either side of its forecast
// begin) a held thread looks at the gate every kWatchPollNs, and a gate it
// sees open is judged by the forecast before
// the daemon's deadline comes, counted from when that thread last saw the
// gate shut (a gate that opened earlier than forecast must not be judged by
// the forecast's own begin: its end comes that much sooner).  Pure; no clock.
#pragma once
#include <algorithm>
#include <cstdint>

namespace freeride::gate {

// What the gate page says of the current bubble, read on the host.
struct GateView {
  uint32_t word = 0;             // (bubble << 1) | open, as the stage's stream wrote it
  uint32_t admit_bubble = 0;     // the bubble the deadline below is for
  int64_t admit_until_ns = 0;    // CLOCK_MONOTONIC: queued work must end by then
  // The next bubble's forecast (gate/gate_page.h): ahead_bubble may be
  // queued for from ahead_from_ns; it is forecast to begin at
  // ahead_begin_ns, and work starting then must end by ahead_until_ns.
  uint32_t ahead_bubble = 0xffffffffu;  // matches no bubble: no forecast
  int64_t ahead_from_ns = 0;
  int64_t ahead_begin_ns = 0;
  int64_t ahead_until_ns = 0;
  bool ahead_watch_only = false;  // nothing queued for it behind the shut gate: only watched
};

// How often a thread held for a watched bubble (an iteration's first) looks
// at the shut gate through its window: the release latency of that bubble,
// bounded by what the held threads spend on the CPU (a look is a few loads).
inline constexpr int64_t kWatchPollNs = 5'000;
// The longest stretch either side of a watched bubble's forecast begin that
// is looked at so closely, whatever the lane's lead (--gate-lead-us): at most
// 2 ms of 5 us looks an iteration per held thread.
inline constexpr int64_t kMostWatchNs = 1'000'000;

enum class PieceVerdict {
  kQueue,           // queue it now (behind its GPU wait: it passes at once, or when the gate opens)
  kWaitForQueue,    // the gate is open; wait for queued work to drain, or the deadline
  kWaitForBubble,   // the gate is shut, or the piece cannot end in this bubble
};

// Whether a piece may be queued behind the shut gate now, for the next
// bubble: from the forecast's lead before its begin until that begin.  The
// forecast begin is the time of the host's begin mark, which comes after the
// stream opened the gate, so a gate still shut then means the bubble is late
// this time; a wait queued for it could be left pending through the busy
// time, so the piece waits for the gate to open instead.  (For a watched
// bubble the window says when to look closely, not when to queue.)
inline bool InAheadWindow(const GateView& view, int64_t now_ns) {
  return view.ahead_bubble == (view.word >> 1) + 1 && now_ns >= view.ahead_from_ns &&
         now_ns <= view.ahead_begin_ns;
}

// The verdict on a piece predicted to take `piece_ns`, with `queued_ns` of
// the program's earlier work predicted still to run, at `now_ns`.
// - Gate open, this bubble's deadline published: queue if the piece and
//   the queue end by it.
// - Gate open, the deadline not yet published (the daemon's mark comes tens
//   to hundreds of microseconds after the stage's stream opened the gate):
//   judged by the forecast for this bubble's length, counted from
//   `seen_shut_ns`, the last time the calling thread saw the gate shut just
//   before this bubble (the bubble began after it, so its end is no earlier
//   than that plus its length), and no later than the forecast's deadline;
//   with no forecast, a gate found open before the forecast's window opens
//   (so the forecast was wrong), or no such sighting (seen_shut_ns 0: the
//   gate may have opened any time before now), wait.  (A stage that marks
//   only from the host has its gate opened by the daemon after its mark,
//   with the deadline published first, so this applies to gates the
//   stage's own stream opens.)
// - Gate shut: queued ahead, behind the shut gate, in the next bubble's
//   ahead window (InAheadWindow), if the queue and the piece fit the
//   forecast when they start at the bubble's forecast begin, and the
//   bubble is not one that is only watched.
inline PieceVerdict JudgePiece(const GateView& view, int64_t now_ns, int64_t queued_ns, int64_t piece_ns,
                               int64_t seen_shut_ns) {
  const uint32_t bubble = view.word >> 1;
  if ((view.word & 1u) == 0) {
    if (!view.ahead_watch_only && InAheadWindow(view, now_ns) &&
        view.ahead_begin_ns + queued_ns + piece_ns <= view.ahead_until_ns)
      return PieceVerdict::kQueue;
    return PieceVerdict::kWaitForBubble;
  }
  int64_t until_ns = view.admit_until_ns;
  if (view.admit_bubble != bubble) {
    if (view.ahead_bubble != bubble || now_ns < view.ahead_from_ns || seen_shut_ns <= 0)
      return PieceVerdict::kWaitForQueue;
    until_ns = std::min(view.ahead_until_ns, seen_shut_ns + (view.ahead_until_ns - view.ahead_begin_ns));
    return now_ns + queued_ns + piece_ns <= until_ns ? PieceVerdict::kQueue : PieceVerdict::kWaitForQueue;
  }
  if (now_ns + queued_ns + piece_ns <= until_ns) return PieceVerdict::kQueue;
  // Worth waiting for the queue only while the piece alone could still end in time.
  return queued_ns > 0 && now_ns + piece_ns <= until_ns ? PieceVerdict::kWaitForQueue
                                                        : PieceVerdict::kWaitForBubble;
}

// Pieces in a row on one stream that may go without a GPU wait, at most.
inline constexpr int kMaxUnwaitedInRow = 8;
// The room to the deadline a piece needs to go without its wait, in percent
// of the queue ahead of it and itself (MayGoUnwaited): twice.
inline constexpr int kUnwaitedRoomPct = 200;

// Whether a piece queued in an open bubble whose deadline `until_ns` is
// published may go without its wait on the GPU.  Each wait and each fence
// costs the program's launching thread a driver call or more: on one H200,
// a loop of one-element additions ran at 0.59-0.65 of its rate alone with a
// wait and a fence around every launch, 0.74 without the waits and 0.92
// without the fences too (bench/interposer_cost_gpu.py), and most programs
// launch from one thread.  The wait is the net for a prediction that was
// wrong (the GPU is further behind than the queue's count says, or the
// bubble ends before its forecast); the host's own judgement has already
// let the piece through.  So it is left out only where even twice the
// predicted queue and piece end by the deadline, and for at most
// kMaxUnwaitedInRow pieces in a row, so that what can run on past a
// bubble's end without having waited for the gate is a few pieces at
// most, each predicted to have ended long before.  Pure.
// `max_in_row` replaces kMaxUnwaitedInRow, and `room_pct` kUnwaitedRoomPct,
// both from launch_gate.h's GateTuning.
inline bool MayGoUnwaited(int64_t now_ns, int64_t queued_ns, int64_t piece_ns, int64_t until_ns,
                          int unwaited_in_row, int max_in_row = kMaxUnwaitedInRow,
                          int room_pct = kUnwaitedRoomPct) {
  // In doubles: a bubble with no deadline has until_ns at INT64_MAX.
  return unwaited_in_row < max_in_row &&
         static_cast<double>(until_ns - now_ns) * 100.0 >= static_cast<double>(room_pct) * (queued_ns + piece_ns);
}

// How long a piece told to wait for the bubble sleeps before it looks
// again: `poll_ns`, or less, to wake at the start of the next bubble's
// ahead window; for a watched bubble, kWatchPollNs from then (or from
// kMostWatchNs before its forecast begin, if the window opens earlier) until
// as long after its forecast begin as the watch began before it (a bubble
// later than that is not watched on: the trainer may have paused).  At
// least 1 us.
inline int64_t ShutPollNs(const GateView& view, int64_t now_ns, int64_t poll_ns) {
  if ((view.word & 1u) == 0 && view.ahead_bubble == (view.word >> 1) + 1) {
    const int64_t watch_ns = std::clamp<int64_t>(view.ahead_begin_ns - view.ahead_from_ns, 0, kMostWatchNs);
    const int64_t wake_ns = view.ahead_watch_only ? view.ahead_begin_ns - watch_ns : view.ahead_from_ns;
    if (now_ns < wake_ns) {
      poll_ns = std::min(poll_ns, wake_ns - now_ns);
    } else if (view.ahead_watch_only && now_ns <= view.ahead_begin_ns + watch_ns) {
      poll_ns = std::min(poll_ns, kWatchPollNs);
    }
  }
  return std::max<int64_t>(1'000, poll_ns);
}

}  // namespace freeride::gate
