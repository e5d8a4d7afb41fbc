#include "policy/task_admission.h"

#include <algorithm>
#include <climits>

namespace freeride {

int ChooseLane(std::span<const LaneLoad> lanes, uint64_t memory_bytes) {
  int best = -1;
  int best_load = INT_MAX;
  for (const LaneLoad& lane : lanes) {
    if (lane.capacity_bytes != 0 && memory_bytes > lane.capacity_bytes) continue;
    if (lane.live_tasks < best_load) {
      best_load = lane.live_tasks;
      best = lane.index;
    }
  }
  return best;
}

std::vector<int64_t> TasksToLaunch(const LaneRoom& room, std::vector<QueuedTask> queued) {
  std::vector<int64_t> launch;
  int resident = room.resident;
  uint64_t memory = room.resident_bytes;
  if (resident >= room.max_resident) return launch;
  std::sort(queued.begin(), queued.end(), [](const QueuedTask& a, const QueuedTask& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.submit_order < b.submit_order;
  });
  for (const QueuedTask& task : queued) {
    if (resident >= room.max_resident) break;
    if (room.capacity_bytes != 0 && memory + task.memory_bytes > room.capacity_bytes) continue;
    ++resident;
    memory += task.memory_bytes;
    launch.push_back(task.task_id);
  }
  return launch;
}

}  // namespace freeride
