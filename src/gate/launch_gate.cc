#include "gate/launch_gate.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

#include "base/clock.h"
#include "gate/capture_mode.h"
#include "gate/too_long_bubbles.h"

namespace freeride::gate {

namespace {


void SleepNs(int64_t ns) {
  // The default timer slack (50 us) would stretch every poll by that much.
  thread_local bool slack_set = [] { return prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0; }();
  (void)slack_set;
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins: a look at the word is a load from memory the GPU writes to, and
// nothing a sleep could wake for sooner than the next look.
void WatchNs(const std::atomic<uint32_t>* word, uint32_t seen, int64_t ns) {
  const int64_t until = MonotonicNow() + ns;
  while (word->load(std::memory_order_acquire) == seen && MonotonicNow() < until) CpuRelax();
}

}  // namespace

HostClock RealHostClock() { return {&MonotonicNow, &SleepNs, &WatchNs}; }

namespace {
uint64_t NextGateId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// When this thread last saw a gate shut, and after which bubble: an open
// bubble seen by the same thread began after that time (JudgePiece's
// seen_shut_ns).  Per thread, since each judges by its own sightings.
struct ShutSighting {
  uint64_t gate = 0;  // LaunchGate::id_; 0: none
  uint32_t bubble = 0;
  int64_t at_ns = 0;
};
thread_local ShutSighting last_shut;
}  // namespace

LaunchGate::LaunchGate(const DriverApi& api, void* page, std::string page_error, GateTaskSlot* slot,
                       HostClock clock, bool wait_every_piece, QueueEstimate queue_estimate,
                       GateTuning tuning)
    : id_(NextGateId()),
      api_(api),
      wait_every_piece_(wait_every_piece),
      queue_estimate_(queue_estimate),
      tuning_{std::clamp<uint32_t>(tuning.run, 1, GateTuning::kMostRun),
              std::clamp<uint64_t>(tuning.sample_every, 1, GateTuning::kMostSampleEvery), tuning.lengths_by_kind,
              tuning.watch_spins, std::clamp(tuning.room_pct, 100, GateTuning::kMostRoomPct)},
      can_fence_(api.event_create && api.event_record && api.event_query),
      page_(page),
      refusal_(std::move(page_error)),
      slot_(slot),
      clock_(clock) {}

LaunchGate::~LaunchGate() {
  if (!api_.event_destroy) return;
  for (auto& [stream, queue] : queues_) {
    for (const Fence& fence : queue.fences) api_.event_destroy(fence.event);
    for (const Pass& pass : queue.passes) api_.event_destroy(pass.event);
  }
  spare_fences_.DestroyAll(api_);
  for (const WorkSample& sample : pending_) {
    api_.event_destroy(sample.start);
    api_.event_destroy(sample.end);
  }
  spare_timing_.DestroyAll(api_);
}

CuResult LaunchGate::Arm() {
  std::lock_guard<std::mutex> lock(arm_mutex_);
  GateState state = state_.load(std::memory_order_relaxed);
  if (state != GateState::kUnarmed) return state == GateState::kArmed ? kCudaSuccess : kCudaErrorNotPermitted;
  auto refuse = [&](std::string why) {
    refusal_ = std::move(why);
    std::fprintf(stderr,
                 "freeride-gate: this program's GPU work cannot be gated (%s); it is refused "
                 "rather than run outside the bubbles\n",
                 refusal_.c_str());
    state_.store(GateState::kRefused, std::memory_order_release);
    return kCudaErrorNotPermitted;
  };
  if (!page_) return refuse(refusal_.empty() ? "no gate page" : refusal_);
  if (!api_.stream_wait_value32 || !api_.mem_host_register || !api_.mem_host_get_device_pointer)
    return refuse("the CUDA driver lacks stream memory operations or host registration");
  CuResult r = api_.mem_host_register(page_, 4096, kHostRegisterPortable | kHostRegisterDeviceMap);
  if (r != kCudaSuccess && r != kCudaErrorHostMemoryAlreadyRegistered)
    return refuse("cuMemHostRegister of the gate page failed with CUDA error " + std::to_string(r));
  CuDevicePtr device = 0;
  r = api_.mem_host_get_device_pointer(&device, page_, 0);
  if (r != kCudaSuccess || device == 0)
    return refuse("cuMemHostGetDevicePointer of the gate page failed with CUDA error " +
                  std::to_string(r));
  word_ = device;
  state_.store(GateState::kArmed, std::memory_order_release);
  return kCudaSuccess;
}

CuResult LaunchGate::CaptureStatus(CuStream stream, bool per_thread, int* capture) const {
  *capture = kCaptureStatusNone;
  if (!api_.stream_is_capturing) return kCudaSuccess;
  CuStream target = (stream == nullptr && per_thread) ? kPerThreadStream : stream;
  return api_.stream_is_capturing(target, capture);
}

bool LaunchGate::Capturing(CuStream stream, bool per_thread) const {
  int capture = kCaptureStatusNone;
  const CuResult r = CaptureStatus(stream, per_thread, &capture);
  // The legacy stream while a blocking stream captures: the copy itself
  // would fail so; cut, it would fail at its first piece all the same.
  if (r == kCudaErrorStreamCaptureImplicit) return true;
  return r == kCudaSuccess && capture != kCaptureStatusNone;
}

CuResult LaunchGate::BeforeWork(CuStream stream, bool per_thread, WorkSample* sample) {
  GateState state = state_.load(std::memory_order_acquire);
  if (state != GateState::kArmed) {
    CuResult armed = state == GateState::kUnarmed ? Arm() : kCudaErrorNotPermitted;
    if (armed != kCudaSuccess) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return armed;
    }
  }
  CuStream target = (stream == nullptr && per_thread) ? kPerThreadStream : stream;
  // Only a capture the driver confirms skips the gate: any failure to ask
  // (the legacy stream while another thread's capture lasts) gates the
  // piece, whose wait the driver then refuses while that capture lasts.
  int capture = kCaptureStatusNone;
  if (CaptureStatus(stream, per_thread, &capture) == kCudaSuccess && capture != kCaptureStatusNone) {
    captured_.fetch_add(1, std::memory_order_relaxed);
    return kCudaSuccess;
  }
  // Reading back asks the driver: at every kCollectEvery-th piece, not at each.
  if (pending_count_.load(std::memory_order_relaxed) > 0 &&
      pieces_.fetch_add(1, std::memory_order_relaxed) % kCollectEvery == 0)
    CollectSamples();
  // The piece's kind's learned length, and whether the kind is still to be learned.
  const uint64_t key = sample && tuning_.lengths_by_kind ? sample->key : 0;
  int64_t kind_ns = 0;
  bool learn_kind = false;
  uint32_t kind_forgets = 0;
  if (key != 0) {
    std::lock_guard<std::mutex> lock(kinds_mutex_);
    kind_ns = kind_lengths_.Estimate(key);
    learn_kind = kind_ns == 0 && kind_lengths_.NoteTiming(key) < kLearnKind;
    kind_forgets = kind_lengths_.Forgets(key);
  }
  if (sample) {
    sample->key = key;
    sample->kind_ns = kind_ns;
  }
  // The thread's own default stream cannot be fenced later from another
  // thread: its pieces always get their wait and their fence; so do all
  // where pieces cannot be counted (no events).
  // A whole graph, or a program none of whose pieces has been timed yet,
  // is not judged by a percentile that may not stand for it.
  const bool may_go_unwaited = !wait_every_piece_ && sample != nullptr && !sample->whole_graph &&
                               target != kPerThreadStream && can_fence_ && !Demoted() &&
                               piece_p95_ns_.load(std::memory_order_relaxed) > 0;
  const Admitted admitted = HoldUntilAdmitted(target, may_go_unwaited, kind_ns, key, kind_forgets);
  if (sample && admitted.kind_forgotten) sample->kind_ns = 0;
  // Whether no other thread's piece is on its way to this stream (between
  // its BeforeWork and AfterWork) now, and the stream's count of such
  // comings and goings: if neither changes until this piece's pass is
  // recorded, no other launch landed between its wait and its pass.
  bool alone = false;
  uint64_t launches = 0;
  if (sample && can_fence_) {
    std::lock_guard<std::mutex> lock(fence_mutex_);
    StreamQueue& queue = queues_[target];
    // A fence stands for pieces of one bubble (the late work is told by it):
    // those of an earlier one are fenced before this piece is queued.  So
    // are those before a wait (another thread's, queued since this piece's
    // look at the queue), so that its pass stands between them and it.
    if (queue.unfenced > 0 && (admitted.wait || queue.unfenced_bubble != admitted.bubble))
      FenceUnfencedLocked(target, queue);
    alone = queue.in_flight == 0;
    ++queue.in_flight;
    launches = ++queue.launches;
    sample->stream = target;
    sample->in_flight = true;
  }
  if (admitted.wait) {
    CuResult r = api_.stream_wait_value32(target, word_, 1u, kStreamWaitValueAnd);
    if (r != kCudaSuccess) {
      failed_waits_.fetch_add(1, std::memory_order_relaxed);
      if (sample && sample->in_flight) {  // no AfterWork follows a refused piece
        std::lock_guard<std::mutex> lock(fence_mutex_);
        StreamQueue& queue = queues_[target];
        --queue.in_flight;
        ++queue.launches;
        sample->in_flight = false;
      }
      return r;
    }
    waits_.fetch_add(1, std::memory_order_relaxed);
    if (sample && can_fence_) {
      std::lock_guard<std::mutex> lock(fence_mutex_);
      StreamQueue& queue = queues_[target];
      queue.unwaited_in_row = 0;
      // Every thread's own default stream shares one entry: its order is not one stream's.
      if (alone && queue.launches == launches && target != kPerThreadStream) RecordPassLocked(target, queue);
    }
  } else {
    unwaited_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!sample) return kCudaSuccess;  // synchronous: neither fenced nor timed
  sample->stream = target;
  sample->queued = true;
  sample->waited = admitted.wait;
  sample->bubble = admitted.bubble;
  const uint64_t n = asynchronous_.fetch_add(1, std::memory_order_relaxed) + 1;
  // Synchronous copies (the default stream, legacy or the thread's own)
  // are not timed: the caller waits for them anyway.
  if (n % tuning_.sample_every == 0) {
    StartSample(target, sample);
  } else if (learn_kind) {
    sample->kind_only = true;
    StartSample(target, sample);
  }
  return kCudaSuccess;
}

int64_t LaunchGate::PieceEstimateNs(int64_t kind_ns, bool as_demoted) const {
  int64_t p95 = piece_p95_ns_.load(std::memory_order_relaxed);
  const int64_t estimate = kind_ns > 0 ? kind_ns : p95 > 0 ? p95 : kUnknownPieceNs;
  return as_demoted && Demoted() ? 2 * estimate : estimate;
}

int64_t LaunchGate::QueuedEstimateNs(const Queued& queued, int64_t common_ns) const {
  const int64_t mean = piece_mean_ns_.load(std::memory_order_relaxed);
  if (queue_estimate_ != QueueEstimate::kMean || mean <= 0) return QueuedAtCommonNs(queued, common_ns);
  return QueuedAtCommonNs(queued, Demoted() ? 2 * mean : mean);
}

int64_t LaunchGate::kind_ns(uint64_t key) const {
  std::lock_guard<std::mutex> lock(kinds_mutex_);
  return kind_lengths_.Estimate(key);
}

size_t LaunchGate::kinds() const {
  std::lock_guard<std::mutex> lock(kinds_mutex_);
  return kind_lengths_.kinds();
}

bool LaunchGate::Demoted() const {
  return slot_ != nullptr && slot_->demoted.load(std::memory_order_relaxed) != 0;
}

void LaunchGate::FenceUnfencedLocked(CuStream stream, StreamQueue& queue) {
  if (queue.unfenced == 0 || fence_count_ >= kMaxFences) return;  // at the cap: counted until fences drain
  // Pieces that cannot be fenced count as ended, as a fence that errs does:
  // a count that never drains would hold the program for good.
  auto forget = [&] { ForgetUnfencedLocked(queue); };
  // A stream now capturing a graph would take the fence into the graph.
  int capture = kCaptureStatusNone;
  if (CaptureStatus(stream, false, &capture) == kCudaSuccess && capture != kCaptureStatusNone) return forget();
  RelaxedCaptureMode relaxed(api_.thread_exchange_capture_mode);
  CuEvent fence = spare_fences_.Take(api_);
  if (!fence) return forget();
  if (api_.event_record(fence, stream) != kCudaSuccess) {  // a destroyed stream, another context
    api_.event_destroy(fence);
    return forget();
  }
  queue.fences.push_back({fence, queue.unfenced_bubble, queue.unfenced, queue.next_seq++, queue.unfenced_kinded});
  queue.unfenced = 0;
  queue.unfenced_kinded = {};
  ++fence_count_;
}

void LaunchGate::ForgetUnfencedLocked(StreamQueue& queue) {
  pieces_counted_ -= queue.unfenced;
  kinded_counted_ -= queue.unfenced_kinded;
  queue.unfenced = 0;
  queue.unfenced_kinded = {};
}

void LaunchGate::RecordPassLocked(CuStream stream, StreamQueue& queue) {
  if (fence_count_ + pass_count_ >= kMaxFences) return;  // then its pieces count as running
  RelaxedCaptureMode relaxed(api_.thread_exchange_capture_mode);
  CuEvent pass = spare_fences_.Take(api_);
  if (!pass) return;
  if (api_.event_record(pass, stream) != kCudaSuccess) {
    api_.event_destroy(pass);
    return;
  }
  queue.passes.push_back({pass, queue.next_seq++});
  ++pass_count_;
  passes_.fetch_add(1, std::memory_order_relaxed);
}

size_t LaunchGate::DrainFencesLocked() {
  if (pieces_counted_ == 0) return 0;
  RelaxedCaptureMode relaxed(api_.thread_exchange_capture_mode);
  for (auto it = queues_.begin(); it != queues_.end();) {
    StreamQueue& queue = it->second;
    FenceUnfencedLocked(it->first, queue);
    // An error (not "not ready") counts as reached: a fence that can never
    // be reached must not hold the program for good.
    while (!queue.fences.empty() && api_.event_query(queue.fences.front().event) != kCudaErrorNotReady) {
      spare_fences_.Keep(api_, queue.fences.front().event);
      pieces_counted_ -= queue.fences.front().pieces;
      kinded_counted_ -= queue.fences.front().kinded;
      queue.fences.pop_front();
      --fence_count_;
    }
    // Passes reached: the stream is past those waits.
    while (!queue.passes.empty() && api_.event_query(queue.passes.front().event) != kCudaErrorNotReady) {
      spare_fences_.Keep(api_, queue.passes.front().event);
      queue.passes.pop_front();
      --pass_count_;
    }
    // All its pieces ended: nothing of it can run on past a bubble, so its
    // run of unwaited pieces starts afresh (and a destroyed stream is forgotten).
    const bool idle = queue.fences.empty() && queue.unfenced == 0 && queue.passes.empty() && queue.in_flight == 0;
    it = idle ? queues_.erase(it) : std::next(it);
  }
  return pieces_counted_;
}

size_t LaunchGate::unfinished_pieces() {
  std::lock_guard<std::mutex> lock(fence_mutex_);
  return api_.event_query ? DrainFencesLocked() : 0;
}

LaunchGate::Queued LaunchGate::LookAtQueue(uint32_t word) {
  std::lock_guard<std::mutex> lock(fence_mutex_);
  if (!api_.event_query) return {};
  const size_t left = DrainFencesLocked();
  // The oldest bubble with pieces running (or queued behind running ones),
  // and the oldest with pieces pending behind a wait not yet passed.
  std::optional<uint32_t> oldest, oldest_pending;
  for (const auto& [stream, queue] : queues_) {
    // Unfenced pieces are left only at the cap of fences; they are the newest.
    const std::optional<uint32_t> first = !queue.fences.empty() ? std::optional(queue.fences.front().bubble)
                                          : queue.unfenced > 0  ? std::optional(queue.unfenced_bubble)
                                                                : std::nullopt;
    std::optional<uint32_t>& into = queue.Pending() ? oldest_pending : oldest;
    if (first && (!into || BubbleBefore(*first, *into))) into = first;
  }
  // Read under the lock: looks from several threads come in time order.  The
  // word was read just before; a close between the two is seen at the next look.
  const int64_t now = clock_.now_ns();
  const uint64_t stretches = late_.late_bubbles();
  late_.Look(now, word, oldest);
  const int64_t pending_before = pending_waits_.late_ns();
  pending_waits_.Look(now, word, oldest_pending);
  if (slot_ && late_.late_bubbles() != stretches) {
    slot_->late_ns.store(late_.late_ns(), std::memory_order_relaxed);
    slot_->late_bubbles.store(late_.late_bubbles(), std::memory_order_relaxed);
  }
  if (slot_ && pending_waits_.late_ns() != pending_before)
    slot_->pending_ns.store(pending_waits_.late_ns(), std::memory_order_relaxed);
  return {left, kinded_counted_};
}

int64_t LaunchGate::late_ns() {
  std::lock_guard<std::mutex> lock(fence_mutex_);
  return late_.late_ns();
}

int64_t LaunchGate::pending_ns() {
  std::lock_guard<std::mutex> lock(fence_mutex_);
  return pending_waits_.late_ns();
}

uint64_t LaunchGate::late_bubbles() {
  std::lock_guard<std::mutex> lock(fence_mutex_);
  return late_.late_bubbles();
}

LaunchGate::Admitted LaunchGate::HoldUntilAdmitted(CuStream stream, bool may_go_unwaited, int64_t kind_ns,
                                                   uint64_t key, uint32_t kind_forgets) {
  const auto& layout = *static_cast<const GatePageLayout*>(page_);
  bool held = false;
  bool kind_forgotten = false;
  // The bubbles that found the piece too long, counted towards forgetting
  // its length (gate/too_long_bubbles.h says which count).
  TooLongBubbles bubbles;
  uint32_t too_long = 0;
  // Whether the piece, queued now by the deadline `until_ns`, may go
  // without its wait; counts it if so.  Ahead of it: `queued_ns`, or with
  // none given every counted piece, as if none had ended (no driver call),
  // those of no learned kind at `common`.
  auto unwaited = [&](int64_t piece, int64_t common, int64_t until_ns, std::optional<int64_t> queued_ns) {
    // A window emptied since BeforeWork looked (ForgetCommonLengths): no
    // length to stand on, so the wait stays.
    if (piece_p95_ns_.load(std::memory_order_relaxed) <= 0) return false;
    std::lock_guard<std::mutex> lock(fence_mutex_);
    const int64_t ahead = queued_ns ? *queued_ns : QueuedAtCommonNs({pieces_counted_, kinded_counted_}, common);
    StreamQueue& queue = queues_[stream];
    if (!MayGoUnwaited(clock_.now_ns(), ahead, piece, until_ns, queue.unwaited_in_row,
                       static_cast<int>(tuning_.run), tuning_.room_pct))
      return false;
    ++queue.unwaited_in_row;
    return true;
  };
  // A bubble counted as too long for the piece (TooLongBubbles): after
  // enough of them its length (a kind's, or the window's percentile, with
  // nothing of the program's queued) is forgotten, and it is judged again.
  auto count_too_long = [&]() {  // true: judged again (a length was forgotten)
    if (kind_ns > 0 && ++too_long >= KindTooLongBubbles(kind_forgets)) {
      {
        std::lock_guard<std::mutex> lock(kinds_mutex_);
        kind_lengths_.Forget(key);
      }
      kinds_forgotten_.fetch_add(1, std::memory_order_relaxed);
      kind_ns = 0;
      kind_forgotten = true;
      too_long = 0;
      return true;  // judged again, at the common percentile
    }
    // (While the window is empty, at kUnknownPieceNs, nothing counts;
    // refilled with long timings, the count starts again.)
    if (kind_ns == 0 && piece_p95_ns_.load(std::memory_order_relaxed) > 0 && ++too_long >= CommonTooLongBubbles()) {
      ForgetCommonLengths();
      too_long = 0;
      return true;  // judged again, at kUnknownPieceNs, and with its wait (unwaited)
    }
    return false;
  };
  for (;;) {
    GateView view;
    // Read before the word: a gate that reads shut opened after this time.
    const int64_t before_read = clock_.now_ns();
    view.word = layout.word.load(std::memory_order_acquire);
    if ((view.word & 1u) == 0) last_shut = {id_, view.word >> 1, before_read};
    const int64_t seen_shut =
        last_shut.gate == id_ && last_shut.bubble + 1 == (view.word >> 1) ? last_shut.at_ns : 0;
    // A deadline being written (the daemon republishes it at a second look)
    // is read again shortly: judged meanwhile by the next bubble's forecast,
    // an open bubble would be judged by its first forecast's deadline.
    const bool torn = !ReadAdmission(layout, &view.admit_bubble, &view.admit_until_ns);
    if (torn) view.admit_bubble = kAdmissionBeingWritten;  // matches no bubble
    AheadAdmission ahead;
    if (ReadAheadAdmission(layout, &ahead)) {
      view.ahead_bubble = ahead.bubble;
      view.ahead_from_ns = ahead.from_ns;
      view.ahead_begin_ns = ahead.begin_ns;
      view.ahead_until_ns = ahead.until_ns;
      view.ahead_watch_only = ahead.watch_only;
    }
    const int64_t common = PieceEstimateNs();
    const int64_t piece = PieceEstimateNs(kind_ns);
    const bool deadline_published = !torn && GateIsOpen(view.word) && view.admit_bubble == (view.word >> 1);
    // Far inside an open bubble, every counted piece taken as unfinished
    // still leaves room: queued with no look at the fences (no driver call).
    if (!held && may_go_unwaited && deadline_published &&
        unwaited(piece, common, view.admit_until_ns, std::nullopt))
      return {view.word >> 1, false, kind_forgotten};
    const Queued counted = LookAtQueue(view.word);
    const int64_t now = clock_.now_ns();
    const int64_t queued_ns = QueuedEstimateNs(counted, common);
    const PieceVerdict verdict =
        torn ? PieceVerdict::kWaitForQueue : JudgePiece(view, now, queued_ns, piece, seen_shut);
    if (verdict == PieceVerdict::kQueue) {
      if (held) held_.fetch_add(1, std::memory_order_relaxed);
      // Queued at its kind's learned length: the kind fits again.
      if (kind_ns > 0 && kind_forgets > 0) {
        std::lock_guard<std::mutex> lock(kinds_mutex_);
        kind_lengths_.NoteFitted(key);
      }
      // Queued by a window's percentile: the program's pieces fit again.
      if (kind_ns == 0 && piece_p95_ns_.load(std::memory_order_relaxed) > 0) {
        uint32_t in_row = window_forgets_in_row_.load(std::memory_order_relaxed);
        if (in_row != 0) window_forgets_in_row_.compare_exchange_strong(in_row, 0, std::memory_order_relaxed);
      }
      // Whether it may also go without its wait is judged with every counted
      // piece of no learned kind at the 95th percentile, whatever the queue
      // estimate: the wait is the net for a prediction that was wrong.
      const int64_t queued_p95 = QueuedAtCommonNs(counted, common);
      if (may_go_unwaited && deadline_published && unwaited(piece, common, view.admit_until_ns, queued_p95))
        return {view.word >> 1, false, kind_forgotten};
      return {GateIsOpen(view.word) ? view.word >> 1 : view.ahead_bubble, true, kind_forgotten};
    }
    const uint32_t bubble = view.word >> 1;
    const bool open = GateIsOpen(view.word);
    // The watched bubble's end is judged before this look's own verdicts,
    // which may be for the next bubble (its ahead window).
    if (bubbles.WatchedEndedUnfitted(bubble, open) && count_too_long()) continue;
    // Held while demoted: would the piece's own length have been queued?
    const int64_t own = PieceEstimateNs(kind_ns, /*as_demoted=*/false);
    if (!torn && own < piece && JudgePiece(view, now, queued_ns, own, seen_shut) == PieceVerdict::kQueue)
      bubbles.NoteOwnLengthFits(open ? bubble : view.ahead_bubble);
    // A bubble whose deadline is out and already past admits nothing.
    const bool admitting = deadline_published && view.admit_until_ns > now;
    TooLongBubbles::Look look;
    look.bubble = bubble;
    look.open = open;
    look.prompt = seen_shut > 0 && before_read - seen_shut <= 2 * kShutPollNs;
    look.deadline_published = deadline_published;
    look.admitting = admitting;
    look.queued = counted.pieces != 0;
    look.longer_than_bubble = verdict == PieceVerdict::kWaitForBubble && seen_shut > 0 && counted.pieces == 0 &&
                              admitting && seen_shut + own > view.admit_until_ns;
    if (bubbles.Observe(look) && count_too_long()) continue;
    held = true;
    // While the gate reads open, polled at the drain's pace whatever the
    // verdict: the time held open is counted to within that poll (the gate
    // may shut during it), and a piece that does not fit is near the
    // bubble's end, which comes soon.
    const bool shut_wait = verdict == PieceVerdict::kWaitForBubble && !open;
    const int64_t poll_ns = shut_wait ? ShutPollNs(view, now, kShutPollNs) : kDrainPollNs;
    if (shut_wait && poll_ns <= kWatchPollNs && tuning_.watch_spins && clock_.watch_ns != nullptr)
      clock_.watch_ns(&layout.word, view.word, poll_ns);  // the watch, or the window about to open
    else
      clock_.sleep_ns(poll_ns);
    if (open) {
      // Held while the gate read open: where an open gate's time goes unused.
      const HeldWhy why = !deadline_published                     ? HeldWhy::kUnpublished
                          : verdict == PieceVerdict::kWaitForQueue ? HeldWhy::kDrain
                                                                   : HeldWhy::kFit;
      CountHeldOpen(why, clock_.now_ns() - now);
    }
  }
}

uint32_t LaunchGate::CommonTooLongBubbles() const {
  return TooLongBubblesAfter(kMostBubblesWindowTooLong, window_forgets_in_row_.load(std::memory_order_relaxed));
}

void LaunchGate::ForgetCommonLengths() {
  {
    std::lock_guard<std::mutex> lock(samples_mutex_);
    lengths_.Clear();
    ++window_generation_;
    piece_p95_ns_.store(0, std::memory_order_relaxed);
    piece_mean_ns_.store(0, std::memory_order_relaxed);
    if (slot_) slot_->work_p95_ns.store(0, std::memory_order_relaxed);
  }
  window_forgets_in_row_.fetch_add(1, std::memory_order_relaxed);
  windows_forgotten_.fetch_add(1, std::memory_order_relaxed);
}

void LaunchGate::CountHeldOpen(HeldWhy why, int64_t ns) {
  if (ns <= 0) return;
  held_open_ns_[static_cast<size_t>(why)].fetch_add(ns, std::memory_order_relaxed);
  if (!slot_) return;
  std::atomic<int64_t>& published = why == HeldWhy::kUnpublished ? slot_->held_unpublished_ns
                                    : why == HeldWhy::kDrain     ? slot_->held_drain_ns
                                                                 : slot_->held_fit_ns;
  published.fetch_add(ns, std::memory_order_relaxed);
}

void LaunchGate::StartSample(CuStream stream, WorkSample* sample) {
  if (!api_.event_create || !api_.event_record || !api_.event_query ||
      !api_.event_elapsed_time || !api_.event_destroy)
    return;
  if (pending_count_.load(std::memory_order_relaxed) >= kMaxPendingSamples) return;  // reading back lags: skip
  RelaxedCaptureMode relaxed(api_.thread_exchange_capture_mode);
  CuEvent start = nullptr, end = nullptr;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(samples_mutex_);
    start = spare_timing_.Take(api_);
    end = start ? spare_timing_.Take(api_) : nullptr;
    generation = window_generation_;
  }
  if (!end || api_.event_record(start, stream) != kCudaSuccess) {
    // Events not recorded (a stream of another context, one destroyed) are whole: kept.
    std::lock_guard<std::mutex> lock(samples_mutex_);
    if (start) spare_timing_.Keep(api_, start);
    if (end) spare_timing_.Keep(api_, end);
    return;
  }
  sample->start = start;
  sample->end = end;
  sample->stream = stream;
  sample->window_generation = generation;
}

