#include "schedule/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "schedule/pipeline_timer.h"

namespace freeride {

std::optional<ScheduleKind> ParseScheduleKind(const std::string& name, std::string* error) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  if (name == "interleaved") return ScheduleKind::kInterleaved1F1B;
  if (name == "zbv") return ScheduleKind::kZeroBubbleV;
  *error = "unknown schedule '" + name + "'; supported: gpipe, 1f1b, interleaved, zbv";
  return std::nullopt;
}

const char* ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::k1F1B: return "1f1b";
    case ScheduleKind::kInterleaved1F1B: return "interleaved";
    case ScheduleKind::kZeroBubbleV: return "zbv";
  }
  return "?";
}

int DefaultVirtualStages(ScheduleKind kind) {
  return kind == ScheduleKind::kInterleaved1F1B || kind == ScheduleKind::kZeroBubbleV ? 2 : 1;
}

int RankOfStage(ScheduleKind kind, int ranks, int stage) {
  if (kind == ScheduleKind::kZeroBubbleV)  // V shape: down the ranks, then back up
    return stage < ranks ? stage : 2 * ranks - 1 - stage;
  return stage % ranks;
}

std::string PipelineAction::Label() const {
  static constexpr char kLetters[] = {'F', 'B', 'I', 'W'};
  return std::to_string(stage) + kLetters[type] + std::to_string(microbatch);
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

namespace {

using Action = PipelineAction;

void CheckShape(ScheduleKind kind, int ranks, int microbatches, int virtual_stages) {
  if (ranks < 1 || microbatches < 1)
    throw std::invalid_argument("ranks (stages) and micro-batches must be at least 1");
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::k1F1B:
      if (virtual_stages != 1)
        throw std::invalid_argument(std::string(ScheduleKindName(kind)) +
                                    " has one stage per rank; use interleaved for --virtual > 1");
      break;
    case ScheduleKind::kInterleaved1F1B: {
      if (virtual_stages < 1) throw std::invalid_argument("--virtual must be at least 1");
      int rounds = std::max(1, microbatches / ranks);
      if (microbatches % rounds != 0)
        throw std::invalid_argument(
            "interleaved 1F1B needs the micro-batches to be a multiple of the rounds "
            "max(1, M / P) = " + std::to_string(rounds) + "; got M = " +
            std::to_string(microbatches));
      break;
    }
    case ScheduleKind::kZeroBubbleV:
      if (virtual_stages != 2)
        throw std::invalid_argument("zbv runs exactly 2 stages per rank (--virtual 2)");
      break;
  }
}

void AppendOneFOneB(int ranks, int rank, int microbatches, std::vector<Action>& out) {
  int warmup = std::min(microbatches, ranks - rank);
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward)
    out.push_back({Action::kForward, rank, next_forward});
  while (next_forward < microbatches) {
    out.push_back({Action::kBackward, rank, next_backward++});
    out.push_back({Action::kForward, rank, next_forward++});
  }
  while (next_backward < microbatches) out.push_back({Action::kBackward, rank, next_backward++});
}

// Interleaved 1F1B (Narayanan et al.), in torch's flexible form: micro-batches
// go through the rank's V stages in rounds of M / rounds; the warm-up is
// (V-1) rounds plus two actions per hop to the last rank.
void AppendInterleaved(int ranks, int rank, int microbatches, int virtual_stages,
                       std::vector<Action>& out) {
  int rounds = std::max(1, microbatches / ranks);
  int per_round = microbatches / rounds;
  int total = microbatches * virtual_stages;
  int warmup = std::min((virtual_stages - 1) * per_round + 2 * (ranks - 1 - rank), total);
  int steady = total - warmup;
  auto forward_stage = [&](int step) {
    return (step / per_round) % virtual_stages * ranks + rank;
  };
  auto backward_stage = [&](int step) {
    return (virtual_stages - 1 - (step - warmup) / per_round % virtual_stages) * ranks + rank;
  };
  std::vector<int> next_forward(ranks * virtual_stages, 0), next_backward = next_forward;
  for (int step = 0; step < warmup + steady + warmup; ++step) {
    if (step < warmup + steady) {
      int s = forward_stage(step);
      out.push_back({Action::kForward, s, next_forward[s]++});
    }
    if (step >= warmup) {
      int s = backward_stage(step);
      out.push_back({Action::kBackward, s, next_backward[s]++});
    }
  }
}

