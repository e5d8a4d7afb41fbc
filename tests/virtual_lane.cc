#include "virtual_lane.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "base/paths.h"
#include "channel/lane_segment.h"
#include "channel/step_accounting.h"
#include "daemon/event_log.h"
#include "daemon/lane.h"
#include "daemon/lane_tasks.h"
#include "daemon/shared_probe_schedule.h"
#include "fake_env.h"
#include "gate/gate_page.h"
#include "freeride/task.h"
#include "sdk/task_loop.h"
#include "test_util.h"

namespace freeride::testing {
namespace {

// Sleeps `length` of `env`'s time: a wait on a word nobody wakes.
void WaitFakeTime(Env* env, Nanos length) {
  std::atomic<uint32_t> never_woken{0};
  env->Wait(&never_woken, 0, length);
}

// A task whose steps wait out fake time.
class FakeTimeTask final : public IterativeTask {
 public:
  FakeTimeTask(Env* env, std::vector<Nanos> steps, bool sized_to_budget, bool idle)
      : env_(env), steps_(std::move(steps)), sized_to_budget_(sized_to_budget), idle_(idle) {}
  StepResult Step() override {
    if (idle_) return {.idle = true};
    const Nanos part = steps_[next_++ % steps_.size()];
    const int parts =
        sized_to_budget_ ? static_cast<int>(std::max<int64_t>(1, StepBudgetNs() / part)) : 1;
    WaitFakeTime(env_, parts * part);
    return {static_cast<double>(parts), false, parts};
  }

 private:
  Env* env_;
  std::vector<Nanos> steps_;
  bool sized_to_budget_;
  bool idle_;
  size_t next_ = 0;
};

// LaneTasks for tasks that are threads: each is a candidate once it is
// ready, until its thread ends.  What the lane books is kept for the test.
class ThreadTasks final : public LaneTasks {
 public:
  struct Entry {
    std::shared_ptr<TaskRuntime> runtime;
    int priority = 0;
    bool demoted = false;
  };
  void Add(Entry entry) { entries_.push_back(std::move(entry)); }

  void Candidates(int, const std::vector<int64_t>& excluded,
                  std::vector<DispatchCandidate>* out) const override {
    out->clear();
    for (size_t i = 0; i < entries_.size(); ++i) {
      const TaskRuntime& runtime = *entries_[i].runtime;
      if (!WaitsForBubbles(runtime)) continue;
      if (std::find(excluded.begin(), excluded.end(), runtime.task_id) != excluded.end()) continue;
      DispatchCandidate c;
      c.task_id = runtime.task_id;
      c.priority = entries_[i].priority;
      c.demoted = entries_[i].demoted;
      c.submit_order = i;
      c.step_estimate = runtime.segment->layout()->step_estimate_ns.load();
      out->push_back(c);
    }
  }
  std::shared_ptr<TaskRuntime> RuntimeOf(int64_t id) const override {
    for (const Entry& e : entries_)
      if (e.runtime->task_id == id && WaitsForBubbles(*e.runtime)) return e.runtime;
    return nullptr;
  }
  void MarkRunning(int64_t) override {}
  void EndRun(int64_t) override {}
  void NoteArmedRun(int64_t) override {}
  uint64_t DrainSteps(TaskRuntime& runtime, std::vector<TaskStep>* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    TaskSegmentLayout* l = runtime.segment->layout();
    std::vector<StepRecord> records;
    uint64_t lost = CollectSteps(l->ring, kStepRingSize, l->ring_head.load(std::memory_order_acquire),
                                 &runtime.ring_tail, out ? &records : nullptr);
    for (const StepRecord& r : records) out->push_back({runtime.task_id, r});
    return lost;
  }
  void AddHarvest(int64_t, Nanos) override {}
  void AddAllowed(int64_t, Nanos) override {}
  // A gated task (an imperative program under the GPU gate) resident, by id.
  void GatedTasks(int, std::vector<GatedTask>* out) const override {
    out->clear();
    if (gated_task_ > 0) out->push_back({gated_task_, gated_pid_, gated_demoted_});
  }
  void SetGatedTask(int64_t id, pid_t pid, bool demoted) {
    gated_task_ = id;
    gated_pid_ = pid;
    gated_demoted_ = demoted;
  }
  void RecordOverrun(int64_t id, Nanos overrun, Nanos bubble) override {
    std::lock_guard<std::mutex> lock(overruns_mu_);
    overruns_.push_back({id, overrun, bubble});
  }
  std::vector<VirtualOverrun> overruns() const {
    std::lock_guard<std::mutex> lock(overruns_mu_);
    return overruns_;
  }
  void KillHung(int64_t id, Nanos) override { ADD_FAILURE() << "the lane killed task " << id; }
  void LaneCounts(int, uint32_t* resident, uint32_t* queued) const override {
    *resident = static_cast<uint32_t>(entries_.size());
    *queued = 0;
  }

