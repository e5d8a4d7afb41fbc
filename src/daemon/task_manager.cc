#include "daemon/task_manager.h"

#include "base/say.h"
#include "daemon/mps_control.h"
#include "daemon/task_logs.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "base/paths.h"
#include "base/units.h"
#include "base/utf8.h"
#include "channel/step_accounting.h"
#include "daemon/launch_plan.h"
#include "daemon/task_dirs.h"
#include "policy/task_admission.h"
#include "sdk/checkpoint_progress.h"
#include "daemon/task_spec.h"
#include "sdk/task_channel.h"

extern char** environ;

namespace freeride {
namespace {

// How often housekeeping looks at the tasks, in real time: what it looks
// for (a task's segment turning ready) changes with no wake-up.  The
// deadlines it judges (back-off, cancel grace) are the Env's.
constexpr Nanos kHousekeepingInterval = 100 * kMillisecond;
constexpr size_t kStderrTailBytes = 4096;
// How often a task's PAUSED <-> RUNNING flips reach the journal.
constexpr Nanos kFlipJournalInterval = 10 * kSecond;
// How often a task's PAUSED <-> RUNNING flips reach the event log.
constexpr Nanos kFlipLogInterval = kSecond;

// Whether a flip is due to be recorded, `last` being when one last was (0: never).
bool FlipDue(Nanos last, Nanos now, Nanos interval) { return last == 0 || now - last >= interval; }

TaskState StateOf(const v1::TaskInfo& info) {
  return ParseState(info.state()).value_or(TaskState::kFailed);
}

}  // namespace

bool TaskRuntime::Attached() const { return segment->state() != TaskProcessState::kStarting; }

// The signal first: it stops the process group at once, while a write to
// cgroup.freeze can wait on the kernel's cgroup lock (held by any cgroup
// being made or removed) for milliseconds.  The freeze then catches the
// processes that left the group.
Nanos TaskRuntime::Stop() {
  ProcessSupervisor::Signal(pid, SIGSTOP);
  Nanos stopped = segment->env()->Now();
  if (cgroup) cgroup->Freeze(true);
  return stopped;
}

Nanos TaskRuntime::Continue(const std::function<bool()>& still_wanted) {
  // Read before the thaw and the signal, as Stop reads after them: a run is
  // timed from before the task can run to after it cannot, even when this
  // thread is preempted in between.
  Nanos continued = segment->env()->Now();
  if (cgroup) cgroup->Freeze(false);
  if (still_wanted && !still_wanted()) {
    if (cgroup) cgroup->Freeze(true);
    return 0;
  }
  ProcessSupervisor::Signal(pid, SIGCONT);
  return continued;
}

void TaskRuntime::Kill() {
  if (cgroup) cgroup->Kill();
  ProcessSupervisor::Signal(pid, SIGKILL);
}

void TaskRuntime::Terminate() {
  ProcessSupervisor::Signal(pid, SIGTERM);
  Continue();
}

TaskManager::TaskManager(const DaemonOptions& options, Journal* journal, EventLog* events,
                         const TaskCgroups* cgroups, Env* env)
    : options_(options), env_(env), journal_(journal), events_(events),
      cgroups_(cgroups && cgroups->available() ? cgroups : nullptr) {}

TaskManager::~TaskManager() { Shutdown(0); }

std::string TaskManager::task_dir(int64_t id) const {
  return fmt::format("{}/tasks/{}", options_.state_dir, id);
}

std::vector<LaneLimits> TaskManager::Limits() const {
  std::vector<LaneLimits> limits;
  for (const LaneConfig& l : options_.lanes) limits.push_back({l.index, l.capacity_bytes});
  return limits;
}

Status TaskManager::Recover(std::vector<std::string>* notes) {
  const bool accept = options_.accept_journal_loss;
  std::vector<v1::TaskInfo> stored;
  std::vector<int64_t> unreadable;
  Status loaded = journal_->LoadTasks(&stored, &unreadable);
  if (!loaded.ok()) {
    if (!accept)
      return {loaded.code, loaded.message + "; the daemon will not start without these tasks. "
                                            "Keep a copy of the state directory; to start with "
                                            "the tasks that can be read, pass "
                                            "--accept-journal-loss"};
    notes->push_back(loaded.message + "; accepted (--accept-journal-loss)");
  }
  int64_t highest = 0;
  if (Status s = journal_->HighestTaskId(&highest); !s.ok()) return s;
  // Every task directory must belong to a task of this journal.
  std::set<int64_t> known;
  for (const v1::TaskInfo& info : stored) known.insert(info.id());
  const std::string& uuid = journal_->uuid();
  std::vector<std::string> lost;
  std::vector<int64_t> lost_ids;
  for (int64_t id : ListTaskDirIds(options_.state_dir + "/tasks")) {
    highest = std::max(highest, id);
    std::string dir = task_dir(id);
    if (TaskDirOrphaned(dir)) continue;
    std::string owner = TaskDirJournal(dir);
    if (known.count(id) && (owner == uuid || owner.empty() || accept)) {
      if (owner != uuid)
        if (Status s = TieTaskDir(dir, uuid); !s.ok()) return s;
      continue;
    }
    lost_ids.push_back(id);
    lost.push_back(known.count(id) ? fmt::format("{} (tied to journal {})", id, owner)
                                   : std::to_string(id));
  }
  if (!lost.empty()) {
    std::string why = fmt::format(
        "the journal ({}, {}) does not know the tasks of {} directories in {}/tasks: {}. The "
        "journal was emptied, replaced, or lost its last commits",
        uuid, journal_->created() ? "new" : fmt::format("{} tasks", stored.size()), lost.size(),
        options_.state_dir, fmt::join(lost, ", "));
    if (!accept)
      return {ErrorCode::kDataLoss,
              why + "; the daemon will not start over them. Keep a copy of the state directory "
                    "(the journal.db.damaged-* files too, if any); to start anyway, pass "
                    "--accept-journal-loss: these directories are then kept, marked orphaned, and "
                    "never reused"};
    for (int64_t id : lost_ids)
      if (Status s = MarkTaskDirOrphaned(task_dir(id), why); !s.ok()) return s;
    notes->push_back(why + "; accepted (--accept-journal-loss): marked orphaned, never reused");
  }

  std::lock_guard<std::mutex> lock(mu_);
  next_id_ = highest + 1;
  size_t relaunch = 0, queued = 0, ended = 0;
  const std::vector<LaneLimits> lanes = Limits();
  for (v1::TaskInfo& info : stored) {
    Record record;
    record.submit_order = next_submit_order_++;
    TaskState state = StateOf(info);
    info.set_pid(0);
    record.info = info;
    Record& inserted = InsertLocked(std::move(record));
    if (IsTerminal(state)) {
      ++ended;
      continue;
    }
    if (inserted.info.lane() >= static_cast<int>(options_.lanes.size())) {
      TransitionLocked(inserted, TaskState::kFailed,
                       fmt::format("lane {} no longer exists after restart", inserted.info.lane()));
      continue;
    }
    std::string error = ValidateSpec(inserted.info.spec(), lanes, &inserted.executable);
    if (!error.empty()) {
      TransitionLocked(inserted, TaskState::kFailed, "cannot relaunch after restart: " + error);
      continue;
    }
    // It resumes from its checkpoint, with the work the checkpoint holds.
    if (auto resumed = ReadCheckpointProgress(task_dir(info.id()) + "/checkpoint/checkpoint")) {
      inserted.info.set_progress(resumed->progress);
      inserted.info.set_steps(resumed->steps);
    }
    if (state == TaskState::kSubmitted) {
      ++queued;
    } else {
      ++relaunch;
      TransitionLocked(inserted, TaskState::kSubmitted, "daemon restarted; relaunching");
    }
  }
  if (!stored.empty()) {
    notes->push_back(fmt::format("recovered {} tasks from the journal: {} to relaunch, {} queued, "
                                 "{} ended",
                                 stored.size(), relaunch, queued, ended));
  }
  return Status::Ok();
}

void TaskManager::Start() {
  supervisor_ = std::make_unique<ProcessSupervisor>(
      [this](const ProcessExit& exit) { OnProcessExit(exit); });
  housekeeping_ = std::thread([this] { HousekeepingLoop(); });
}

void TaskManager::Shutdown(Nanos grace) {
  std::vector<std::shared_ptr<TaskRuntime>> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    stopping_ = true;
    for (auto& [id, record] : tasks_)
      if (record.runtime) running.push_back(record.runtime);
  }
  cv_.notify_all();
  if (housekeeping_.joinable()) housekeeping_.join();
  // Iterative tasks save a checkpoint on kStop; imperative ones are stopped.
  for (auto& runtime : running) {
    if (runtime->RunsOnlyInBubbles()) runtime->Terminate();
    else runtime->segment->SendCommand(TaskCommand::kStop);
  }
  // Each exit bumps exits_ after the supervisor stopped counting the child,
  // so a count read before running() cannot miss the last exit.
  const Nanos deadline = processes_env_->Now() + grace;
  for (Nanos now = processes_env_->Now(); supervisor_ && now < deadline; now = processes_env_->Now()) {
    const uint32_t exits = exits_.load();
    if (supervisor_->running() == 0) break;
    processes_env_->Wait(&exits_, exits, deadline - now);
  }
  if (supervisor_) supervisor_->Shutdown();
  // Tasks killed above, or still starting, exit without an exit callback:
  // their segments go here, as OnProcessExit's would.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, record] : tasks_) {
      if (!record.runtime) continue;
      unlink(TaskSegmentPath(options_.socket_path, id).c_str());
      SetRuntimeLocked(record, nullptr);
    }
  }
  if (Status stored = journal_->Flush(); !stored.ok()) ComplainAboutJournal(stored);
}

