// The gate of one side-task process: before each piece of GPU work the
// program submits (a kernel, a graph, a copy or a fill), a wait on its own
// stream for the lane's gate word to be open.  The wait runs on the GPU, so
// no piece starts while the gate is closed.
//
// A wait left pending through the busy time costs the training (see
// gate/piece_admission.h), so the piece is queued at all only when the
// gate is open and the piece, after what the program has queued before it,
// is predicted to end by the bubble's admission deadline, or, behind the
// shut gate, when the next bubble is forecast to begin within a short lead
// and the piece fits its forecast; until then the calling thread is held on
// the host, polling the gate page (every 50 us while the gate is shut, or
// until the next bubble's lead begins if that is sooner; every 10 us while
// it is open: queued work draining, or the piece waiting for the bubble to
// end), and remembering when it last saw the gate shut (an
// open gate whose deadline is not yet published is judged from then:
// gate/piece_admission.h).  What is
// queued is tracked with events recorded after the pieces (fences): after
// every piece near its bubble's deadline, after every kFenceEvery-th one
// (GateTuning's run) far from it, and when the bubble a stream's pieces were admitted to
// changes; a piece's length is predicted by the 95th percentile of the
// timed pieces, or, with GateTuning's lengths_by_kind (an experiment), by the
// longest recent timing of its kind where one is back (gate/piece_key.h,
// gate/piece_lengths.h: a kernel by its function and launch shape, a graph
// by its executable, a one-dimensional copy or fill by its size).  Far from
// the deadline a piece is judged by all counted
// pieces as if unfinished, without asking the driver, and may go without
// its GPU wait (MayGoUnwaited): the calls that would cost the launching
// thread most are made only where they decide something.
//
// Armed lazily, at the first piece of work (a CUDA context is current then):
// the lane's gate page is registered as mapped host memory.  If that fails
// the gate is refused for good: every later piece of work fails with
// CUDA_ERROR_NOT_PERMITTED and the reason is written to stderr once, so a
// program that cannot be gated never runs ungated.
//
// Work a stream is capturing into a graph gets no wait of its own: the
// graph is gated where it is launched.
//
// It also times one piece of work in kSampleEvery (GateTuning's sample_every;
// events around it, reused once read back, on its
// stream, read back later on the program's own threads), and the first
// kLearnKind pieces of a kind none of whose lengths is back yet, and publishes the
// 95th percentile of those lengths in its slot of the gate page, where the
// daemon shows it in the lane's margin (policy/gate_close.h's GateMargin; the
// deadline itself is the base margin before the forecast end: each piece is
// held to it here, by its own predicted length).  A learned length that keeps a
// piece out of whole bubbles is forgotten (kMostBubblesTooLong,
// kMostBubblesWindowTooLong): nothing held by it would run to correct it.
//
// Threading: BeforeWork and AfterWork are called from any of the program's
// threads at once; arming happens once (the first caller arms, the others
// wait for it).  BeforeWork blocks its caller while the piece is held.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gate/driver_types.h"
#include "gate/event_spares.h"
#include "gate/gate_page.h"
#include "gate/late_work.h"
#include "gate/piece_admission.h"
#include "gate/piece_lengths.h"
#include "gate/work_lengths.h"

