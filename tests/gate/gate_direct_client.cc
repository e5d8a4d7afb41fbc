// A program linked against the driver (the fake libcuda.so.1) that calls
// its entry points by name, as one built with -lcuda does (or a library of
// the program, beside a CUDA runtime that looks its entry points up): with
// libfreeride_gate.so preloaded, each call by name binds at load time to the
// interposer's export of that name.
// argv[1] names the scenario; the driver's log goes to stdout, then
// "result <code>" of each call made.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "gate_word.h"

using CuResult = int;
using GetProc = CuResult (*)(const char*, void**, int, uint64_t, int*);
using Launch = CuResult (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                            void**, void**);
extern "C" {
CuResult cuStreamSynchronize(void* stream);
CuResult cuStreamSynchronize_ptsz(void* stream);
CuResult cuEventRecord(void* event, void* stream);
CuResult cuCtxSynchronize();
// Entry points the gate does not cover, as cuda.h names them (cuStreamBatchMemOp,
// cuMemcpyHtoA): the driver's _v2 forms.
CuResult cuStreamBatchMemOp_v2(void* stream, unsigned count, void* params, unsigned flags);
CuResult cuMemcpyHtoA_v2(void* array, size_t offset, const void* src, size_t n);
// The fake driver's own.
const char* fake_cuda_log();
void fake_cuda_note(const char* line);
}

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  std::string results;
  auto note = [&](CuResult r) { results += "result " + std::to_string(r) + "\n"; };
  void* const stream = reinterpret_cast<void*>(0x1000);
  void* const event = reinterpret_cast<void*>(0xe0001);  // the fake logs its records
  if (scenario == "ordered") {
    // Without launch ahead: each ordered call reaches the driver as made,
    // its arguments and result intact (stream 0xbad fails there).
    note(cuStreamSynchronize(stream));
    note(cuStreamSynchronize(reinterpret_cast<void*>(0xbad)));
    note(cuEventRecord(event, stream));
    note(cuStreamSynchronize_ptsz(stream));
    note(cuCtxSynchronize());
  } else if (scenario == "probe") {
    // dlsym(RTLD_DEFAULT) for names the driver has and names it lacks.
    for (const char* name : {"cuStreamSynchronize", "cuCtxSynchronize", "cuStreamBatchMemOp_v2",
                             "cuCtxSynchronize_v2", "cuGraphExecNodeSetParams", "cuLaunchGrid"})
      std::printf("%s %s\n", name, dlsym(RTLD_DEFAULT, name) ? "found" : "absent");
  } else if (scenario == "uncovered") {
    // Work the gate does not cover, called by name: refused under the gate,
    // never run by the driver outside the bubbles.
    note(cuStreamBatchMemOp_v2(stream, 0, nullptr, 0));
    const char bytes[16] = {};
    note(cuMemcpyHtoA_v2(reinterpret_cast<void*>(0xa1), 0, bytes, sizeof bytes));
  } else if (scenario == "ahead") {
    // Under launch ahead (FREERIDE_GATE_AHEAD): the program's runtime looks
    // its launch up (dlsym on the driver, then cuGetProcAddress), and that
    // launch, made while the gate is shut, is queued; a library of the
    // program linked against libcuda then makes an ordered call by name,
    // which must reach the driver only after that launch (the gate opens
    // 200 ms later, from another thread).  The driver's own exports of the
    // launches are never queued: each is submitted on the caller's thread.
    std::atomic<uint32_t>* word = MapGateWord();
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    auto get_proc = reinterpret_cast<GetProc>(cuda ? dlsym(cuda, "cuGetProcAddress_v2") : nullptr);
    Launch launch[2] = {};
    int status = 0;
    for (uint64_t per_thread : {0, 1})
      if (!get_proc || get_proc("cuLaunchKernel", reinterpret_cast<void**>(&launch[per_thread]), 12000,
                                per_thread ? 2 : 1, &status) != 0) {
        std::printf("no cuLaunchKernel\n");
        return 2;
      }
    void* const kernel = reinterpret_cast<void*>(0xf1);  // the fake logs its arguments
    int round = 0;
    long long zero = 0;
    void* params[] = {&round, &zero};
    note(launch[0](kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));  // arms the gate
    note(cuStreamSynchronize(stream));
    const std::function<CuResult()> ordered[] = {
        [&] { return cuStreamSynchronize(stream); },
        [&] { return cuEventRecord(event, stream); },
        [&] { return cuStreamSynchronize_ptsz(stream); },  // the weak per-thread export
        [&] { return cuCtxSynchronize(); },                // legacy and per-thread names the same
    };
    for (const auto& call : ordered) {
      ++round;
      word->store(2);  // bubble 1 closed
      note(launch[round == 3](kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
      fake_cuda_note(("queued " + std::to_string(round)).c_str());
      std::thread opener([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        fake_cuda_note(("gate opening " + std::to_string(round)).c_str());
        word->store(3);  // bubble 1 open again
      });
      note(call());
      fake_cuda_note(("returned " + std::to_string(round)).c_str());
      opener.join();
    }
  } else {
    std::printf("unknown scenario\n");
    return 2;
  }
  std::printf("%s%s", fake_cuda_log(), results.c_str());
  return 0;
}
