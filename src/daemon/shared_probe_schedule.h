// The overhead probe's schedule, shared by every lane of the daemon, so that
// all of them withhold side work in the same windows: a withheld iteration
// is then free of every local lane's side work, not only its own.
#pragma once
#include <mutex>

#include "policy/overhead_probe.h"

namespace freeride {

class SharedProbeSchedule {
 public:
  explicit SharedProbeSchedule(ProbeConfig config) : config_(config) {}

  // The schedule in force; disabled until a lane has proposed one.  Any
  // thread.
  ProbeSchedule Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return schedule_;
  }
  // A lane that has seen the config's `warmup_iterations` iterations of typical
  // length `iteration` proposes a schedule for them.  The first proposal
  // wins: the lanes of one pipeline see the same iterations.  Returns the
  // schedule in force.  Any thread.
  ProbeSchedule Propose(Nanos iteration) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!schedule_.enabled()) schedule_ = ProbeSchedule::ForIteration(iteration, config_);
    return schedule_;
  }

 private:
  const ProbeConfig config_;
  mutable std::mutex mu_;
  ProbeSchedule schedule_;
};

}  // namespace freeride
