#include "schedule/pipeline_schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

#include "schedule/pipeline_timer.h"

namespace freeride {

namespace {

constexpr ScheduleKind kAllKinds[] = {
    ScheduleKind::kGPipe,     ScheduleKind::k1F1B,
    ScheduleKind::kInterleaved1F1B, ScheduleKind::kLoopedBFS,
    ScheduleKind::kInterleavedZeroBubble, ScheduleKind::kZeroBubbleV,
    ScheduleKind::kDualPipeV};

// torch's class name without "Schedule", lower case.
const char* TorchClassName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::k1F1B: return "1f1b";
    case ScheduleKind::kInterleaved1F1B: return "interleaved1f1b";
    case ScheduleKind::kLoopedBFS: return "loopedbfs";
    case ScheduleKind::kInterleavedZeroBubble: return "interleavedzerobubble";
    case ScheduleKind::kZeroBubbleV: return "zbvzerobubble";
    case ScheduleKind::kDualPipeV: return "dualpipev";
  }
  return "?";
}

}  // namespace

std::optional<ScheduleKind> ParseScheduleKind(const std::string& name, std::string* error) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.rfind("schedule", 0) == 0) lower = lower.substr(8);
  std::string supported;
  for (ScheduleKind kind : kAllKinds) {
    if (lower == ScheduleKindName(kind) || lower == TorchClassName(kind)) return kind;
    supported += std::string(supported.empty() ? "" : ", ") + ScheduleKindName(kind);
  }
  *error = "unknown schedule '" + name + "'; supported: " + supported +
           " (or torch's class name, e.g. ScheduleLoopedBFS)";
  return std::nullopt;
}

const char* ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::k1F1B: return "1f1b";
    case ScheduleKind::kInterleaved1F1B: return "interleaved";
    case ScheduleKind::kLoopedBFS: return "loopedbfs";
    case ScheduleKind::kInterleavedZeroBubble: return "interleavedzb";
    case ScheduleKind::kZeroBubbleV: return "zbv";
    case ScheduleKind::kDualPipeV: return "dualpipev";
  }
  return "?";
}

int DefaultVirtualStages(ScheduleKind kind) {
  return kind == ScheduleKind::kGPipe || kind == ScheduleKind::k1F1B ? 1 : 2;
}