// ZB-V: stage `rank` on the way down and stage 2P-1-rank on the way up, with
// split backwards.  Like torch it plans for at least 2P-1 micro-batches and
// then drops the actions of those that do not exist.
void AppendZeroBubbleV(int ranks, int rank, int microbatches, std::vector<Action>& out) {
  int planned = std::max(2 * ranks - 1, microbatches);
  int down = rank, up = 2 * ranks - 1 - rank;
  int f_down = 0, f_up = 0, b_down = 0, b_up = 0;
  std::vector<Action> plan;
  auto add = [&](Action::Type type, int stage, int mb) { plan.push_back({type, stage, mb}); };
  for (int i = 0; i < 2 * (ranks - rank) - 1; ++i) add(Action::kForward, down, f_down++);
  for (int i = 0; i < rank; ++i) {
    add(Action::kForward, up, f_up++);
    add(Action::kForward, down, f_down++);
  }
  for (int i = 0; i < ranks - rank; ++i) {
    add(Action::kForward, up, f_up++);
    add(Action::kBackwardInput, up, b_up);
    add(Action::kBackwardWeight, up, b_up++);
  }
  while (f_up < f_down || f_down < planned) {
    if (f_down < planned) add(Action::kForward, down, f_down++);
    add(Action::kBackwardInput, down, b_down);
    add(Action::kBackwardWeight, down, b_down++);
    add(Action::kForward, up, f_up++);
    add(Action::kBackwardInput, up, b_up);
    add(Action::kBackwardWeight, up, b_up++);
  }
  int w_down = b_down, w_up = b_up;
  for (int i = 0; i < rank; ++i) {
    add(Action::kBackwardInput, down, b_down++);
    add(Action::kBackwardInput, up, b_up++);
  }
  for (int i = 0; i < ranks - rank; ++i) {
    add(Action::kBackwardInput, down, b_down++);
    add(Action::kBackwardWeight, down, w_down++);
  }
  while (w_up < b_up) add(Action::kBackwardWeight, up, w_up++);
  while (w_down < b_down) add(Action::kBackwardWeight, down, w_down++);
  for (const Action& a : plan)
    if (a.microbatch < microbatches) out.push_back(a);
}

}  // namespace

std::vector<std::vector<PipelineAction>> BuildActionOrder(ScheduleKind kind, int ranks,
                                                          int microbatches, int virtual_stages) {
  CheckShape(kind, ranks, microbatches, virtual_stages);
  std::vector<std::vector<PipelineAction>> order(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    auto& actions = order[rank];
    switch (kind) {
      case ScheduleKind::kGPipe:
        for (int m = 0; m < microbatches; ++m) actions.push_back({Action::kForward, rank, m});
        for (int m = 0; m < microbatches; ++m) actions.push_back({Action::kBackward, rank, m});
        break;
      case ScheduleKind::k1F1B:
        AppendOneFOneB(ranks, rank, microbatches, actions);
        break;
      case ScheduleKind::kInterleaved1F1B:
        AppendInterleaved(ranks, rank, microbatches, virtual_stages, actions);
        break;
      case ScheduleKind::kZeroBubbleV:
        AppendZeroBubbleV(ranks, rank, microbatches, actions);
        break;
    }
  }
  return order;
}

ScheduleTimeline TimeSchedule(ScheduleKind kind, int ranks, int microbatches,
                              const StageTimes& times, double min_idle, int virtual_stages) {
  PipelineTimer timer(kind, ranks, microbatches, virtual_stages);
  ScheduleTimeline timeline;
  timeline.ranks.resize(ranks);
  struct FixedTimes {
    const StageTimes& times;
    const PipelineTimer& timer;
    ScheduleTimeline& timeline;
    double Duration(int, int, const PipelineAction& a) const {
      switch (a.type) {
        case Action::kForward: return times.forward;
        case Action::kBackward: return times.backward;
        case Action::kBackwardInput: return times.InputTime();
        case Action::kBackwardWeight: return times.WeightTime();
      }
      return 0;
    }
    double Start(int, int, double, double ready) const { return ready; }
    void Done(int rank, int index, double start, double end) {
      timeline.ranks[rank].actions.push_back({timer.order()[rank][index], start, end});
    }
  } hooks{times, timer, timeline};
  std::vector<double> rank_start(ranks, 0), rank_free(ranks, 0);
  timer.Run(rank_start.data(), times.p2p_latency, hooks, rank_free.data());
  timeline.iteration = *std::max_element(rank_free.begin(), rank_free.end());
  double idle_total = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    RankTimeline& r = timeline.ranks[rank];
    r.rank = rank;
    int first_backward = -1;
    for (size_t i = 0; i < r.actions.size(); ++i) {
      r.busy += r.actions[i].end - r.actions[i].start;
      if (first_backward < 0 && r.actions[i].action.IsBackwardStart())
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
  timeline.bubble_fraction = idle_total / (ranks * timeline.iteration);
  return timeline;
}

bool ParseStageTimes(const std::string& text, StageTimes* times, std::string* error) {
  std::vector<double> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
      *error = "--times: '" + item + "' is not a non-negative number";
      return false;
    }
    values.push_back(v);
  }
  if (values.size() < 2 || values.size() > 3) {
    *error = "--times takes F,B or F,B,W (forward, backward, weight-gradient times)";
    return false;
  }
  times->forward = values[0];
  // Schedules without split backwards run the weight gradient inside backward.
  times->backward = values[1] + (values.size() == 3 ? values[2] : 0);
  if (values.size() == 3) times->weight = values[2];
  if (times->forward + times->backward <= 0) {
    *error = "--times: forward and backward cannot both be zero";
    return false;
  }
  return true;
}

double ClosedFormBubbleFraction(int stages, int microbatches) {
  return static_cast<double>(stages - 1) / (microbatches + stages - 1);
}

}  // namespace freeride
