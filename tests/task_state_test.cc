#include "events/task_state.h"

#include <gtest/gtest.h>

namespace freeride {
namespace {

TEST(TaskState, FollowsTheLifecycle) {
  using S = TaskState;
  EXPECT_TRUE(IsTransitionAllowed(S::kSubmitted, S::kCreated));
  EXPECT_TRUE(IsTransitionAllowed(S::kCreated, S::kPaused));
  EXPECT_TRUE(IsTransitionAllowed(S::kPaused, S::kRunning));
  EXPECT_TRUE(IsTransitionAllowed(S::kRunning, S::kPaused));
  EXPECT_TRUE(IsTransitionAllowed(S::kRunning, S::kFinished));
  EXPECT_TRUE(IsTransitionAllowed(S::kRunning, S::kSubmitted)) << "relaunch after restart";
  EXPECT_FALSE(IsTransitionAllowed(S::kSubmitted, S::kRunning)) << "must be created first";
  EXPECT_FALSE(IsTransitionAllowed(S::kSubmitted, S::kFinished));
  for (S end : {S::kFinished, S::kFailed, S::kCancelled}) {
    EXPECT_TRUE(IsTerminal(end));
    for (S to : {S::kSubmitted, S::kCreated, S::kPaused, S::kRunning, S::kFinished, S::kFailed})
      EXPECT_FALSE(IsTransitionAllowed(end, to)) << "ended tasks stay ended";
  }
}

TEST(TaskState, NamesRoundTrip) {
  for (TaskState s : {TaskState::kSubmitted, TaskState::kCreated, TaskState::kPaused,
                      TaskState::kRunning, TaskState::kFinished, TaskState::kFailed,
                      TaskState::kCancelled})
    EXPECT_EQ(ParseState(StateName(s)), s);
  EXPECT_FALSE(ParseState("SLEEPING").has_value());
}

}  // namespace
}  // namespace freeride
