// A lane: one GPU (or one CPU core) and the dispatcher thread that serves
// its bubbles.  The mechanism lives here (waiting on the bubble channel,
// granting, stopping and continuing processes); the choices are made by
// BubbleServing (policy/bubble_serving.h) and BubblePredictor.
#pragma once
#include <atomic>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/env.h"
#include "channel/lane_segment.h"
#include "daemon/daemon_options.h"
#include "daemon/event_log.h"
#include "daemon/shared_probe_schedule.h"
#include "daemon/lane_tasks.h"
#include "freeride.pb.h"
#include "gate/gate_page.h"
#include "policy/bubble_predictor.h"
#include "policy/bubble_serving.h"
#include "policy/dispatch_policy.h"
#include "policy/overhead_guard.h"
#include "policy/overhead_probe.h"

namespace freeride {

// Open, Start and Stop are the owner's, from one thread; FillStats,
// segment_path and NoteStage may be called from any thread.
class Lane {
 public:
  // `probe` is the daemon's schedule of withheld windows, shared by its
  // lanes; it, `options`, `tasks`, `events` and `env` outlive the lane.
  // `env` is the clock and waits of the lane and its segment: the real one
  // in the daemon, a fake in tests that serve bubbles on fake time.
  Lane(const LaneConfig& config, const DaemonOptions& options, LaneTasks* tasks,
       EventLog* events, SharedProbeSchedule* probe, Env* env = Env::Default());
  // Stops the lane.
  ~Lane();

  // Maps (or re-maps, after a restart) the lane's segment; nothing is
  // withheld or restricted until the lane has an estimate.  Before Start;
  // false with *error when the segment cannot be mapped.
  bool Open(std::string* error);
  // Starts the dispatcher thread.  After a successful Open.
  void Start();
  // Stops the dispatcher thread and joins it; the thread first accounts for
  // the bubbles up to now, so that every recorded step is logged.
  // Idempotent.
  void Stop();
  // The lane's statistics, read from its counters and its segment.  After
  // Open.
  void FillStats(v1::LaneStats* stats) const;
  // Whether the lane's tasks are gated on the GPU (DaemonOptions::IsGatedLane).
  bool gated() const { return gated_; }
  // The lane segment's file, which stages and tasks map by path.
  const std::string& segment_path() const { return segment_path_; }
  // Removes the lane's segment file, so that a clean stop does not leave it
  // behind; processes that map it keep their mappings.  The gate page is
  // kept: a stage that finds its page removed registers a new one, which
  // puts it on host marks for up to a second, so a daemon restarted on the
  // same socket reopens the old page instead (GatePage::CreateOrOpen shuts
  // its gate).  After Stop; the owner's thread.
  void RemoveFiles() const;
  // Logs a stage's attach request (a stage_attach event).
  void NoteStage(int64_t pid, int rank, const std::string& label);

 private:
  struct BubbleContext {
    BubbleMark mark;
    Nanos predicted_end = 0;
    Nanos first_grant_ns = 0;  // when the first task was told to run
    std::vector<TaskStep> steps;
    uint64_t steps_lost = 0;  // records the task's ring overwrote unread
    DispatchVerdict last_verdict = DispatchVerdict::kNoCandidates;
  };