namespace freeride::gate {

enum class GateState { kUnarmed, kArmed, kRefused };

struct GateCounters {
  uint64_t waits = 0;          // pieces of work that got a wait
  uint64_t unwaited = 0;       // pieces queued far inside an open bubble without one (MayGoUnwaited)
  uint64_t captured = 0;       // pieces recorded into a graph (gated at its launch)
  uint64_t failed_waits = 0;   // waits the driver refused (the work was not submitted)
  uint64_t refused = 0;        // pieces refused because the gate could not be armed
  uint64_t held = 0;           // pieces whose thread was held on the host before queueing
  uint64_t passes = 0;         // waits followed by a pass (gate/late_work.h: pending told from late)
  // Time threads were held on the host while the gate read open, summed over
  // threads, by why (GateTaskSlot's fields of the same names; also published there).
  int64_t held_unpublished_ns = 0;
  int64_t held_drain_ns = 0;
  int64_t held_fit_ns = 0;
  uint64_t kinds = 0;          // kinds of piece met and kept (gate/piece_lengths.h), timed or learned, now
  uint64_t kinds_forgotten = 0;  // learned kinds forgotten for holding a piece too long (kMostBubblesTooLong)
  uint64_t windows_forgotten = 0;  // times the common window was emptied for the same (CommonTooLongBubbles)
};

// How the work a program has queued ahead of a piece is predicted to take:
// each counted piece at the 95th percentile of the timed ones (kP95, the
// default: a queue of short pieces is taken as that many long ones), or at
// their mean (kMean: the sum's expectation, closer for long queues of mixed
// pieces, with the new piece still at the 95th percentile).  Either way, with
// lengths by kind, a piece counted at its kind's length stays at it.  An experiment
// (FREERIDE_GATE_QUEUE_ESTIMATE=mean in the interposer), to be measured
// against kP95 on a GPU before it could become the default.
enum class QueueEstimate { kP95, kMean };

// How much the gate economises far inside an open bubble, where a piece is
// admitted on the host with room to spare.  Fewer driver calls per launch
// against a longer run of pieces that could start past a bubble that ends
// before its forecast.  The interposer sets them from FREERIDE_GATE_RUN and
// FREERIDE_GATE_SAMPLE_EVERY (experiments: the defaults are what the rows in
// bench/results were measured with).
struct GateTuning {
  static constexpr uint32_t kMostRun = 256;
  static constexpr uint64_t kMostSampleEvery = 4096;
  // Pieces in a row on a stream that may go without a GPU wait, and pieces
  // one fence stands for there (MayGoUnwaited).  1 to kMostRun.
  uint32_t run = kMaxUnwaitedInRow;
  // One asynchronous piece in this many is timed (until one has been, every
  // piece waits on the GPU: a large value delays the first unwaited piece
  // that long).  1 to kMostSampleEvery.
  uint64_t sample_every = 16;
  // Pieces predicted by their kind's learned length (gate/piece_lengths.h)
  // where it is known, instead of all by the common 95th percentile
  // (FREERIDE_GATE_LENGTHS=kind in the interposer).  An experiment, off by
  // default: no consistent gain on a real pipeline (bench/results/piece_kinds_2xh200.md);
  // on one H200's short bubbles it left no wait pending, where a real 2-stage
  // pipeline's rows left more (gate_kinds_margin_h200.md).
  bool lengths_by_kind = false;
  // A held thread spins on the gate word through a watched bubble's window
  // (an iteration's first, gate/piece_admission.h), instead of sleeping
  // kWatchPollNs between looks (FREERIDE_GATE_WATCH=spin in the interposer,
  // an experiment: at most 2 * kMostWatchNs of one core an iteration per
  // held thread; that bubble's release p50 23 -> 19 us at busy:bubble 2:2 ms
  // in one launch, no gain at 2:1 and 8:2 ms,
  // bench/results/gate_room_watch_h200.md).
  bool watch_spins = false;
  // Far inside an open bubble a piece goes without its GPU wait where the
  // time to the deadline is at least this percent of the queue ahead of it
  // and itself (MayGoUnwaited; FREERIDE_GATE_ROOM=PCT in the interposer, an
  // experiment).  A program whose host runs ahead of the GPU keeps its
  // queue near the deadline, so at 200 nearly every piece then waits and is
  // fenced, about 2 us of GPU time each on an H200 (20 us kernels started
  // 23.6 us apart against 21.7 unwaited, gate_watch_h200.md's stamps).
  // 100 to kMostRoomPct.
  static constexpr int kMostRoomPct = 800;
  int room_pct = kUnwaitedRoomPct;
};

// The host's clock, sleep and close watch, injected so that the hold is
// tested on fake time.  The real ones: CLOCK_MONOTONIC, nanosleep, and a
// spin on the word (a pause instruction between loads).  watch_ns returns
// once `word` no longer holds `seen`, or after `ns`; null: sleep_ns(ns).
struct HostClock {
  int64_t (*now_ns)() = nullptr;
  void (*sleep_ns)(int64_t ns) = nullptr;
  void (*watch_ns)(const std::atomic<uint32_t>* word, uint32_t seen, int64_t ns) = nullptr;
};
HostClock RealHostClock();

// A piece of work on its way: the stream it was queued on (for its fence)
// and, when it is chosen for timing, its events, recorded around it.
struct WorkSample {
  // Set by the caller: the piece's kind (gate/piece_key.h; 0: none).
  uint64_t key = 0;
  // Set by BeforeWork: its kind's learned length (0: not learned; the
  // piece is then counted at the common percentile).
  int64_t kind_ns = 0;
  CuEvent start = nullptr;
  CuEvent end = nullptr;
  CuStream stream = nullptr;
  bool whole_graph = false;  // set by the caller: a graph launch, which always gets its wait
  bool queued = false;  // it was admitted: AfterWork counts it, and fences it (the caller clears
                        // it when the driver refused the work)
  bool waited = false;  // it got a GPU wait: near its deadline, so fenced at once
  bool in_flight = false;  // counted on its way to its stream until AfterWork
  // Timed to learn its kind alone (kLearnKind), not as one of the common
  // percentile's: those are one piece in sample_every, so that start-up's
  // many kinds, each timed at once, cannot fill that window.
  bool kind_only = false;
  uint32_t bubble = 0;  // the bubble it was admitted to (its gate's number)
  // The common window's emptyings before it was timed (a timing from an
  // emptied window's time is not added to the new one).
  uint64_t window_generation = 0;
};

// Where the gate word is: a page of shared memory, mapped by the caller.
class LaunchGate {
 public:
  static constexpr uint64_t kSampleEvery = GateTuning{}.sample_every;
  // A piece's predicted length before any has been timed.
  static constexpr int64_t kUnknownPieceNs = 100'000;
  static constexpr int64_t kShutPollNs = 50'000;
  static constexpr int64_t kDrainPollNs = 10'000;
  // Fences kept at most; pieces past this many unfinished ones are counted
  // without a fence of their own until fences drain (the thread's own
  // default stream's are not counted then).
  static constexpr size_t kMaxFences = 1024;
  // A piece queued without a wait is fenced with the kFenceEvery-1 before
  // it; one fence then stands for them all (GateTuning's run).
  static constexpr uint32_t kFenceEvery = GateTuning{}.run;
  // The timed pieces are read back at every kCollectEvery-th piece: each
  // look asks the driver.
  static constexpr uint64_t kCollectEvery = 16;
  // Timed pieces pending their read-back, at most: past it none is timed.
  static constexpr size_t kMaxPendingSamples = 64;
  // Timing events kept for reuse, at most: a pair for each sample that may be
  // pending, and one more.
  static constexpr size_t kMaxSpareTiming = 2 * kMaxPendingSamples + 2;
  // Pieces of a kind with no length back yet timed, whatever the sample
  // rate, at most: a kind seen once in a while would otherwise go unlearned.
  static constexpr uint32_t kLearnKind = 2;
  // A piece of a learned kind that, with nothing of the program's queued,
  // is held out of this many bubbles (it would not end by the deadline even
  // begun when its thread last saw the gate shut before the opening, or it
  // never fitted at any look in a bubble its thread saw open promptly:
  // HoldUntilAdmitted) has its kind forgotten and is judged at the common
  // percentile: a length learned too long (a timing stretched by the
  // training's own kernels) would otherwise hold the piece, and the
  // program, for good, since a kind that never runs is never timed again.
  // A kind whose pieces are in fact that long is let in at the common
  // percentile once forgotten, overruns, and is learned again: so each time
  // it is forgotten again with no piece of it let in at its learned length
  // in between, twice as many bubbles are required (KindTooLongBubbles), up
  // to kMostBubblesTooLong << kMostWindowBackoff, as for the common window.
  static constexpr uint32_t kMostBubblesTooLong = 2;
  // The same for a piece judged by the common percentile, in this many
  // bubbles: its window is emptied (the next pieces are judged at
  // kUnknownPieceNs until timings come back), since no piece held by it
  // would ever run to bring it down (a window filled by start-up's long
  // copies, say).  More bubbles than for a kind, so that a piece that fits
  // only an iteration's longest bubble meets that one first.  A program
  // whose pieces are in fact that long then overruns the bubble it is let
  // into, so each time this happens again with no piece queued by the
  // window in between, twice as many bubbles are required, up to
  // kMostBubblesWindowTooLong << kMostWindowBackoff: such a program overruns
  // rarely, and the daemon's overrun budget judges it.
  static constexpr uint32_t kMostBubblesWindowTooLong = 16;
  static constexpr uint32_t kMostWindowBackoff = 5;
  // Bubbles a length must keep a piece out of, `first` the first time, once
  // forgotten `in_row` times in a row already: twice as many each time, up
  // to first << kMostWindowBackoff (a kind's, KindTooLongBubbles; the common
  // window's, CommonTooLongBubbles).
  static uint32_t TooLongBubblesAfter(uint32_t first, uint32_t in_row) {
    return first << std::min(in_row, kMostWindowBackoff);
  }
  // Bubbles a piece of a learned kind, forgotten `forgets` times in a row
  // already, must not fit before its kind is forgotten again.
  static uint32_t KindTooLongBubbles(uint32_t forgets) { return TooLongBubblesAfter(kMostBubblesTooLong, forgets); }