TaskManager::Record* TaskManager::FindLocked(int64_t id, const std::string& name) {
  if (id > 0) return ByIdLocked(id);
  // By name: the task that has not ended (names are unique among those),
  // else the newest ended one.  tasks_ is ordered by id, oldest first.
  Record* newest = nullptr;
  for (auto& [task_id, record] : tasks_) {
    if (record.info.spec().name() != name) continue;
    if (!IsTerminal(record.state)) return &record;
    newest = &record;
  }
  return newest;
}

const TaskManager::Record* TaskManager::FindLocked(int64_t id, const std::string& name) const {
  return const_cast<TaskManager*>(this)->FindLocked(id, name);
}

// A `transition` event (docs/event-log.md) for `info`, already in its new
// state.  It carries the task's progress so far and its alone rate, so that
// `freeride report` can value the work from the log alone.
static std::string TransitionLine(Nanos now, const v1::TaskInfo& info,
                                  std::optional<TaskState> from, TaskState to,
                                  const std::string& reason) {
  events::TransitionEvent event;
  event.ts_ns = now;
  event.unix_ns = info.updated_unix_ns();
  event.task_id = info.id();
  event.name = info.spec().name();
  event.lane = info.lane();
  event.from = from;
  event.to = to;
  event.reason = reason;
  event.progress = info.progress();
  event.steps = info.steps();
  event.unit = info.progress_unit();
  event.alone_rate_per_s = info.spec().alone_rate_per_s();
  fmt::memory_buffer line;
  events::AppendEvent(line, event);
  return fmt::to_string(line);
}