  void Loop();
  // Serves one open bubble until it ends.  Returns the bubble_seq to wait
  // for a change from: the closed state after an end mark, the bubble's own
  // seq when it ended because the stage died or went stale.
  uint32_t ServeBubble(const BubbleMark& mark);
  // Returns true when the bubble with `seq` is over (end mark, dead stage or
  // stale stage).
  bool BubbleOver(uint32_t seq, Nanos begin_ns) const;
  // Both call `started` right after the task was told to run.
  // With `armed`, the task has taken the bubble by itself; it is not granted.
  // Grants the bubble to an iterative task until `deadline` (the predicted
  // end; earlier for a demoted task) and waits for it to hand it back.  A
  // step still running long after the bubble's end is a hang: the task is
  // killed.
  void RunIterative(BubbleContext& bubble, TaskRuntime& task, bool armed, Nanos deadline,
                    const std::function<void()>& started);
  // Continues a task that runs only inside bubbles (an imperative one, or an
  // iterative one held until it attaches) until the bubble ends, or until
  // `stop_at` (a withheld window's start) when non-zero.  A held task that
  // attached meanwhile is let go to run its init.
  void RunImperative(BubbleContext& bubble, TaskRuntime& task, Nanos stop_at,
                     const std::function<void()>& started);
  void FinishBubble(BubbleContext& bubble);
  // The least of a bubble's forecast that another candidate could use after
  // the armed task hands it back: `after_no_fit` when its next step did not
  // fit (DispatchPolicy::LeftoverNeeded), `after_idle` when it had nothing
  // to do or finished (DispatchPolicy::LeastUsable).
  struct HandBackThresholds {
    Nanos after_no_fit = 0;
    Nanos after_idle = 0;
  };
  HandBackThresholds HandBackWakeThresholds() const;
  // The lane's loop while a task is armed: sleeps until an end mark, a
  // hand-back worth serving, or a timeout; accounts for each bubble closed
  // since `seen`, the bubble_seq already dealt with, and serves the open one
  // when the armed task left enough of it.  Returns the new `seen`.
  uint32_t ServeQuietly(uint32_t seen);
  // Whether the armed task has handed back the open bubble with at least the
  // threshold for its kind of hand-back left by HandBackLeftover.
  bool LeftoverWorthServing(const BubbleMark& open, const HandBackThresholds& thresholds) const;
  // Accounts for every bubble that closed after `seen` (a bubble_seq value
  // already dealt with) and before `current`.  Returns the new `seen`: an open
  // bubble at `current` is left unserved.
  uint32_t FinishClosedBubbles(uint32_t seen, uint32_t current);
  // Accounts for one closed bubble that the lane did not serve while it was
  // open: the armed task, if any, had it to itself.  Waits only if a step of
  // it still runs.
  void FinishUnservedBubble(const BubbleMark& mark);
  bool StageAlive() const;
  // When the segment's file was deleted (systemd's RemoveIPC does this to
  // /dev/shm), makes it again, says so loudly and returns true: the stage and
  // the tasks re-map it by path.  At most once a second.
  bool RemakeDeletedSegment();
  Nanos next_segment_check_ns_ = 0;
  // Segments replaced by RemakeDeletedSegment, kept mapped: other threads
  // may still hold pointers into them.
  std::vector<LaneSegment> retired_segments_;
  // Held exclusively while RemakeDeletedSegment replaces segment_, shared by
  // FillStats on other threads.
  mutable std::shared_mutex segment_swap_mu_;
  // StageAlive's last answer, reused for a few milliseconds.
  mutable std::atomic<int64_t> checked_pid_{0};
  mutable std::atomic<Nanos> checked_at_{0};
  mutable std::atomic<bool> checked_alive_{false};
  // Picks the task that takes the next bubble directly (the dispatcher's own
  // choice made ahead of time) and arms it; disarms a task no longer chosen.
  void Arm();
  void Disarm();
  void PublishForecast(uint32_t slot);
  // Called with the attached stage process (the segment's stage_pid) as the
  // lane serves or closes a bubble: when it is another process than the one
  // the forecasts follow, forgets the forecasts, the iteration in progress
  // and the probe's warm-up, publishes the new process as the one they
  // follow, and logs a stage_new event.  That process may run another
  // schedule, whose slots have bubbles of other lengths, and its first
  // iteration does not follow the last process's.  On the lane's thread.
  void ForgetAReplacedStage(int64_t stage_pid);
  // Zeroes every published forecast and second look, then publishes
  // `follow_pid` as the stage process they follow (0: none yet).
  void ClearPublishedForecasts(int64_t follow_pid);
  // The overhead probe and guard, on the lane's thread.  A closed bubble of
  // the stage's first slot ends one training iteration and begins the next:
  // feeds the estimator, and the guard once a probe cycle closes.
  void ObserveIterationBegin(Nanos begin_ns);
  // Publishes the next withheld window once the published one has passed.
  void PublishWithholdWindow(Nanos now);
  void PublishGuardRestrictions();

  // The GPU gate's closer (a gated lane only), on its own thread so that the
  // dispatcher's batched accounting does not delay it: at each begin mark it
  // publishes the bubble's admission deadline, the forecast end less the
  // margin (GateCloseAt), and again from the long forecast if the bubble
  // outlasts its slot's second look; at each end mark, the next bubble's
  // forecast for queueing ahead; and it closes a gate whose stage went
  // silent or died.  It books the time each bubble admitted work (less any
  // wait before a second look) as the gated tasks' allowed time, and writes
  // a gate_bubble event for it.
  void GateLoop();
  // Closes the gate of a stage that is gone or silent while no bubble is
  // marked open (the GPU opened it, then the stage died before its mark).
  void CloseAbandonedGate(uint32_t seq, Nanos now);
  void CloseGate(const char* why, Nanos now);