  // `page` is the mapped gate page (its first word is the gate), or null
  // when it could not be mapped, with `page_error` saying why.  `slot` is
  // where this process publishes its work's length (null: nowhere).
  // `page` must be a GatePageLayout (its word, and the admission deadline
  // the daemon publishes, are read on the host).
  // `wait_every_piece`: no piece goes without its GPU wait, nor its fence
  // (FREERIDE_GATE_STRICT=1 in the interposer): the strictest gate, at the
  // cost of a few driver calls per launch.
  // `queue_estimate`: how queued work is predicted (QueueEstimate).
  // `tuning`: GateTuning (values outside its bounds are taken as the nearest bound).
  LaunchGate(const DriverApi& api, void* page, std::string page_error,
             GateTaskSlot* slot = nullptr, HostClock clock = RealHostClock(), bool wait_every_piece = false,
             QueueEstimate queue_estimate = QueueEstimate::kP95, GateTuning tuning = {});
  ~LaunchGate();

  // Called before the program's piece of work on `stream` (as the program
  // passed it; `per_thread` when the entry point is the per-thread-stream
  // variant, so that stream 0 means the thread's own default stream).
  // kCudaSuccess: submit the work.  Anything else: do not submit it, and
  // return this to the program.  Blocks while the piece is held (above).
  // When `sample` is given it is filled, and the caller then calls
  // AfterWork once the work is submitted: the piece's fence, and when it
  // is chosen for timing, its start event (recorded here) and end event.
  CuResult BeforeWork(CuStream stream, bool per_thread, WorkSample* sample = nullptr);
  // Records the fence of a queued piece and the end of a sampled one.
  void AfterWork(const WorkSample& sample);
  // Whether work on `stream` (as BeforeWork takes it, with `per_thread`)
  // would be captured into a graph now, or refused for a capture elsewhere
  // (the legacy stream while a blocking stream captures): then a long copy
  // is not cut (gate/copy_split.h).  False when the driver cannot say.  One
  // driver call.
  bool Capturing(CuStream stream, bool per_thread) const;
  // Whether pieces are predicted by their kind (GateTuning::lengths_by_kind):
  // a caller need not name a piece's kind otherwise.
  bool learns_kinds() const { return tuning_.lengths_by_kind; }
  // Pieces queued that have not been seen to end (their fences, once
  // recorded, have not been reached).
  size_t unfinished_pieces();
  // Side work found unfinished, and past its GPU wait, after the bubble it
  // was admitted to had closed (gate/late_work.h), in all, and its stretches; also published in
  // the process's slot of the gate page.  Looked for at each launch judged
  // on the drained queue and each poll of a held thread, so work that runs
  // late while no thread looks is seen only within LateWork's gap.
  int64_t late_ns();
  uint64_t late_bubbles();
  // Busy time during which pieces of a closed bubble waited, pending, on
  // their GPU wait (they had not started: not late work, which runs; a
  // pending wait costs the trainer far less).  Also published in the slot.
  int64_t pending_ns();
  // The published 95th percentile of the timed pieces (0: none yet).
  int64_t work_p95_ns() const;
  // The mean of the timed pieces (0: none yet).
  int64_t work_mean_ns() const { return piece_mean_ns_.load(std::memory_order_relaxed); }
  // The learned length of pieces of kind `key` (0: none learned).
  int64_t kind_ns(uint64_t key) const;
  // Kinds of piece met and kept now (PieceLengths::kinds).
  size_t kinds() const;