bool TaskManager::TransitionLocked(Record& record, TaskState to, const std::string& reason) {
  TaskState from = record.state;
  if (!IsTransitionAllowed(from, to)) return false;
  Nanos unix_now = WallNow();
  record.state = to;
  record.info.set_state(StateName(to));
  record.info.set_updated_unix_ns(unix_now);
  if (!reason.empty()) record.info.set_message(reason);
  // PAUSED <-> RUNNING happens twice a bubble, hundreds of times a second.
  // The bubble and step events say when the task ran, so these flips are
  // logged at most once a second per task, keeping the log's progress fresh.
  // A restart treats both alike (relaunch from the checkpoint), and each
  // journal commit is a disk sync, so they are journaled more rarely still.
  bool bubble_flip = (from == TaskState::kPaused && to == TaskState::kRunning) ||
                     (from == TaskState::kRunning && to == TaskState::kPaused);
  bool journal = true, log = true;
  const Nanos now = env_->Now();
  if (bubble_flip) {
    log = FlipDue(record.last_flip_logged_ns, now, kFlipLogInterval);
    journal = FlipDue(record.last_flip_journaled_ns, now, kFlipJournalInterval);
    if (log) record.last_flip_logged_ns = now;
    if (journal) record.last_flip_journaled_ns = now;
  }
  if (journal) {
    TransitionRecord transition{record.info.id(), StateName(from), StateName(to), unix_now, reason};
    journal_->Record(record.info, &transition);
  }
  if (log) events_->EmitLine(TransitionLine(now, record.info, from, to, reason));
  return true;
}

int TaskManager::ChooseLaneLocked(uint64_t memory) const {
  std::vector<LaneLoad> loads;
  for (const LaneConfig& lane : options_.lanes) {
    LaneLoad load{lane.index, lane.capacity_bytes, 0};
    for (const auto& [id, record] : tasks_)
      if (record.info.lane() == lane.index && !IsTerminal(record.state)) ++load.live_tasks;
    loads.push_back(load);
  }
  return ChooseLane(loads, memory);
}

Status TaskManager::Submit(const v1::TaskSpec& spec_in, v1::TaskInfo* out) {
  v1::TaskSpec spec = spec_in;
  std::string executable;
  std::string error = ValidateSpec(spec, Limits(), &executable);
  if (!error.empty()) return {ErrorCode::kInvalidArgument, error};
  Record record;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return {ErrorCode::kUnavailable, "the daemon is shutting down"};
    for (const auto& [id, record] : tasks_) {
      if (record.info.spec().name() == spec.name() && !IsTerminal(record.state)) {
        return {ErrorCode::kAlreadyExists,
                fmt::format("a task named '{}' is already {} (id {}); pick another --name or "
                            "cancel it first",
                            spec.name(), record.info.state(), id)};
      }
    }
    int lane = spec.lane() >= 0 ? spec.lane() : ChooseLaneLocked(spec.memory_bytes());
    if (lane < 0)
      return {ErrorCode::kResourceExhausted,
              fmt::format("no lane has {} for this task", FormatBytes(spec.memory_bytes()))};
    if (submitting_names_.count(spec.name()))
      return {ErrorCode::kAlreadyExists,
              fmt::format("a task named '{}' is being submitted; pick another --name",
                          spec.name())};
    submitting_names_.insert(spec.name());
    record.submit_order = next_submit_order_++;
    record.executable = executable;
    v1::TaskInfo& info = record.info;
    info.set_id(next_id_++);  // never given again, even if this submission fails
    *info.mutable_spec() = spec;
    info.set_lane(lane);
    info.set_state(StateName(TaskState::kSubmitted));
    info.set_submitted_unix_ns(WallNow());
    info.set_updated_unix_ns(info.submitted_unix_ns());
    info.set_message("queued");
  }
  // Acknowledged means durable: the task's directory, tied to the journal,
  // and its row.  A directory then exists for every acknowledged task, so a
  // journal that loses one is noticed at the next start.
  const v1::TaskInfo& info = record.info;
  std::string dir = task_dir(info.id());
  Status stored = EnsureTaskDir(dir, journal_->uuid());
  if (stored.ok()) {
    TransitionRecord transition{info.id(), "", StateName(TaskState::kSubmitted),
                                info.submitted_unix_ns(), "submitted"};
    stored = journal_->Write(info, &transition);
    if (!stored.ok()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  submitting_names_.erase(spec.name());
  if (!stored.ok())
    return {stored.code, fmt::format("task not submitted: the daemon could not store it durably "
                                     "({}); nothing of it was kept",
                                     stored.message)};
  events_->EmitLine(
      TransitionLine(env_->Now(), info, std::nullopt, TaskState::kSubmitted, "submitted"));
  *out = info;
  InsertLocked(std::move(record));
  cv_.notify_all();
  return Status::Ok();
}

Status TaskManager::Cancel(int64_t id, const std::string& name, v1::TaskInfo* out) {
  std::shared_ptr<TaskRuntime> runtime;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Record* record = FindLocked(id, name);
    if (!record)
      return {ErrorCode::kNotFound,
              id > 0 ? fmt::format("no task with id {}", id) : fmt::format("no task named '{}'", name)};
    TaskState state = record->state;
    if (IsTerminal(state)) {
      *out = record->info;
      return {ErrorCode::kFailedPrecondition,
              fmt::format("task {} has already ended ({})", record->info.id(), record->info.state())};
    }
    record->cancel_requested = true;
    if (!record->runtime) {
      TransitionLocked(*record, TaskState::kCancelled, "cancelled before launch");
    } else {
      record->cancel_kill_at = env_->Now() + options_.cancel_grace;
      record->info.set_message("cancelling");
      runtime = record->runtime;
    }
    *out = record->info;
  }
  if (runtime) {
    if (runtime->RunsOnlyInBubbles()) runtime->Terminate();
    else runtime->segment->SendCommand(TaskCommand::kStop);
  }
  if (Status stored = journal_->Flush(); !stored.ok())
    return {stored.code, fmt::format("task {} is being cancelled, but the journal cannot record "
                                     "it yet ({}); it keeps trying, and until it succeeds a "
                                     "daemon restart would run the task again",
                                     out->id(), stored.message)};
  return Status::Ok();
}

Status TaskManager::Get(int64_t id, const std::string& name, v1::TaskInfo* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Record* record = FindLocked(id, name);
  if (!record)
    return {ErrorCode::kNotFound,
            id > 0 ? fmt::format("no task with id {}", id) : fmt::format("no task named '{}'", name)};
  *out = LiveInfoLocked(*record);
  return Status::Ok();
}