void LaunchGate::AfterWork(const WorkSample& sample) {
  // in_flight is set only where pieces can be counted (BeforeWork).
  if (sample.in_flight) {
    std::lock_guard<std::mutex> lock(fence_mutex_);
    StreamQueue& queue = queues_[sample.stream];
    --queue.in_flight;
    ++queue.launches;
    if (sample.queued) {
      // Another thread may have queued a piece of another bubble on this
      // stream since this one's BeforeWork: a fence stands for one bubble.
      if (queue.unfenced > 0 && queue.unfenced_bubble != sample.bubble) FenceUnfencedLocked(sample.stream, queue);
      // Where that fence could not be made, the group keeps its earlier bubble.
      if (queue.unfenced == 0 || BubbleBefore(sample.bubble, queue.unfenced_bubble))
        queue.unfenced_bubble = sample.bubble;
      ++queue.unfenced;
      ++pieces_counted_;
      if (sample.kind_ns > 0) {
        const KindedWork piece{1, Demoted() ? 2 * sample.kind_ns : sample.kind_ns};
        queue.unfenced_kinded += piece;
        kinded_counted_ += piece;
      }
      // Near the deadline (it waited) the count must be exact: fenced at once.
      if (sample.waited || queue.unfenced >= tuning_.run || wait_every_piece_)
        FenceUnfencedLocked(sample.stream, queue);
      // The thread's own default stream cannot be fenced from another thread
      // later: a piece it could not fence now (the cap) is not counted.
      if (sample.stream == kPerThreadStream && queue.unfenced > 0) ForgetUnfencedLocked(queue);
    }
  }
  if (!sample.start) return;
  RelaxedCaptureMode relaxed(api_.thread_exchange_capture_mode);
  if (api_.event_record(sample.end, sample.stream) != kCudaSuccess) {
    api_.event_destroy(sample.start);
    api_.event_destroy(sample.end);
    return;
  }
  std::lock_guard<std::mutex> lock(samples_mutex_);
  pending_.push_back(sample);
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
}

