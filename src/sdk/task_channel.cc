#include "sdk/task_channel.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/futex.h"
#include "base/utf8.h"

namespace freeride {

std::unique_ptr<TaskChannel> TaskChannel::AttachFromEnvironment(std::string* error) {
  const char* task_path = std::getenv(kEnvTaskSegment);
  const char* lane_path = std::getenv(kEnvLaneSegment);
  if (!task_path || !*task_path || !lane_path || !*lane_path) {
    *error = "not launched by a FreeRide daemon (FREERIDE_TASK_SEGMENT is not set)";
    return nullptr;
  }
  Endpoints endpoints;
  endpoints.task_segment = task_path;
  endpoints.lane_segment = lane_path;
  if (const char* dir = std::getenv(kEnvCheckpointDir)) endpoints.checkpoint_dir = dir;
  if (const char* hint = std::getenv(kEnvStepHint)) endpoints.step_hint = std::atoll(hint);
  if (const char* memory = std::getenv(kEnvMemory))
    endpoints.memory_bytes = std::strtoull(memory, nullptr, 10);
  return Attach(endpoints, Env::Default(), error);
}

std::unique_ptr<TaskChannel> TaskChannel::Attach(const Endpoints& endpoints, Env* env,
                                                 std::string* error) {
  auto channel = std::make_unique<TaskChannel>();
  channel->env_ = env;
  if (!channel->task_.Open(endpoints.task_segment, error)) return nullptr;
  if (!channel->lane_.Open(endpoints.lane_segment, /*writable=*/false, error)) return nullptr;
  channel->task_.set_env(env);
  channel->lane_.set_env(env);
  channel->lane_path_ = endpoints.lane_segment;
  // Tells the daemon this program uses the SDK: it stops holding it to bubbles.
  channel->task_.set_state(TaskProcessState::kAttached);
  channel->checkpoint_dir_ = endpoints.checkpoint_dir;
  if (endpoints.step_hint > 0) channel->estimator_.set_prior(endpoints.step_hint);
  channel->memory_bytes_ = endpoints.memory_bytes;
  channel->seen_grant_ = channel->task_.layout()->grant_seq.load();
  channel->aged_through_seq_ = channel->lane_.layout()->bubble_seq.load();
  return channel;
}

void TaskChannel::SetUnit(std::string_view unit) {
  auto* l = task_.layout();
  // Cut on a character's boundary: the daemon shows the unit as text.
  const std::string_view kept = Utf8Prefix(unit, sizeof(l->progress_unit) - 1);
  const size_t n = kept.size();
  std::memcpy(l->progress_unit, kept.data(), n);
  l->progress_unit[n] = '\0';
}

void TaskChannel::Ready() {
  // Until its first step the daemon would judge the task by the spec's
  // hint; the task's own prior may be shorter (a paced task's piece).
  PublishStepEstimate();
  task_.set_state(TaskProcessState::kReady);
  task_.Acknowledge();
}

bool TaskChannel::TakeArmedBubble() {
  const LaneSegmentLayout* lane = lane_.layout();
  BubbleMark mark = lane_.Read();
  if (!mark.open() || mark.seq == last_served_seq_) return false;
  // A withheld window or the overhead guard may keep side work out of this
  // bubble; the task then sleeps to the next begin mark, as after a yield.
  Admission admission =
      AdmissionFor(*lane, mark, env_->Now(), mark.begin_ns + PublishedForecast(*lane, mark));
  if (!admission.serve) return false;
  granted_seq_ = mark.seq;
  task_.layout()->taken_bubble_seq.store(mark.seq, std::memory_order_release);
  deadline_ = admission.deadline;
  fit_factor_ = admission.fit_factor;
  granted_free_memory_ = mark.free_memory_bytes;
  armed_grant_ = true;
  armed_slot_ = mark.slot;
  armed_begin_ns_ = mark.begin_ns;
  second_look_taken_ = false;
  return true;
}

bool TaskChannel::TakeSecondLook() {
  if (!armed_grant_ || second_look_taken_) return false;
  second_look_taken_ = true;
  const LaneSegmentLayout* lane = lane_.layout();
  SecondLook look;
  if (!PublishedSecondLook(*lane, armed_slot_, &look.after, &look.length)) return false;
  Nanos now = env_->Now();
  const Nanos longer_deadline =
      ArmedSecondLook(policy_, PublishedGate(*lane), granted_seq_, armed_begin_ns_, look, now,
                      deadline_, estimator_.Estimate(), fit_factor_);
  if (longer_deadline == 0) return false;
  const Nanos at = armed_begin_ns_ + look.after;
  auto still_open = [&] {
    return lane->bubble_seq.load(std::memory_order_acquire) == granted_seq_ &&
           task_.layout()->command.load(std::memory_order_relaxed) !=
               static_cast<uint32_t>(TaskCommand::kStop);
  };
  // An end mark does not wake this sleep (the task waits on begin marks
  // only); the point is usually a few short bubbles' length away.  Bounded,
  // so a stop command is seen even if the segment says something absurd.
  while (still_open() && (now = env_->Now()) < at)
    env_->Wait(const_cast<std::atomic<uint32_t>*>(&lane->bubble_seq), granted_seq_,
              std::min(at - now, 100 * kMillisecond), kWakeOnBegin);
  if (!still_open()) return false;
  deadline_ = longer_deadline;
  return true;
}

void TaskChannel::AgeStepEstimate() {
  uint32_t seq = lane_.layout()->bubble_seq.load(std::memory_order_acquire);
  // Begin marks make the sequence odd: count the bubbles begun since.
  int begun = static_cast<int>((seq + 1) / 2 - (aged_through_seq_ + 1) / 2);
  aged_through_seq_ = seq;
  if (stepped_since_aging_) {
    stepped_since_aging_ = false;
    return;
  }
  estimator_.PassedOver(begun);
  PublishStepEstimate();
}

void TaskChannel::PublishStepEstimate() {
  task_.layout()->step_estimate_ns.store(estimator_.Estimate(), std::memory_order_relaxed);
}

void TaskChannel::MaybeReattachLane() {
  Nanos now = env_->Now();
  if (now < next_lane_check_ns_) return;
  next_lane_check_ns_ = now + kSecond;
  if (!lane_.mapping().Unlinked()) return;
  LaneSegment fresh;
  std::string error;
  if (!fresh.Open(lane_path_, /*writable=*/false, &error)) return;  // not made again yet
  fresh.set_env(env_);
  lane_ = std::move(fresh);
  aged_through_seq_ = lane_.layout()->bubble_seq.load();
  last_served_seq_ = 0;
}

TaskChannel::Wake TaskChannel::WaitForGrant(Nanos timeout) {
  AgeStepEstimate();
  auto* l = task_.layout();
  Nanos deadline = timeout >= 0 ? env_->Now() + timeout : -1;
  for (;;) {
    MaybeReattachLane();
    auto* lane = lane_.layout();
    auto command = static_cast<TaskCommand>(l->command.load(std::memory_order_acquire));
    if (command == TaskCommand::kStop) return Wake::kStop;
    if (command == TaskCommand::kCheckpoint) {
      l->command.store(static_cast<uint32_t>(TaskCommand::kNone));
      return Wake::kCheckpoint;
    }
    Nanos wait = -1;
    if (deadline >= 0) {
      wait = deadline - env_->Now();
      if (wait <= 0) return Wake::kTimeout;
    }
    if (l->armed.load(std::memory_order_acquire) != 0) {
      uint32_t seq = lane->bubble_seq.load(std::memory_order_acquire);
      if ((seq & 1u) != 0 && TakeArmedBubble()) {
        task_.set_state(TaskProcessState::kStepping);
        return Wake::kGranted;
      }
      // Sleeps on the stage's own futex word: the begin mark wakes this
      // process directly, and end marks (nothing to take) do not.  Bounded,
      // so commands and disarming are seen.
      Nanos bounded = wait < 0 ? 100 * kMillisecond : std::min(wait, 100 * kMillisecond);
      env_->Wait(const_cast<std::atomic<uint32_t>*>(&lane->bubble_seq), seq, bounded,
                kWakeOnBegin);
      continue;
    }
    if (l->grant_active.load(std::memory_order_acquire) != 0) {
      uint32_t granted = l->granted_bubble_seq.load(std::memory_order_relaxed);
      if (granted == lane->bubble_seq.load(std::memory_order_acquire) &&
          granted != last_served_seq_) {
        granted_seq_ = granted;
        l->taken_bubble_seq.store(granted, std::memory_order_release);
        deadline_ = l->grant_deadline_ns.load(std::memory_order_relaxed);
        fit_factor_ = AdmissionFor(*lane, lane_.Read(), env_->Now(), deadline_).fit_factor;
        armed_grant_ = false;
        task_.set_state(TaskProcessState::kStepping);
        return Wake::kGranted;
      }
    }
    seen_grant_ = task_.WaitForGrant(seen_grant_, wait);
  }
}

bool TaskChannel::GrantHolds() const {
  auto* l = task_.layout();
  if (l->command.load(std::memory_order_relaxed) == static_cast<uint32_t>(TaskCommand::kStop))
    return false;
  if (!lane_.StillOpen(granted_seq_)) return false;
  if (armed_grant_) return memory_bytes_ <= granted_free_memory_;
  return l->grant_active.load(std::memory_order_acquire) != 0;
}

bool TaskChannel::NextStepFits() const {
  return GrantHolds() &&
         policy_.StepFits(env_->Now(), deadline_, estimator_.Estimate(), fit_factor_);
}

Nanos TaskChannel::StepBudget() const {
  return GrantHolds() ? policy_.LongestFittingStep(env_->Now(), deadline_, fit_factor_) : 0;
}

void TaskChannel::RecordStep(Nanos start, Nanos end, double units, int parts) {
  estimator_.Observe((end - start) / std::max(parts, 1));
  stepped_since_aging_ = true;
  PublishStepEstimate();
  task_.RecordStep(start, end, units, granted_seq_);
}

void TaskChannel::AddProgress(double units) { task_.AddProgress(units); }

void TaskChannel::ResumeCounters(double progress, uint64_t steps) {
  TaskSegmentLayout* l = task_.layout();
  l->progress_bits.store(std::bit_cast<uint64_t>(progress), std::memory_order_relaxed);
  l->steps_done.store(steps, std::memory_order_relaxed);
  l->counters_are_totals.store(1, std::memory_order_release);
}

void TaskChannel::Yield(bool idle) {
  last_served_seq_ = granted_seq_;
  MarkServed(idle);
  task_.set_state(TaskProcessState::kYielded);
  task_.Acknowledge();
  WakeLaneIfWorthIt(idle);
}

void TaskChannel::Finished(bool ok) {
  MarkServed(/*rest_free=*/true);
  task_.set_state(ok ? TaskProcessState::kFinished : TaskProcessState::kFailed);
  task_.Acknowledge();
  WakeLaneIfWorthIt(/*rest_free=*/true);
}

void TaskChannel::MarkServed(bool rest_free) {
  if (rest_free) task_.layout()->rest_free_bubble_seq.store(granted_seq_, std::memory_order_relaxed);
  // Released: a lane that sees this bubble served sees whether its rest is free.
  task_.layout()->served_bubble_seq.store(granted_seq_, std::memory_order_release);
}

void TaskChannel::WakeLaneIfWorthIt(bool rest_free) {
  // A granted task's lane waits for the acknowledgement; an armed task's
  // lane sleeps until the bubble ends unless the rest is worth offering.
  if (!armed_grant_) return;
  auto* lane = lane_.layout();
  if (granted_seq_ != lane->bubble_seq.load(std::memory_order_acquire)) return;
  SecondLook look;
  PublishedSecondLook(*lane, armed_slot_, &look.after, &look.length);
  const Nanos left = HandBackLeftover(armed_begin_ns_, deadline_, look, env_->Now());
  const auto& threshold = rest_free ? lane->idle_handback_wake_ns : lane->handback_wake_ns;
  if (left >= threshold.load(std::memory_order_relaxed))
    env_->WakeAll(const_cast<std::atomic<uint32_t>*>(&lane->bubble_seq), kWakeOnHandBack);
}

std::optional<double> ParseStandaloneSeconds(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string_view::npos ||
      text.front() == '+' || text.front() == '-')
    return std::nullopt;
  const std::string copy(text);  // strtod needs a terminated string
  char* end = nullptr;
  const double seconds = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(seconds) || seconds <= 0) return std::nullopt;
  return seconds;
}

}  // namespace freeride
