// Per-stage times for the simulator from a file: either a stage-times config
// or the JSON of `freeride profile --json` (a measured run).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "schedule/pipeline_schedule.h"

namespace freeride::sim {

struct StageTimesFile {
  std::vector<StageTimes> stages;  // milliseconds, per model stage
  double p2p_ms = -1;              // < 0: the file does not say
  int ranks = 0;                   // pipeline ranks the file describes
  std::string source;              // "config" or "profile"
  std::string note;                // how the times were derived, for the user
};

// Reads `path`.  A config is {"stages": [{"forward_ms": F, "backward_ms": B,
// "weight_ms": W (optional)}, ...], "p2p_ms": L (optional)}.  A profile
// (`freeride profile --json`) gives each rank's median busy time per
// iteration (or its iteration time and bubbles, busy being the rest); with M micro-batches each rank did M forwards and M backwards
// in it, so forward = busy / (M (1 + backward_ratio)) and backward =
// backward_ratio x forward (the optimizer step is folded into them).
// Returns nullopt with an *error naming the file and the problem otherwise;
// `freeride schedule --json` output (which has "stages" and "ranks" of
// another meaning) is refused as such, with the flags that simulate it.
std::optional<StageTimesFile> ReadStageTimesFile(const std::string& path, int microbatches,
                                                 double backward_ratio, std::string* error);

}  // namespace freeride::sim