int RankOfStage(ScheduleKind kind, int ranks, int stage) {
  if (kind == ScheduleKind::kZeroBubbleV || kind == ScheduleKind::kDualPipeV)
    // V shape: down the ranks, then back up
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
  // Every stage's every micro-batch is an action (three with split backwards), held in memory:
  // a shape past these is a typo, and it would otherwise overflow an int or exhaust memory.
  // Checked before the kinds' rules, whose arithmetic (2 * ranks) assumes a plannable shape.
  if (virtual_stages >= 1) {
    const int64_t stages = static_cast<int64_t>(ranks) * virtual_stages;  // exact, for the message
    if (stages > kMostScheduleStages)
      throw std::invalid_argument(std::to_string(stages) + " stages (" + std::to_string(ranks) + " ranks x " +
                                  std::to_string(virtual_stages) + " per rank) is more than the " +
                                  std::to_string(kMostScheduleStages) + " a schedule is planned for");
    if (stages * microbatches > kMostScheduleStageMicrobatches)
      throw std::invalid_argument(std::to_string(stages) + " stages x " + std::to_string(microbatches) +
                                  " micro-batches is more than the " +
                                  std::to_string(kMostScheduleStageMicrobatches) +
                                  " stage micro-batches a schedule is planned for");
  }
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::k1F1B:
      if (virtual_stages != 1)
        throw std::invalid_argument(std::string(ScheduleKindName(kind)) +
                                    " has one stage per rank; use interleaved for --virtual > 1");
      break;
    case ScheduleKind::kInterleaved1F1B:
    case ScheduleKind::kInterleavedZeroBubble: {
      if (virtual_stages < 1) throw std::invalid_argument("--virtual must be at least 1");
      int rounds = std::max(1, microbatches / ranks);
      if (microbatches % rounds != 0)
        throw std::invalid_argument(
            std::string(ScheduleKindName(kind)) +
            " needs the micro-batches to be a multiple of the rounds max(1, M / P) = " +
            std::to_string(rounds) + "; got M = " + std::to_string(microbatches));
      break;
    }
    case ScheduleKind::kLoopedBFS:
      if (virtual_stages < 1) throw std::invalid_argument("--virtual must be at least 1");
      break;
    case ScheduleKind::kZeroBubbleV:
    case ScheduleKind::kDualPipeV:
      if (virtual_stages != 2)
        throw std::invalid_argument(std::string(ScheduleKindName(kind)) +
                                    " runs exactly 2 stages per rank (--virtual 2)");
      if (kind == ScheduleKind::kDualPipeV && microbatches < 2 * ranks)
        throw std::invalid_argument("dualpipev needs at least as many micro-batches as stages (" +
                                    std::to_string(2 * ranks) + "); got M = " +
                                    std::to_string(microbatches));
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
// (V-1) rounds plus two actions per hop to the last rank.  With zero_bubble,
// interleaved zero bubble (ZB1P): one warm-up action per hop, input
// gradients in place of backwards, and each weight gradient deferred by
// `rank` steps (the oldest pending first), as torch's _get_1f1b_rank_ops.
void AppendInterleaved(int ranks, int rank, int microbatches, int virtual_stages, bool zero_bubble,
                       std::vector<Action>& out) {
  int rounds = std::max(1, microbatches / ranks);
  int per_round = microbatches / rounds;
  int total = microbatches * virtual_stages;
  int per_hop = zero_bubble ? 1 : 2;
  int warmup = std::min((virtual_stages - 1) * per_round + per_hop * (ranks - 1 - rank), total);
  int steady = total - warmup;
  auto forward_stage = [&](int step) {
    return (step / per_round) % virtual_stages * ranks + rank;
  };
  auto backward_stage = [&](int step) {
    return (virtual_stages - 1 - (step - warmup) / per_round % virtual_stages) * ranks + rank;
  };
  std::vector<int> next_forward(ranks * virtual_stages, 0), next_backward = next_forward,
                                                           next_weight = next_forward;
  std::vector<int> backward_steps;
  size_t weights_done = 0;
  auto add_weight = [&] {
    int s = backward_stage(backward_steps[weights_done++]);
    out.push_back({Action::kBackwardWeight, s, next_weight[s]++});
  };
  for (int step = 0; step < warmup + steady + warmup; ++step) {
    if (step < warmup + steady) {
      int s = forward_stage(step);
      out.push_back({Action::kForward, s, next_forward[s]++});
    }
    if (step >= warmup) {
      int s = backward_stage(step);
      out.push_back({zero_bubble ? Action::kBackwardInput : Action::kBackward, s, next_backward[s]++});
      backward_steps.push_back(step);
      if (zero_bubble && step - warmup >= rank) add_weight();
    }
  }
  while (zero_bubble && weights_done < backward_steps.size()) add_weight();
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

// Looped BFS (Lamy-Poirier): each local stage in turn runs the forwards of
// all micro-batches; then the stages in reverse run their backwards, the
// micro-batches in reverse too (as torch orders them).
void AppendLoopedBFS(int ranks, int rank, int microbatches, int virtual_stages,
                     std::vector<Action>& out) {
  for (int k = 0; k < virtual_stages; ++k)
    for (int m = 0; m < microbatches; ++m) out.push_back({Action::kForward, k * ranks + rank, m});
  for (int k = virtual_stages; k-- > 0;)
    for (int m = microbatches; m-- > 0;) out.push_back({Action::kBackward, k * ranks + rank, m});
}

// DualPipeV (DeepSeek's DualPipe on a V): stage `rank` down and 2P-1-rank
// up; after the warm-up, a forward of one stage paired with a backward of
// the other (torch runs the pair one after the other), then backwards that
// turn into split input and weight gradients half-way, torch's steps 1-8.
void AppendDualPipeV(int ranks, int rank, int microbatches, std::vector<Action>& out) {
  const int down = rank, up = 2 * ranks - 1 - rank;
  std::map<std::pair<int, Action::Type>, int> next;  // (stage, F/I/W) -> micro-batch
  std::deque<std::pair<int, int>> pending_weights;   // (stage, micro-batch)
  auto add = [&](int stage, Action::Type type) {
    Action::Type counter = type == Action::kBackward ? Action::kBackwardInput : type;
    int mb = next[{stage, counter}]++;
    out.push_back({type, stage, mb});
    if (type == Action::kBackward) ++next[{stage, Action::kBackwardWeight}];
    if (type == Action::kBackwardInput) pending_weights.push_back({stage, mb});
  };
  auto add_pending_weight = [&] {
    if (pending_weights.empty()) return;
    auto [stage, mb] = pending_weights.front();
    pending_weights.pop_front();
    out.push_back({Action::kBackwardWeight, stage, mb});
    ++next[{stage, Action::kBackwardWeight}];
  };
  auto forward_and_backward = [&](int forward_stage, int backward_stage, bool overlapped = true) {
    add(forward_stage, Action::kForward);
    out.back().paired = overlapped;
    add(backward_stage, Action::kBackward);
  };
  for (int i = 0; i < 2 * (ranks - rank - 1); ++i) add(down, Action::kForward);
  for (int i = 0; i < rank + 1; ++i) {
    add(down, Action::kForward);
    add(up, Action::kForward);
  }
  for (int i = 0; i < ranks - rank - 1; ++i) {
    add(up, Action::kBackwardInput);
    add_pending_weight();
    add(up, Action::kForward);
  }
  for (int i = 0; i < microbatches - 2 * ranks + rank + 1; ++i) {
    forward_and_backward(down, up, /*overlapped=*/i > 0 || rank < ranks - 1);
    forward_and_backward(up, down);
  }
  for (int i = 0; i < ranks - rank - 1; ++i) {
    add(up, Action::kBackward);
    forward_and_backward(up, down);
  }
  const int tail = rank + 1;
  bool split = false;
  for (int i = 0; i < tail; ++i) {
    if (i == tail / 2 && rank % 2 == 1) split = true;
    add(up, split ? Action::kBackwardInput : Action::kBackward);
    if (i == tail / 2 && rank % 2 == 0) split = true;
    add(down, split ? Action::kBackwardInput : Action::kBackward);
  }
  for (int i = 0; i < ranks - rank - 1; ++i) {
    add_pending_weight();
    add(down, split ? Action::kBackwardInput : Action::kBackward);
  }
  for (int i = 0; i < rank + 1; ++i) add_pending_weight();
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
        AppendInterleaved(ranks, rank, microbatches, virtual_stages, /*zero_bubble=*/false, actions);
        break;
      case ScheduleKind::kLoopedBFS:
        AppendLoopedBFS(ranks, rank, microbatches, virtual_stages, actions);
        break;
      case ScheduleKind::kInterleavedZeroBubble:
        AppendInterleaved(ranks, rank, microbatches, virtual_stages, /*zero_bubble=*/true, actions);
        break;
      case ScheduleKind::kZeroBubbleV:
        AppendZeroBubbleV(ranks, rank, microbatches, actions);
        break;
      case ScheduleKind::kDualPipeV:
        AppendDualPipeV(ranks, rank, microbatches, actions);
        break;
    }
  }
  return order;
}