void LaunchGate::CollectSamples() {
  std::unique_lock<std::mutex> lock(samples_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it
  size_t done = 0;
  RelaxedCaptureMode relaxed(api_.thread_exchange_capture_mode);
  for (const WorkSample& sample : pending_) {
    CuResult r = api_.event_query(sample.end);
    if (r == kCudaErrorNotReady) break;  // in order on its stream; later ones may be on others, but wait
    float ms = 0;
    if (r == kCudaSuccess && api_.event_elapsed_time(&ms, sample.start, sample.end) == kCudaSuccess) {
      const int64_t ns = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
      // A timing begun before the window was last emptied is of the work
      // that filled it: it would fill it again.
      if (!sample.kind_only && sample.window_generation == window_generation_) lengths_.Add(ns);
      if (sample.key != 0) {
        std::lock_guard<std::mutex> kinds_lock(kinds_mutex_);
        kind_lengths_.Add(sample.key, ns);
      }
      spare_timing_.Keep(api_, sample.start);
      spare_timing_.Keep(api_, sample.end);
    } else {  // an event in error is not reused
      api_.event_destroy(sample.start);
      api_.event_destroy(sample.end);
    }
    ++done;
  }
  if (done == 0) return;
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
  const int64_t p95 = lengths_.P95();  // a selection over the window: once
  piece_p95_ns_.store(p95, std::memory_order_relaxed);
  piece_mean_ns_.store(lengths_.Mean(), std::memory_order_relaxed);
  if (!slot_) return;
  slot_->work_p95_ns.store(p95, std::memory_order_relaxed);
  slot_->samples.fetch_add(done, std::memory_order_relaxed);
}

int64_t LaunchGate::work_p95_ns() const {
  return slot_ ? slot_->work_p95_ns.load(std::memory_order_relaxed) : 0;
}

GateCounters LaunchGate::counters() const {
  return {waits_.load(std::memory_order_relaxed), unwaited_.load(std::memory_order_relaxed),
          captured_.load(std::memory_order_relaxed),
          failed_waits_.load(std::memory_order_relaxed), refused_.load(std::memory_order_relaxed),
          held_.load(std::memory_order_relaxed), passes_.load(std::memory_order_relaxed),
          HeldOpenNs(HeldWhy::kUnpublished), HeldOpenNs(HeldWhy::kDrain), HeldOpenNs(HeldWhy::kFit),
          kinds(), kinds_forgotten_.load(std::memory_order_relaxed),
          windows_forgotten_.load(std::memory_order_relaxed)};
}

}  // namespace freeride::gate