  GateState state() const { return state_.load(std::memory_order_acquire); }
  const std::string& refusal() const { return refusal_; }
  GateCounters counters() const;
  CuDevicePtr word_address() const { return word_; }

 private:
  // Counted pieces whose kind's length was learned when they were queued,
  // and the sum of those lengths (the others count at the common percentile).
  struct KindedWork {
    uint32_t pieces = 0;
    int64_t ns = 0;
    KindedWork& operator+=(const KindedWork& o) {
      pieces += o.pieces;
      ns += o.ns;
      return *this;
    }
    KindedWork& operator-=(const KindedWork& o) {
      pieces -= o.pieces;
      ns -= o.ns;
      return *this;
    }
  };
  struct Fence {
    CuEvent event;
    uint32_t bubble;  // the bubble its pieces were admitted to
    uint32_t pieces;  // the pieces it stands for
    uint64_t seq;     // its place among the stream's fences and passes
    KindedWork kinded;  // those of its pieces counted at their kind's length
  };
  // Recorded just after a piece's GPU wait: not reached while the wait is
  // pending, so the pieces behind it are not running.
  struct Pass {
    CuEvent event;
    uint64_t seq;
  };
  // One stream's queued pieces, as far as they are known to be unfinished.
  struct StreamQueue {
    std::deque<Fence> fences;     // oldest first
    uint32_t unfenced = 0;        // pieces queued since its last fence
    uint32_t unfenced_bubble = 0; // ... admitted to this bubble
    KindedWork unfenced_kinded;   // ... of them, counted at their kind's length
    int unwaited_in_row = 0;      // pieces queued without a GPU wait since its last wait
    std::deque<Pass> passes;      // not yet reached, oldest first
    uint64_t next_seq = 0;
    // Pieces between their BeforeWork and AfterWork (their launch on its
    // way), and a count of such comings and goings: a pass is recorded only
    // where no other launch may have landed between its wait and it.
    int in_flight = 0;
    uint64_t launches = 0;
    // Its oldest unfinished pieces wait, pending, behind a GPU wait the
    // stream has not passed: none of them runs.
    bool Pending() const { return !passes.empty() && !fences.empty() && passes.front().seq < fences.front().seq; }
  };

