// Times one iteration of a pipeline schedule, one action at a time, with the
// caller deciding each action's length and when a rank actually starts it.
// TimeSchedule (fixed stage times) and the simulator (jitter, stragglers,
// side tasks in the gaps) share this dependency logic.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "schedule/pipeline_schedule.h"

namespace freeride {

class PipelineTimer {
 public:
  // Builds the action order; throws std::invalid_argument as
  // BuildActionOrder does.
  PipelineTimer(ScheduleKind kind, int ranks, int microbatches, int virtual_stages)
      : kind_(kind),
        ranks_(ranks),
        microbatches_(microbatches),
        stages_(ModelStageCount(ranks, virtual_stages)),  // BuildActionOrder below refuses too many
        order_(BuildActionOrder(kind, ranks, microbatches, virtual_stages)),
        forward_end_(static_cast<size_t>(stages_) * microbatches),
        backward_end_(forward_end_.size()),
        next_(ranks),
        rank_free_(ranks) {
    for (const auto& actions : order_) total_actions_ += actions.size();
  }

  const std::vector<std::vector<PipelineAction>>& order() const { return order_; }
  int ranks() const { return ranks_; }
  int stages() const { return stages_; }
  int RankOf(int stage) const { return RankOfStage(kind_, ranks_, stage); }

  // Runs one iteration.  Rank r may start its first action at rank_start[r];
  // its last action ends at rank_end[r] on return.  Hooks:
  //   double Duration(int rank, int index, const PipelineAction&)
  //   double Start(int rank, int index, double free, double ready)
  //       the rank finished its previous work at `free` and the action's
  //       inputs are there at `ready` (>= free); returns when the action
  //       really starts (>= ready: a gap may be handed to side tasks that
  //       overrun it);
  //   void Done(int rank, int index, double start, double end)
  // `p2p_latency` is added to every dependency that crosses ranks.  The
  // output of the first action of an overlapped pair (PipelineAction::paired)
  // is there only when the second ends, as torch sends both then.  The
  // order in which hooks are called depends on the schedule alone, not on
  // the times, so that two runs with the same random draws stay in step.
  template <class Hooks>
  void Run(const double* rank_start, double p2p_latency, Hooks& hooks, double* rank_end) {
    std::fill(forward_end_.begin(), forward_end_.end(), kUnset);
    std::fill(backward_end_.begin(), backward_end_.end(), kUnset);
    std::fill(next_.begin(), next_.end(), 0);
    std::copy(rank_start, rank_start + ranks_, rank_free_.begin());
    size_t remaining = total_actions_;
    auto arrival = [&](const std::vector<double>& ends, int from_stage, int to_stage, int mb) {
      double end = ends[Index(from_stage, mb)];
      if (end == kUnset) return kUnset;
      return end + (RankOf(from_stage) != RankOf(to_stage) ? p2p_latency : 0);
    };
    while (remaining > 0) {
      bool progressed = false;
      for (int rank = 0; rank < ranks_; ++rank) {
        while (next_[rank] < order_[rank].size()) {
          const PipelineAction& a = order_[rank][next_[rank]];
          double ready = rank_free_[rank];
          if (a.type == PipelineAction::kForward) {
            if (a.stage > 0) {
              double in = arrival(forward_end_, a.stage - 1, a.stage, a.microbatch);
              if (in == kUnset) break;
              ready = std::max(ready, in);
            }
          } else if (a.IsBackwardStart()) {
            if (forward_end_[Index(a.stage, a.microbatch)] == kUnset) break;
            if (a.stage + 1 < stages_) {
              double in = arrival(backward_end_, a.stage + 1, a.stage, a.microbatch);
              if (in == kUnset) break;
              ready = std::max(ready, in);
            }
          } else if (backward_end_[Index(a.stage, a.microbatch)] == kUnset) {
            break;  // a weight gradient waits for the same stage's input gradient
          }
          int index = static_cast<int>(next_[rank]);
          double start = std::max(ready, hooks.Start(rank, index, rank_free_[rank], ready));
          double end = start + hooks.Duration(rank, index, a);
          // The first of an overlapped pair hands its output on when the pair ends.
          if (!a.paired) Publish(a, end);
          if (index > 0 && order_[rank][index - 1].paired) Publish(order_[rank][index - 1], end);
          rank_free_[rank] = end;
          hooks.Done(rank, index, start, end);
          ++next_[rank];
          --remaining;
          progressed = true;
        }
      }
      if (!progressed) throw std::logic_error("schedule deadlocks: an action waits on itself");
    }
    std::copy(rank_free_.begin(), rank_free_.end(), rank_end);
  }

 private:
  static constexpr double kUnset = -1e300;
  // `a`'s output is there for the actions that wait on it from `end` on.
  void Publish(const PipelineAction& a, double end) {
    if (a.type == PipelineAction::kForward) forward_end_[Index(a.stage, a.microbatch)] = end;
    if (a.IsBackwardStart()) backward_end_[Index(a.stage, a.microbatch)] = end;
  }
  size_t Index(int stage, int mb) const {
    return static_cast<size_t>(stage) * microbatches_ + mb;
  }

  ScheduleKind kind_;
  int ranks_, microbatches_, stages_;
  std::vector<std::vector<PipelineAction>> order_;
  size_t total_actions_ = 0;
  // Per (stage, micro-batch): when its forward, and its backward or input
  // gradient (what the previous stage waits for), ended.
  std::vector<double> forward_end_, backward_end_;
  std::vector<size_t> next_;
  std::vector<double> rank_free_;
};

}  // namespace freeride
