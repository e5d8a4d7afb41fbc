#include "sim/serve_gap.h"

#include <algorithm>

#include "policy/admission.h"
#include "policy/bubble_serving.h"

namespace freeride::sim {

double ServeGap(const DispatchPolicy& policy, GapLane& lane, const Gap& gap,
                const NextStepLength& next_length,
                const std::function<void(const GapStep&)>& stepped,
                std::vector<DispatchCandidate>* scratch) {
  const double begin = gap.begin, end = gap.end;
  const Nanos predicted = lane.predictor.Predict(gap.slot, 0);
  const SecondLook second_look = lane.predictor.SecondLookFor(gap.slot);
  uint64_t stepped_tasks = 0;
  double now = begin + gap.dispatch_latency;
  double last_step_end = begin;  // only a step, not the dispatch latency, can delay the trainer
  // The simulated lane has no probe or guard: side work is always admitted.
  const AdmissionGate open_gate;
  // A granted task steps while its next step fits `deadline`.
  auto run_steps = [&](size_t chosen, double deadline) {
    GapTask& task = lane.tasks[chosen];
    while (now < end && policy.StepFits(static_cast<Nanos>(now), static_cast<Nanos>(deadline),
                                        task.estimator.Estimate())) {
      const double length = next_length(chosen);
      task.estimator.Observe(static_cast<Nanos>(length));
      stepped({chosen, now, now + length});
      stepped_tasks |= uint64_t{1} << chosen;
      now = last_step_end = now + length;
    }
  };
  // Candidates are known by their index on the lane plus one: 0 is "none".
  std::vector<DispatchCandidate>& candidates = *scratch;
  auto fill_candidates = [&](const std::vector<int64_t>& excluded) {
    candidates.clear();
    for (size_t i = 0; i < lane.tasks.size(); ++i) {
      const int64_t id = static_cast<int64_t>(i) + 1;
      if (std::find(excluded.begin(), excluded.end(), id) != excluded.end()) continue;
      const GapTask& task = lane.tasks[i];
      // No imperative tasks in the simulator: every task steps.
      DispatchCandidate& c = candidates.emplace_back();
      c.task_id = id;
      c.priority = task.priority;
      c.submit_order = i;
      c.memory_bytes = task.memory_bytes;
      c.step_estimate = task.estimator.Estimate();
      c.demoted = task.demoted;
    }
  };
  if (predicted > 0 || second_look.exists()) {
    const uint32_t seq = 1;  // any bubble: the open gate serves every one
    BubbleServing serving(policy, {seq, static_cast<Nanos>(begin),
                                   static_cast<Nanos>(begin) + predicted, second_look,
                                   gap.free_memory_bytes});
    fill_candidates({});
    if (const int64_t armed = ChooseArmed(policy, candidates, gap.free_memory_bytes)) {
      serving.Exclude(armed);
      const size_t chosen = static_cast<size_t>(armed - 1);
      const double deadline = static_cast<double>(serving.predicted_end());
      run_steps(chosen, deadline);
      const Nanos longer = ArmedSecondLook(
          policy, open_gate, seq, static_cast<Nanos>(begin), second_look, static_cast<Nanos>(now),
          static_cast<Nanos>(deadline), lane.tasks[chosen].estimator.Estimate(), 1.0);
      const double at = begin + static_cast<double>(second_look.after);
      if (longer > 0 && at < end) {
        now = std::max(now, at);
        run_steps(chosen, static_cast<double>(longer));
      }
    }
    while (now < end) {
      fill_candidates(serving.excluded());
      ServingAction action = serving.Next(static_cast<Nanos>(now), candidates, open_gate);
      if (action.kind == ServingActionKind::kWaitUntil) {
        if (static_cast<double>(action.until) >= end) break;
        now = std::max(now, static_cast<double>(action.until));
        continue;
      }
      if (action.kind != ServingActionKind::kGrant) break;
      run_steps(static_cast<size_t>(action.task_id - 1), static_cast<double>(action.until));
    }
  }
  lane.predictor.Observe(gap.slot, static_cast<Nanos>(end - begin));
  for (size_t i = 0; i < lane.tasks.size(); ++i)
    if (!(stepped_tasks >> i & 1)) lane.tasks[i].estimator.PassedOver(1);
  return last_step_end;
}

}  // namespace freeride::sim