  CuResult Arm();
  struct Admitted {
    uint32_t bubble;  // the bubble the piece was admitted to
    bool wait;        // it needs its GPU wait (MayGoUnwaited said no)
    bool kind_forgotten = false;  // its kind's length was forgotten (kMostBubblesTooLong)
  };
  // Bubbles a piece judged by the common percentile must not fit at its
  // first look before the window is emptied (kMostWindowBackoff).
  uint32_t CommonTooLongBubbles() const;
  // Empties the common window (WorkLengths::Clear) and its published
  // percentile and mean.
  void ForgetCommonLengths();
  // Holds the calling thread until JudgePiece lets a piece on `stream` be
  // queued.  `may_go_unwaited`: an asynchronous piece, whose wait may be
  // left out.  `kind_ns`: its kind's learned length (0: none; predicted at
  // the common percentile).
  // `key`: its kind, forgotten if the piece is held too long by its length
  // (kMostBubblesTooLong), after KindTooLongBubbles(`kind_forgets`): the
  // kind's forgettings in a row (PieceLengths::Forgets).
  Admitted HoldUntilAdmitted(CuStream stream, bool may_go_unwaited, int64_t kind_ns, uint64_t key,
                             uint32_t kind_forgets);

  // Pieces queued and not seen to end, and those of them counted at their kind's length.
  struct Queued {
    size_t pieces = 0;
    KindedWork kinded;
  };
  // Drains the reached fences and looks for late work with the gate word
  // `word` (read just before); the unfinished pieces left.
  Queued LookAtQueue(uint32_t word);
  // Fences the unfenced pieces of every stream, then pops the fences that
  // have been reached, stream by stream; the pieces left unfinished.
  // Caller holds fence_mutex_.
  size_t DrainFencesLocked();
  // Records a fence on `stream` for the pieces counted on it since its last
  // one (`queue`, its entry); pieces that cannot be fenced count as ended.
  // Caller holds fence_mutex_.
  void FenceUnfencedLocked(CuStream stream, StreamQueue& queue);
  // Stops counting `queue`'s unfenced pieces (they count as ended: a count
  // that could never drain would hold the program for good).  Caller holds
  // fence_mutex_.
  void ForgetUnfencedLocked(StreamQueue& queue);
  // Records a pass on `stream` just after a piece's GPU wait (nothing when
  // no event can be had).  Caller holds fence_mutex_.
  void RecordPassLocked(CuStream stream, StreamQueue& queue);
  // A piece's predicted length: its kind's learned length `kind_ns` if
  // there is one, else the 95th percentile of the timed pieces
  // (kUnknownPieceNs before any); twice that while the daemon has demoted
  // this process's task (its slot's `demoted`).
  // `as_demoted` false: the length alone, demoted or not.
  int64_t PieceEstimateNs(int64_t kind_ns = 0, bool as_demoted = true) const;
  // cuStreamIsCapturing's answer for `stream` as BeforeWork takes it
  // (kCudaSuccess and none without the entry point).
  CuResult CaptureStatus(CuStream stream, bool per_thread, int* capture) const;
  // The predicted time to run the queued pieces `queued`: those of a
  // learned kind at the length they were counted at, the others each at
  // `common_ns` (PieceEstimateNs(), read once by the caller) by default, at
  // the timed pieces' mean (doubled while demoted) under
  // QueueEstimate::kMean.  Only JudgePiece's queue: whether a piece may go
  // without its wait is judged with the others at `common_ns` each.
  int64_t QueuedEstimateNs(const Queued& queued, int64_t common_ns) const;
  // The same, every piece of no learned kind at `common_ns`.
  static int64_t QueuedAtCommonNs(const Queued& queued, int64_t common_ns) {
    return static_cast<int64_t>(queued.pieces - queued.kinded.pieces) * common_ns + queued.kinded.ns;
  }
  bool Demoted() const;
  // Why a thread was held while the gate read open: the bubble's deadline
  // not yet published or being rewritten (the forecast, if any, did not
  // admit the piece); queued work draining; the piece predicted not to end
  // by the deadline.
  enum class HeldWhy { kUnpublished, kDrain, kFit };
  // Adds `ns` held while open to the count for `why`, and to the slot's.
  void CountHeldOpen(HeldWhy why, int64_t ns);
  int64_t HeldOpenNs(HeldWhy why) const {
    return held_open_ns_[static_cast<size_t>(why)].load(std::memory_order_relaxed);
  }
  void StartSample(CuStream stream, WorkSample* sample);
  // Reads back the timed pieces that have ended; at most one caller at once.
  void CollectSamples();

