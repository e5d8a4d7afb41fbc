// How the simulator serves one gap of one lane: the armed task first, then
// the dispatcher's grants, by the decisions of policy/bubble_serving.h, on a
// simulated clock.  ClusterRun serves every gap of a simulated job with it,
// and the differential test (tests/serving_differential_test.cc) serves a
// trace with it that the daemon's Lane serves too, to compare the two.
//
// Pure: no threads, no clock; not thread-safe (one lane per call).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "policy/bubble_predictor.h"
#include "policy/dispatch_policy.h"
#include "policy/step_estimator.h"

namespace freeride::sim {

// A task on a simulated lane, with what the lane learns of it.
struct GapTask {
  int priority = 0;
  uint64_t memory_bytes = 0;
  StepEstimator estimator;
  // Held over its overrun budget for the whole run.  The simulator keeps no
  // overrun budget of its own; the differential test sets this to serve a
  // demoted task as the daemon does.
  bool demoted = false;
};

// What a lane keeps between gaps.
struct GapLane {
  BubblePredictor predictor;
  std::vector<GapTask> tasks;
};

// One step a task ran.
struct GapStep {
  size_t task = 0;     // index into GapLane::tasks
  double start = 0, end = 0;  // simulated ns
};

struct Gap {
  uint32_t slot = 0;
  double begin = 0, end = 0;   // simulated ns
  double dispatch_latency = 0; // from the begin mark to the first decision
  uint64_t free_memory_bytes = UINT64_MAX;
};

// The length (simulated ns, as run) of task `task`'s next step.
using NextStepLength = std::function<double(size_t task)>;

// Serves `gap` on `lane`: chooses and runs steps (each reported to
// `stepped`, whose end may pass the gap's), then has the predictor learn
// the gap's length and ages the estimates of tasks that ran no step.
// Returns the end of the last step (the gap's begin when none ran).
// `scratch` is the caller's, reused across calls to save an allocation per
// gap (one per simulating thread).
double ServeGap(const DispatchPolicy& policy, GapLane& lane, const Gap& gap,
                const NextStepLength& next_length,
                const std::function<void(const GapStep&)>& stepped,
                std::vector<DispatchCandidate>* scratch);

}  // namespace freeride::sim
