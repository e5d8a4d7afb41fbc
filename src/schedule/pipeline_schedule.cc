#include "schedule/pipeline_schedule.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace freeride {

std::optional<ScheduleKind> ParseScheduleKind(const std::string& name, std::string* error) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  if (name == "interleaved" || name == "zbv")
    *error = "schedule '" + name + "' is not modelled yet; supported: gpipe, 1f1b";
  else
    *error = "unknown schedule '" + name + "'; supported: gpipe, 1f1b";
  return std::nullopt;
}

const char* ScheduleKindName(ScheduleKind kind) {
  return kind == ScheduleKind::kGPipe ? "gpipe" : "1f1b";
}

std::string PipelineAction::Label() const {
  return (type == kForward ? "F" : "B") + std::to_string(microbatch);
}

const char* BubbleTypeName(BubbleType type) {
  switch (type) {
    case BubbleType::kFill: return "fill";
    case BubbleType::kWarmupWait: return "warmup_wait";
    case BubbleType::kSteady: return "steady";
    case BubbleType::kDrain: return "drain";
  }
  return "?";
}

char BubbleTypeLetter(BubbleType type) {
  switch (type) {
    case BubbleType::kFill: return 'A';
    case BubbleType::kWarmupWait: return 'B';
    case BubbleType::kSteady: return 'D';
    case BubbleType::kDrain: return 'C';
  }
  return '?';
}

std::vector<std::vector<PipelineAction>> BuildActionOrder(ScheduleKind kind, int stages,
                                                          int microbatches) {
  if (stages < 1 || microbatches < 1)
    throw std::invalid_argument("stages and micro-batches must be at least 1");
  std::vector<std::vector<PipelineAction>> order(stages);
  for (int rank = 0; rank < stages; ++rank) {
    auto& actions = order[rank];
    if (kind == ScheduleKind::kGPipe) {
      for (int m = 0; m < microbatches; ++m) actions.push_back({PipelineAction::kForward, m});
      for (int m = 0; m < microbatches; ++m) actions.push_back({PipelineAction::kBackward, m});
      continue;
    }
    int warmup = std::min(microbatches, stages - rank);
    int next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward)
      actions.push_back({PipelineAction::kForward, next_forward});
    while (next_forward < microbatches) {
      actions.push_back({PipelineAction::kBackward, next_backward++});
      actions.push_back({PipelineAction::kForward, next_forward++});
    }
    while (next_backward < microbatches)
      actions.push_back({PipelineAction::kBackward, next_backward++});
  }
  return order;
}

ScheduleTimeline TimeSchedule(ScheduleKind kind, int stages, int microbatches,
                              const StageTimes& times, double min_idle) {
  auto order = BuildActionOrder(kind, stages, microbatches);
  const double kUnset = -1;
  // Finish time of F/B of (stage, micro-batch).
  std::vector<std::vector<double>> f_end(stages, std::vector<double>(microbatches, kUnset));
  std::vector<std::vector<double>> b_end = f_end;
  std::vector<size_t> next(stages, 0);
  std::vector<double> rank_free(stages, 0);
  ScheduleTimeline timeline;
  timeline.ranks.resize(stages);
  size_t remaining = 0;
  for (auto& a : order) remaining += a.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int rank = 0; rank < stages; ++rank) {
      while (next[rank] < order[rank].size()) {
        const PipelineAction& a = order[rank][next[rank]];
        double ready = rank_free[rank];
        if (a.type == PipelineAction::kForward) {
          if (rank > 0) {
            if (f_end[rank - 1][a.microbatch] == kUnset) break;
            ready = std::max(ready, f_end[rank - 1][a.microbatch] + times.p2p_latency);
          }
        } else {
          if (f_end[rank][a.microbatch] == kUnset) break;
          if (rank + 1 < stages) {
            if (b_end[rank + 1][a.microbatch] == kUnset) break;
            ready = std::max(ready, b_end[rank + 1][a.microbatch] + times.p2p_latency);
          }
        }
        double length = a.type == PipelineAction::kForward ? times.forward : times.backward;
        TimedAction timed{a, ready, ready + length};
        (a.type == PipelineAction::kForward ? f_end : b_end)[rank][a.microbatch] = timed.end;
        rank_free[rank] = timed.end;
        timeline.ranks[rank].actions.push_back(timed);
        ++next[rank];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) throw std::logic_error("schedule deadlocks: an action waits on itself");
  }
  timeline.iteration = *std::max_element(rank_free.begin(), rank_free.end());
  double idle_total = 0;
  for (int rank = 0; rank < stages; ++rank) {
    RankTimeline& r = timeline.ranks[rank];
    r.rank = rank;
    int first_backward = -1;
    for (size_t i = 0; i < r.actions.size(); ++i) {
      r.busy += r.actions[i].end - r.actions[i].start;
      if (first_backward < 0 && r.actions[i].action.type == PipelineAction::kBackward)
        first_backward = static_cast<int>(i);
    }
    auto add_idle = [&](double start, double end, BubbleType type) {
      if (end - start < min_idle) return;
      r.idle.push_back({static_cast<int>(r.idle.size()), start, end - start, type});
    };
    add_idle(0, r.actions.front().start, BubbleType::kFill);
    for (size_t i = 1; i < r.actions.size(); ++i) {
      BubbleType type = static_cast<int>(i) == first_backward ? BubbleType::kWarmupWait
                                                              : BubbleType::kSteady;
      add_idle(r.actions[i - 1].end, r.actions[i].start, type);
    }
    add_idle(r.actions.back().end, timeline.iteration, BubbleType::kDrain);
    idle_total += timeline.iteration - r.busy;
  }
  timeline.bubble_fraction = idle_total / (stages * timeline.iteration);
  return timeline;
}

double ClosedFormBubbleFraction(int stages, int microbatches) {
  return static_cast<double>(stages - 1) / (microbatches + stages - 1);
}

}  // namespace freeride
