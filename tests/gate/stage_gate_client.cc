// The training stage's side of the gate, against the fake driver (whose
// stream write stores the value at once): opens lane argv[2] of the daemon
// at socket argv[1], opens and closes the gate on a stream for two bubbles,
// and prints each call's result and the gate word after it, then the pid the
// page names as its stage.  The test made the lane's gate page, as a daemon
// does.  With a third argument "gated", it marks three bubbles (slots 7, 8
// and 9, the last left open) with the gated marks instead, and closes the
// stage; with "failing-close", a gated bubble whose close fails, a fork
// whose child closes its copy of the stage, and one more bubble; with
// "host-writes", gated bubbles on two streams that the fake driver reports
// done or busy, printing after each call how many gate writes went on a
// stream and from the host, then the driver's count of stream writes.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/paths.h"
#include "freeride/freeride.h"
#include "gate/gate_page.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::printf("usage: stage_gate_client SOCKET LANE [gated|failing-close|host-writes]\n");
    return 2;
  }
  freeride_stage* stage = freeride_stage_open(std::atoi(argv[2]), argv[1]);
  if (!stage) return 2;
  void* stream = reinterpret_cast<void*>(0x1000);
  if (argc == 4 && std::string(argv[3]) == "host-writes") {
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
    auto sym = [&](const char* name) { return cuda ? dlsym(cuda, name) : nullptr; };
    auto set_done = reinterpret_cast<void (*)(uintptr_t, int)>(sym("fake_cuda_set_stream_done"));
    auto set_capturing = reinterpret_cast<void (*)(unsigned)>(sym("fake_cuda_set_capturing"));
    auto capture_mode = reinterpret_cast<int (*)()>(sym("fake_cuda_capture_mode"));
    auto log = reinterpret_cast<const char* (*)()>(sym("fake_cuda_log"));
    if (!set_done || !set_capturing || !capture_mode || !log) return 2;
    void* a = reinterpret_cast<void*>(0x1000);
    void* b = reinterpret_cast<void*>(0x2000);
    auto show = [&](const char* call, int result) {
      uint64_t on_stream = 0, from_host = 0;
      freeride_stage_gate_writes(stage, &on_stream, &from_host);
      std::printf("%s %d stream %llu host %llu\n", call, result, static_cast<unsigned long long>(on_stream),
                  static_cast<unsigned long long>(from_host));
    };
    const bool two_streams = std::getenv("CLIENT_TWO_STREAMS") != nullptr;
    if (two_streams) {
      // A's write may be pending (the stage cannot ask a stream it was not
      // given: it may be gone), so B's close goes on B; from then on the
      // writes went on two streams, and every write is a stream write.
      show("begin a busy", freeride_bubble_begin_gated(stage, a, 1, 0, 1001));
      set_done(0x2000, 1);
      show("end b done, a's write pending", freeride_bubble_end_gated(stage, b));
      set_done(0x1000, 1);
      show("begin a done, two streams", freeride_bubble_begin_gated(stage, a, 2, 0, 1002));
      show("end a done, two streams", freeride_bubble_end_gated(stage, a));
    } else {
      set_done(0x1000, 1);
      show("begin a done", freeride_bubble_begin_gated(stage, a, 1, 0, 1001));
      show("end a done", freeride_bubble_end_gated(stage, a));
      set_done(0x1000, 0);
      show("begin a busy", freeride_bubble_begin_gated(stage, a, 2, 0, 1002));
      set_done(0x1000, 1);
      show("end a done, its write landed", freeride_bubble_end_gated(stage, a));
      freeride_stage_set_gate_writes(stage, FREERIDE_GATE_WRITE_MEMSET);
      set_done(0x1000, 0);
      show("begin a busy, memset", freeride_bubble_begin_gated(stage, a, 3, 0, 1003));
      set_done(0x1000, 1);
      show("end a done, memset", freeride_bubble_end_gated(stage, a));
      freeride_stage_set_gate_writes(stage, 7);  // not a mode: memset stays
      set_done(0x1000, 0);
      show("begin a busy, mode 7", freeride_bubble_begin_gated(stage, a, 4, 0, 1004));
      set_done(0x1000, 1);
      show("end a done, mode 7", freeride_bubble_end_gated(stage, a));
      freeride_stage_set_gate_writes(stage, FREERIDE_GATE_WRITE_STREAM);
      show("begin a done, stream writes", freeride_bubble_begin_gated(stage, a, 5, 0, 1005));
      show("end a done, stream writes", freeride_bubble_end_gated(stage, a));
      freeride_stage_set_gate_writes(stage, FREERIDE_GATE_WRITE_AUTO);
      // Being captured, the stream is not asked (a query would end the
      // capture), and the write goes into the graph, replayed later: the
      // writes are untracked from then on.
      set_capturing(0x1000);
      show("begin a capturing", freeride_bubble_begin_gated(stage, a, 6, 0, 1006));
      set_capturing(0);
      show("end a done, after a capture", freeride_bubble_end_gated(stage, a));
    }
    auto count = [&](const char* what) {
      int n = 0;
      for (const char* p = log(); (p = std::strstr(p, what)) != nullptr; ++p) ++n;
      return n;
    };
    std::printf("driver stream writes %d memsets %d capture mode %d capturing queries %d\n", count("write "),
                count("memset "), capture_mode(), count("query of a capturing stream"));
    freeride_stage_close(stage);
    return 0;
  }
  if (argc == 4 && std::string(argv[3]) == "failing-close") {
    // A bubble whose close cannot be enqueued (the context broke), then a
    // fork: the child's handle must leave the parent's thread and lane alone.
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
    auto set_write = cuda ? reinterpret_cast<void (*)(int)>(dlsym(cuda, "fake_cuda_set_write_result")) : nullptr;
    if (!set_write) return 2;
    std::printf("begin_gated %d\n", freeride_bubble_begin_gated(stage, nullptr, 5, 0, 1005));
    set_write(700);  // cudaErrorIllegalAddress's driver code
    std::printf("end_gated %d\n", freeride_bubble_end_gated(stage, nullptr));
    set_write(0);
    // The stage's thread closes the gate the stream could not (a bound only
    // for a broken run).
    freeride::GatePage gate;
    std::string gate_error;
    if (!gate.Open(freeride::LaneSegmentPath(argv[1], std::atoi(argv[2])) + "-gate", &gate_error)) return 2;
    for (int i = 0; i < 60000 && gate.layout()->word.load() != freeride::GateClosedValue(1); ++i) usleep(1000);
    std::printf("gate closed %d\n", gate.layout()->word.load() == freeride::GateClosedValue(1));
    pid_t child = fork();
    if (child == 0) {
      int begin = freeride_bubble_begin_gated(stage, nullptr, 6, 0, 1006);
      freeride_stage_close(stage);
      _exit(begin == -1 ? 0 : 3);
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("child %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
    std::printf("begin_gated %d\n", freeride_bubble_begin_gated(stage, nullptr, 8, 0, 1008));
    std::printf("end_gated %d\n", freeride_bubble_end_gated(stage, nullptr));
    freeride_stage_close(stage);
    return 0;
  }
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
