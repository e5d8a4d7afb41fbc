// Everything a user types or submits about a task: sizes and durations,
// a TaskSpec as the control API receives it, a task profile, and the
// simulator's stage-time files.  The first byte picks the parser.
#include <exception>

#include "base/units.h"
#include "client/task_profile.h"
#include "daemon/task_spec.h"
#include "fuzz_input.h"
#include "sim/stage_times_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 5;
  ++data;
  --size;
  std::string error;
  switch (mode) {
    case 0:
      freeride::ParseBytes(freeride::fuzz::AsString(data, size), &error);
      break;
    case 1:
      freeride::ParseDuration(freeride::fuzz::AsString(data, size), &error);
      break;
    case 2: {
      freeride::v1::TaskSpec spec;
      if (!spec.ParseFromArray(data, static_cast<int>(size))) break;
      std::vector<freeride::LaneLimits> lanes = {{0, 8ull << 30}, {1, 0}};
      std::string resolved;
      freeride::ValidateSpec(spec, lanes, &resolved);
      break;
    }
    case 3: {
      freeride::fuzz::MemoryFile file(data, size);
      freeride::ReadTaskProfile(file.path(), &error);
      break;
    }
    case 4: {
      freeride::fuzz::MemoryFile file(data, size);
      freeride::sim::ReadStageTimesFile(file.path(), 4, 2.0, &error);
      break;
    }
  }
  return 0;
}
