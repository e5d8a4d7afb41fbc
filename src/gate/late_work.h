// The gate's own misses: side work still unfinished after the stage's
// stream closed the bubble it was admitted for.  A started kernel cannot be
// stopped, so a piece the prediction let through may run on into the busy
// time; this is how long it did.
//
// Pure rule, on the caller's clock: each Look gives the gate word and the
// oldest bubble any unfinished piece was admitted for.  Late time is the
// stage's busy time only: work of bubble b is late from the first look at
// which the gate is shut with b over (b, or a later bubble, closed) until
// the first look at which no piece of b or earlier is unfinished, or the
// gate is open again (work of a closed bubble that runs, or waits, inside a
// later bubble costs the training nothing; if it is still unfinished when
// that bubble closes, a new stretch begins).  The rule counts whatever the
// caller calls unfinished: LaunchGate keeps one LateWork for pieces that run
// (or queue behind running ones) and another for pieces pending behind a
// GPU wait the stream has not passed (a wait that reached the GPU after its
// bubble closed waits there until the next one), so late work and pending
// time are told apart.  The time between
// looks bounds the error at either end (the interposer looks at each launch
// judged on the drained queue, near a bubble's deadline, and at each poll of
// a held thread: every 10-50 us while held).  Where the looks stop for a while (no thread
// held: the program computes on the CPU, or waits in a synchronize), the
// end is unknown within the gap; it is counted at most `max_gap_ns` past
// the last look that saw the work unfinished.  The start, after such a gap,
// is counted from the first look that sees the bubble over: late work
// before it is missed.
//
// Threading: not synchronised; its owner serialises the calls.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>

#include "gate/gate_page.h"

namespace freeride::gate {

// Whether bubble `a` comes before bubble `b`, on the word's 31-bit numbers,
// which wrap.
inline constexpr uint32_t kBubbleMask = 0x7fffffffu;
inline bool BubbleBefore(uint32_t a, uint32_t b) {
  a &= kBubbleMask;
  b &= kBubbleMask;
  return a != b && ((b - a) & kBubbleMask) < 0x40000000u;
}

class LateWork {
 public:
  explicit LateWork(int64_t max_gap_ns) : max_gap_ns_(max_gap_ns) {}

  // One look at time `now_ns` (no earlier than the last look's: a caller
  // with several threads reads its clock under the lock it looks under).
  // Returns the length of a late stretch that ended at this look (0 when
  // none did).
  int64_t Look(int64_t now_ns, uint32_t word, std::optional<uint32_t> oldest_unfinished) {
    if (now_ns < last_look_ns_) now_ns = last_look_ns_;
    int64_t ended = 0;
    // Over: no piece of the late bubbles is left, or a bubble is open again.
    if (late_ && (GateIsOpen(word) || !(oldest_unfinished && !BubbleBefore(late_bubble_, *oldest_unfinished)))) {
      const int64_t end = std::min(now_ns, last_look_ns_ + max_gap_ns_);
      ended = std::max<int64_t>(0, end - late_since_ns_);
      late_ns_ += ended;
      ++late_bubbles_;
      late_ = false;
    }
    last_look_ns_ = now_ns;
    // The latest bubble that is over, with the gate shut: the word's.
    const uint32_t over = (word >> 1) & kBubbleMask;
    if (!late_ && !GateIsOpen(word) && oldest_unfinished && !BubbleBefore(over, *oldest_unfinished)) {
      late_ = true;
      late_since_ns_ = now_ns;
      late_bubble_ = over;  // one stretch covers late pieces of several bubbles
    }
    return ended;
  }

  // Late time in all, and the stretches of it (one per bubble whose work
  // ran late, unless several ran late back to back).
  int64_t late_ns() const { return late_ns_; }
  uint64_t late_bubbles() const { return late_bubbles_; }
  bool late() const { return late_; }

 private:
  const int64_t max_gap_ns_;
  int64_t last_look_ns_ = 0;
  bool late_ = false;
  uint32_t late_bubble_ = 0;  // unfinished pieces of this bubble or earlier are late
  int64_t late_since_ns_ = 0;
  int64_t late_ns_ = 0;
  uint64_t late_bubbles_ = 0;
};

}  // namespace freeride::gate
