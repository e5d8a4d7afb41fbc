// A model of pipeline-parallel schedules: each rank's order of forward and
// backward actions, their timing under given stage times, and the idle
// slots (bubbles) that result.  The source of bubble slots for the runtime's
// per-slot learning and for the simulator.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace freeride {

// Every schedule torch.distributed.pipelining offers (torch 2.13):
// ScheduleGPipe, Schedule1F1B; with V stages per rank on a looped placement
// (stage s on rank s mod P) ScheduleInterleaved1F1B, ScheduleLoopedBFS and
// ScheduleInterleavedZeroBubble; with 2 stages per rank on a V-shaped
// placement ScheduleZBVZeroBubble and ScheduleDualPipeV.  The zero-bubble
// ones split some backwards into input (I) and weight (W) gradients.
enum class ScheduleKind {
  kGPipe,
  k1F1B,
  kInterleaved1F1B,
  kLoopedBFS,
  kInterleavedZeroBubble,
  kZeroBubbleV,
  kDualPipeV,
};

// Parses "gpipe" / "1f1b" / "interleaved" / "loopedbfs" / "interleavedzb" /
// "zbv" / "dualpipev", or torch's class name ("ScheduleLoopedBFS", with or
// without "Schedule", any case); sets *error (naming the supported kinds)
// otherwise.
std::optional<ScheduleKind> ParseScheduleKind(const std::string& name, std::string* error);
const char* ScheduleKindName(ScheduleKind kind);

// Stages per rank when the user gives none: 1 for gpipe and 1f1b, else 2.
int DefaultVirtualStages(ScheduleKind kind);

// The rank that runs `stage` (of ranks x virtual_stages stages).
int RankOfStage(ScheduleKind kind, int ranks, int stage);

struct PipelineAction {
  enum Type { kForward, kBackward, kBackwardInput, kBackwardWeight } type;
  int stage;  // global stage index; equals the rank without virtual stages
  int microbatch;
  // DualPipeV's overlapped pair (OVERLAP_F_B): this action runs with the
  // next one as one, and torch sends the outputs of both when the pair ends.
  bool paired = false;
  bool IsBackwardStart() const { return type == kBackward || type == kBackwardInput; }
  std::string Label() const;  // "0F2", "7I0": as torch's pipeline_order prints them
};

// Each rank's action order, as torch.distributed.pipelining builds its
// pipeline_order, idle (None) steps left out.  Schedule1F1B: min(M, P-rank)
// warm-up forwards, then backward/forward pairs, then the remaining
// backwards; ScheduleGPipe: all forwards, then all backwards; the others
// follow torch's per-rank construction (DualPipeV's overlapped forward and
// backward pairs run one after the other, as torch runs them).  Throws
// std::invalid_argument with a plain message for shapes torch refuses
// (ranks or micro-batches < 1, virtual stages other than 1 for gpipe/1f1b
// or 2 for zbv/dualpipev, interleaved micro-batches not a multiple of the
// rounds max(1, M / P), dualpipev with fewer micro-batches than stages), and
// for shapes too large to plan (more than kMostScheduleStages stages, or more
// than kMostScheduleStageMicrobatches stages x micro-batches).
inline constexpr int64_t kMostScheduleStages = 65'536;
inline constexpr int64_t kMostScheduleStageMicrobatches = 4'000'000;

// The model's stages, ranks x virtual_stages, clamped at INT32_MAX rather than
// overflowed, so that a count can be held before BuildActionOrder refuses it
// (any count past kMostScheduleStages).  Pure.
inline int ModelStageCount(int ranks, int virtual_stages) {
  const int64_t stages = static_cast<int64_t>(ranks) * virtual_stages;
  return stages > INT32_MAX ? INT32_MAX : static_cast<int>(stages);
}
std::vector<std::vector<PipelineAction>> BuildActionOrder(ScheduleKind kind, int ranks,
                                                          int microbatches,
                                                          int virtual_stages = 1);

// Why a rank is idle, with the FreeRide prototype's letter for it.
enum class BubbleType {
  kFill,       // A: before the rank's first action
  kWarmupWait, // B: after the warm-up forwards, waiting for the first gradient
  kSteady,     // D: a gap between actions in the steady state
  kDrain,      // C: after the rank's last action, until the iteration ends
};
const char* BubbleTypeName(BubbleType type);   // "fill", "warmup_wait", ...
char BubbleTypeLetter(BubbleType type);        // 'A', 'B', 'D', 'C'

struct TimedAction {
  PipelineAction action;
  double start = 0, end = 0;
};

struct IdleSlot {
  int slot = 0;       // index of the idle period within the rank's iteration
  double start = 0, duration = 0;
  BubbleType type = BubbleType::kSteady;
};

struct RankTimeline {
  int rank = 0;
  std::vector<TimedAction> actions;
  std::vector<IdleSlot> idle;
  double busy = 0;
};

// Times of one action on one stage (with V stages per rank, a stage holds
// 1/V of the rank's layers).
struct StageTimes {
  double forward = 1.0;
  double backward = 2.0;   // input and weight gradients together
  double p2p_latency = 0;  // added between dependent actions on different ranks
  double weight = -1;      // the weight-gradient part of backward; < 0: half
  double WeightTime() const { return weight >= 0 ? weight : backward / 2; }
  double InputTime() const { return backward - WeightTime(); }
  // The split of `stage`'s backward as torch runs it: the first stage's
  // input is the data, which needs no gradient, so torch computes no input
  // gradient there (I is empty) and its weight gradient is the whole
  // backward.
  double InputTimeOf(int stage) const { return stage == 0 ? 0 : InputTime(); }
  double WeightTimeOf(int stage) const { return stage == 0 ? backward : WeightTime(); }
  double ActionTime(const PipelineAction& a) const;
};

// Parses "F,B" or "F,B,W" (forward, backward and its weight-gradient part;
// schedules without a split backward run W inside B, so B + W becomes the
// backward).  Sets *error and returns false for anything else.
bool ParseStageTimes(const std::string& text, StageTimes* times, std::string* error);

struct ScheduleTimeline {
  std::vector<RankTimeline> ranks;
  double iteration = 0;       // makespan
  double bubble_fraction = 0; // idle time / (ranks x iteration)
};

// Times one iteration of the schedule on its own, every rank starting at 0:
// an action starts when its rank is free and its input (the previous
// stage's forward, the next stage's backward, the same stage's input
// gradient for W) has arrived.  Idle periods shorter than min_idle are not
// reported as slots.  Throws as BuildActionOrder does.
ScheduleTimeline TimeSchedule(ScheduleKind kind, int ranks, int microbatches,
                              const StageTimes& times, double min_idle = 1e-9,
                              int virtual_stages = 1);

// Times a training loop's steady state, what a profiler sees: iterations
// back to back, each rank starting its next iteration as soon as its own
// last action ends (torch's schedules have no barrier between steps), until
// the timeline repeats.  Each rank's times are from its own iteration start
// (its previous iteration's end); the wait for the next iteration's first
// input, which joins the previous drain, is its fill, and there is no
// drain.  `iteration` is the period.  Where one iteration's tail overlaps
// the next one's start (ZB-V, whose first rank ends early), the bubbles of
// TimeSchedule shrink or vanish here.
ScheduleTimeline TimeSteadyState(ScheduleKind kind, int ranks, int microbatches,
                                 const StageTimes& times, double min_idle = 1e-9,
                                 int virtual_stages = 1);

// (P - 1) / (M + P - 1): the bubble fraction of GPipe and 1F1B.
double ClosedFormBubbleFraction(int stages, int microbatches);

}  // namespace freeride
