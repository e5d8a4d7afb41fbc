// The training stage's side of the gate, against the fake driver (whose
// stream write stores the value at once): opens lane argv[2] of the daemon
// at socket argv[1], opens and closes the gate on a stream for two bubbles,
// and prints each call's result and the gate word after it, then the pid the
// page names as its stage.  The test made the lane's gate page, as a daemon
// does.  With a third argument "gated", it marks three bubbles (slots 7, 8
// and 9, the last left open) with the gated marks instead, and closes the
// stage.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/paths.h"
#include "freeride/freeride.h"
#include "gate/gate_page.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::printf("usage: stage_gate_client SOCKET LANE [gated]\n");
    return 2;
  }
  freeride_stage* stage = freeride_stage_open(std::atoi(argv[2]), argv[1]);
  if (!stage) return 2;
  void* stream = reinterpret_cast<void*>(0x1000);
  if (argc == 4) {
    // The default stream (NULL), as a trainer on torch's default stream passes it.
    std::printf("end_gated before any begin %d\n", freeride_bubble_end_gated(stage, nullptr));
    for (uint32_t slot = 7; slot <= 9; ++slot) {
      std::printf("begin_gated %d\n", freeride_bubble_begin_gated(stage, nullptr, slot, 0, 1000 + slot));
      if (slot < 9) std::printf("end_gated %d\n", freeride_bubble_end_gated(stage, nullptr));
    }
    freeride_stage_close(stage);
    return 0;
  }
  freeride::GatePage page;
  std::string error;
  if (!page.Open(freeride::LaneSegmentPath(argv[1], std::atoi(argv[2])) + "-gate", &error)) {
    std::printf("%s\n", error.c_str());
    return 2;
  }
  auto show = [&](const char* call, int result) {
    std::printf("%s %d word %u\n", call, result, page.layout()->word.load());
  };
  show("open_on_stream", freeride_gate_open_on_stream(stage, stream));
  show("close_on_stream", freeride_gate_close_on_stream(stage, stream));
  show("open_on_stream", freeride_gate_open_on_stream(stage, stream));
  show("close_on_stream", freeride_gate_close_on_stream(stage, stream));
  std::printf("stage_pid matches %d\n", page.layout()->stage_pid.load() == getpid());
  freeride_stage_close(stage);
  show("open_on_stream without a stage", freeride_gate_open_on_stream(nullptr, stream));
  return 0;
}