 private:
  static bool WaitsForBubbles(const TaskRuntime& runtime) {
    if (runtime.exited.load()) return false;
    TaskProcessState state = runtime.segment->state();
    return state == TaskProcessState::kReady || state == TaskProcessState::kYielded ||
           state == TaskProcessState::kStepping;
  }
  std::vector<Entry> entries_;  // fixed before the lane starts
  int64_t gated_task_ = 0;
  pid_t gated_pid_ = -1;
  bool gated_demoted_ = false;
  mutable std::mutex overruns_mu_;
  std::vector<VirtualOverrun> overruns_;
  std::mutex mu_;
};

}  // namespace

VirtualLaneRun RunVirtualLane(const std::vector<VirtualTask>& tasks,
                              const std::vector<VirtualBubble>& bubbles, DaemonOptions options,
                              const VirtualGate& virtual_gate) {
  VirtualLaneRun run;
  // A gated lane needs only a library's name: no process is launched here.
  if (virtual_gate.on) options.gate_library = "libfreeride_gate.so";
  TempDir dir;
  options.socket_path = dir.path() + "/freeride.sock";
  options.state_dir = dir.path();
  options.realtime_dispatch = false;
  if (options.lanes.empty()) options.lanes.push_back(LaneConfig{0, "gpu:0", 0, -1});
  FakeEnv env(100 * kSecond);
  env.SetAlive(getpid(), true);
  for (const VirtualBubble& b : bubbles)
    if (b.stage_pid > 0) env.SetAlive(static_cast<pid_t>(b.stage_pid), true);
  EventLog events;
  std::string error;
  const std::string log_path = dir.path() + "/events.jsonl";
  if (!events.Open(log_path, &error)) {
    ADD_FAILURE() << error;
    return run;
  }
  SharedProbeSchedule probe(options.probe);
  ThreadTasks lane_tasks;
  // The gated process that publishes in the gate page: the task's launched
  // process, or a child of it in its process group.
  const pid_t gated_launched = getpid() + 1000000;
  const pid_t gated_publisher = virtual_gate.task_slot_is_child ? gated_launched + 1 : gated_launched;
  if (virtual_gate.task_slot_is_child) env.SetProcessGroup(gated_publisher, gated_launched);
  if (virtual_gate.gated_task) lane_tasks.SetGatedTask(1000, gated_launched, virtual_gate.task_demoted);
  Lane lane(options.lanes[0], options, &lane_tasks, &events, &probe, &env);
  if (!lane.Open(&error)) {
    ADD_FAILURE() << error;
    return run;
  }
  for (const std::string& file : {lane.segment_path(), GatePagePath(options.socket_path, 0)})
    if (std::filesystem::exists(file)) run.files_made.push_back(file);
  LaneSegment stage;
  if (!stage.Open(lane.segment_path(), /*writable=*/true, &error)) {
    ADD_FAILURE() << error;
    return run;
  }
  GatePage gate;
  GateTaskSlot* task_slot = nullptr;
  if (virtual_gate.on) {
    if (!gate.Open(GatePagePath(options.socket_path, options.lanes[0].index), &error)) {
      ADD_FAILURE() << error;
      return run;
    }
    if (virtual_gate.stage_drives) gate.layout()->stage_pid.store(getpid());
    if (virtual_gate.task_work_p95 > 0 || virtual_gate.task_late > 0 || virtual_gate.task_late_during > 0 ||
        virtual_gate.task_pending > 0 || virtual_gate.task_pending_during > 0 ||
        virtual_gate.task_held != std::array<Nanos, 3>{} || virtual_gate.task_held_during != std::array<Nanos, 3>{}) {
      env.SetAlive(gated_publisher, true);  // a gated process, alive to the lane
      GateTaskSlot* slot = gate.ClaimTaskSlot(gated_publisher);
      task_slot = slot;
      slot->work_p95_ns.store(virtual_gate.task_work_p95);
      slot->late_ns.store(virtual_gate.task_late);
      slot->late_bubbles.store(virtual_gate.task_late_bubbles);
      slot->pending_ns.store(virtual_gate.task_pending);
      slot->held_unpublished_ns.store(virtual_gate.task_held[0]);
      slot->held_drain_ns.store(virtual_gate.task_held[1]);
      slot->held_fit_ns.store(virtual_gate.task_held[2]);
    }
  }
  uint32_t gate_bubble = 0;
  stage.set_env(&env);
  stage.layout()->stage_pid.store(getpid());
  stage.layout()->stage_heartbeat_ns.store(env.Now());

  std::vector<std::unique_ptr<TaskChannel>> channels;
  std::vector<std::shared_ptr<TaskRuntime>> runtimes;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto runtime = std::make_shared<TaskRuntime>();
    runtime->task_id = static_cast<int64_t>(i) + 1;
    runtime->pid = getpid();
    runtime->segment = std::make_shared<TaskSegment>();
    const std::string path = dir.path() + "/task" + std::to_string(i + 1);
    if (!runtime->segment->Create(path, runtime->task_id, &error)) {
      ADD_FAILURE() << error;
      return run;
    }
    runtime->segment->set_env(&env);
    TaskChannel::Endpoints endpoints;
    endpoints.task_segment = path;
    endpoints.lane_segment = lane.segment_path();
    endpoints.step_hint = tasks[i].prior;
    channels.push_back(TaskChannel::Attach(endpoints, &env, &error));
    if (!channels.back()) {
      ADD_FAILURE() << error;
      return run;
    }
    lane_tasks.Add({runtime, tasks[i].priority, tasks[i].demoted});
    runtimes.push_back(runtime);
    run.task_ids.push_back(runtime->task_id);
  }