v1::TaskInfo TaskManager::LiveInfoLocked(const Record& record) const {
  v1::TaskInfo info = record.info;
  if (!record.runtime) return info;
  const TaskSegment& segment = *record.runtime->segment;
  info.set_step_estimate_ns(segment.layout()->step_estimate_ns.load());
  // The segment's counters are exact and current; the record's are as of the
  // lane's last look, which can be a bubble old.
  CopyCounters(record, *record.runtime, &info);
  // A lane whose armed task has it to itself does not wake when a bubble
  // begins, so it marks the task RUNNING only when the bubble is over; the
  // task's own state says whether it is inside a step right now.
  if (record.state == TaskState::kPaused && !record.runtime->exited &&
      segment.state() == TaskProcessState::kStepping)
    info.set_state(StateName(TaskState::kRunning));
  return info;
}

std::vector<v1::TaskInfo> TaskManager::List(bool include_ended, int64_t after_id,
                                            size_t limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::TaskInfo> out;
  for (auto it = tasks_.upper_bound(after_id); it != tasks_.end() && out.size() < limit; ++it) {
    if (!include_ended && IsTerminal(it->second.state)) continue;
    out.push_back(LiveInfoLocked(it->second));
  }
  return out;
}

bool TaskManager::WaitsForABubbleLocked(const Record& record) const {
  TaskState state = record.state;
  if (state == TaskState::kPaused) return true;
  // Held before it attaches: not yet PAUSED, but it runs in bubbles.
  return state == TaskState::kSubmitted && record.runtime && record.runtime->pid > 0 &&
         record.runtime->held.load(std::memory_order_acquire);
}

void TaskManager::SetRuntimeLocked(Record& record, std::shared_ptr<TaskRuntime> runtime) {
  std::vector<Record*>& residents = resident_[record.info.lane()];
  residents.erase(std::remove(residents.begin(), residents.end(), &record), residents.end());
  if (runtime) residents.push_back(&record);
  record.runtime = std::move(runtime);
}

TaskManager::Record& TaskManager::InsertLocked(Record record) {
  int64_t id = record.info.id();
  record.state = StateOf(record.info);
  Record& inserted = tasks_.emplace(id, std::move(record)).first->second;
  by_id_[id] = &inserted;
  return inserted;
}

TaskManager::Record* TaskManager::ByIdLocked(int64_t id) {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

const TaskManager::Record* TaskManager::ByIdLocked(int64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

void TaskManager::Candidates(int lane, const std::vector<int64_t>& excluded,
                             std::vector<DispatchCandidate>* out) const {
  out->clear();
  std::lock_guard<std::mutex> lock(mu_);
  auto resident = resident_.find(lane);
  if (resident == resident_.end()) return;
  for (const Record* resident_record : resident->second) {
    const Record& record = *resident_record;
    int64_t id = record.info.id();
    if (record.info.lane() != lane || !record.runtime || record.cancel_requested) continue;
    if (!WaitsForABubbleLocked(record)) continue;
    if (std::find(excluded.begin(), excluded.end(), id) != excluded.end()) continue;
    DispatchCandidate c;
    c.task_id = id;
    c.priority = record.info.spec().priority();
    c.submit_order = record.submit_order;
    c.memory_bytes = record.info.spec().memory_bytes();
    c.imperative = record.runtime->RunsOnlyInBubbles();
    c.starting = record.runtime->held.load(std::memory_order_acquire);
    c.step_estimate = record.runtime->segment->layout()->step_estimate_ns.load(
        std::memory_order_relaxed);
    if (c.step_estimate == 0) c.step_estimate = record.info.spec().step_time_hint_ns();
    c.demoted = record.overrun && record.overrun->demoted();
    out->push_back(c);
  }
}

std::shared_ptr<TaskRuntime> TaskManager::RuntimeOf(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Record* record = ByIdLocked(id);
  if (!record || !record->runtime || record->runtime->exited) return nullptr;
  if (!WaitsForABubbleLocked(*record)) return nullptr;
  return record->runtime;
}

void TaskManager::MarkRunning(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Record* record = ByIdLocked(id)) TransitionLocked(*record, TaskState::kRunning, "bubble");
}

void TaskManager::EndRun(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  Record* record = ByIdLocked(id);
  if (!record || !record->runtime || record->runtime->exited) return;
  if (record->state == TaskState::kRunning)
    TransitionLocked(*record, TaskState::kPaused, "bubble over");
}

void TaskManager::NoteArmedRun(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  Record* record = ByIdLocked(id);
  if (!record || !record->runtime || record->runtime->exited) return;
  if (record->state != TaskState::kPaused) return;
  // Flips that would be neither logged nor journaled change nothing anyone
  // sees: the task is PAUSED again, and Get/List show it RUNNING while it
  // steps.
  if (!FlipDue(record->last_flip_logged_ns, env_->Now(), kFlipLogInterval)) return;
  TransitionLocked(*record, TaskState::kRunning, "bubble");
  TransitionLocked(*record, TaskState::kPaused, "bubble over");
}

uint64_t TaskManager::DrainSteps(TaskRuntime& runtime, std::vector<TaskStep>* out) {
  TaskSegmentLayout* l = runtime.segment->layout();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t head = l->ring_head.load(std::memory_order_acquire);
  // Kept between calls: a lane drains at every bubble.
  thread_local std::vector<StepRecord> records;
  records.clear();
  uint64_t lost = CollectSteps(l->ring, kStepRingSize, head, &runtime.ring_tail, out ? &records : nullptr);
  // The segment is the task's to write: records whose times make no sense
  // are dropped; units that make none count as 0, the step's time still counts.
  for (const StepRecord& record : records) {
    if (!PlausibleStep(record)) {
      ++lost;
      continue;
    }
    out->push_back({runtime.task_id, record});
    if (!PlausibleUnits(record.units)) {
      out->back().record.units = 0;
      if (Record* task = ByIdLocked(runtime.task_id); task && !task->warned_units) {
        task->warned_units = true;
        Say(stderr, "freeride daemon: task {} reported a step of {} units (below 0 or not a number): "
                           "counted as 0 units; its time is counted as any step's\n", runtime.task_id, record.units);
      }
    }
  }
  RefreshProgressLocked(runtime);
  return lost;
}

void TaskManager::RefreshProgressLocked(TaskRuntime& runtime) {
  if (Record* record = ByIdLocked(runtime.task_id)) CopyCounters(*record, runtime, &record->info);
}

void TaskManager::PollProgressWatches() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [lane, ids] : resident_)
    for (Record* record : ids)
      if (record->progress_watch && record->runtime) {
        record->progress_watch->Poll();
        CopyCounters(*record, *record->runtime, &record->info);
      }
}

