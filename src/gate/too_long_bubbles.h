// Which bubbles count towards forgetting the length a held piece is judged
// by.  A piece whose predicted length (its kind's, or the common window's
// 95th percentile) is longer than the bubbles it meets would be held out of
// them for good; after kMostBubblesTooLong (a kind) or CommonTooLongBubbles
// (the window) bubbles that found it too long, LaunchGate::HoldUntilAdmitted
// forgets that length and judges the piece again.
//
// A bubble counts in one of two ways, and once at most:
// - at its first look with the deadline out (still ahead, nothing of the
//   program's queued), a piece that would not end by the deadline even begun
//   when the thread last saw the gate shut, before the bubble opened, is
//   longer than the whole bubble by its predicted length, however late the
//   look (the deadline comes out some 200 us after the opening);
// - at its end, a bubble the thread saw open promptly (held across the
//   opening, within two shut polls of its last shut sighting), whose deadline
//   it saw out and still ahead, with nothing queued at any look, in which the
//   piece never fitted: a piece that fits only begun at the opening itself,
//   or before the deadline came out, never fits at a look (a held thread
//   sees the opening up to a poll late, the deadline later still), and would
//   never count the first way.
// A bubble first looked at late (the program was busy on its CPU) does not
// count the second way: the piece may fit a bubble looked at from its
// opening.  A bubble that admits nothing (no forecast yet, a withheld window,
// the overhead guard's pause: its deadline out and already past) counts
// neither way, whatever the piece's length.  Both ways go by the piece's own
// length, not doubled while its task is demoted, and a bubble the piece would
// have been queued for at its own length, in it or ahead of it, does not
// count: a length that fits is not to be forgotten for the demotion.
//
// Pure; no clock.  One per held piece, on the holding thread.
#pragma once
#include <cstdint>
#include <optional>

namespace freeride::gate {

class TooLongBubbles {
 public:
  // What one look at the gate found, for the bubble it shows.
  struct Look {
    uint32_t bubble = 0;            // the gate word's bubble
    bool open = false;              // the gate read open
    bool prompt = false;            // seen open within two shut polls of the last shut sighting
    bool deadline_published = false;  // this bubble's deadline is out
    bool admitting = false;         // ... and still ahead
    bool queued = false;            // some of the program's work was counted as queued
    // The piece would not end by the deadline even begun at the last shut
    // sighting before this bubble, with nothing queued, the bubble admitting
    // (the first way; meaningful at the bubble's first look with its deadline out).
    bool longer_than_bubble = false;
  };

  // Whether the bubble being watched has ended (the gate now shut, or open
  // for another bubble) without the piece ever fitting it: it counts the
  // second way.  Asked first at each look, before the look's own verdicts
  // (NoteOwnLengthFits, Observe): those may be for the next bubble.  Stops
  // watching it either way.
  bool WatchedEndedUnfitted(uint32_t bubble, bool open) {
    if (!watch_ || (open && bubble == watch_->bubble)) return false;
    const Watch ended = *watch_;
    watch_.reset();
    return ended.prompt && ended.admitting && !ended.queued && !ended.counted && own_length_fits_ != ended.bubble;
  }

  // The piece, at its own undoubled length, would have been queued for
  // `bubble` (the open one, or the next one ahead of it): that bubble does
  // not count.
  void NoteOwnLengthFits(uint32_t bubble) { own_length_fits_ = bubble; }

  // Records a look at which the piece was held; true when it makes the
  // bubble count the first way (its first look with the deadline out).
  // An open bubble not yet watched is watched from here.
  bool Observe(const Look& look) {
    if (look.open && !watch_) watch_ = Watch{look.bubble, look.prompt};
    if (watch_) {
      watch_->admitting |= look.admitting;
      watch_->queued |= look.queued;
    }
    if (!look.deadline_published || judged_in_ == look.bubble) return false;
    judged_in_ = look.bubble;
    if (!look.longer_than_bubble) return false;
    if (watch_) watch_->counted = true;
    return true;
  }

 private:
  struct Watch {
    uint32_t bubble = 0;
    bool prompt = false;
    bool admitting = false;
    bool queued = false;
    bool counted = false;
  };
  std::optional<Watch> watch_;             // the open bubble the piece is held in
  std::optional<uint32_t> judged_in_;      // the last bubble judged with its deadline out
  std::optional<uint32_t> own_length_fits_;
};

}  // namespace freeride::gate
