// The Kineto trace reader and bubble analysis on arbitrary bytes (plain or
// gzip JSON).  Bad traces must end in an exception with a message, never a
// crash, a hang or unbounded memory.
#include <exception>

#include "fuzz_input.h"
#include "profile/bubble_profile.h"
#include "profile/kineto_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  freeride::fuzz::MemoryFile file(data, size);
  try {
    freeride::profile::KinetoTrace trace = freeride::profile::LoadKinetoTrace(file.path());
    freeride::profile::AnalyzeRank(trace, 0, {});
  } catch (const std::exception&) {
    // A clear error is the expected outcome for most inputs.
  }
  return 0;
}