void TaskManager::TrimTaskLogs() {
  if (options_.task_log_max_bytes == 0) return;
  std::vector<int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [lane, records] : resident_)
      for (const Record* record : records) ids.push_back(record->info.id());
  }
  // Outside the lock: a trim copies up to half the size.
  for (int64_t id : ids)
    for (const std::string& path : {TaskStdoutLog(task_dir(id)), TaskStderrLog(task_dir(id))}) {
      std::string error;
      const bool trimmed = TrimTaskLog(path, options_.task_log_max_bytes, &error);
      if (!trimmed && error.empty()) continue;
      bool say = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Record* record = ByIdLocked(id);
        if (trimmed && record && record->progress_watch)
          record->progress_watch->Emptied(path);  // this thread polls it: no poll in between
        if (!error.empty() && record && !record->warned_log_trim) say = record->warned_log_trim = true;
      }
      // Said outside the lock (a stalled stderr must not hold the lanes up), once a task.
      if (say)
        Say(stderr, "freeride daemon: task {}'s {} passed --task-log-max-size: {}{}\n", id, path, error,
            trimmed ? "; emptied without keeping its tail" : "");
    }
}

void TaskManager::CopyCounters(const Record& record, const TaskRuntime& runtime,
                               v1::TaskInfo* info) {
  // `runtime` is the caller's: the lane may still drain a process whose
  // record has already let it go (record.runtime null or a new attempt's).
  if (record.progress_watch) {
    if (auto shown = record.progress_watch->progress()) info->set_progress(runtime.base_progress + *shown);
    if (info->progress_unit().empty())
      info->set_progress_unit(record.info.spec().progress_unit().empty() ? "units"
                                                                         : record.info.spec().progress_unit());
    return;
  }
  const TaskSegmentLayout* l = runtime.segment->layout();
  // Until an iterative task is ready, its counters do not yet say what it
  // resumed from.
  if (!runtime.imperative && runtime.segment->state() == TaskProcessState::kStarting) return;
  // A task whose counters are its totals (the SDK's, resumed from its
  // checkpoint) has redone the steps lost since then: they count once.
  bool totals = l->counters_are_totals.load(std::memory_order_acquire) == 1;
  double progress = runtime.segment->progress();
  if (std::isfinite(progress) && progress >= 0)
    info->set_progress((totals ? 0 : runtime.base_progress) + progress);
  info->set_steps((totals ? 0 : runtime.base_steps) + l->steps_done.load(std::memory_order_relaxed));
  if (info->progress_unit().empty() && l->progress_unit[0]) {
    // The task's to write: made valid UTF-8, or every reply that carries it would fail.
    info->set_progress_unit(
        ValidUtf8(std::string_view(l->progress_unit, strnlen(l->progress_unit, sizeof(l->progress_unit)))));
  }
}

// A lane books a bubble's time at the bubble's end, which can come after
// the task has ended (its last transition journaled): an ended task's
// figures are journaled again, or a restart would show them smaller.
void TaskManager::AddHarvest(int64_t id, Nanos harvested) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Record* record = ByIdLocked(id)) {
    record->info.set_harvested_ns(record->info.harvested_ns() + harvested);
    if (IsTerminal(record->state) && harvested != 0) journal_->Record(record->info, nullptr);
  }
}

void TaskManager::AddAllowed(int64_t id, Nanos allowed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Record* record = ByIdLocked(id)) {
    record->info.set_allowed_ns(record->info.allowed_ns() + allowed);
    if (IsTerminal(record->state) && allowed != 0) journal_->Record(record->info, nullptr);
  }
}

void TaskManager::RecordOverrun(int64_t id, Nanos overrun, Nanos bubble) {
  std::lock_guard<std::mutex> lock(mu_);
  Record* found = ByIdLocked(id);
  if (!found || !found->runtime) return;
  Record& record = *found;
  const OverrunBudgetConfig& budget = options_.BudgetForLane(record.info.lane());
  if (!record.overrun) record.overrun = std::make_unique<OverrunBudget>(budget);
  OverrunJudgement judged = record.overrun->Record(overrun, bubble);
  if (judged.verdict == OverrunVerdict::kWithin) return;
  const std::string why =
      judged.verdict == OverrunVerdict::kRestore
          ? fmt::format("kept within its overrun budget for {} bubbles in a row since its demotion",
                        budget.restore_after)
          : fmt::format(
                "overran its last {} bubbles by {} in all ({:.0f}% of their length; budget {:.0f}%)",
                judged.bubbles, FormatDuration(judged.overrun),
                100.0 * static_cast<double>(judged.overrun) /
                    static_cast<double>(std::max<Nanos>(1, judged.bubble_time)),
                100 * budget.max_fraction);
  EmitBudgetEventLocked(record, judged.verdict, overrun, why);
  if (judged.verdict != OverrunVerdict::kKill) {
    // A gated task's overruns are its GPU work found late (gate/late_work.h);
    // demoted, its interposer counts each piece at twice its length.
    const char* demoted_means = record.runtime->gated
                                    ? "; its GPU work is now let through only where twice its length fits"
                                    : "; it now runs only where twice its step fits";
    record.info.set_message(judged.verdict == OverrunVerdict::kRestore ? "restored: " + why
                                                                       : "demoted: " + why + demoted_means);
    journal_->Record(record.info, nullptr);
    return;
  }
  KillForPolicyLocked(record, "killed: " + why + " after demotion");
}