  // This gate among every one the process made (a thread's sightings of a
  // shut gate are its own gate's, whatever address a later gate reuses).
  const uint64_t id_;
  DriverApi api_;
  const bool wait_every_piece_;
  const QueueEstimate queue_estimate_;
  const GateTuning tuning_;
  // The driver has what fences and passes need: pieces can be counted.
  const bool can_fence_;
  void* page_;
  std::string refusal_;
  std::mutex arm_mutex_;
  std::atomic<GateState> state_{GateState::kUnarmed};
  CuDevicePtr word_ = 0;
  std::atomic<uint64_t> waits_{0}, unwaited_{0}, captured_{0}, failed_waits_{0}, refused_{0}, held_{0}, passes_{0},
      kinds_forgotten_{0}, windows_forgotten_{0};
  // Windows emptied since a piece was last queued by a window's percentile.
  std::atomic<uint32_t> window_forgets_in_row_{0};
  std::array<std::atomic<int64_t>, 3> held_open_ns_{};  // by HeldWhy
  std::atomic<uint64_t> pieces_{0};  // pieces begun while timed ones are pending: every kCollectEvery-th reads back
  std::atomic<uint64_t> asynchronous_{0};  // pieces given a sample: one in kSampleEvery is timed
  std::mutex fence_mutex_;
  std::map<CuStream, StreamQueue> queues_;  // under fence_mutex_
  LateWork late_{2 * kShutPollNs};          // under fence_mutex_
  // Pieces of a closed bubble whose wait is pending: told apart from late
  // work, which runs.  Under fence_mutex_.
  LateWork pending_waits_{2 * kShutPollNs};
  size_t fence_count_ = 0;                  // fences recorded and not yet reached
  size_t pass_count_ = 0;                   // passes recorded and not yet reached
  size_t pieces_counted_ = 0;               // pieces not yet seen to end, fenced or not
  KindedWork kinded_counted_;               // ... of them, counted at their kind's length
  // Events for fences and passes, reached and kept (at most kMaxFences are
  // out at once, so no more are ever spare).  Under fence_mutex_.
  EventSpares spare_fences_{kEventDisableTiming, kMaxFences};
  std::atomic<int64_t> piece_p95_ns_{0};
  std::atomic<int64_t> piece_mean_ns_{0};
  GateTaskSlot* slot_;
  HostClock clock_;
  std::mutex samples_mutex_;
  std::vector<WorkSample> pending_;  // recorded, not yet read back (oldest first)
  // Timing events read back, kept for the next samples: a sample then costs
  // two records, not two creations and two destructions more.  Under samples_mutex_.
  EventSpares spare_timing_{0, kMaxSpareTiming};
  std::atomic<size_t> pending_count_{0};
  WorkLengths lengths_;              // under samples_mutex_
  uint64_t window_generation_ = 0;  // times lengths_ was emptied; under samples_mutex_
  mutable std::mutex kinds_mutex_;
  PieceLengths kind_lengths_;  // under kinds_mutex_
};

}  // namespace freeride::gate
