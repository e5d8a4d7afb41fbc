// Which step time a built-in task behind a lane's GPU gate steps at:
// --step-ms, or the bubble-sized target (common/bubble_windows.h), chosen by
// the work each does there.
//
// Which one does more is the task's own matter: on one H100 (bench/results/
// gate_h100_bubble_steps.md) SGD, whose 2 ms step is one kernel that the gate
// holds until a bubble's rest fits it, did 2.5 times the work at the
// bubble-sized target on an interleaved 1F1B schedule, while PageRank, whose
// step is several short kernels and each step a round trip from the host,
// did a fifth to a half less.  So the task tries each in turn and keeps the
// one that did more work a bubble for kKeepNs, then tries both again (the bubbles may
// have changed); each time the trials choose the same again, it is kept
// twice as long, up to kLongestKeepNs, so that a steady run spends little
// time on trials (about 1 s in the worse of every 8 min).  Work is counted a bubble, not a second, so that a pause of
// the stage's marks (no bubbles, no work) does not count against the choice
// being tried then.  Pure: time and bubbles are passed in; one thread.
#pragma once
#include <cstdint>

namespace freeride::tasks {

enum class StepChoice { kStepMs, kBubbleSized };

const char* StepChoiceName(StepChoice choice);

class StepTargetChooser {
 public:
  static constexpr int64_t kTrialNs = 1'000'000'000;   // each choice's trial lasts this long at least
  static constexpr int64_t kSettleNs = 250'000'000;    // ... whose start is not counted: the sizer adapting
  static constexpr uint64_t kTrialBubbles = 50;        // ... and counts this many bubbles at least
  static constexpr int64_t kTrialLimitNs = 10'000'000'000;  // a trial short of bubbles this long gives up
  static constexpr int64_t kKeepNs = 30'000'000'000;   // how long the better one stands at first
  static constexpr int64_t kLongestKeepNs = 480'000'000'000;  // ... and at most, chosen again and again

  // The choice to step at now (CLOCK_MONOTONIC ns).  `bubbles`: how many of
  // the lane's bubbles the task has seen so far (a count that only grows).
  // `differ`: whether the bubble-sized target differs enough from --step-ms
  // to be worth a trial; read only where trials would start (first, and when
  // a kept choice's time is up), so that a median that flips between two
  // kinds of bubble does not restart trials: while it is false there,
  // --step-ms is kept.  Trials that cannot count kTrialBubbles within
  // kTrialLimitNs (the lane stopped forecasting bubbles) give up and keep
  // --step-ms.
  StepChoice Choose(int64_t now_ns, uint64_t bubbles, bool differ);

  // The step just run did `units` of work (StepResult::units); counted in
  // the trial under way once past its settling start.
  void Record(double units);

  // The work a bubble the last trials read: 0 before.
  double step_ms_work() const { return work_[0]; }
  double bubble_sized_work() const { return work_[1]; }
  // How long the choice now kept stands before the next trials.
  int64_t keep_ns() const { return keep_ns_; }
  // True once (and until it is read) trials chose differently from the last
  // choice said (the first choice, and each change after it).
  bool TakeDecision() {
    const bool made = decided_;
    decided_ = false;
    return made;
  }

 private:
  enum class Phase { kNone, kTrial, kKept };
  void StartTrial(int64_t now_ns, StepChoice choice);
  void Keep(int64_t now_ns, StepChoice choice);

  Phase phase_ = Phase::kNone;
  StepChoice current_ = StepChoice::kStepMs;
  int64_t phase_start_ns_ = 0;
  bool counting_ = false;         // the trial is past its settling start
  uint64_t first_bubble_ = 0;     // ... and counts bubbles from this one
  double counted_units_ = 0;
  double work_[2] = {0, 0};
  bool tried_both_ = false;  // the trial under way is the second of a pair
  bool decided_ = false;
  int64_t keep_ns_ = kKeepNs;
  bool said_ = false;  // a choice was said (TakeDecision) ...
  StepChoice said_choice_ = StepChoice::kStepMs;  // ... this one
};

}  // namespace freeride::tasks