void TaskManager::KillHung(int64_t id, Nanos overrun) {
  std::lock_guard<std::mutex> lock(mu_);
  Record* record = ByIdLocked(id);
  if (!record || !record->runtime || !record->policy_kill.empty()) return;
  EmitBudgetEventLocked(*record, OverrunVerdict::kKill, overrun, "hung in a step");
  KillForPolicyLocked(*record, fmt::format("killed: hung in a step {} past its bubble's end",
                                              FormatDuration(overrun)));
}

void TaskManager::EmitBudgetEventLocked(const Record& record, OverrunVerdict verdict, Nanos overrun,
                                        const std::string& reason) {
  events_->Emit({{"type", "overrun_budget"},
                 {"ts_ns", env_->Now()},
                 {"task_id", record.info.id()},
                 {"lane", record.info.lane()},
                 {"verdict", OverrunVerdictName(verdict)},
                 {"overrun_ns", overrun},
                 {"reason", reason}});
}

void TaskManager::KillForPolicyLocked(Record& record, const std::string& reason) {
  if (!record.runtime || !record.policy_kill.empty()) return;
  record.policy_kill = reason;
  record.runtime->Kill();
}

void TaskManager::LaneCounts(int lane, uint32_t* resident, uint32_t* queued) const {
  std::lock_guard<std::mutex> lock(mu_);
  *resident = *queued = 0;
  if (auto r = resident_.find(lane); r != resident_.end())
    *resident = static_cast<uint32_t>(r->second.size());
  for (const auto& [id, record] : tasks_)
    if (record.info.lane() == lane && !record.runtime &&
        record.state == TaskState::kSubmitted)
      ++*queued;
}

void TaskManager::GatedTasks(int lane, std::vector<GatedTask>* out) const {
  out->clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto r = resident_.find(lane); r != resident_.end())
    for (const Record* record : r->second)
      if (record->runtime && record->runtime->gated && !record->runtime->exited)
        out->push_back({record->info.id(), record->runtime->pid,
                        record->overrun != nullptr && record->overrun->demoted()});
}

void TaskManager::HousekeepingLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    AdmitAndLaunch();
    PromoteReadyTasks();
    PollProgressWatches();
    TrimTaskLogs();
    EscalateCancels();
    FailUnattachedTasks();
    lock.lock();
    cv_.wait_for(lock, std::chrono::nanoseconds(kHousekeepingInterval));
  }
}

void TaskManager::AdmitAndLaunch() {
  std::vector<int64_t> to_launch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Nanos now = env_->Now();
    for (const LaneConfig& lane : options_.lanes) {
      LaneRoom room{lane.capacity_bytes, 0, 0, options_.max_resident_per_lane};
      if (auto r = resident_.find(lane.index); r != resident_.end()) {
        for (const Record* record : r->second) {
          ++room.resident;
          room.resident_bytes += record->info.spec().memory_bytes();
        }
      }
      // A full lane takes nobody: no need to look through the queue.
      if (room.resident >= room.max_resident) continue;
      std::vector<QueuedTask> queued;
      for (const auto& [id, record] : tasks_) {
        if (record.info.lane() != lane.index || record.runtime) continue;
        if (record.state == TaskState::kSubmitted && record.retry_at <= now)
          queued.push_back({id, record.info.spec().priority(), record.submit_order,
                            record.info.spec().memory_bytes()});
      }
      for (int64_t id : TasksToLaunch(room, std::move(queued))) to_launch.push_back(id);
    }
  }
  for (int64_t id : to_launch) Launch(id);
}