  const LaneConfig config_;
  const DaemonOptions& options_;
  LaneTasks* tasks_;
  EventLog* events_;
  Env* env_;
  std::string segment_path_;
  LaneSegment segment_;
  BubblePredictor predictor_;
  DispatchPolicy policy_;
  std::vector<DispatchCandidate> candidates_;  // reused, to avoid allocation per bubble
  std::shared_ptr<TaskRuntime> armed_;
  // Steps drained before their bubble was finished (an armed task a bubble
  // ahead of the lane), kept for that bubble.
  std::vector<TaskStep> steps_ahead_;
  uint64_t last_free_memory_ = UINT64_MAX;

  SharedProbeSchedule* probe_;
  ProbeSchedule schedule_;  // the probe's, once one is in force
  OverheadEstimator estimator_;
  OverheadGuard guard_;
  Nanos last_iteration_begin_ = 0;
  int64_t forecast_stage_pid_ = 0;  // the stage process the forecasts were learned from
  std::vector<Nanos> warmup_iterations_;
  int64_t logged_ratios_ = 0;  // the estimator's ratios_added() at the last overhead event
  Nanos published_window_end_ = 0;
  // The newest estimate and guard level, for FillStats on other threads.
  mutable std::mutex overhead_mu_;
  OverheadEstimate overhead_;
  GuardLevel guard_level_ = GuardLevel::kNormal;
  std::atomic<bool> schedule_probing_{false};

  std::atomic<bool> stopping_{false};
  // Set by each thread as it ends, so that Stop wakes until both have gone.
  std::atomic<bool> loop_ended_{true};
  std::atomic<bool> gate_loop_ended_{true};
  std::thread thread_;

  const bool gated_;
  GatePage gate_;
  std::thread gate_thread_;
  // The word the gate's thread sleeps on (in its own mapping of the lane
  // segment), so that Stop can wake it; null while it has none.
  std::atomic<std::atomic<uint32_t>*> gate_wait_word_{nullptr};
  Nanos gate_open_unmarked_since_ = 0;  // the gate's thread's: open with no bubble marked
  std::atomic<uint64_t> gate_early_closes_{0};
  std::atomic<uint64_t> gate_forced_closes_{0};
  std::atomic<int64_t> gate_open_ns_{0};
  // The last bubble's margin for its longest task: the base margin plus
  // that task's 95th-percentile piece (how early its last piece starts).
  std::atomic<int64_t> gate_margin_ns_{0};
  // The gated tasks' late work (gate/late_work.h): totals over every
  // process, from the deltas of each one's slot (the gate's thread's map),
  // and each process's since the last JudgeLateWork.
  void CollectLateWork();
  // Records, for each task in `tasks`, the late work its processes (its
  // launched one, and those in its process group) published since the last
  // call as its overrun in a bubble of length `bubble` (the longest of its
  // processes'), zero included, so that its overrun budget judges the
  // gate's misses as it does a step's; then tells each slot's interposer
  // whether its task is demoted, this bubble's verdict included.  A process
  // that left its task's group (setsid) is judged as nobody's.
  void JudgeLateWork(const std::vector<GatedTask>& tasks, Nanos bubble);
  std::map<int64_t, GateTaskReport> late_seen_;  // pid -> its slot's report at the last look
  std::map<int64_t, int64_t> late_unjudged_;  // pid -> late ns since the last JudgeLateWork
  std::map<int64_t, pid_t> late_group_;       // pid -> its process group, read when its late work was
  bool late_baselined_ = false;
  std::atomic<int64_t> gate_late_ns_{0};
  std::atomic<uint64_t> gate_late_bubbles_{0};
  std::atomic<int64_t> gate_pending_ns_{0};  // shown, not judged: a pending wait runs nothing
  // Gated threads' time held on the host while the gate was open, by why
  // (GateTaskSlot): shown, where an open gate's time went unused.
  std::atomic<int64_t> gate_held_unpublished_ns_{0};
  std::atomic<int64_t> gate_held_drain_ns_{0};
  std::atomic<int64_t> gate_held_fit_ns_{0};

  // Statistics, read by FillStats from other threads.
  std::atomic<uint64_t> bubbles_{0};
  std::atomic<int64_t> bubble_ns_{0};
  std::atomic<int64_t> harvested_ns_{0};
  std::atomic<int64_t> allowed_ns_{0};
  std::atomic<int64_t> overrun_ns_{0};
  std::atomic<int64_t> running_task_{0};  // a task the lane granted the open bubble
  bool bubbles_flowing_ = false;  // ServeQuietly's last round found closed bubbles
  std::atomic<int> last_verdict_{static_cast<int>(DispatchVerdict::kNoCandidates)};
};

}  // namespace freeride
