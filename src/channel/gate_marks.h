// Bubble marks read from the lane's gate word, so that the trainer's stream
// carries no host callback: the stage's stream writes OpenValue(n) where its
// bubble n begins and ClosedValue(n) where it ends (gate/gate_page.h), the
// training thread leaves the bubble's slot in a ring beside it, and a
// watcher thread in the stage's process (gate_mark_watcher.h) turns what
// the word shows into begin and end marks, timed when it sees them.
//
// This file is the pure part: which marks a newly read word value implies.
// A watcher polls, so it may see a bubble's end without its begin, or skip
// whole bubbles; those are marked as begun and ended at the moment it saw
// them (length 0: a short forecast wastes a little of a slot, a long one
// overruns it), in order, so the daemon still sees every slot of an
// iteration.
#pragma once
#include <atomic>
#include <cstdint>

namespace freeride {

// What the training thread records for its bubble `bubble` before its
// stream opens the gate.  `bubble` is stored last (release), so a reader
// that finds its own number there reads the rest whole.
struct GateMarkRecord {
  std::atomic<uint32_t> bubble{0};
  uint32_t slot = 0;
  int64_t predicted_ns = 0;
  uint64_t free_memory_bytes = 0;
};

inline constexpr uint32_t kGateMarkRecords = 1024;

enum class GateMarkKind { kBegin, kEnd };

struct GateMark {
  GateMarkKind kind;
  uint32_t bubble;
  uint32_t slot;               // begin marks only
  int64_t predicted_ns;        // begin marks only
  uint64_t free_memory_bytes;  // begin marks only
  bool seen_open;              // false: its open was not seen (a length-0 bubble)
};

// The bubbles of one stage, as its watcher has seen them.  Bubble numbers
// are the stage's own (1, 2, ... as it opens them, 31 bits, wrapping).  Not
// thread-safe: the watcher's alone.
class GateMarkReader {
 public:
  // `last_opened`: the number of the stage's last bubble opened before the
  // reader starts (0: none); the reader marks the ones after it.
  explicit GateMarkReader(uint32_t last_opened);

  // Marks implied by the word `word`, read after the stage has enqueued its
  // writes up to bubble `enqueued` (its last opened).  A word naming a
  // bubble outside those not yet marked (an earlier stage's, or one already
  // ended) implies nothing.  `records` is the stage's ring of
  // kGateMarkRecords; a bubble whose record was overwritten or is not
  // visible yet is skipped (counted in skipped()).  Calls emit(const
  // GateMark&) for each mark, in order.  At most kGateMarkRecords bubbles
  // are marked per call; further ones wait for the next.
  template <typename Emit>
  void Observe(uint32_t word, uint32_t enqueued, const GateMarkRecord* records, Emit&& emit);

  // The stage could not enqueue the close of `bubble`: ends it now if it is
  // the one open; if the word has not shown it open yet, it is ended as soon
  // as it begins.
  template <typename Emit>
  void ForceEnd(uint32_t bubble, Emit&& emit);

  // Whether `bubble` has been marked begun and ended, recently (within a
  // ring's worth of bubbles).  A word showing such a bubble open again is
  // one whose close will never come (forced) or landed before its open (the
  // two written on unordered streams): its watcher closes it.
  bool Ended(uint32_t bubble) const {
    const uint32_t ago = Distance(bubble & kBubbleMask, next_);
    return bubble != 0 && bubble != open_ && ago >= 1 && ago <= kGateMarkRecords;
  }

  // The bubble begun and not ended (0: none), and the next to begin.
  uint32_t open() const { return open_; }
  uint32_t next() const { return next_; }
  uint64_t skipped() const { return skipped_; }

  static constexpr uint32_t kBubbleMask = 0x7fffffffu;
  static uint32_t Distance(uint32_t from, uint32_t to) { return (to - from) & kBubbleMask; }
  // The bubble after `bubble`; 0 is skipped (it means "none"), as the stage
  // skips it when its count wraps.
  static uint32_t Next(uint32_t bubble) {
    const uint32_t next = (bubble + 1) & kBubbleMask;
    return next == 0 ? 1 : next;
  }

 private:
  bool Record(uint32_t bubble, const GateMarkRecord* records, GateMark* begin);

  uint32_t open_ = 0;
  uint32_t next_;
  uint32_t forced_ = 0;  // ended before its open was seen: ended at its begin
  uint64_t skipped_ = 0;
};

template <typename Emit>
void GateMarkReader::Observe(uint32_t word, uint32_t enqueued, const GateMarkRecord* records,
                             Emit&& emit) {
  const uint32_t bubble = (word >> 1) & kBubbleMask;
  const bool is_open = (word & 1u) != 0;
  if (bubble == 0) return;  // never a stage's bubble: a new page's word
  const uint32_t first = open_ != 0 ? open_ : next_;
  // The bubbles not marked yet that the stage has opened: first..enqueued.
  if (Distance(first, bubble) >= Distance(first, Next(enqueued & kBubbleMask))) return;
  if (open_ != 0) {
    if (bubble == open_ && is_open) return;  // still open
    const uint32_t ended = open_;
    emit(GateMark{GateMarkKind::kEnd, ended, 0, 0, 0, true});
    open_ = 0;
    if (bubble == ended) return;  // its close
  }
  for (uint32_t n = 0; next_ != bubble && n < kGateMarkRecords; ++n) {
    GateMark begin{GateMarkKind::kBegin, next_, 0, 0, 0, false};
    if (next_ == forced_) forced_ = 0;
    if (Record(next_, records, &begin)) {
      emit(begin);
      emit(GateMark{GateMarkKind::kEnd, next_, 0, 0, 0, false});
    }
    next_ = Next(next_);
  }
  if (next_ != bubble) return;  // more than a ring's worth behind: the rest next time
  GateMark begin{GateMarkKind::kBegin, bubble, 0, 0, 0, is_open};
  next_ = Next(bubble);
  if (!Record(bubble, records, &begin)) return;
  emit(begin);
  if (is_open && bubble != forced_) {
    open_ = bubble;
  } else {
    emit(GateMark{GateMarkKind::kEnd, bubble, 0, 0, 0, false});
    if (bubble == forced_) forced_ = 0;
  }
}

template <typename Emit>
void GateMarkReader::ForceEnd(uint32_t bubble, Emit&& emit) {
  bubble &= kBubbleMask;
  if (bubble == 0) return;
  if (open_ == bubble) {
    emit(GateMark{GateMarkKind::kEnd, open_, 0, 0, 0, true});
    open_ = 0;
  } else if (Distance(next_, bubble) < kGateMarkRecords) {
    forced_ = bubble;  // not seen open yet
  }
}

}  // namespace freeride