double StageTimes::ActionTime(const PipelineAction& a) const {
  switch (a.type) {
    case Action::kForward: return forward;
    case Action::kBackward: return backward;
    case Action::kBackwardInput: return InputTimeOf(a.stage);
    case Action::kBackwardWeight: return WeightTimeOf(a.stage);
  }
  return 0;
}

namespace {

// Fixed action times; each finished action is appended to `ranks` (one
// iteration's timeline per rank).
struct FixedTimes {
  const StageTimes& times;
  const PipelineTimer& timer;
  std::vector<RankTimeline>& ranks;
  double Duration(int, int, const PipelineAction& a) const { return times.ActionTime(a); }
  double Start(int, int, double, double ready) const { return ready; }
  void Done(int rank, int index, double start, double end) {
    ranks[rank].actions.push_back({timer.order()[rank][index], start, end});
  }
};

// Fills r.busy and r.idle from r.actions, for the rank's window [from, to):
// the gap before the first action is the fill, the one after the last the
// drain, the one before the first backward the wait after the warm-up.
void FindIdle(RankTimeline& r, double from, double to, double min_idle) {
  int first_backward = -1;
  r.busy = 0;
  for (size_t i = 0; i < r.actions.size(); ++i) {
    r.busy += r.actions[i].end - r.actions[i].start;
    if (first_backward < 0 && r.actions[i].action.IsBackwardStart())
      first_backward = static_cast<int>(i);
  }
  auto add_idle = [&](double start, double end, BubbleType type) {
    if (end - start < min_idle) return;
    r.idle.push_back({static_cast<int>(r.idle.size()), start, end - start, type});
  };
  add_idle(from, r.actions.front().start, BubbleType::kFill);
  for (size_t i = 1; i < r.actions.size(); ++i) {
    BubbleType type = static_cast<int>(i) == first_backward ? BubbleType::kWarmupWait
                                                            : BubbleType::kSteady;
    add_idle(r.actions[i - 1].end, r.actions[i].start, type);
  }
  add_idle(r.actions.back().end, to, BubbleType::kDrain);
}

}  // namespace