bool TaskManager::Launch(int64_t id) {
  LaunchRequest request;
  std::shared_ptr<TaskRuntime> runtime = std::make_shared<TaskRuntime>();
  std::string dir = task_dir(id);
  std::string checkpoint_dir = dir + "/checkpoint";
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Record* found = ByIdLocked(id);
    if (!found || found->runtime || stopping_) return false;
    Record& record = *found;
    const v1::TaskSpec& spec = record.info.spec();
    if (Status tied = EnsureTaskDir(dir, journal_->uuid()); !tied.ok()) {
      TransitionLocked(record, TaskState::kFailed, tied.message);
      return false;
    }
    if (!MakeDirs(checkpoint_dir, 0700, &error)) {
      TransitionLocked(record, TaskState::kFailed, error);
      return false;
    }
    runtime->task_id = id;
    runtime->imperative = spec.kind() == v1::TASK_KIND_IMPERATIVE;
    runtime->gated = runtime->imperative && options_.IsGatedLane(record.info.lane());
    runtime->held = !runtime->imperative;
    if (cgroups_) {
      runtime->cgroup = cgroups_->Create(id, &error);
      if (!runtime->cgroup)
        events_->Emit({{"type", "warning"}, {"ts_ns", env_->Now()}, {"task_id", id},
                       {"message", error + "; the task runs without one"}});
    }
    runtime->base_progress = record.info.progress();
    runtime->base_steps = record.info.steps();
    // The segment keeps the real Env: the task's process wakes its words
    // through the kernel's futex, and its waits and run times are the lane's.
    runtime->segment = std::make_shared<TaskSegment>();
    std::string segment_path = TaskSegmentPath(options_.socket_path, id);
    if (!runtime->segment->Create(segment_path, id, &error)) {
      TransitionLocked(record, TaskState::kFailed, error);
      return false;
    }
    LaunchPlanInput plan;
    plan.task_id = id;
    plan.executable = record.executable;
    plan.spec = &spec;
    for (const LaneConfig& lane : options_.lanes)
      if (lane.index == record.info.lane()) plan.lane = &lane;
    plan.task_dir = dir;
    plan.checkpoint_dir = checkpoint_dir;
    plan.task_segment_path = segment_path;
    plan.lane_segment_path = LaneSegmentPath(options_.socket_path, record.info.lane());
    plan.socket_path = options_.socket_path;
    plan.cpu_task_priority = options_.cpu_task_priority;
    plan.mps_pipe_dir = options_.mps_pipe_dir;
    plan.mps_thread_percentage = options_.mps_thread_percentage;
    if (!spec.progress_regex().empty() || !spec.progress_file().empty()) {
      std::string file = spec.progress_file();
      if (!file.empty() && file[0] != '/') file = spec.working_dir() + "/" + file;
      std::vector<std::string> outputs;
      if (spec.progress_streams() != v1::PROGRESS_STREAMS_STDERR) outputs.push_back(TaskStdoutLog(dir));
      if (spec.progress_streams() != v1::PROGRESS_STREAMS_STDOUT) outputs.push_back(TaskStderrLog(dir));
      record.progress_watch = std::make_unique<ProgressWatch>(spec.progress_regex(), std::move(outputs), file);
    }
    if (options_.IsGatedLane(record.info.lane())) {
      plan.gate_library = options_.gate_library;
      plan.gate_page_path = GatePagePath(options_.socket_path, record.info.lane());
    }
    for (char** e = environ; *e; ++e) plan.daemon_environment.emplace_back(*e);
    request = PlanLaunch(plan);
    request.cgroup = runtime->cgroup;
    record.info.set_attempts(record.info.attempts() + 1);
    SetRuntimeLocked(record, runtime);  // reserves the slot while launching
  }
  LaunchResult result = supervisor_->Launch(request);
  std::lock_guard<std::mutex> lock(mu_);
  Record* found = ByIdLocked(id);
  if (!found) return false;
  Record& record = *found;
  if (result.pid < 0) {
    SetRuntimeLocked(record, nullptr);
    unlink(TaskSegmentPath(options_.socket_path, id).c_str());
    TransitionLocked(record, TaskState::kFailed, result.error);
    return false;
  }
  runtime->pid = result.pid;
  // A gated task starts stopped like any other, and is continued for good:
  // its CPU start-up may run, its GPU work waits on the gate.
  if (runtime->gated) runtime->Continue();
  // Logged whatever follows: the process was launched, even one that exits
  // at once and is reaped before this (a reader that bounds a relaunch by
  // its launch event would otherwise find the one before).
  events_->Emit({{"type", "launch"},
                 {"ts_ns", env_->Now()},
                 {"task_id", id},
                 {"lane", record.info.lane()},
                 {"pid", result.pid},
                 {"attempt", record.info.attempts()}});
  // A process that exits at once may already have been reaped and its end
  // recorded; that outcome must not be overwritten with "launched".
  if (record.runtime != runtime) return true;
  record.info.set_pid(result.pid);
  record.info.set_message(fmt::format(
      "launched as pid {} (attempt {}){}", result.pid, record.info.attempts(),
      runtime->gated        ? "; its GPU work runs only while the lane's GPU gate is open"
      : runtime->imperative ? ""
                            : "; runs only inside bubbles until it attaches to FreeRide"));
  journal_->Record(record.info, nullptr);
  return true;
}

void TaskManager::PromoteReadyTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [lane, ids] : resident_)
  for (Record* resident : ids) {
    Record& record = *resident;
    if (!record.runtime || record.runtime->pid <= 0 || record.runtime->exited) continue;
    if (record.state != TaskState::kSubmitted) continue;
    auto state = record.runtime->segment->state();
    // An imperative task is created stopped; its init is its own loop.
    bool ready = record.runtime->imperative || state == TaskProcessState::kReady;
    if (!ready) continue;
    // The CREATED transition carries what the task starts from (docs/event-log.md).
    RefreshProgressLocked(*record.runtime);
    if (record.runtime->gated) {
      TransitionLocked(record, TaskState::kCreated, "launched; its GPU work waits on the lane's gate");
      TransitionLocked(record, TaskState::kPaused, "gated");
      TransitionLocked(record, TaskState::kRunning,
                       "gated: its GPU work runs whenever the lane's gate is open");
      continue;
    }
    TransitionLocked(record, TaskState::kCreated,
                     record.runtime->imperative ? "launched, stopped until a bubble" : "init done");
    TransitionLocked(record, TaskState::kPaused, "waiting for a bubble");
  }
}

void TaskManager::EscalateCancels() {
  std::vector<std::shared_ptr<TaskRuntime>> kill_list;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Nanos now = env_->Now();
    for (const auto& [lane, ids] : resident_)
    for (Record* resident : ids) {
      Record& record = *resident;
      if (record.cancel_requested && record.runtime && record.runtime->pid > 0 &&
          record.cancel_kill_at != 0 && now >= record.cancel_kill_at) {
        kill_list.push_back(record.runtime);
        record.cancel_kill_at = 0;
      }
    }
  }
  for (auto& runtime : kill_list) runtime->Kill();
}

