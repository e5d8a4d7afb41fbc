// Owns every side task: the lifecycle state machine, admission onto lanes,
// launching through the ProcessSupervisor, journaling, and recovery after a
// restart.  The lanes ask it which tasks may run and tell it what ran.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "channel/task_segment.h"
#include "daemon/daemon_options.h"
#include "daemon/event_log.h"
#include "daemon/journal.h"
#include "daemon/lane_tasks.h"
#include "daemon/process_supervisor.h"
#include "daemon/task_cgroup.h"
#include "daemon/task_spec.h"
#include "events/task_state.h"
#include "daemon/progress_watch.h"
#include "freeride.pb.h"
#include "policy/dispatch_policy.h"
#include "policy/overrun_budget.h"

namespace freeride {

// Threads: Recover, Start and Shutdown from the owner's thread; every
// other member from any thread (each takes mu_).
class TaskManager final : public LaneTasks {
 public:
  // With `cgroups` (available), every task runs in a cgroup of its own.
  // Every time the manager reads (retry back-off, cancel grace, flip-log
  // intervals, event times) and Shutdown's grace are `env`'s.  `journal`,
  // `events`, `cgroups` and `env` outlive the manager.
  TaskManager(const DaemonOptions& options, Journal* journal, EventLog* events,
              const TaskCgroups* cgroups = nullptr, Env* env = Env::Default());
  // Shuts down with no grace.
  ~TaskManager();

  // Loads the journal: ended tasks stay as they were; tasks that were
  // launched go back to SUBMITTED to be relaunched (from their checkpoints).
  // Checks the task directories against it: a directory the journal does not
  // know, or one tied to another journal, means the journal lost tasks
  // (kDataLoss, unless options.accept_journal_loss: such directories are then
  // marked orphaned and never reused).  Task ids continue above every id the
  // journal or a directory ever had.  Adds human-readable notes about what
  // was recovered.  Call once, before Start().
  Status Recover(std::vector<std::string>* notes);
  // Starts the process supervisor and the housekeeping thread, which
  // launches admitted tasks.  Once, after Recover.
  void Start();
  // Stops housekeeping; asks iterative tasks to checkpoint and exit, waits up
  // to `grace` of the Env's time (less once every process has exited), then
  // kills the rest.  Task states stay as journaled so the
  // next daemon relaunches them.  Idempotent.
  void Shutdown(Nanos grace);

  // --- control API ---
  // Acknowledged (OK) only once the task is durable in the journal; when
  // the journal cannot store it, nothing of it is kept.  Else
  // kInvalidArgument (a bad spec), kAlreadyExists (a live task has the
  // name), kResourceExhausted (no lane has room) or kUnavailable (shutting
  // down).  Blocks on the journal's commit.
  Status Submit(const v1::TaskSpec& spec, v1::TaskInfo* out);
  // Cancels the task Get finds: one not yet launched ends CANCELLED at
  // once; a launched one is asked to stop and killed after
  // options.cancel_grace.  kNotFound, or kFailedPrecondition when it has
  // already ended; an error of the journal's means the cancel stands but is
  // not yet durable.
  Status Cancel(int64_t id, const std::string& name, v1::TaskInfo* out);
  // The task with `id` (when > 0), else the live one named `name`, else the
  // newest ended one of that name, as clients see it; kNotFound otherwise.
  Status Get(int64_t id, const std::string& name, v1::TaskInfo* out) const;
  // Tasks by id, oldest first: those with ids above `after_id`, at most
  // `limit` of them.
  std::vector<v1::TaskInfo> List(bool include_ended, int64_t after_id = 0,
                                 size_t limit = SIZE_MAX) const;

  // --- lane side: LaneTasks (daemon/lane_tasks.h), each under mu_ ---
  void Candidates(int lane, const std::vector<int64_t>& excluded,
                  std::vector<DispatchCandidate>* out) const override;
  std::shared_ptr<TaskRuntime> RuntimeOf(int64_t id) const override;
  void MarkRunning(int64_t id) override;
  void EndRun(int64_t id) override;
  // Records the flips only when the log is due one (TransitionLocked keeps
  // them to one a second).
  void NoteArmedRun(int64_t id) override;
  uint64_t DrainSteps(TaskRuntime& runtime, std::vector<TaskStep>* out) override;
  void AddHarvest(int64_t id, Nanos harvested) override;
  void AddAllowed(int64_t id, Nanos allowed) override;
  // A task over its OverrunBudget is demoted (logged, and from then on its
  // candidates are marked demoted for the dispatch policy), and killed,
  // FAILED without retries, if it stays over budget.
  void RecordOverrun(int64_t id, Nanos overrun, Nanos bubble) override;
  // The task ends FAILED without retries.
  void KillHung(int64_t id, Nanos overrun) override;
  void LaneCounts(int lane, uint32_t* resident, uint32_t* queued) const override;
  void GatedTasks(int lane, std::vector<GatedTask>* out) const override;

  // STATE/tasks/<id>.  Any thread.
  std::string task_dir(int64_t id) const;

