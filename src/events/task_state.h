// The side-task lifecycle:
//   SUBMITTED -> CREATED (launched, init done) -> PAUSED <-> RUNNING
//             -> FINISHED | FAILED | CANCELLED
// A task goes back to SUBMITTED to be launched again: after a daemon restart
// or for a retry.  The functions below are pure; any thread.
#pragma once
#include <optional>
#include <string_view>

namespace freeride {

enum class TaskState { kSubmitted, kCreated, kPaused, kRunning, kFinished, kFailed, kCancelled };

// The state's upper-case name, e.g. "PAUSED" (a static string).
const char* StateName(TaskState state);
// The state named exactly `name` (upper case); nullopt for anything else.
std::optional<TaskState> ParseState(std::string_view name);
// FINISHED, FAILED and CANCELLED: states a task never leaves.
bool IsTerminal(TaskState state);
// True when `from` may move to `to`: never out of an ended state; to FAILED
// or CANCELLED from any other; else along the arrows above, back to
// SUBMITTED from any live state, and to FINISHED from any but SUBMITTED.
bool IsTransitionAllowed(TaskState from, TaskState to);

}  // namespace freeride
