// Which lane a new task joins, and which queued tasks a lane launches now.
// Pure: the task manager passes what it knows under its lock and carries
// the answer out.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace freeride {

struct LaneLoad {
  int index = 0;
  uint64_t capacity_bytes = 0;  // memory side tasks may hold; 0: unknown, no limit
  int live_tasks = 0;           // placed there and not ended
};

// The lane with the fewest live tasks among those whose capacity holds
// `memory_bytes` (the first of equals); -1 when none does.
int ChooseLane(std::span<const LaneLoad> lanes, uint64_t memory_bytes);

struct LaneRoom {
  uint64_t capacity_bytes = 0;  // 0: unknown, no limit
  int resident = 0;             // launched and not ended
  uint64_t resident_bytes = 0;  // their declared memory
  int max_resident = 0;
};

struct QueuedTask {
  int64_t task_id = 0;
  int priority = 0;
  uint64_t submit_order = 0;
  uint64_t memory_bytes = 0;
};

// The queued tasks to launch on a lane with `room`, in launch order: highest
// priority first, then first submitted, each while the lane has a resident
// place left and its memory fits beside the residents'.  A task too big for
// what is left is passed over, not waited for: a smaller one behind it may
// fit.
std::vector<int64_t> TasksToLaunch(const LaneRoom& room, std::vector<QueuedTask> queued);

}  // namespace freeride
