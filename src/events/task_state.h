// The side-task lifecycle:
//   SUBMITTED -> CREATED (launched, init done) -> PAUSED <-> RUNNING
//             -> FINISHED | FAILED | CANCELLED
// A task goes back to SUBMITTED to be launched again: after a daemon restart
// or for a retry.
#pragma once
#include <optional>
#include <string_view>

namespace freeride {

enum class TaskState { kSubmitted, kCreated, kPaused, kRunning, kFinished, kFailed, kCancelled };

const char* StateName(TaskState state);
std::optional<TaskState> ParseState(std::string_view name);
bool IsTerminal(TaskState state);
// True when `from` may move to `to`.
bool IsTransitionAllowed(TaskState from, TaskState to);

}  // namespace freeride
