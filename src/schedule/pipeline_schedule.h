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

enum class ScheduleKind { kGPipe, k1F1B };

// Parses "gpipe" / "1f1b"; sets *error (naming the supported kinds) otherwise.
std::optional<ScheduleKind> ParseScheduleKind(const std::string& name, std::string* error);
const char* ScheduleKindName(ScheduleKind kind);

struct PipelineAction {
  enum Type { kForward, kBackward } type;
  int microbatch;
  std::string Label() const;  // "F2", "B0": the names torch's pipeline_order prints
};

// Each rank's action order, as torch.distributed.pipelining builds it
// (Schedule1F1B: min(M, P - rank) warm-up forwards, then backward/forward
// pairs, then the remaining backwards; ScheduleGPipe: all forwards, then all
// backwards).  Requires stages >= 1 and microbatches >= 1.
std::vector<std::vector<PipelineAction>> BuildActionOrder(ScheduleKind kind, int stages,
                                                          int microbatches);

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

struct StageTimes {
  double forward = 1.0;
  double backward = 2.0;   // input and weight gradients together
  double p2p_latency = 0;  // added between dependent actions on different ranks
};

struct ScheduleTimeline {
  std::vector<RankTimeline> ranks;
  double iteration = 0;       // makespan
  double bubble_fraction = 0; // idle time / (ranks x iteration)
};

// Times the schedule: an action starts when its rank is free and its input
// (the previous stage's forward, the next stage's backward) has arrived.
// Idle periods shorter than min_idle are not reported as slots.
ScheduleTimeline TimeSchedule(ScheduleKind kind, int stages, int microbatches,
                              const StageTimes& times, double min_idle = 1e-9);

// (P - 1) / (M + P - 1): the bubble fraction of GPipe and 1F1B.
double ClosedFormBubbleFraction(int stages, int microbatches);

}  // namespace freeride
