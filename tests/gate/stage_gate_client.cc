// The training stage's side of the gate, against the fake driver: opens
// lane argv[2] of the daemon at socket argv[1] and writes the gate as a
// stage does whose GPU drains in the middle of a bubble (open on the stream,
// close from the host), then at its begin (open from the host, close on the
// stream).
// Prints each call's result and the gate word after it.  The test made the
// lane's gate page, as a daemon does.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/paths.h"
#include "freeride/freeride.h"
#include "gate/gate_page.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::printf("usage: stage_gate_client SOCKET LANE\n");
    return 2;
  }
  freeride_stage* stage = freeride_stage_open(std::atoi(argv[2]), argv[1]);
  if (!stage) return 2;
  freeride::GatePage page;
  std::string error;
  if (!page.Open(freeride::LaneSegmentPath(argv[1], std::atoi(argv[2])) + "-gate", &error)) {
    std::printf("%s\n", error.c_str());
    return 2;
  }
  void* stream = reinterpret_cast<void*>(0x1000);
  auto show = [&](const char* call, int result) {
    std::printf("%s %d word %u\n", call, result, page.layout()->word.load());
  };
  show("close_now", freeride_gate_close_now(stage));  // nothing opened yet: no gate written
  show("open_on_stream", freeride_gate_open_on_stream(stage, stream));
  show("close_now", freeride_gate_close_now(stage));
  show("open_now", freeride_gate_open_now(stage));
  show("close_on_stream", freeride_gate_close_on_stream(stage, stream));
  freeride_stage_close(stage);
  show("open_now after close", freeride_gate_open_now(nullptr));
  return 0;
}
