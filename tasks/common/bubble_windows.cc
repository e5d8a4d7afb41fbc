#include "common/bubble_windows.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "channel/gate_marks.h"
#include "policy/quantile.h"

namespace freeride::tasks {

void BubbleWindows::Record(int64_t window_ns) {
  if (window_ns <= 0) return;
  windows_[next_slot_] = window_ns;
  next_slot_ = (next_slot_ + 1) % kKept;
  kept_ = std::min(kept_ + 1, kKept);
}

int64_t BubbleWindows::MedianNs() const {
  // The nearest-rank median of an even count is the lower one.
  return kept_ == 0 ? 0 : QuantileOf(windows_.data(), kept_, 0.5);
}

int64_t StepTargetForWindows(int64_t step_ns, int64_t median_window_ns) {
  step_ns = std::max<int64_t>(1, step_ns);
  if (median_window_ns <= 0) return step_ns;
  return std::clamp(median_window_ns / kStepsPerWindow, std::min(kShortestStepNs, step_ns), step_ns);
}

void BubbleSizedSteps::Start(SlowChunks slow, bool fixed) {
  const char* path = std::getenv("FREERIDE_GATE_PAGE");
  if (slow != SlowChunks::kOutvoted || fixed || path == nullptr || *path == '\0') return;
  if (page_.Open(path, &error_)) return;
  page_.Close();
  // Said, since the steps then stay at --step-ms behind the gate.
  std::fprintf(stderr, "freeride: cannot read the lane's gate page %s (%s): steps stay at --step-ms\n", path,
               error_.c_str());
}

int64_t BubbleSizedSteps::TargetNsAt(int64_t now_ns) {
  if (!page_.is_open()) return step_ns_;
  AheadAdmission ahead;
  // Each bubble once, where its forecast is first read.  An iteration's
  // first bubble (watch only: nothing is queued ahead of it) is a bubble the
  // task fills all the same.
  if (ReadAheadAdmission(*page_.layout(), &ahead) && ahead.bubble != latest_bubble_) {
    windows_.Record(ahead.until_ns - ahead.begin_ns);
    if (latest_bubble_) {
      // The stage numbers its bubbles in 31 bits; a larger step than any
      // between two reads is a new stage process numbering from 1 again.
      const uint32_t step = GateMarkReader::Distance(*latest_bubble_, ahead.bubble);
      bubbles_seen_ += step > 0 && step <= kMostBubblesBetweenReads ? step : 1;
    }
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
