// The per-task control segment, shared by the lane dispatcher (in the
// daemon) and one side-task process.
//
// Daemon -> task: a grant to run steps until a deadline inside one bubble,
// and commands (stop, checkpoint).  grant_seq is the task's futex word.
// Task -> daemon: lifecycle state, progress, step-time estimate and a ring of
// step records (start, end, units).  ack_seq is the daemon's futex word.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "base/clock.h"
#include "base/env.h"
#include "channel/shared_mapping.h"

namespace freeride {

constexpr uint64_t kTaskSegmentMagic = 0x46525441534b3031ULL;  // "FRTASK01"
constexpr uint32_t kTaskSegmentVersion = 6;
// Step records kept for the lane, which reads them in batches (up to every
// 100 ms while a task has its lane to itself): room for steps of 25 us.
constexpr uint32_t kStepRingSize = 4096;

enum class TaskProcessState : uint32_t {
  kStarting = 0,  // launched, init() not finished
  kReady = 1,     // init() done, waiting for a grant
  kStepping = 2,  // inside a grant
  kYielded = 3,   // grant handed back
  kFinished = 4,  // finish() done, exiting with success
  kFailed = 5,    // the task reported an error
  kAttached = 6,  // the SDK opened the segment; init() runs (before kReady)
};

enum class TaskCommand : uint32_t { kNone = 0, kStop = 1, kCheckpoint = 2 };

struct StepRecord {
  int64_t start_ns;
  int64_t end_ns;
  double units;
  uint32_t bubble_seq;  // the bubble the step ran in (an armed task may be a bubble ahead of the lane)
  uint32_t unused;
};

struct TaskSegmentLayout {
  uint64_t magic;
  uint32_t version;
  uint32_t ring_size;
  int64_t task_id;

  // --- written by the daemon ---
  alignas(64) std::atomic<uint32_t> grant_seq;
  std::atomic<uint32_t> task_sleeping;
  std::atomic<uint32_t> grant_active;
  std::atomic<uint32_t> granted_bubble_seq;
  std::atomic<int64_t> grant_deadline_ns;
  std::atomic<uint32_t> command;
  std::atomic<uint32_t> armed;  // 1: wait on the lane's bubble_seq, take bubbles directly

  // --- written by the task ---
  alignas(64) std::atomic<uint32_t> ack_seq;
  std::atomic<uint32_t> daemon_sleeping;
  std::atomic<uint32_t> state;
  std::atomic<uint64_t> steps_done;
  std::atomic<uint64_t> progress_bits;  // double, bit-cast
  std::atomic<int64_t> step_estimate_ns;
  std::atomic<uint32_t> served_bubble_seq;  // the bubble the last yield was for
  std::atomic<uint32_t> taken_bubble_seq;   // the bubble the task took last (stepping in it)
  // The bubble the task last handed back without using the rest because it
  // had nothing to do (an idle step) or finished, rather than because its
  // next step did not fit.  Stored before served_bubble_seq.
  std::atomic<uint32_t> rest_free_bubble_seq;
  // 1: steps_done and progress count the work the task resumed from (its
  // checkpoint's, or none for a fresh start), so they are the task's totals;
  // 0: they count this process's work only.  Set before kReady.
  std::atomic<uint32_t> counters_are_totals;
  char progress_unit[32];

  alignas(64) std::atomic<uint64_t> ring_head;
  StepRecord ring[kStepRingSize];
};

// One process's mapping of a task segment.  Create, Open, Close and set_env
// are the owner's, with no other call in flight; the other members work on
// the shared layout, from the side (daemon or task) each names.
class TaskSegment {
 public:
  // Daemon side: creates the segment for task_id, or resets an existing
  // file's content.  False with *error when it cannot be mapped.
  bool Create(const std::string& path, int64_t task_id, std::string* error);
  // Task side: maps an existing segment and validates its header.  False
  // with *error when it is missing or not a segment of this version.
  bool Open(const std::string& path, std::string* error);
  // Unmaps the segment; layout() is then null.
  void Close() { mapping_.Reset(); layout_ = nullptr; }
  bool is_open() const { return layout_ != nullptr; }
  TaskSegmentLayout* layout() const { return layout_; }

  // Daemon, the lane's thread: grants steps inside bubble `bubble_seq` until
  // deadline and wakes the task.  Revoke withdraws the grant (the task
  // yields after its step).
  void Grant(uint32_t bubble_seq, Nanos deadline);
  void Revoke();
  // Daemon, any thread: posts `command` (replacing one not yet seen) and
  // wakes the task.
  void SendCommand(TaskCommand command);
  // Daemon, the lane's thread: arms or disarms the task for direct bubble
  // pick-up, and wakes it.
  void SetArmed(bool armed);
  // Daemon: sleeps until ack_seq differs from `seen` or the timeout passes;
  // returns the new ack_seq.
  uint32_t WaitForAck(uint32_t seen, Nanos timeout) const;
  // Wakes a daemon sleeping in WaitForAck (used by the task, and by the
  // daemon's supervisor when the task process exits).  Any thread.
  void Acknowledge();

  // Task: sleeps until grant_seq differs from `seen` or the timeout passes;
  // returns the new grant_seq.
  uint32_t WaitForGrant(uint32_t seen, Nanos timeout) const;
  // Task: counts one step and its work, and appends its record to the ring
  // (wait-free).  The counters are exact; the ring keeps the last
  // kStepRingSize records for the event log.  One thread at a time: the
  // counters have a single writer.
  void RecordStep(Nanos start, Nanos end, double units, uint32_t bubble_seq);
  // Task: counts work done outside a step (imperative tasks).  The same
  // single writer as RecordStep.
  void AddProgress(double units);

  TaskProcessState state() const {
    return static_cast<TaskProcessState>(layout_->state.load(std::memory_order_acquire));
  }
  void set_state(TaskProcessState s) {
    layout_->state.store(static_cast<uint32_t>(s), std::memory_order_release);
  }
  // The work counted so far.  The task writes it, so the daemon checks it
  // before use.  Any thread.
  double progress() const;

  // The Env whose waits and wake-ups this segment uses (Env::Default()
  // unless a test sets a fake).  Set before any other thread uses the
  // segment; it must outlive the segment's use.
  void set_env(Env* env) { env_ = env; }
  Env* env() const { return env_; }

 private:
  SharedMapping mapping_;
  TaskSegmentLayout* layout_ = nullptr;
  Env* env_ = Env::Default();
};

}  // namespace freeride
