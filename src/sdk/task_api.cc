// The side-task half of the C ABI, a thin shell over TaskChannel.
#include <cstdlib>
#include <cstring>
#include <new>

#include <stdexcept>
#include <string>

#include "freeride/freeride.h"
#include "freeride/task.h"
#include "sdk/task_channel.h"

using freeride::TaskChannel;

namespace {

// What freeride_step_parts() declared for the step running on this thread.
thread_local int declared_parts = 1;
// What freeride_step_idle() declared for the step running on this thread.
thread_local bool declared_idle = false;

// The C hooks as an IterativeTask, so that one runner serves both.
class ForeignTask : public freeride::IterativeTask {
 public:
  explicit ForeignTask(const freeride_iterative_task& hooks) : h_(hooks) {}
  std::string unit() const override { return h_.unit ? h_.unit : "steps"; }
  void Init() override { Check(h_.init, "init"); }
  freeride::StepResult Step() override {
    double units = 0;
    int done = 0;
    declared_parts = 1;
    declared_idle = false;
    if (h_.step(h_.user, &units, &done) != 0) Fail("step");
    return {units, done != 0, declared_parts, declared_idle};
  }
  void Pause() override { Check(h_.pause, "pause"); }
  void Resume() override { Check(h_.resume, "resume"); }
  void Finish() override { Check(h_.finish, "finish"); }
  bool Save(const std::string& path) override {
    return h_.save && h_.save(h_.user, path.c_str()) == 1;
  }
  bool Restore(const std::string& path) override {
    return h_.restore && h_.restore(h_.user, path.c_str()) == 1;
  }
  uint64_t peak_memory_bytes() const override {
    return h_.peak_memory_bytes ? h_.peak_memory_bytes(h_.user) : 0;
  }

 private:
  void Check(int (*hook)(void*), const char* name) {
    if (hook && hook(h_.user) != 0) Fail(name);
  }
  [[noreturn]] void Fail(const char* name) {
    const char* why = h_.error ? h_.error(h_.user) : nullptr;
    throw std::runtime_error(std::string(name) + " failed" + (why && *why ? ": " + std::string(why) : ""));
  }
  freeride_iterative_task h_;
};

}  // namespace

struct freeride_task {
  std::unique_ptr<TaskChannel> channel;
};

extern "C" {

int freeride_task_announce(void) {
  const char* path = std::getenv(freeride::kEnvTaskSegment);
  if (!path || !*path) return 0;
  freeride::TaskSegment segment;
  std::string error;
  if (!segment.Open(path, &error)) return 0;
  segment.set_state(freeride::TaskProcessState::kAttached);
  return 1;
}

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
  if (!task) return -1;  // nothing to wait for: a loop until -1 ends
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

int freeride_task_second_look(freeride_task* task) {
  return task && task->channel->TakeSecondLook() ? 1 : 0;
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

void freeride_task_yield_idle(freeride_task* task) {
  if (task) task->channel->Yield(/*idle=*/true);
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

int64_t freeride_step_budget_ns(void) { return freeride::StepBudgetNs(); }

void freeride_step_parts(int parts) { declared_parts = parts > 0 ? parts : 1; }

void freeride_step_idle(void) { declared_idle = true; }

int freeride_run_iterative_task(const freeride_iterative_task* hooks, int standalone,
                                double seconds) {
  if (!hooks || !hooks->step) return 2;
  ForeignTask task(*hooks);
  return freeride::RunIterativeTask(task, {.standalone = standalone != 0, .seconds = seconds});
}

}  // extern "C"
