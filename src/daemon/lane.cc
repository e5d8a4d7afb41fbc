#include "daemon/lane.h"

#include "base/say.h"
#include "policy/gate_close.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <limits>
#include <cerrno>

#include "base/futex.h"
#include "base/paths.h"
#include "policy/gate_close.h"
#include "policy/next_bubble.h"
#include "policy/quantile.h"
#include "channel/step_accounting.h"

namespace freeride {

// The proto's guard levels are the policy's, by number.
static_assert(static_cast<int>(GuardLevel::kNormal) == v1::GUARD_LEVEL_NORMAL &&
              static_cast<int>(GuardLevel::kWiderMargins) == v1::GUARD_LEVEL_WIDER_MARGINS &&
              static_cast<int>(GuardLevel::kFewerGrants) == v1::GUARD_LEVEL_FEWER_GRANTS &&
              static_cast<int>(GuardLevel::kDemoted) == v1::GUARD_LEVEL_DEMOTED &&
              static_cast<int>(GuardLevel::kPaused) == v1::GUARD_LEVEL_PAUSED &&
              kGuardLevels == 5);
namespace {

constexpr Nanos kIdleWakeInterval = 200 * kMillisecond;
constexpr Nanos kWatchInterval = 50 * kMillisecond;
// While bubbles come and go and the armed task serves itself, the lane
// accounts for them this often (the stage's ring keeps the last 256).
constexpr Nanos kQuietBatchInterval = 100 * kMillisecond;
constexpr Nanos kStageCheckInterval = 10 * kMillisecond;

}  // namespace

Lane::Lane(const LaneConfig& config, const DaemonOptions& options, LaneTasks* tasks,
           EventLog* events, SharedProbeSchedule* probe, Env* env)
    : config_(config),
      options_(options),
      tasks_(tasks),
      events_(events),
      env_(env),
      segment_path_(LaneSegmentPath(options.socket_path, config.index)),
      predictor_(options.predictor),
      policy_(options.dispatch),
      probe_(probe),
      guard_(options.GuardForLane(config.index)),
      gated_(options.IsGatedLane(config.index)) {}

Lane::~Lane() { Stop(); }

bool Lane::Open(std::string* error) {
  if (!segment_.CreateOrOpen(segment_path_, config_.index, error)) return false;
  segment_.set_env(env_);
  // A restarted daemon starts its estimate afresh: nothing is withheld or
  // restricted until it has one.
  LaneSegmentLayout* l = segment_.layout();
  l->withhold_start_ns.store(0);
  l->withhold_end_ns.store(0);
  PublishGuardRestrictions();
  // Nor does it have forecasts: an armed task must not judge by the last
  // daemon's while this one's predictor is empty.
  ClearPublishedForecasts(0);
  if (gated_ && !gate_.CreateOrOpen(GatePagePath(options_.socket_path, config_.index), config_.index,
                                    error))
    return false;
  return true;
}

bool Lane::RemakeDeletedSegment() {
  Nanos now = env_->Now();
  if (now < next_segment_check_ns_) return false;
  next_segment_check_ns_ = now + kSecond;
  if (!segment_.mapping().Unlinked()) return false;
  Disarm();
  LaneSegment fresh;
  std::string error;
  bool remade = fresh.CreateOrOpen(segment_path_, config_.index, &error);
  fresh.set_env(env_);
  std::string what = remade ? fmt::format("lane {}: its segment {} was deleted (by systemd's "
                                          "RemoveIPC?); made it again, and the stage and tasks "
                                          "map it anew",
                                          config_.index, segment_path_)
                            : fmt::format("lane {}: its segment {} was deleted and cannot be made "
                                          "again ({}); the lane serves no bubbles",
                                          config_.index, segment_path_, error);
  Say(stderr, "freeride daemon: {}\n", what);
  events_->Emit({{"type", "lane_segment"},
                 {"ts_ns", now},
                 {"lane", config_.index},
                 {"event", remade ? "remade" : "lost"},
                 {"reason", what}});
  if (!remade) return false;
  {
    // FillStats reads segment_ from other threads; the lane's own thread,
    // the only one that replaces it, reads it without the lock.
    std::unique_lock<std::shared_mutex> swap(segment_swap_mu_);
    retired_segments_.push_back(std::move(segment_));
    segment_ = std::move(fresh);
  }
  // The new segment knows no window or guard level yet.
  published_window_end_ = 0;
  PublishGuardRestrictions();
  return true;
}

void Lane::Start() {
  stopping_ = false;
  loop_ended_ = false;
  thread_ = std::thread([this] {
    Loop();
    loop_ended_ = true;
  });
  if (gated_) {
    gate_loop_ended_ = false;
    gate_thread_ = std::thread([this] {
      GateLoop();
      gate_loop_ended_ = true;
    });
  }
}

void Lane::Stop() {
  stopping_ = true;
  // A wake that lands between a thread's look at stopping_ and its wait is
  // lost; the thread would then sleep to its wait's deadline, on a clock that
  // a test may never move.  So wake until both threads have ended.
  while (!loop_ended_.load() || !gate_loop_ended_.load()) {
    {
      std::shared_lock<std::shared_mutex> no_swap(segment_swap_mu_);
      if (segment_.is_open()) env_->WakeAll(&segment_.layout()->bubble_seq);
    }
    if (std::atomic<uint32_t>* word = gate_wait_word_.load()) env_->WakeAll(word);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (thread_.joinable()) thread_.join();
  if (gate_thread_.joinable()) gate_thread_.join();
  // A stopped daemon leaves no gate open behind it.
  if (gate_.is_open()) gate_.ForceClose();
}

void Lane::NoteStage(int64_t pid, int rank, const std::string& label) {
  events_->Emit({{"type", "stage_attach"},
                 {"ts_ns", env_->Now()},
                 {"lane", config_.index},
                 {"pid", pid},
                 {"rank", rank},
                 {"label", label}});
}

bool Lane::StageAlive() const {
  int64_t pid = segment_.layout()->stage_pid.load(std::memory_order_relaxed);
  if (pid <= 0) return false;
  // A kill(pid, 0) per check was hundreds of system calls a second under
  // load; a stage that dies is still noticed within kStageCheckInterval.
  Nanos now = env_->Now();
  if (pid == checked_pid_.load(std::memory_order_relaxed) &&
      now - checked_at_.load(std::memory_order_relaxed) < kStageCheckInterval)
    return checked_alive_.load(std::memory_order_relaxed);
  bool alive = env_->ProcessAlive(static_cast<pid_t>(pid));
  checked_alive_.store(alive, std::memory_order_relaxed);
  checked_pid_.store(pid, std::memory_order_relaxed);
  checked_at_.store(now, std::memory_order_relaxed);
  return alive;
}

bool Lane::BubbleOver(uint32_t seq, Nanos begin_ns) const {
  const LaneSegmentLayout* l = segment_.layout();
  if (l->bubble_seq.load(std::memory_order_acquire) != seq) return true;
  if (!StageAlive()) return true;
  return BubbleSilent(begin_ns, l->stage_heartbeat_ns.load(std::memory_order_relaxed),
                      env_->Now(), options_.stage_timeout);
}

void Lane::Loop() {
  // The dispatcher sleeps almost always and runs for microseconds at a bubble
  // begin; a real-time class (when the daemon may use one) takes the
  // scheduler's wake-up delay off the signal path.  Side tasks keep the
  // normal class.
  bool realtime = false;
  if (options_.realtime_dispatch) {
    sched_param param{};
    param.sched_priority = 10;
    realtime = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
  }
  events_->Emit({{"type", "lane_start"},
                 {"ts_ns", env_->Now()},
                 {"lane", config_.index},
                 {"device", config_.device},
                 {"realtime", realtime}});
  LaneSegmentLayout* l = segment_.layout();
  uint32_t seen = l->bubble_seq.load(std::memory_order_acquire);
  // A bubble may already be open when a restarted daemon maps the segment.
  if (seen & 1u) seen = ServeBubble(segment_.Read());
  while (!stopping_) {
    if (RemakeDeletedSegment()) seen = segment_.layout()->bubble_seq.load(std::memory_order_acquire);
    Arm();
    if (armed_ && !armed_->exited) {
      seen = ServeQuietly(seen);
      continue;
    }
    uint32_t seq = segment_.WaitForChange(seen, kIdleWakeInterval);
    if (stopping_) break;
    if (seq == seen) continue;
    // Bubbles that opened and closed while the lane was busy are accounted
    // for (an armed task may have stepped in them); an open one is served.
    seen = FinishClosedBubbles(seen, seq);
    BubbleMark mark = segment_.Read();
    if (mark.open() && mark.seq != seen) seen = ServeBubble(mark);
  }
  // A lane that stops accounts for the bubbles up to now, the open one too,
  // so that every step its tasks recorded is logged.
  Disarm();
  uint32_t current = segment_.layout()->bubble_seq.load(std::memory_order_acquire);
  seen = FinishClosedBubbles(seen, current);
  if ((current & 1u) != 0 && current != seen) ServeBubble(segment_.Read());
}

void Lane::CloseGate(const char* why, Nanos now) {
  if (!gate_.ForceClose()) return;
  gate_forced_closes_.fetch_add(1, std::memory_order_relaxed);
  gate_.layout()->forced_closes.fetch_add(1, std::memory_order_relaxed);
  events_->Emit({{"type", "gate"}, {"ts_ns", now}, {"lane", config_.index}, {"event", "forced_close"},
                 {"reason", why}});
}

void Lane::CloseAbandonedGate(uint32_t seq, Nanos now) {
  if (!GateIsOpen(gate_.layout()->word.load(std::memory_order_acquire)) || (seq & 1u) != 0) {
    gate_open_unmarked_since_ = 0;
    return;
  }
  if (gate_open_unmarked_since_ == 0) gate_open_unmarked_since_ = now;
  if (!StageAlive())
    CloseGate("the stage that opened it is gone", now);
  else if (now - gate_open_unmarked_since_ > options_.stage_timeout)
    CloseGate("open with no bubble marked for longer than --stage-timeout", now);
  else
    return;
  gate_open_unmarked_since_ = 0;
}

namespace {

// What the gate page says of the bubble after gate bubble `bubble` (its
// begin mark's sequence `seq`), from its forecast `next`: queue work from
// `gate_lead` before the forecast begin, to end by its admission deadline.
// An iteration's first bubble is published watched only: nothing is queued
// for it behind the shut gate, but through the same window held threads
// look at the gate closely, and once it is open a piece may be queued by
// the forecast before the lane's deadline is published
// (gate/piece_admission.h).  Unpublished
// (AheadAdmission{}) when the forecast is unknown or the bubble admits no
// work.
AheadAdmission AheadOf(const LaneSegmentLayout& l, const NextBubbleForecast& next, uint32_t seq,
                       uint32_t bubble, const DaemonOptions& options) {
  if (!next.known) return {};
  BubbleMark upcoming;
  upcoming.seq = seq + 2;  // its begin mark's sequence
  upcoming.slot = next.slot;
  const Nanos length = PublishedForecast(l, upcoming);
  const Nanos until = GateCloseAt(next.begin_ns, length, options.gate_margin,
                                  AdmissionFor(l, upcoming, next.begin_ns, next.begin_ns + length));
  if (until <= next.begin_ns) return {};
  return {bubble + 1, next.begin_ns - options.gate_lead, next.begin_ns, until, next.iteration_first};
}

}  // namespace

void Lane::GateLoop() {
  // Its own mapping of the lane segment: the dispatcher may replace its own
  // (RemakeDeletedSegment) while this thread waits on it.
  LaneSegment segment;
  std::string error;
  std::vector<GatedTask> gated_tasks;
  uint32_t seen = 0;
  // The next bubble's forecast, learned here from the marks this thread
  // serves (policy/next_bubble.h), and the bubble before the current one.
  NextBubblePredictor next_bubbles;
  int64_t forecast_stage = 0;
  bool have_previous = false;
  uint32_t previous_seq = 0;  // its begin mark's sequence
  uint32_t previous_slot = 0;
  Nanos previous_end = 0;
  while (!stopping_) {
    if (!segment.is_open() || segment.mapping().Unlinked()) {
      if (!segment.Open(segment_path_, /*writable=*/true, &error)) {
        std::atomic<uint32_t> nothing{0};
        env_->Wait(&nothing, 0, kWatchInterval);  // the dispatcher remakes it meanwhile
        continue;
      }
      segment.set_env(env_);
      gate_wait_word_.store(&segment.layout()->bubble_seq);
      if (stopping_) break;  // Stop may have looked for the word before it was set
      seen = segment.layout()->bubble_seq.load(std::memory_order_acquire);
      if (seen & 1u) --seen;  // serve a bubble already open
    }
    const LaneSegmentLayout& l = *segment.layout();
    uint32_t seq = segment.WaitForChange(seen, kIdleWakeInterval, kWakeOnBegin);
    Nanos now = env_->Now();
    CloseAbandonedGate(seq, now);
    if (stopping_ || seq == seen) continue;
    seen = seq;
    BubbleMark mark = segment.Read();
    if (!mark.open() || mark.seq != seq) {
      // Past the end of the bubble served last, a bubble ended before this
      // thread read its begin (a short one, whose marks ran back to back):
      // the forecast made at the last end was for that one, and busy times
      // now span it.  Neither is used.
      if (!(have_previous && seq == previous_seq + 1)) {
        have_previous = false;
        gate_.PublishAhead({});
      }
      continue;
    }
    // A new stage process may have another schedule: its busy times are learned afresh.
    const int64_t stage_pid = l.stage_pid.load(std::memory_order_relaxed);
    if (stage_pid != forecast_stage) {
      next_bubbles.Reset();
      forecast_stage = stage_pid;
      have_previous = false;
    }
    if (have_previous && mark.seq == previous_seq + 2)
      next_bubbles.Observe(previous_slot, previous_end, mark.slot, mark.begin_ns);
    have_previous = false;
    const Nanos forecast = PublishedForecast(l, mark);
    const Admission admission = AdmissionFor(l, mark, now, mark.begin_ns + forecast);
    // Only gated (imperative) tasks are held to the admission deadline: SDK
    // tasks fit their steps to the forecast end themselves, and a deadline
    // before it would hold the rest of a step over the busy time that
    // follows.  With none resident, work is admitted to the stage's end mark.
    // The deadline is applied by each task's interposer before it queues a
    // piece, with the piece's learned length (gate/piece_admission.h); the
    // word itself is left to the stage, so that no piece already queued is
    // held behind a shut gate through the busy time.
    tasks_->GatedTasks(config_.index, &gated_tasks);
    CollectLateWork();  // before the look below frees the slots of processes that have exited
    const Nanos margin = GateMargin(
        options_.gate_margin,
        gate_.LongestTaskWork([&](int64_t pid) { return env_->ProcessAlive(static_cast<pid_t>(pid)); }));
    gate_margin_ns_.store(margin, std::memory_order_relaxed);
    Nanos close_at = gated_tasks.empty()
                         ? std::numeric_limits<Nanos>::max()
                         : GateCloseAt(mark.begin_ns, forecast, options_.gate_margin, admission);
    // A stage that drives the gate (freeride_gate_open_on_stream) opened it
    // before its host mark ran, so the word now holds this bubble's number
    // (or a later one's, if the mark came very late: that one is then judged
    // by this mark, conservatively).  For a stage that marks only from the
    // host, the lane opens the gate itself, from here, at a later bubble
    // number than any the stage wrote, with the deadline published first:
    // the bubble began at the host mark, before the word opens, so a side
    // thread must not judge it by its last sighting of the shut gate
    // (gate/piece_admission.h).
    const bool stage_drives = gate_.layout()->stage_pid.load(std::memory_order_relaxed) ==
                              l.stage_pid.load(std::memory_order_relaxed);
    if (!stage_drives) {
      uint32_t current = gate_.layout()->word.load(std::memory_order_acquire);
      gate_.PublishAdmission((current >> 1) + 1, close_at);
      gate_.layout()->word.compare_exchange_strong(current, GateOpenValue((current >> 1) + 1));
    }
    const uint32_t word = gate_.layout()->word.load(std::memory_order_acquire);
    const uint32_t bubble = word >> 1;
    if (GateIsOpen(word)) gate_.PublishAdmission(bubble, close_at);
    // A slot of two kinds (policy/bubble_predictor.h) is forecast as its
    // short kind; a bubble still open at the second look's point is of the
    // long kind, and its deadline is published again from the long forecast.
    Nanos look_after = 0, look_length = 0;
    bool look_pending = !gated_tasks.empty() && GateIsOpen(word) &&
                        PublishedSecondLook(l, mark.slot, &look_after, &look_length) &&
                        look_length > forecast;
    // Until the end mark: past the deadline the lane still watches for a
    // stage that dies or goes silent with the gate open.
    Nanos closed_at = 0;  // when admission ended, if before the end mark
    bool closed_early = false;  // ... with the stage's gate still open then
    Nanos admitted_from = mark.begin_ns;  // admitted since then (until closed_at, if set)
    Nanos admitted_before = 0;            // admitted before a second look reopened admission
    bool extended = false;                // the second look published a later deadline
    bool ended_by_mark = false;
    while (!stopping_) {
      now = env_->Now();
      if (l.bubble_seq.load(std::memory_order_acquire) != seq) {  // its end mark came
        ended_by_mark = true;
        break;
      }
      if (look_pending && now >= mark.begin_ns + look_after) {
        look_pending = false;
        const Nanos longer = GateCloseAt(mark.begin_ns, look_length, options_.gate_margin,
                                         AdmissionFor(l, mark, now, mark.begin_ns + look_length));
        if (longer > close_at && gate_.layout()->word.load(std::memory_order_acquire) == word) {
          close_at = longer;
          if (closed_at != 0) {  // reopened: the time in between admitted nothing
            admitted_before += closed_at - admitted_from;
            admitted_from = now;
            closed_at = 0;
          }
          closed_early = false;
          extended = true;
          gate_.PublishAdmission(bubble, close_at);
        }
      }
      if (closed_at == 0 && now >= close_at) {
        closed_early = GateIsOpen(word) && gate_.layout()->word.load(std::memory_order_acquire) == word;
        closed_at = now;
      }
      if (!StageAlive() || BubbleSilent(mark.begin_ns,
                                        l.stage_heartbeat_ns.load(std::memory_order_relaxed), now,
                                        options_.stage_timeout)) {
        CloseGate(StageAlive() ? "no marks for longer than --stage-timeout"
                               : "the stage that opened it is gone",
                  now);
        if (closed_at == 0) closed_at = now;
        break;
      }
      Nanos wait = closed_at == 0 ? std::min<Nanos>(close_at - now, kWatchInterval) : kWatchInterval;
      if (look_pending) wait = std::min<Nanos>(wait, std::max<Nanos>(0, mark.begin_ns + look_after - now));
      segment.WaitForChange(seq, wait, kWakeOnEnd);
    }
    if (closed_early && closed_at != 0) {
      gate_early_closes_.fetch_add(1, std::memory_order_relaxed);
      gate_.layout()->early_closes.fetch_add(1, std::memory_order_relaxed);
    }
    // The lane closes what it opened, at the end mark at the latest.
    if (!stage_drives) gate_.CloseEarly(bubble);
    // Side work was admitted from the begin until the deadline, or until
    // the end mark (the stage's stream closed the gate there), less any
    // time between a deadline and a second look.
    BubbleMark closed;
    const bool have_end = segment.ClosedBubbleMark(seq, &closed);
    Nanos end = closed_at;
    if (end == 0) end = have_end ? closed.end_ns : env_->Now();
    const Nanos open_ns = admitted_before + std::max<Nanos>(0, end - admitted_from);
    gate_open_ns_.fetch_add(open_ns, std::memory_order_relaxed);
    for (const GatedTask& task : gated_tasks) tasks_->AddAllowed(task.id, open_ns);
    CollectLateWork();
    // The next bubble's forecast, for queueing ahead of its begin.  Only
    // after an end mark: a silent or dead stage's next bubble is unknown.
    AheadAdmission ahead;  // unpublished: nothing is queued ahead
    if (ended_by_mark && have_end && !stopping_) {
      have_previous = true;
      previous_seq = seq;
      previous_slot = mark.slot;
      previous_end = closed.end_ns;
      // Only while this bubble's end is the latest thing that happened: the
      // word still holds its close, and no later begin has been marked.  A
      // late look would label another bubble with this forecast.  (The
      // gated tasks are the bubble's, as its begin found them.)
      const bool latest = gate_.layout()->word.load(std::memory_order_acquire) == GateClosedValue(bubble) &&
                          l.bubble_seq.load(std::memory_order_acquire) == seq + 1;
      if (latest && !gated_tasks.empty() && options_.gate_lead > 0)
        ahead = AheadOf(l, next_bubbles.Forecast(mark.slot, closed.end_ns), seq, bubble, options_);
    }
    gate_.PublishAhead(ahead);
    // Only bubbles that really ended are judged (as steps' are), after the
    // forecast is out; late work seen while no gated task is resident is
    // nobody's.
    if (!gated_tasks.empty() && have_end) JudgeLateWork(gated_tasks, closed.end_ns - mark.begin_ns);
    else late_unjudged_.clear();
    // What the gate admitted in this bubble, for those who ask where a slot's
    // time went (bench/e2e_arms.py): gated tasks' bubbles carry no grants.
    if (!gated_tasks.empty())
      events_->Emit({{"type", "gate_bubble"},
                     {"ts_ns", env_->Now()},
                     {"lane", config_.index},
                     {"seq", seq},
                     {"slot", mark.slot},
                     {"begin_ns", mark.begin_ns},
                     {"forecast_ns", forecast},
                     {"deadline_ns", close_at - mark.begin_ns},
                     {"second_look", extended},
                     {"admitted_ns", open_ns}});
  }
  if (gate_.is_open()) gate_.PublishAhead({});  // no forecast outlives the lane's thread
  gate_wait_word_.store(nullptr);
}

void Lane::Arm() {
  tasks_->Candidates(config_.index, {}, &candidates_);
  const int64_t target = ChooseArmed(policy_, candidates_, last_free_memory_);
  if (armed_ && (armed_->task_id != target || armed_->exited)) Disarm();
  if (target == 0 || armed_) return;
  std::shared_ptr<TaskRuntime> runtime = tasks_->RuntimeOf(target);
  if (!runtime) return;
  LaneSegmentLayout* l = segment_.layout();
  l->begin_waiters.fetch_add(1, std::memory_order_seq_cst);  // on the armed task's behalf
  l->armed_task_id.store(target, std::memory_order_release);
  runtime->segment->SetArmed(true);
  armed_ = std::move(runtime);
}

void Lane::Disarm() {
  if (!armed_) return;
  LaneSegmentLayout* l = segment_.layout();
  armed_->segment->SetArmed(false);
  l->armed_task_id.store(0, std::memory_order_release);
  l->handback_wake_ns.store(INT64_MAX, std::memory_order_relaxed);  // only an armed task reads it
  l->idle_handback_wake_ns.store(INT64_MAX, std::memory_order_relaxed);
  l->begin_waiters.fetch_sub(1, std::memory_order_seq_cst);
  env_->WakeAll(&l->bubble_seq);  // the task sleeps there; let it notice
  // Steps it took by itself in bubbles not finished yet (it may have exited
  // in one) are kept for them.
  tasks_->DrainSteps(*armed_, &steps_ahead_);
  armed_.reset();
}

void Lane::RemoveFiles() const { unlink(segment_path_.c_str()); }

Lane::HandBackThresholds Lane::HandBackWakeThresholds() const {
  auto armed = std::find_if(candidates_.begin(), candidates_.end(),
                            [&](const DispatchCandidate& c) { return c.task_id == armed_->task_id; });
  if (armed == candidates_.end()) return {0, 0};  // not a candidate now: any hand-back is news
  // Judged as the dispatcher will judge the leftover: with the guard's margins.
  const double fit_factor = RestrictionsFor(guard_.level()).fit_factor;
  HandBackThresholds thresholds{DispatchPolicy::kNeverUsable, DispatchPolicy::kNeverUsable};
  for (const DispatchCandidate& c : candidates_) {
    if (c.task_id == armed->task_id) continue;
    thresholds.after_no_fit =
        std::min(thresholds.after_no_fit, policy_.LeftoverNeeded(*armed, c, fit_factor));
    thresholds.after_idle = std::min(thresholds.after_idle, policy_.LeastUsable(c, fit_factor));
  }
  return thresholds;
}

uint32_t Lane::ServeQuietly(uint32_t seen) {
  LaneSegmentLayout* l = segment_.layout();
  const HandBackThresholds handback_wake = HandBackWakeThresholds();
  l->handback_wake_ns.store(handback_wake.after_no_fit, std::memory_order_relaxed);
  l->idle_handback_wake_ns.store(handback_wake.after_idle, std::memory_order_relaxed);
  uint32_t current = l->bubble_seq.load(std::memory_order_acquire);
  // The armed task takes each bubble by itself, so the lane need not wake at
  // every mark: while bubbles flow it sleeps through them and accounts for a
  // batch at a time, waking early only when the task hands back enough of a
  // bubble for another task.  When bubbles stop it waits for the next end.
  // After a dead stage's bubble (served already) any mark is news.
  bool open = (current & 1u) != 0;
  bool served_dead = open && current == seen;
  // A hand-back that came while the lane was busy finds it awake.
  bool serve_now = open && !served_dead && LeftoverWorthServing(segment_.Read(), handback_wake);
  if (served_dead) {
    segment_.WaitForChange(current, kIdleWakeInterval, kWakeOnBegin | kWakeOnEnd);
  } else if (!serve_now) {
    if (bubbles_flowing_) {
      segment_.WaitForChange(current, kQuietBatchInterval, kWakeOnHandBack);
    } else if (static_cast<int32_t>(current - seen) <= 1) {  // nothing closed since `seen`
      // A bubble open for a while is checked on, in case its stage died.
      segment_.WaitForChange(current, open ? kWatchInterval : kIdleWakeInterval,
                             kWakeOnEnd | kWakeOnHandBack);
    }
  }
  current = l->bubble_seq.load(std::memory_order_acquire);
  uint32_t before = seen;
  seen = FinishClosedBubbles(seen, current);
  bubbles_flowing_ = seen != before;
  if ((current & 1u) != 0 && current != seen) {
    BubbleMark open = segment_.Read();
    if (open.seq != current) return seen;  // moved on meanwhile: look again
    // The full dispatcher takes over the open bubble when the armed task
    // handed back enough for another task, when the lane stops (it logs what
    // the task did so far), and when the stage died or went silent (it ends
    // the bubble, as it does for any lane).  Only a bubble open for a while
    // could be a dead stage's.
    bool long_open = env_->Now() - open.begin_ns > kWatchInterval;
    if (LeftoverWorthServing(open, handback_wake) || stopping_ ||
        (long_open && BubbleOver(open.seq, open.begin_ns)))
      return ServeBubble(open);
  }
  return seen;
}

bool Lane::LeftoverWorthServing(const BubbleMark& open,
                                const HandBackThresholds& thresholds) const {
  if (!open.open() || !armed_) return false;
  const TaskSegmentLayout* task = armed_->segment->layout();
  bool handed_back = task->served_bubble_seq.load(std::memory_order_acquire) == open.seq &&
                     task->state.load(std::memory_order_acquire) !=
                         static_cast<uint32_t>(TaskProcessState::kStepping);
  if (!handed_back) return false;
  const Nanos threshold = task->rest_free_bubble_seq.load(std::memory_order_relaxed) == open.seq
                              ? thresholds.after_idle
                              : thresholds.after_no_fit;
  const Nanos now = env_->Now();
  const Nanos forecast_end =
      open.begin_ns + predictor_.PredictOpenFor(open.slot, open.hint_ns, now - open.begin_ns);
  return HandBackLeftover(open.begin_ns, forecast_end, predictor_.SecondLookFor(open.slot), now) >=
         threshold;
}

uint32_t Lane::FinishClosedBubbles(uint32_t seen, uint32_t current) {
  // The odd sequences after `seen` below `current` are bubbles that closed.
  uint32_t first = (seen + 1) | 1u;
  if (static_cast<int32_t>(current - first) <= 0) {
    if ((current & 1u) == 0) return current;
    return current == seen ? seen : current - 1;
  }
  // More than a ring behind (the lane was stalled for that long): the oldest
  // bubbles are gone and are not counted.
  if (current - first > 2 * kClosedBubbleRing) first = current - 2 * kClosedBubbleRing + 1;
  for (uint32_t seq = first; static_cast<int32_t>(current - seq) > 0; seq += 2) {
    BubbleMark mark;
    if (segment_.ClosedBubbleMark(seq, &mark)) FinishUnservedBubble(mark);
  }
  // An open bubble is left to the caller.
  return (current & 1u) != 0 ? current - 1 : current;
}

void Lane::FinishUnservedBubble(const BubbleMark& mark) {
  BubbleContext bubble;
  bubble.mark = mark;
  // The forecast the armed task had at the end: the second look's, when the
  // bubble lasted past its point.
  bubble.predicted_end =
      mark.begin_ns + predictor_.PredictOpenFor(mark.slot, mark.hint_ns, mark.end_ns - mark.begin_ns);
  if (mark.free_memory_bytes != UINT64_MAX) last_free_memory_ = mark.free_memory_bytes;
  std::shared_ptr<TaskRuntime> task = armed_;
  if (task && !task->exited && tasks_->RuntimeOf(task->task_id)) {
    // Over already, so this only waits when a step of the bubble still runs
    // (an overrun, or a hang to kill).
    RunIterative(bubble, *task, /*armed=*/true, bubble.predicted_end, [] {});
    tasks_->NoteArmedRun(task->task_id);
  } else if (task) {
    bubble.steps_lost += tasks_->DrainSteps(*task, &bubble.steps);  // its last steps, if it exited
  }
  // Whatever an armed task left, no other candidate's step could fit it (or
  // it would have woken the lane).  With none armed, nobody could run.
  bubble.last_verdict = task && candidates_.size() > 1 ? DispatchVerdict::kNoTimeFit
                                                       : DispatchVerdict::kNoCandidates;
  // Nobody was told to run: the task took the bubble when its first step began.
  bubble.first_grant_ns = 0;
  for (const TaskStep& step : bubble.steps)
    if (step.record.bubble_seq == mark.seq &&
        (bubble.first_grant_ns == 0 || step.record.start_ns < bubble.first_grant_ns))
      bubble.first_grant_ns = step.record.start_ns;
  FinishBubble(bubble);
}

void Lane::ForgetAReplacedStage(int64_t pid) {
  LaneSegmentLayout* l = segment_.layout();
  if (pid <= 0 || pid == forecast_stage_pid_) return;
  const int64_t replaced = forecast_stage_pid_;
  forecast_stage_pid_ = pid;
  if (replaced == 0) {
    l->forecast_stage_pid.store(pid, std::memory_order_release);
    return;
  }
  predictor_.Reset();
  ClearPublishedForecasts(pid);
  last_iteration_begin_ = 0;
  warmup_iterations_.clear();
  events_->Emit({{"type", "stage_new"},
                 {"ts_ns", env_->Now()},
                 {"lane", config_.index},
                 {"pid", pid},
                 {"replaced_pid", replaced}});
}

void Lane::ClearPublishedForecasts(int64_t follow_pid) {
  LaneSegmentLayout* l = segment_.layout();
  for (uint32_t i = 0; i < kPublishedSlots; ++i) {
    l->predicted_len_ns[i].store(0, std::memory_order_relaxed);
    l->second_look_us[i].store(0, std::memory_order_relaxed);
  }
  // After the forecasts are cleared: a task that sees this pid reads none.
  l->forecast_stage_pid.store(follow_pid, std::memory_order_release);
}

void Lane::PublishForecast(uint32_t slot) {
  uint32_t index = slot < kPublishedSlots ? slot : kPublishedSlots - 1;
  LaneSegmentLayout* l = segment_.layout();
  l->predicted_len_ns[index].store(predictor_.Predict(slot, 0), std::memory_order_relaxed);
  SecondLook look = predictor_.SecondLookFor(slot);
  l->second_look_us[index].store(look.exists() ? PackSecondLook(look.after, look.length) : 0,
                                 std::memory_order_relaxed);
}

uint32_t Lane::ServeBubble(const BubbleMark& mark) {
  LaneSegmentLayout* l = segment_.layout();
  BubbleContext bubble;
  bubble.mark = mark;
  // An open bubble is the attached process's.
  ForgetAReplacedStage(l->stage_pid.load(std::memory_order_relaxed));
  // A bubble served late (handed back by the armed task, or found open
  // after a busy spell) may be past its second look's point already.
  bubble.predicted_end = mark.begin_ns + predictor_.PredictOpenFor(mark.slot, mark.hint_ns,
                                                                   env_->Now() - mark.begin_ns);
  if (mark.free_memory_bytes != UINT64_MAX) last_free_memory_ = mark.free_memory_bytes;

  BubbleServing serving(policy_, {mark.seq, mark.begin_ns, bubble.predicted_end,
                                  predictor_.SecondLookFor(mark.slot), mark.free_memory_bytes});
  if (armed_ && !armed_->exited && tasks_->RuntimeOf(armed_->task_id)) {
    // The armed task woke on the begin mark itself and is already deciding
    // whether its step fits; the dispatcher follows it.
    std::shared_ptr<TaskRuntime> task = armed_;
    serving.Exclude(task->task_id);
    running_task_ = task->task_id;
    RunIterative(bubble, *task, /*armed=*/true, bubble.predicted_end,
                 [&] { tasks_->MarkRunning(task->task_id); });
    running_task_ = 0;
    tasks_->EndRun(task->task_id);
  } else if (armed_) {
    serving.Exclude(armed_->task_id);  // it waits on the lane, not on grants
  }

  while (!stopping_ && !BubbleOver(mark.seq, mark.begin_ns)) {
    const Nanos now = env_->Now();
    tasks_->Candidates(config_.index, serving.excluded(), &candidates_);
    ServingAction action = serving.Next(now, candidates_, PublishedGate(*l));
    bubble.last_verdict = action.verdict;
    bubble.predicted_end = serving.predicted_end();
    if (action.kind == ServingActionKind::kWaitUntil) {
      segment_.WaitForChange(mark.seq, action.until - now);
      continue;
    }
    if (action.kind == ServingActionKind::kDone) break;
    const int64_t id = action.task_id;
    std::shared_ptr<TaskRuntime> task = tasks_->RuntimeOf(id);
    if (!task) continue;
    running_task_ = id;
    // Grant first, book-keep after: the journal and event log are not on the
    // path from the begin mark to the first step.
    // A held task is SUBMITTED until it attaches: no RUNNING/PAUSED flip
    // (the task manager would refuse it, under its lock).
    const bool held = task->held.load(std::memory_order_acquire);
    if (task->RunsOnlyInBubbles()) {
      RunImperative(bubble, *task, action.stop_at, [&] { if (!held) tasks_->MarkRunning(id); });
    } else {
      RunIterative(bubble, *task, /*armed=*/false, action.until, [&] { tasks_->MarkRunning(id); });
    }
    running_task_ = 0;
    if (!held) tasks_->EndRun(id);
  }
  while (!stopping_ && !BubbleOver(mark.seq, mark.begin_ns))
    segment_.WaitForChange(mark.seq, kWatchInterval);
  bool ended_by_mark = l->bubble_seq.load(std::memory_order_acquire) != mark.seq;
  FinishBubble(bubble);
  // After an end mark, look for the next change from the closed state; after
  // a dead or stale stage, wait for the sequence to move at all.
  return ended_by_mark ? mark.seq + 1 : mark.seq;
}

void Lane::RunIterative(BubbleContext& bubble, TaskRuntime& task, bool armed, Nanos deadline,
                        const std::function<void()>& started) {
  TaskSegment& segment = *task.segment;
  TaskSegmentLayout* l = segment.layout();
  uint32_t ack = l->ack_seq.load(std::memory_order_acquire);
  Nanos now = env_->Now();
  Nanos over_since = 0;  // when the lane first saw the bubble over with a step running
  const Nanos hang = options_.BudgetForLane(config_.index).hang;
  if (!armed) segment.Grant(bubble.mark.seq, deadline);
  if (bubble.first_grant_ns == 0) bubble.first_grant_ns = now;
  started();
  auto handed_back = [&] {
    TaskProcessState state = segment.state();
    return l->served_bubble_seq.load(std::memory_order_acquire) == bubble.mark.seq &&
           (state == TaskProcessState::kYielded || state == TaskProcessState::kFinished ||
            state == TaskProcessState::kFailed);
  };
  while (!handed_back() && !task.exited && !stopping_) {
    // The task never took the bubble (it closed before the task woke up):
    // nothing is running, so stop waiting.  A task inside a step of this
    // bubble is waited for; it cannot be interrupted and yields when the
    // step returns.  An armed task that woke late may be stepping in the
    // next bubble already: that one is not this bubble's.
    if (BubbleOver(bubble.mark.seq, bubble.mark.begin_ns)) {
      bool stepping_here = segment.state() == TaskProcessState::kStepping &&
                           l->taken_bubble_seq.load(std::memory_order_acquire) == bubble.mark.seq;
      if (!stepping_here) break;
      Nanos now = env_->Now();
      if (over_since == 0) over_since = now;
      if (hang > 0 && now - over_since >= hang) tasks_->KillHung(task.task_id, now - over_since);
    }
    ack = segment.WaitForAck(ack, kWatchInterval);
  }
  if (!armed) segment.Revoke();
  bubble.steps_lost += tasks_->DrainSteps(task, &bubble.steps);
}

void Lane::RunImperative(BubbleContext& bubble, TaskRuntime& task, Nanos stop_at,
                         const std::function<void()>& continued) {
  double progress_before = task.segment->progress();
  const bool held = task.held;
  Nanos start = task.Continue([&] { return !BubbleOver(bubble.mark.seq, bubble.mark.begin_ns); });
  if (start == 0) return;  // the bubble ended while the cgroup thawed
  if (bubble.first_grant_ns == 0) bubble.first_grant_ns = start;
  continued();
  Nanos now = start;
  while (!stopping_ && !task.exited && !BubbleOver(bubble.mark.seq, bubble.mark.begin_ns) &&
         (stop_at == 0 || (now = env_->Now()) < stop_at))
    segment_.WaitForChange(bubble.mark.seq,
                           stop_at == 0 ? kWatchInterval : std::min(kWatchInterval, stop_at - now));
  // An iterative task that attached to the SDK in this bubble is let go to
  // run its init; it then waits for grants.
  Nanos end = 0;
  if (held && task.Attached()) task.held = false;
  else if (!task.exited) end = task.Stop();
  if (end == 0) end = env_->Now();
  double units = task.segment->progress() - progress_before;
  tasks_->DrainSteps(task, nullptr);
  // A held task's run is its start-up, not work: it is not a step.
  if (held) task.held_run_ns += end - start;
  else bubble.steps.push_back({task.task_id, StepRecord{start, end, units, bubble.mark.seq, 0},
                               /*allowed_only=*/true});
}

void Lane::FinishBubble(BubbleContext& bubble) {
  const BubbleMark& mark = bubble.mark;
  // The stage records every bubble's end, so a lane that waited out a long
  // overrun (the stage marks on meanwhile) still measures it against the
  // real end, not its own late view of it.
  BubbleMark closed;
  bool have_end = segment_.ClosedBubbleMark(mark.seq, &closed) && closed.end_ns >= mark.begin_ns;
  Nanos end_ns = have_end ? closed.end_ns : env_->Now();
  // An armed task can be a bubble ahead of the lane: steps drained early
  // wait for their own bubble, and those kept from earlier drains join this.
  auto later = [&](const TaskStep& step) {
    return static_cast<int32_t>(step.record.bubble_seq - mark.seq) > 0;
  };
  // (Usually there is nothing to move, and stable_partition would allocate.)
  if (!steps_ahead_.empty() || std::any_of(bubble.steps.begin(), bubble.steps.end(), later)) {
    auto kept_due = std::stable_partition(steps_ahead_.begin(), steps_ahead_.end(), later);
    auto drained_ahead = std::stable_partition(bubble.steps.begin(), bubble.steps.end(),
                                               [&](const TaskStep& step) { return !later(step); });
    std::vector<TaskStep> due(kept_due, steps_ahead_.end());
    steps_ahead_.erase(kept_due, steps_ahead_.end());
    steps_ahead_.insert(steps_ahead_.end(), drained_ahead, bubble.steps.end());
    bubble.steps.erase(drained_ahead, bubble.steps.end());
    bubble.steps.insert(bubble.steps.end(), due.begin(), due.end());
  }
  const events::BubbleEnd ended_by =
      have_end ? events::BubbleEnd::kMark
               : (StageAlive() ? events::BubbleEnd::kStale : events::BubbleEnd::kStageGone);
  Nanos length = end_ns - mark.begin_ns;
  if (have_end) {
    ForgetAReplacedStage(segment_.layout()->stage_pid.load(std::memory_order_relaxed));
    // A bubble of a process that has been replaced since (accounted late) is
    // not learned from: the forecasts now follow its successor.
    if (closed.stage_pid <= 0 || closed.stage_pid == forecast_stage_pid_) {
      predictor_.Observe(mark.slot, length);
      PublishForecast(mark.slot);
      if (mark.slot == 0) ObserveIterationBegin(mark.begin_ns);
    }
  }
  PublishWithholdWindow(env_->Now());

  Nanos harvested_total = 0, allowed_total = 0, overrun_total = 0;
  // Per task that stepped in this bubble: its time inside the bubble, and
  // how far its last step ran past the end.
  struct TaskShare {
    int64_t task_id;
    Nanos inside;
    Nanos overrun;
    bool allowed_only;
  };
  std::vector<TaskShare> shares;
  const Nanos unix_now = WallNow();
  // The bubble's events go to the log as one batch, formatted in one buffer:
  // at hundreds of bubbles a second, a string per event was a good part of
  // the daemon's CPU.
  fmt::memory_buffer lines;
  auto emit_step = [&](const TaskStep& step, Nanos overrun) {
    const StepRecord& r = step.record;
    events::StepEvent event;
    event.ts_ns = r.end_ns;
    event.lane = config_.index;
    event.task_id = step.task_id;
    event.bubble_seq = r.bubble_seq;
    event.start_ns = r.start_ns;
    event.end_ns = r.end_ns;
    event.units = r.units;
    event.overrun_ns = overrun;
    event.late = r.bubble_seq != mark.seq;
    event.allowed = step.allowed_only;
    event.unix_ns = unix_now;
    events::AppendEvent(lines, event);
    lines.push_back('\n');
  };
  for (const TaskStep& step : bubble.steps) {
    // A step of an earlier bubble, drained late (its bubble was finished
    // before the step was recorded): logged under its own bubble, not
    // counted in this.
    if (step.record.bubble_seq != mark.seq) {
      emit_step(step, 0);
      continue;
    }
    StepShare share = ShareOfStep(step.record, mark.begin_ns, end_ns);
    (step.allowed_only ? allowed_total : harvested_total) += share.inside;
    overrun_total += share.overrun;
    auto mine = std::find_if(shares.begin(), shares.end(),
                             [&](const TaskShare& entry) { return entry.task_id == step.task_id; });
    if (mine == shares.end()) {
      shares.push_back({step.task_id, share.inside, share.overrun, step.allowed_only});
    } else {
      mine->inside += share.inside;
      mine->overrun = std::max(mine->overrun, share.overrun);
    }
    emit_step(step, share.overrun);
  }
  for (const TaskShare& share : shares) {
    if (share.allowed_only) tasks_->AddAllowed(share.task_id, share.inside);
    else tasks_->AddHarvest(share.task_id, share.inside);
    // Only bubbles that really ended are judged: a stale or vanished stage's
    // bubble has no end that a task could have respected.
    if (have_end) tasks_->RecordOverrun(share.task_id, share.overrun, std::max<Nanos>(length, 0));
  }
  bubbles_.fetch_add(1, std::memory_order_relaxed);
  bubble_ns_.fetch_add(std::max<Nanos>(length, 0), std::memory_order_relaxed);
  harvested_ns_.fetch_add(harvested_total, std::memory_order_relaxed);
  allowed_ns_.fetch_add(allowed_total, std::memory_order_relaxed);
  overrun_ns_.fetch_add(overrun_total, std::memory_order_relaxed);
  last_verdict_ = static_cast<int>(bubble.last_verdict);
  events::BubbleEvent event;
  event.ts_ns = end_ns;
  event.lane = config_.index;
  event.slot = mark.slot;
  event.seq = mark.seq;
  event.begin_ns = mark.begin_ns;
  event.end_ns = end_ns;
  event.predicted_end_ns = bubble.predicted_end;
  event.first_grant_ns = bubble.first_grant_ns;
  event.hint_ns = mark.hint_ns;
  if (mark.free_memory_bytes != UINT64_MAX) event.free_memory_bytes = mark.free_memory_bytes;
  event.ended_by = ended_by;
  event.verdict = bubble.last_verdict;
  event.steps = bubble.steps.size() + bubble.steps_lost;
  event.step_records_lost = bubble.steps_lost;
  event.harvested_ns = harvested_total;
  event.allowed_ns = allowed_total;
  event.overrun_ns = overrun_total;
  event.unix_ns = unix_now;
  events::AppendEvent(lines, event);
  events_->EmitLine(fmt::to_string(lines));
}

void Lane::ObserveIterationBegin(Nanos begin_ns) {
  const Nanos previous = last_iteration_begin_;
  last_iteration_begin_ = begin_ns;
  if (previous <= 0 || begin_ns <= previous || options_.probe.period_iterations <= 0) return;
  if (!schedule_.enabled()) {
    schedule_ = probe_->Get();
    if (!schedule_.enabled()) {
      warmup_iterations_.push_back(begin_ns - previous);
      if (static_cast<int>(warmup_iterations_.size()) < options_.probe.warmup_iterations) return;
      schedule_ = probe_->Propose(QuantileOf(std::move(warmup_iterations_), 0.5));
      warmup_iterations_.clear();
      if (!schedule_.enabled()) return;
      events_->Emit({{"type", "probe_schedule"},
                     {"ts_ns", env_->Now()},
                     {"lane", config_.index},
                     {"period_ns", schedule_.period()},
                     {"window_ns", schedule_.window_length()}});
    }
    schedule_probing_ = true;
    return;  // the first iteration under the schedule starts at this mark
  }
  if (!estimator_.ObserveIteration(previous, begin_ns, schedule_)) return;
  OverheadEstimate estimate = estimator_.Estimate();
  const GuardLevel before = guard_.level();
  const bool changed = guard_.Judge(estimate);
  if (changed) {
    estimator_.Reset();
    PublishGuardRestrictions();
  }
  {
    std::lock_guard<std::mutex> lock(overhead_mu_);
    overhead_ = changed ? estimator_.Estimate() : estimate;
    guard_level_ = guard_.level();
  }
  // A cycle with too few iterations on either side adds no ratio: the
  // estimate is the one logged already.
  if (!changed && estimator_.ratios_added() == logged_ratios_) return;
  logged_ratios_ = estimator_.ratios_added();
  nlohmann::json event = {{"type", "overhead"},
                          {"ts_ns", env_->Now()},
                          {"unix_ns", WallNow()},
                          {"lane", config_.index},
                          {"cycles", estimate.cycles},
                          {"min_cycles", estimate.min_cycles},
                          {"withheld_iterations", estimate.withheld_iterations},
                          {"served_iterations", estimate.served_iterations},
                          {"guard", GuardLevelName(guard_.level())}};
  if (estimate.known()) {
    event["slowdown"] = estimate.mean;
    event["slowdown_low"] = estimate.low;
    event["slowdown_high"] = estimate.high;
  }
  if (changed) event["guard_from"] = GuardLevelName(before);
  events_->Emit(std::move(event));
}

void Lane::PublishWithholdWindow(Nanos now) {
  if (!schedule_.enabled() || now < published_window_end_) return;
  TimeWindow window = schedule_.NextWindow(now);
  LaneSegmentLayout* l = segment_.layout();
  l->withhold_end_ns.store(window.end, std::memory_order_relaxed);
  l->withhold_start_ns.store(window.start, std::memory_order_release);
  published_window_end_ = window.end;
}

void Lane::PublishGuardRestrictions() {
  GuardRestrictions r = RestrictionsFor(guard_.level());
  LaneSegmentLayout* l = segment_.layout();
  l->guard_fit_permille.store(static_cast<uint32_t>(r.fit_factor * 1000 + 0.5));
  l->guard_serve_every.store(r.serve_every);
  l->guard_paused.store(r.paused ? 1 : 0);
}

void Lane::CollectLateWork() {
  std::map<int64_t, GateTaskReport> now;
  gate_.ForEachTaskReport([&](int64_t pid, const GateTaskReport& report) {
    const auto it = late_seen_.find(pid);
    // The first look only notes what the processes had published before this
    // lane ran (a restarted daemon does not count their history again).
    const GateTaskReport before = it != late_seen_.end() ? it->second
                                  : late_baselined_     ? GateTaskReport{}
                                                        : report;
    // A slot claimed again by a new process starts from 0: no delta then.
    if (report.late_ns > before.late_ns) {
      gate_late_ns_.fetch_add(report.late_ns - before.late_ns, std::memory_order_relaxed);
      late_unjudged_[pid] += report.late_ns - before.late_ns;
      // Its group is read now, while the process lives (it may exit before
      // its late work is judged).
      if (!late_group_.count(pid)) late_group_[pid] = env_->ProcessGroupOf(static_cast<pid_t>(pid));
    }
    // Each field only grows for one process: its growth since the last look.
    auto add = [](auto& total, auto now_value, auto before_value) {
      if (now_value > before_value) total.fetch_add(now_value - before_value, std::memory_order_relaxed);
    };
    add(gate_late_bubbles_, report.late_bubbles, before.late_bubbles);
    add(gate_pending_ns_, report.pending_ns, before.pending_ns);
    add(gate_held_unpublished_ns_, report.held_unpublished_ns, before.held_unpublished_ns);
    add(gate_held_drain_ns_, report.held_drain_ns, before.held_drain_ns);
    add(gate_held_fit_ns_, report.held_fit_ns, before.held_fit_ns);
    now[pid] = report;
  });
  for (auto it = late_group_.begin(); it != late_group_.end();)
    it = now.count(it->first) || late_unjudged_.count(it->first) ? std::next(it) : late_group_.erase(it);
  late_seen_ = std::move(now);  // forgets the processes whose slots were freed
  late_baselined_ = true;
}

void Lane::JudgeLateWork(const std::vector<GatedTask>& tasks, Nanos bubble) {
  // The task a gated process belongs to: its own launched process, or a
  // process in that one's group (a launcher's child).  -1: none.
  auto task_for = [&](const std::vector<GatedTask>& among, int64_t pid) -> int64_t {
    for (const GatedTask& task : among)
      if (pid == task.pid) return task.id;
    const auto known = late_group_.find(pid);
    const pid_t group = known != late_group_.end() ? known->second : env_->ProcessGroupOf(static_cast<pid_t>(pid));
    for (const GatedTask& task : among)
      if (group > 0 && group == task.pid) return task.id;
    return -1;
  };
  // A task's processes run late side by side: its overrun is the longest
  // of theirs, as a step's is the longest of its pieces'.
  std::map<int64_t, Nanos> late_of_task;
  for (const auto& [pid, late] : late_unjudged_) {
    const int64_t id = task_for(tasks, pid);
    if (id >= 0) late_of_task[id] = std::max(late_of_task[id], late);
  }
  late_unjudged_.clear();
  for (const GatedTask& task : tasks) tasks_->RecordOverrun(task.id, late_of_task[task.id], bubble);
  // Whether each is demoted now, this bubble's verdicts included.
  std::vector<GatedTask> now;
  tasks_->GatedTasks(config_.index, &now);
  gate_.PublishDemotions([&](int64_t pid) {
    const int64_t id = task_for(now, pid);
    for (const GatedTask& task : now)
      if (task.id == id) return task.demoted;
    return false;
  });
}

void Lane::FillStats(v1::LaneStats* stats) const {
  // The segment is read under the swap lock, and only it: the lane thread
  // may wait for this lock while it remakes a deleted segment.  A retired
  // segment stays mapped, so `l` stays valid after the lock is let go.
  std::shared_lock<std::shared_mutex> no_swap(segment_swap_mu_);
  const LaneSegmentLayout* l = segment_.layout();
  stats->set_stage_pid(l->stage_pid.load());
  stats->set_stage_alive(StageAlive());
  // The open bubble, and who runs in it, are read from shared memory: a lane
  // whose armed task serves itself does not see bubbles begin.
  const BubbleMark open = segment_.Read();
  const bool in_bubble = open.open() && !BubbleOver(open.seq, open.begin_ns);
  no_swap.unlock();
  stats->set_lane(config_.index);
  stats->set_device(config_.device);
  stats->set_segment_path(segment_path_);
  const bool idle = options_.cpu_task_priority == CpuTaskPriority::kIdle;
  stats->set_isolation(options_.IsCpuLane(config_.index)
                           ? (idle ? v1::ISOLATION_CPU_SCHED_IDLE : v1::ISOLATION_CPU_NORMAL)
                       : options_.mps_pipe_dir.empty() ? v1::ISOLATION_GPU_TIME_SLICED
                                                       : v1::ISOLATION_GPU_MPS);
  stats->set_cpu_core(config_.cpu_core);
  int64_t running_task = running_task_.load();
  if (in_bubble && running_task == 0) {
    int64_t armed = l->armed_task_id.load(std::memory_order_acquire);
    std::shared_ptr<TaskRuntime> task = armed != 0 ? tasks_->RuntimeOf(armed) : nullptr;
    if (task && task->segment->state() == TaskProcessState::kStepping &&
        task->segment->layout()->taken_bubble_seq.load(std::memory_order_acquire) == open.seq)
      running_task = armed;
  }
  stats->set_in_bubble(in_bubble);
  stats->set_current_slot(l->slot.load());
  stats->set_current_bubble_predicted_ns(in_bubble ? PublishedForecast(*l, open) : 0);
  stats->set_bubbles(bubbles_.load());
  stats->set_bubble_ns(bubble_ns_.load());
  stats->set_harvested_ns(harvested_ns_.load());
  stats->set_allowed_ns(allowed_ns_.load() + gate_open_ns_.load());
  stats->set_dispatch(gated_ ? v1::DISPATCH_GPU_GATE : v1::DISPATCH_HOST);
  stats->set_gate_early_closes(gate_early_closes_.load());
  stats->set_gate_forced_closes(gate_forced_closes_.load());
  stats->set_gate_open_ns(gate_open_ns_.load());
  stats->set_gate_margin_ns(gate_margin_ns_.load());
  stats->set_gate_late_ns(gate_late_ns_.load());
  stats->set_gate_late_bubbles(gate_late_bubbles_.load());
  stats->set_gate_pending_ns(gate_pending_ns_.load());
  stats->set_gate_held_unpublished_ns(gate_held_unpublished_ns_.load());
  stats->set_gate_held_drain_ns(gate_held_drain_ns_.load());
  stats->set_gate_held_fit_ns(gate_held_fit_ns_.load());
  stats->set_overrun_ns(overrun_ns_.load());
  stats->set_free_memory_bytes(l->free_memory_bytes.load());
  stats->set_capacity_bytes(config_.capacity_bytes);
  stats->set_running_task(running_task);
  uint32_t resident = 0, queued = 0;
  tasks_->LaneCounts(config_.index, &resident, &queued);
  stats->set_resident_tasks(resident);
  stats->set_queued_tasks(queued);
  stats->set_last_verdict(VerdictName(static_cast<DispatchVerdict>(last_verdict_.load())));
  std::lock_guard<std::mutex> lock(overhead_mu_);
  v1::OverheadEstimate* overhead = stats->mutable_overhead();
  overhead->set_probing(schedule_probing_.load());
  overhead->set_cycles(overhead_.cycles);
  overhead->set_min_cycles(overhead_.min_cycles);
  overhead->set_known(overhead_.known());
  if (overhead_.known()) {
    overhead->set_slowdown(overhead_.mean);
    overhead->set_slowdown_low(overhead_.low);
    overhead->set_slowdown_high(overhead_.high);
  }
  overhead->set_withheld_iterations(overhead_.withheld_iterations);
  overhead->set_served_iterations(overhead_.served_iterations);
  overhead->set_guard_level(GuardLevelName(guard_level_));
  overhead->set_guard(static_cast<v1::GuardLevel>(guard_level_));
  overhead->set_budget(guard_.config().budget);
}

}  // namespace freeride
