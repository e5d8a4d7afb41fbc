// The side-task half of the C ABI, a thin shell over TaskChannel.
#include <cstring>
#include <new>

#include "freeride/freeride.h"
#include "sdk/task_channel.h"

using freeride::TaskChannel;

struct freeride_task {
  std::unique_ptr<TaskChannel> channel;
};

extern "C" {

freeride_task* freeride_task_attach(char* error, size_t error_len) {
  std::string reason;
  auto channel = TaskChannel::AttachFromEnvironment(&reason);
  if (!channel) {
    if (error && error_len > 0) {
      std::strncpy(error, reason.c_str(), error_len - 1);
      error[error_len - 1] = '\0';
    }
    return nullptr;
  }
  auto* task = new (std::nothrow) freeride_task();
  if (task) task->channel = std::move(channel);
  return task;
}

void freeride_task_set_unit(freeride_task* task, const char* unit) {
  if (task && unit) task->channel->SetUnit(unit);
}

void freeride_task_ready(freeride_task* task) {
  if (task) task->channel->Ready();
}

int freeride_task_wait_grant(freeride_task* task, int64_t timeout_ns) {
  if (!task) return 0;
  switch (task->channel->WaitForGrant(timeout_ns)) {
    case TaskChannel::Wake::kGranted: return 1;
    case TaskChannel::Wake::kTimeout: return 0;
    case TaskChannel::Wake::kStop: return -1;
    case TaskChannel::Wake::kCheckpoint: return 2;
  }
  return 0;
}

int freeride_task_next_step_fits(freeride_task* task) {
  return task && task->channel->NextStepFits() ? 1 : 0;
}

void freeride_task_record_step(freeride_task* task, int64_t start_ns, int64_t end_ns,
                               double units) {
  if (task) task->channel->RecordStep(start_ns, end_ns, units);
}

void freeride_task_add_progress(freeride_task* task, double units) {
  if (task) task->channel->AddProgress(units);
}

void freeride_task_yield(freeride_task* task) {
  if (task) task->channel->Yield();
}

int64_t freeride_task_step_estimate_ns(const freeride_task* task) {
  return task ? task->channel->StepEstimate() : 0;
}

const char* freeride_task_checkpoint_dir(const freeride_task* task) {
  return task ? task->channel->checkpoint_dir().c_str() : "";
}

void freeride_task_finished(freeride_task* task, int ok) {
  if (task) task->channel->Finished(ok != 0);
}

void freeride_task_detach(freeride_task* task) { delete task; }

}  // extern "C"