  // Counted: the lane's thread (and its gate's), the stage's and each task's.
  env.RunVirtualTime(static_cast<int>(2 + tasks.size() + (lane.gated() ? 1 : 0)));
  std::vector<std::thread> task_threads;
  for (size_t i = 0; i < tasks.size(); ++i) {
    task_threads.emplace_back([&, i] {
      FakeTimeTask task(&env, tasks[i].steps, tasks[i].sized_to_budget, tasks[i].idle);
      RunUnderDaemon(task, *channels[i]);
      runtimes[i]->exited = true;
      env.Leave();
    });
  }
  lane.Start();
  std::thread stage_thread([&] {
    WaitFakeTime(&env, kSecond);  // the tasks start and say they are ready
    run.started_ns = env.Now();
    for (const VirtualBubble& b : bubbles) {
      stage.layout()->stage_pid.store(b.stage_pid > 0 ? b.stage_pid : getpid());
      // A stage that drives the gate registers its page as it attaches.
      if (virtual_gate.stage_drives) gate.layout()->stage_pid.store(b.stage_pid > 0 ? b.stage_pid : getpid());
      if (virtual_gate.on) {
        // The forecast for the bubble about to open: the stage's own count,
        // or, for a stage that marks from the host alone, the one after the
        // word's (the lane opens it at the begin mark).
        const uint32_t opening = virtual_gate.stage_drives ? gate_bubble + 1
                                                           : (gate.layout()->word.load() >> 1) + 1;
        AheadAdmission ahead;
        VirtualAhead seen;
        if (ReadAheadAdmission(*gate.layout(), &ahead) && ahead.bubble == opening) {
          seen.published = true;
          seen.begin_error = ahead.begin_ns - env.Now();
          seen.lead = ahead.begin_ns - ahead.from_ns;
          seen.window = ahead.until_ns - ahead.begin_ns;
          seen.watch_only = ahead.watch_only;
        }
        run.gate_ahead.push_back(seen);
      }
      if (virtual_gate.stage_drives) gate.layout()->word.store(GateOpenValue(++gate_bubble));
      const Nanos begin = env.Now();
      stage.WriteBegin(b.slot, begin, 0, UINT64_MAX);
      WaitFakeTime(&env, b.length);
      if (virtual_gate.stage_drives) {
        if (gate.layout()->word.load() != GateOpenValue(gate_bubble)) ++run.gate_shut_before_end;
        uint32_t admitted = 0;
        int64_t until = 0;
        const bool read = ReadAdmission(*gate.layout(), &admitted, &until);
        run.gate_admission_ns.push_back(read && admitted == gate_bubble
                                            ? (until == INT64_MAX ? INT64_MAX : until - begin)
                                            : -1);
        gate.layout()->word.store(GateClosedValue(gate_bubble));
      }
      stage.WriteEnd(env.Now());
      if (task_slot && &b == &bubbles[std::min<size_t>(1, bubbles.size() - 1)]) {
        task_slot->late_ns.fetch_add(virtual_gate.task_late_during);
        task_slot->late_bubbles.fetch_add(virtual_gate.task_late_bubbles_during);
        task_slot->pending_ns.fetch_add(virtual_gate.task_pending_during);
        task_slot->held_unpublished_ns.fetch_add(virtual_gate.task_held_during[0]);
        task_slot->held_drain_ns.fetch_add(virtual_gate.task_held_during[1]);
        task_slot->held_fit_ns.fetch_add(virtual_gate.task_held_during[2]);
      }
      WaitFakeTime(&env, b.busy_after);
    }
    if (virtual_gate.silent_in_bubble > 0) {
      // The stream opened the gate and the begin mark came; then nothing.
      gate.layout()->word.store(GateOpenValue(++gate_bubble));
      stage.WriteBegin(bubbles.empty() ? 0 : bubbles.back().slot, env.Now(), 0, UINT64_MAX);
      WaitFakeTime(&env, virtual_gate.silent_in_bubble);
    }
    if (virtual_gate.abandoned_open > 0) {
      // The stream opened the gate, and the stage died before its mark.
      gate.layout()->word.store(GateOpenValue(++gate_bubble));
      WaitFakeTime(&env, virtual_gate.abandoned_open);
    }
    // The lane accounts for the last bubbles before the tasks stop.
    WaitFakeTime(&env, kSecond);
    env.Leave();
  });
  stage_thread.join();
  for (const auto& runtime : runtimes) runtime->segment->SendCommand(TaskCommand::kStop);
  for (std::thread& t : task_threads) t.join();
  if (virtual_gate.on) {
    v1::LaneStats stats;
    lane.FillStats(&stats);
    run.gate_early_closes = stats.gate_early_closes();
    run.gate_forced_closes = stats.gate_forced_closes();
    run.gate_open_ns = stats.gate_open_ns();
    run.gate_margin_ns = stats.gate_margin_ns();
    run.gate_late_ns = stats.gate_late_ns();
    run.gate_late_bubbles = stats.gate_late_bubbles();
    run.gate_pending_ns = stats.gate_pending_ns();
    run.gate_held_ns = {stats.gate_held_unpublished_ns(), stats.gate_held_drain_ns(), stats.gate_held_fit_ns()};
    run.gate_word_at_end = gate.layout()->word.load();
    if (task_slot) run.gate_slot_demoted = task_slot->demoted.load();
  }
  lane.Stop();
  run.overruns = lane_tasks.overruns();
  lane.RemoveFiles();
  for (const std::string& file : run.files_made)
    if (std::filesystem::exists(file)) run.files_left.push_back(file);
  // The daemon keeps a gate page for the next daemon on its socket; a
  // test's socket has none.
  unlink(GatePagePath(options.socket_path, 0).c_str());
  events.Close();
  std::optional<report::EventLogData> data = report::ReadEventLog(log_path, &error);
  if (!data) ADD_FAILURE() << error;
  else run.events = std::move(*data);
  std::ifstream log(log_path);
  for (std::string line; std::getline(log, line);) {
    nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_object() && event.value("type", "") == "gate_bubble") run.gate_bubbles.push_back(event);
  }
  return run;
}

}  // namespace freeride::testing