ScheduleTimeline TimeSchedule(ScheduleKind kind, int ranks, int microbatches,
                              const StageTimes& times, double min_idle, int virtual_stages) {
  PipelineTimer timer(kind, ranks, microbatches, virtual_stages);
  ScheduleTimeline timeline;
  timeline.ranks.resize(ranks);
  FixedTimes hooks{times, timer, timeline.ranks};
  std::vector<double> rank_start(ranks, 0), rank_free(ranks, 0);
  timer.Run(rank_start.data(), times.p2p_latency, hooks, rank_free.data());
  timeline.iteration = *std::max_element(rank_free.begin(), rank_free.end());
  double idle_total = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    RankTimeline& r = timeline.ranks[rank];
    r.rank = rank;
    FindIdle(r, 0, timeline.iteration, min_idle);
    idle_total += timeline.iteration - r.busy;
  }
  timeline.bubble_fraction = idle_total / (ranks * timeline.iteration);
  return timeline;
}

ScheduleTimeline TimeSteadyState(ScheduleKind kind, int ranks, int microbatches,
                                 const StageTimes& times, double min_idle, int virtual_stages) {
  PipelineTimer timer(kind, ranks, microbatches, virtual_stages);
  std::vector<double> start(ranks, 0), end(ranks, 0);
  std::vector<RankTimeline> now;
  // With fixed times the timeline turns periodic once the start-up has
  // passed through the pipeline: a few iterations per rank at most.
  const int kMaxIterations = 8 * ranks * virtual_stages + 16;
  std::vector<double> period(ranks, 0), last_period(ranks, -1);
  for (int i = 0; i < kMaxIterations; ++i) {
    now.assign(ranks, RankTimeline{});
    FixedTimes hooks{times, timer, now};
    timer.Run(start.data(), times.p2p_latency, hooks, end.data());
    last_period = period;
    for (int r = 0; r < ranks; ++r) period[r] = end[r] - start[r];
    bool repeats = i > 0;
    for (int r = 0; r < ranks && repeats; ++r)
      repeats = std::abs(period[r] - last_period[r]) <= 1e-9 * period[r];
    if (repeats) break;
    if (i + 1 < kMaxIterations) start = end;
  }
  ScheduleTimeline timeline;
  timeline.ranks = std::move(now);
  timeline.iteration = *std::max_element(period.begin(), period.end());
  double idle_total = 0;
  for (int rank = 0; rank < ranks; ++rank) {
    RankTimeline& r = timeline.ranks[rank];
    r.rank = rank;
    // This iteration began where the rank's previous one ended: before the
    // last Run, `start` held those ends.
    double from = start[rank];
    for (TimedAction& a : r.actions) a.start -= from, a.end -= from;
    FindIdle(r, 0, end[rank] - from, min_idle);
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
