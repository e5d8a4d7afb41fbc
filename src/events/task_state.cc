#include "events/task_state.h"

namespace freeride {

const char* StateName(TaskState state) {
  switch (state) {
    case TaskState::kSubmitted: return "SUBMITTED";
    case TaskState::kCreated: return "CREATED";
    case TaskState::kPaused: return "PAUSED";
    case TaskState::kRunning: return "RUNNING";
    case TaskState::kFinished: return "FINISHED";
    case TaskState::kFailed: return "FAILED";
    case TaskState::kCancelled: return "CANCELLED";
  }
  return "?";
}

std::optional<TaskState> ParseState(std::string_view name) {
  for (TaskState s : {TaskState::kSubmitted, TaskState::kCreated, TaskState::kPaused,
                      TaskState::kRunning, TaskState::kFinished, TaskState::kFailed,
                      TaskState::kCancelled}) {
    if (name == StateName(s)) return s;
  }
  return std::nullopt;
}

bool IsTerminal(TaskState state) {
  return state == TaskState::kFinished || state == TaskState::kFailed ||
         state == TaskState::kCancelled;
}

bool IsTransitionAllowed(TaskState from, TaskState to) {
  if (IsTerminal(from)) return false;
  if (to == TaskState::kFailed || to == TaskState::kCancelled) return true;
  switch (from) {
    case TaskState::kSubmitted:
      return to == TaskState::kCreated || to == TaskState::kSubmitted;  // retry before init
    case TaskState::kCreated:
      return to == TaskState::kPaused || to == TaskState::kSubmitted ||
             to == TaskState::kFinished;
    case TaskState::kPaused:
      return to == TaskState::kRunning || to == TaskState::kSubmitted ||
             to == TaskState::kFinished;
    case TaskState::kRunning:
      return to == TaskState::kPaused || to == TaskState::kSubmitted ||
             to == TaskState::kFinished;
    default:
      return false;
  }
}

}  // namespace freeride
