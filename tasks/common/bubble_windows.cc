#include "common/bubble_windows.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace freeride::tasks {

void BubbleWindows::Record(uint32_t bubble, int64_t window_ns) {
  if (window_ns <= 0 || last_bubble_ == bubble) return;
  last_bubble_ = bubble;
  windows_[next_slot_] = window_ns;
  next_slot_ = (next_slot_ + 1) % kKept;
  kept_ = std::min(kept_ + 1, kKept);
}

int64_t BubbleWindows::MedianNs() const {
  if (kept_ == 0) return 0;
  std::array<int64_t, kKept> sorted = windows_;
  const int median = (kept_ - 1) / 2;
  std::nth_element(sorted.begin(), sorted.begin() + median, sorted.begin() + kept_);
  return sorted[median];
}

int64_t StepTargetForWindows(int64_t step_ns, int64_t median_window_ns) {
  step_ns = std::max<int64_t>(1, step_ns);
  if (median_window_ns <= 0) return step_ns;
  return std::clamp(median_window_ns / kStepsPerWindow, std::min(kShortestStepNs, step_ns), step_ns);
}

BubbleSizedSteps::BubbleSizedSteps(int64_t step_ns, bool fixed) : step_ns_(step_ns) {
  const char* path = std::getenv("FREERIDE_GATE_PAGE");
  if (fixed || path == nullptr || *path == '\0') return;
  if (page_.Open(path, &error_)) return;
  page_.Close();
  // Said, since the steps then stay at --step-ms behind the gate.
  std::fprintf(stderr, "freeride: cannot read the lane's gate page %s (%s): steps stay at --step-ms\n", path,
               error_.c_str());
}

int64_t BubbleSizedSteps::TargetNsAt(int64_t now_ns) {
  if (!page_.is_open()) return step_ns_;
  AheadAdmission ahead;
  // An iteration's first bubble (watch only: nothing is queued ahead of it)
  // is a bubble the task fills all the same.
  if (ReadAheadAdmission(*page_.layout(), &ahead)) {
    windows_.Record(ahead.bubble, ahead.until_ns - ahead.begin_ns);
    if (have_bubble_ && ahead.bubble != latest_bubble_) {
      // The stage numbers its bubbles in 31 bits (channel/gate_marks.h).
      const uint32_t step = (ahead.bubble - latest_bubble_) & 0x7fffffffu;
      bubbles_seen_ += step > 0 && step <= kMostBubblesBetweenReads ? step : 1;
    }
    have_bubble_ = true;
    latest_bubble_ = ahead.bubble;
  }
  const int64_t sized = StepTargetForWindows(step_ns_, windows_.MedianNs());
  const StepChoice choice = chooser_.Choose(now_ns, bubbles_seen_, WorthATrial(step_ns_, sized));
  if (chooser_.TakeDecision())
    std::fprintf(stderr,
                 "freeride: behind the gate, steps of %.2f ms (--step-ms) did %.4g units a bubble, of %.2f ms "
                 "(a third of the bubbles' median window) %.4g: stepping at %s (tried again after %d s, then less "
                 "often while the choice holds)\n",
                 step_ns_ / 1e6, chooser_.step_ms_work(), sized / 1e6, chooser_.bubble_sized_work(),
                 StepChoiceName(choice), static_cast<int>(chooser_.keep_ns() / 1'000'000'000));
  return choice == StepChoice::kBubbleSized ? sized : step_ns_;
}

}  // namespace freeride::tasks