 private:
  struct Record {
    v1::TaskInfo info;
    // info.state() as a value, set by InsertLocked and TransitionLocked (the
    // only writers of the state): the lanes' candidate scans read it at every
    // bubble, and the proto's string is for clients.
    TaskState state = TaskState::kSubmitted;
    bool warned_units = false;  // told the daemon's log once of units below 0 or not a number
    bool warned_log_trim = false;  // ... of a log trim that failed (--task-log-max-size)
    uint64_t submit_order = 0;
    std::string executable;
    std::shared_ptr<TaskRuntime> runtime;  // set while a process exists
    bool cancel_requested = false;
    Nanos cancel_kill_at = 0;
    Nanos retry_at = 0;
    std::unique_ptr<OverrunBudget> overrun;  // made at the first bubble it steps in
    std::string policy_kill;  // why the daemon killed it; it then ends FAILED
    Nanos last_flip_logged_ns = 0;     // the last PAUSED <-> RUNNING flip in the event log
    Nanos last_flip_journaled_ns = 0;  // and in the journal
    // The progress a program without the SDK shows (spec.progress_regex or
    // progress_file), made at launch; null without either.
    std::unique_ptr<ProgressWatch> progress_watch;
  };

  // The record's info as clients see it: with the task's step estimate, and
  // RUNNING while its process is inside a step.  mu_ held.
  v1::TaskInfo LiveInfoLocked(const Record& record) const;
  // Copies the task's progress and step count from its segment into its
  // record.  mu_ held.
  void RefreshProgressLocked(TaskRuntime& runtime);
  // Copies the task's progress, step count and unit from its segment, or,
  // for a task with a progress watch, the progress it has shown.
  // `runtime` is the process's counters are read from (not always
  // record.runtime: the lane may drain a process the record has let go).
  static void CopyCounters(const Record& record, const TaskRuntime& runtime, v1::TaskInfo* info);
  // Reads the progress watches of the resident tasks (housekeeping).
  void PollProgressWatches();
  // Keeps each resident task's stdout.log and stderr.log within
  // --task-log-max-size (daemon/task_logs.h).  Housekeeping's thread.
  void TrimTaskLogs();
  // An `overrun_budget` event (docs/event-log.md).  mu_ held.
  void EmitBudgetEventLocked(const Record& record, OverrunVerdict verdict, Nanos overrun,
                             const std::string& reason);
  // Kills the record's process for a policy reason.  mu_ held.
  void KillForPolicyLocked(Record& record, const std::string& reason);
  // Adds a record to tasks_ and by_id_.  mu_ held.
  Record& InsertLocked(Record record);
  // The record with `id`, or nullptr.  mu_ held.
  Record* ByIdLocked(int64_t id);
  const Record* ByIdLocked(int64_t id) const;
  // Whether the lane may run the record's task in a bubble: PAUSED, or
  // held until it attaches.  mu_ held.
  bool WaitsForABubbleLocked(const Record& record) const;
  // Sets or clears a record's runtime and keeps resident_ in step.  mu_ held.
  void SetRuntimeLocked(Record& record, std::shared_ptr<TaskRuntime> runtime);

  // Moves a record to `to`, journaling and logging the transition.  Must be
  // called with mu_ held.  Returns false (and changes nothing) when the
  // state machine forbids it.
  bool TransitionLocked(Record& record, TaskState to, const std::string& reason);
  void HousekeepingLoop();
  void AdmitAndLaunch();
  void PromoteReadyTasks();
  void EscalateCancels();
  // Fails the held tasks that ran the attach timeout in bubbles without
  // attaching to the SDK.
  void FailUnattachedTasks();
  bool Launch(int64_t id);
  // Says on stderr (at most every few seconds) that the journal failed.
  void ComplainAboutJournal(const Status& status);
  void OnProcessExit(const ProcessExit& exit);
  Record* FindLocked(int64_t id, const std::string& name);
  const Record* FindLocked(int64_t id, const std::string& name) const;
  int ChooseLaneLocked(uint64_t memory) const;
  std::vector<LaneLimits> Limits() const;

  const DaemonOptions options_;
  Env* const env_;
  Journal* journal_;
  EventLog* events_;
  const TaskCgroups* cgroups_;
  std::unique_ptr<ProcessSupervisor> supervisor_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Record> tasks_;  // by id, oldest first; never erased, so pointers stay valid
  // The same records by id, hashed: the lanes look tasks up at every bubble,
  // where a walk down a tree of thousands of cold nodes costs too much.
  std::unordered_map<int64_t, Record*> by_id_;
  // The tasks with a process, by lane: the lanes ask for candidates
  // at every bubble, and must not scan thousands of queued tasks to find them.
  std::map<int, std::vector<Record*>> resident_;
  int64_t next_id_ = 1;
  // Names of submissions waiting for the journal, so that two of one name
  // cannot both be accepted.
  std::set<std::string> submitting_names_;
  Nanos last_journal_complaint_ = 0;
  uint64_t next_submit_order_ = 1;
  bool stopping_ = false;
  bool shutting_down_ = false;  // exits are not task failures
  // Task processes reaped so far: Shutdown waits on it for the last one to
  // exit, through processes_env_, the real clock whatever env_ is (real
  // processes' time to exit; a fake clock nobody advances would wait for ever).
  std::atomic<uint32_t> exits_{0};
  Env* const processes_env_ = Env::Default();
  std::thread housekeeping_;
};

}  // namespace freeride
