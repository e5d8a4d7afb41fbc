// gate/too_long_bubbles.h: which bubbles count towards forgetting a held
// piece's length.  (LaunchGateTest runs the same rules through the hold on a
// fake clock and driver; these pin each rule alone.)
#include "gate/too_long_bubbles.h"

#include <gtest/gtest.h>

namespace freeride::gate {
namespace {

using Look = TooLongBubbles::Look;

// A look at open bubble `bubble`, held promptly from its opening, its
// deadline out and ahead, nothing queued; `longer`: the first way's verdict.
Look OpenLook(uint32_t bubble, bool longer = false) {
  return {.bubble = bubble, .open = true, .prompt = true, .deadline_published = true, .admitting = true,
          .longer_than_bubble = longer};
}

Look ShutLook(uint32_t bubble) { return {.bubble = bubble}; }

// Looks at `look`'s bubble, then sees it shut: whether it counted at its end.
bool EndsUnfitted(TooLongBubbles& bubbles, const Look& look) {
  EXPECT_FALSE(bubbles.WatchedEndedUnfitted(look.bubble, true));
  bubbles.Observe(look);
  return bubbles.WatchedEndedUnfitted(look.bubble, false);
}

TEST(TooLongBubbles, TheFirstWayCountsABubbleOnceAtItsFirstLookWithTheDeadlineOut) {
  TooLongBubbles bubbles;
  Look early = OpenLook(4, true);
  early.deadline_published = false;  // the daemon's deadline comes some 200 us after the opening
  EXPECT_FALSE(bubbles.Observe(early));
  EXPECT_TRUE(bubbles.Observe(OpenLook(4, true)));
  EXPECT_FALSE(bubbles.Observe(OpenLook(4, true)));  // the same bubble, looked at again
  // Counted the first way, it does not count again at its end.
  EXPECT_FALSE(bubbles.WatchedEndedUnfitted(4, false));
  EXPECT_TRUE(bubbles.Observe(OpenLook(5, true)));  // the next bubble is judged afresh
}

TEST(TooLongBubbles, ABubbleOnlyItsFirstLookWithTheDeadlineJudgesIsNotJudgedTheFirstWayLater) {
  TooLongBubbles bubbles;
  EXPECT_FALSE(bubbles.Observe(OpenLook(4, false)));  // fits at its first look (say, queue drains)
  EXPECT_FALSE(bubbles.Observe(OpenLook(4, true)));   // later looks do not count it the first way
}

TEST(TooLongBubbles, APromptlySeenAdmittingBubbleThePieceNeverFittedCountsAtItsEnd) {
  TooLongBubbles bubbles;
  EXPECT_TRUE(EndsUnfitted(bubbles, OpenLook(7)));
  // Nothing is watched now: a shut look, or the next bubble's opening, ends nothing.
  EXPECT_FALSE(bubbles.WatchedEndedUnfitted(8, false));
  // A bubble that opened without a shut sighting in between ends the watch too.
  bubbles.Observe(OpenLook(8));
  EXPECT_TRUE(bubbles.WatchedEndedUnfitted(9, true));
}

TEST(TooLongBubbles, ABubbleLookedAtLateQueuedInOrAdmittingNothingDoesNotCountAtItsEnd) {
  Look late = OpenLook(3);
  late.prompt = false;  // first looked at after the program's own CPU work
  TooLongBubbles a;
  EXPECT_FALSE(EndsUnfitted(a, late));

  Look queued = OpenLook(3);
  queued.queued = true;
  TooLongBubbles b;
  EXPECT_FALSE(EndsUnfitted(b, queued));

  Look withheld = OpenLook(3);
  withheld.admitting = false;  // a deadline out and already past: a withheld window, the guard's pause
  TooLongBubbles c;
  EXPECT_FALSE(EndsUnfitted(c, withheld));

  // Admitting at any look is enough; so is queued at any look to spoil it.
  TooLongBubbles d;
  d.Observe(withheld);
  d.Observe(OpenLook(3));
  EXPECT_TRUE(d.WatchedEndedUnfitted(3, false));
  TooLongBubbles e;
  e.Observe(OpenLook(3));
  e.Observe(queued);
  EXPECT_FALSE(e.WatchedEndedUnfitted(3, false));
}

TEST(TooLongBubbles, ABubbleTheDemotedPieceFitsAtItsOwnLengthDoesNotCountEitherWayAtItsEnd) {
  TooLongBubbles in_it;
  in_it.NoteOwnLengthFits(6);
  EXPECT_FALSE(EndsUnfitted(in_it, OpenLook(6)));
  // Noted for the bubble ahead, while the gate was still shut before it.
  TooLongBubbles ahead;
  ahead.Observe(ShutLook(5));
  ahead.NoteOwnLengthFits(6);
  EXPECT_FALSE(EndsUnfitted(ahead, OpenLook(6)));
  // Only that bubble: the next one counts.
  EXPECT_TRUE(EndsUnfitted(ahead, OpenLook(7)));
}

}  // namespace
}  // namespace freeride::gate