void TaskManager::FailUnattachedTasks() {
  // Candidates under the lock; their CPU time, a file read, outside it (the
  // lanes take the lock at every bubble).
  struct Held {
    int64_t id;
    std::shared_ptr<TaskRuntime> runtime;
    Nanos held;
  };
  std::vector<Held> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [lane, ids] : resident_)
      for (Record* record : ids) {
        TaskRuntime* runtime = record->runtime.get();
        if (!runtime || !runtime->held || runtime->exited || runtime->Attached()) continue;
        const Nanos held = runtime->held_run_ns.load();
        if (held >= options_.attach_timeout) due.push_back({record->info.id(), record->runtime, held});
      }
  }
  for (const Held& task : due) {
    // Bubble time is not a fair chance on an overloaded machine, where the
    // process may have had little CPU in it: a program is judged once it
    // has also used a tenth of the timeout on a CPU (its start-up before
    // `import freeride`), or in any case after ten times the bubble time,
    // so a program that only sleeps is failed too.  An unreadable clock
    // (the process just ended, its exit not yet handled) is no reason to
    // fail it; the exit path judges it.  The cgroup counts the whole tree,
    // so a wrapper (sh -c, torchrun) is judged by its children's CPU too.
    Nanos cpu = task.runtime->cgroup ? task.runtime->cgroup->CpuUsageNs() : -1;
    if (cpu < 0) cpu = ProcessCpuTime(task.runtime->pid);
    if ((cpu < 0 || cpu < options_.attach_timeout / 10) && task.held < 10 * options_.attach_timeout)
      continue;
    std::lock_guard<std::mutex> lock(mu_);
    Record* record = ByIdLocked(task.id);
    if (!record || record->runtime != task.runtime || task.runtime->exited ||
        task.runtime->Attached())
      continue;  // it ended or attached meanwhile
    KillForPolicyLocked(
        *record, fmt::format("ran {} in bubbles ({} of CPU) without attaching to FreeRide, so it "
                             "does not use the FreeRide SDK: submit a program that does not use "
                             "it with --kind imperative",
                             FormatDuration(task.held), FormatDuration(std::max<Nanos>(cpu, 0))));
  }
}

void TaskManager::OnProcessExit(const ProcessExit& exit) {
  // Shutdown waits for the last exit (and then joins this thread before it
  // clears the runtimes).
  exits_.fetch_add(1);
  processes_env_->WakeAll(&exits_);
  std::shared_ptr<TaskRuntime> runtime;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Record* record = ByIdLocked(exit.task_id);
    if (!record) return;
    runtime = record->runtime;
  }
  if (!runtime) return;
  runtime->exited = true;
  // The step records stay for the lane, which logs them with their bubble
  // (an armed task may exit before the lane sees its last bubble end).
  {
    std::lock_guard<std::mutex> lock(mu_);
    RefreshProgressLocked(*runtime);
  }
  runtime->segment->Acknowledge();  // wakes a lane waiting on this task
  const std::string stderr_tail = ReadTaskLogTail(TaskStderrLog(task_dir(exit.task_id)), kStderrTailBytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Record* found = ByIdLocked(exit.task_id);
    if (!found) return;
    Record& record = *found;
    SetRuntimeLocked(record, nullptr);
    unlink(TaskSegmentPath(options_.socket_path, exit.task_id).c_str());
    record.info.set_pid(0);
    record.info.set_exit_code(exit.exit_code);
    record.info.set_term_signal(exit.term_signal);
    // The tail is cut at a byte count (often inside a character: tqdm's
    // bars are 3-byte ones) and the task's own bytes: made valid UTF-8, or
    // every show and cancel of this task would fail to serialise.
    record.info.set_stderr_tail(ValidUtf8(Utf8SuffixFromACharacter(stderr_tail)));
    if (shutting_down_) {
      journal_->Record(record.info, nullptr);
      return;  // the next daemon relaunches it
    }
    std::string how = exit.term_signal ? fmt::format("killed by signal {} ({})", exit.term_signal,
                                                     strsignal(exit.term_signal))
                                       : fmt::format("exited with status {}", exit.exit_code);
    std::string policy_kill = std::move(record.policy_kill);
    record.policy_kill.clear();
    record.overrun.reset();
    const bool success = exit.term_signal == 0 && exit.exit_code == 0;
    const bool without_sdk = !runtime->imperative && !runtime->Attached();
    // The SDK reports the end after the task's finish() and after it deleted
    // its checkpoint: a relaunch would start the whole task over.
    const bool reported_finished =
        !runtime->imperative && runtime->segment->state() == TaskProcessState::kFinished;
    bool moved = true;
    if (record.cancel_requested) {
      moved = TransitionLocked(record, TaskState::kCancelled, "cancelled; " + how);
    } else if (!policy_kill.empty()) {
      // Retrying would hurt the training again: a policy kill is final.
      moved = TransitionLocked(record, TaskState::kFailed, policy_kill);
    } else if (success && without_sdk) {
      // Relaunching would only do the same again.
      moved = TransitionLocked(
          record, TaskState::kFailed,
          how + " without attaching to FreeRide, so it does not use the FreeRide SDK: submit a "
                "program that does not use it with --kind imperative");
    } else if (success || reported_finished) {
      // A task may end before it was seen ready (an imperative one at once).
      if (record.state == TaskState::kSubmitted)
        TransitionLocked(record, TaskState::kCreated, "launched");
      // Reported finished, then a crash on the way out (a driver's teardown,
      // a kill): the work is done, and is not retried.
      moved = TransitionLocked(record, TaskState::kFinished,
                               success ? how : "finished (the task reported its end), then " + how);
    } else if (record.info.attempts() <= record.info.spec().max_retries()) {
      Nanos backoff = options_.retry_backoff << std::min(record.info.attempts() - 1, 10);
      record.retry_at = env_->Now() + backoff;
      TransitionLocked(record, TaskState::kSubmitted,
                       fmt::format("{}; retrying in {} (attempt {} of {})", how,
                                   FormatDuration(backoff), record.info.attempts() + 1,
                                   record.info.spec().max_retries() + 1));
    } else {
      moved = TransitionLocked(record, TaskState::kFailed, how);
    }
    // A process that is gone never leaves its task waiting to be relaunched
    // unless a retry said so.
    if (!moved) TransitionLocked(record, TaskState::kFailed, how);
  }
  if (Status stored = journal_->Flush(); !stored.ok()) ComplainAboutJournal(stored);
  cv_.notify_all();
}

void TaskManager::ComplainAboutJournal(const Status& status) {
  Nanos now = env_->Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_journal_complaint_ != 0 && now - last_journal_complaint_ < 10 * kSecond) return;
    last_journal_complaint_ = now;
  }
  Say(stderr, "freeride daemon: {}; task states are kept in memory and retried\n",
      status.message);
}

}  // namespace freeride
