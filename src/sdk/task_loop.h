// An iterative task's loop under a daemon: waits for grants (or takes
// bubbles while armed), steps while the next step fits, takes the second
// look, hands bubbles back, and checkpoints between them.
#pragma once
#include "freeride/task.h"
#include "sdk/task_channel.h"

namespace freeride {

// Runs `task` on `channel` until the task is done (0) or the daemon stops it
// (0, after a checkpoint).  Time and waits are the channel's Env, so a test
// runs the loop on fake time.  On the task's thread; throws what the task
// throws.
int RunUnderDaemon(IterativeTask& task, TaskChannel& channel);

}  // namespace freeride
