// Drives the interposer the way a CUDA runtime does, against the fake
// driver: dlopen the driver, dlsym cuGetProcAddress_v2, look entry points
// up and call them.  argv[1] names the scenario; the driver's log goes to
// stdout, then "result <code>" of each call made.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gate_word.h"

using CuResult = int;
using GetProc = CuResult (*)(const char*, void**, int, uint64_t, int*);
using Launch = CuResult (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, void*, void**, void**);
using Graph = CuResult (*)(void*, void*);
using HtoD = CuResult (*)(unsigned long long, const void*, size_t);
using Sync = CuResult (*)();
using HtoDAsync = CuResult (*)(unsigned long long, const void*, size_t, void*);
using BatchV2 = CuResult (*)(unsigned long long*, unsigned long long*, size_t*, size_t, void*, size_t*, size_t, void*);
struct Location {
  int type, id;
};
using PrefetchV2 = CuResult (*)(unsigned long long, size_t, Location, unsigned, void*);
using PrefetchBatch = CuResult (*)(unsigned long long*, size_t*, size_t, Location*, size_t*, size_t,
                                   unsigned long long, void*);
struct InstantiateParams {
  uint64_t flags;
  void* upload_stream;
  void* error_node;
  int result;
};
using Instantiate = CuResult (*)(void**, void*, InstantiateParams*);
using Decompress = CuResult (*)(void*, size_t, unsigned, size_t*, void*);
using Memset2D = CuResult (*)(unsigned long long, size_t, unsigned char, size_t, size_t);
using BatchV1 = CuResult (*)(unsigned long long*, unsigned long long*, size_t*, size_t, void*, size_t*, size_t,
                             size_t*, void*);

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    std::printf("no driver: %s\n", dlerror());
    return 2;
  }
  auto log = reinterpret_cast<const char* (*)()>(dlsym(cuda, "fake_cuda_log"));
  auto set_capturing = reinterpret_cast<void (*)(unsigned)>(dlsym(cuda, "fake_cuda_set_capturing"));
  auto set_register = reinterpret_cast<void (*)(int)>(dlsym(cuda, "fake_cuda_set_register_result"));
  auto note_line = reinterpret_cast<void (*)(const char*)>(dlsym(cuda, "fake_cuda_note"));
  auto get_proc = reinterpret_cast<GetProc>(dlsym(cuda, "cuGetProcAddress_v2"));
  std::string results;
  auto note = [&](CuResult r) { results += "result " + std::to_string(r) + "\n"; };
  void* stream = reinterpret_cast<void*>(0x1000);
  void* fn = nullptr;
  int status = 0;
  if (scenario == "runtime") {  // legacy and per-thread launches, a graph, a sync copy
    get_proc("cuLaunchKernel", &fn, 12000, 1, &status);
    note(reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
    get_proc("cuLaunchKernel", &fn, 12000, 2, &status);
    note(reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
    get_proc("cuGraphLaunch", &fn, 12000, 1, &status);
    note(reinterpret_cast<Graph>(fn)(nullptr, stream));
    get_proc("cuMemcpyHtoD", &fn, 12000, 1, &status);
    note(reinterpret_cast<HtoD>(fn)(0, "x", 1));
    get_proc("cuCtxSynchronize", &fn, 12000, 1, &status);
    note(reinterpret_cast<Sync>(fn)());
  } else if (scenario == "capture") {  // work captured into a graph, then the graph launched
    set_capturing(0x1000);
    get_proc("cuLaunchKernel", &fn, 12000, 1, &status);
    note(reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
    set_capturing(0);
    get_proc("cuGraphLaunch", &fn, 12000, 1, &status);
    note(reinterpret_cast<Graph>(fn)(nullptr, stream));
  } else if (scenario == "long-copies") {  // copies of 2.5 MiB: cut unless captured; one of 2 MiB: not cut
    const char* host = reinterpret_cast<const char*>(0x70000000);
    get_proc("cuMemcpyHtoDAsync", &fn, 12000, 1, &status);
    note(reinterpret_cast<HtoDAsync>(fn)(0x10000000, host, 5u << 19, stream));
    note(reinterpret_cast<HtoDAsync>(fn)(0x10000000, host, 2u << 20, stream));
    set_capturing(0x1000);
    note(reinterpret_cast<HtoDAsync>(fn)(0x10000000, host, 5u << 19, stream));
    set_capturing(0);
    get_proc("cuMemcpyHtoD", &fn, 12000, 1, &status);
    note(reinterpret_cast<HtoD>(fn)(0x10000000, host, 5u << 19));
  } else if (scenario == "old-version") {  // a pre-3.2 copy signature
    CuResult r = get_proc("cuMemcpyHtoD", &fn, 3000, 1, &status);
    note(r);
    note(fn == nullptr ? 0 : 1);
    note(status);  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
  } else if (scenario == "uncovered") {  // an entry point the gate does not cover
    note(get_proc("cuStreamBatchMemOp", &fn, 12000, 1, &status));
    note(reinterpret_cast<Sync>(fn)());
  } else if (scenario == "batch-copies") {  // cuMemcpyBatchAsync as CUDA 13 and 12.8 declare it
    unsigned long long dsts[3] = {}, srcs[3] = {};
    size_t sizes[3] = {}, attr_idxs[1] = {}, fail_idx = 0;
    get_proc("cuMemcpyBatchAsync", &fn, 13000, 1, &status);
    note(reinterpret_cast<BatchV2>(fn)(dsts, srcs, sizes, 2, nullptr, attr_idxs, 0, stream));
    get_proc("cuMemcpyBatchAsync", &fn, 12080, 1, &status);
    note(reinterpret_cast<BatchV1>(fn)(dsts, srcs, sizes, 3, nullptr, attr_idxs, 0, &fail_idx, stream));
    size_t error_idx = 0;
    get_proc("cuMemBatchDecompressAsync", &fn, 12060, 1, &status);
    note(reinterpret_cast<Decompress>(fn)(nullptr, 4, 0, &error_idx, stream));
    std::printf("%sfail index %zu\nerror index %zu\n", log(), fail_idx, error_idx);
    std::printf("%s", results.c_str());
    return 0;
  } else if (scenario == "prefetch-upload-fill") {  // managed memory moved, a graph uploaded, a 2-D fill
    get_proc("cuMemPrefetchAsync", &fn, 13000, 1, &status);
    note(reinterpret_cast<PrefetchV2>(fn)(0x20000000, 4096, Location{1, 0}, 0, stream));
    unsigned long long ptrs[2] = {0x20000000, 0x30000000};
    size_t sizes[2] = {4096, 8192}, loc_idxs[1] = {0};
    Location to{1, 0};
    get_proc("cuMemPrefetchBatchAsync", &fn, 13000, 1, &status);
    note(reinterpret_cast<PrefetchBatch>(fn)(ptrs, sizes, 2, &to, loc_idxs, 1, 0, stream));
    get_proc("cuGraphUpload", &fn, 12000, 1, &status);
    note(reinterpret_cast<Graph>(fn)(nullptr, stream));
    get_proc("cuMemsetD2D8", &fn, 12000, 1, &status);
    note(reinterpret_cast<Memset2D>(fn)(0x20000000, 64, 7, 16, 4));
  } else if (scenario == "instantiate") {  // a graph instantiated with its upload, then without
    get_proc("cuGraphInstantiateWithParams", &fn, 12000, 1, &status);
    void* exec = nullptr;
    InstantiateParams with_upload{2 | 1, stream, nullptr, -1};  // upload, and free on launch
    note(reinterpret_cast<Instantiate>(fn)(&exec, nullptr, &with_upload));
    std::printf("exec %p result %d flags %llu\n", exec, with_upload.result,
                static_cast<unsigned long long>(with_upload.flags));
    InstantiateParams plain{1, nullptr, nullptr, -1};
    note(reinterpret_cast<Instantiate>(fn)(&exec, nullptr, &plain));
    // The per-thread variant, its upload on the thread's own stream (0), and the
    // exported name a program linked to the driver binds.
    get_proc("cuGraphInstantiateWithParams", &fn, 12000, 2, &status);
    InstantiateParams per_thread{2, nullptr, nullptr, -1};
    note(reinterpret_cast<Instantiate>(fn)(&exec, nullptr, &per_thread));
    fn = dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithParams");
    InstantiateParams direct{2, stream, nullptr, -1};
    note(fn ? reinterpret_cast<Instantiate>(fn)(&exec, nullptr, &direct) : -1);
  } else if (scenario == "instantiate-refused") {  // the gate cannot be armed: no exec is left
    get_proc("cuGraphInstantiateWithParams", &fn, 12000, 1, &status);
    void* exec = nullptr;
    InstantiateParams with_upload{2, stream, reinterpret_cast<void*>(0x5), -1};
    note(reinterpret_cast<Instantiate>(fn)(&exec, nullptr, &with_upload));
    std::printf("exec %p result %d error node %p flags %llu\n", exec, with_upload.result, with_upload.error_node,
                static_cast<unsigned long long>(with_upload.flags));
  } else if (scenario == "direct") {  // a program that binds the driver's names itself
    fn = dlsym(RTLD_DEFAULT, "cuLaunchKernel");
    note(fn ? reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr) : -1);
    fn = dlsym(cuda, "cuLaunchKernel_ptsz");
    note(fn ? reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) : -1);
  } else if (scenario == "many") {  // 64 launches on one stream, then a graph
    get_proc("cuLaunchKernel", &fn, 12000, 1, &status);
    for (int i = 0; i < 64; ++i)
      note(reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
    get_proc("cuGraphLaunch", &fn, 12000, 1, &status);
    note(reinterpret_cast<Graph>(fn)(nullptr, stream));
  } else if (scenario == "ahead") {
    // Under launch ahead (FREERIDE_GATE_AHEAD): a launch made while the gate
    // is shut returns at once, its arguments copied (the client overwrites
    // them), and a stream synchronisation returns only once it was submitted.
    // The client shuts and opens the gate itself, as the stage's stream would.
    std::atomic<uint32_t>* word = MapGateWord();
    void* kernel = reinterpret_cast<void*>(0xf1);
    int a = 1;
    long long b = 2;
    void* params[] = {&a, &b};
    get_proc("cuLaunchKernel", &fn, 12000, 1, &status);
    auto launch = reinterpret_cast<Launch>(fn);
    get_proc("cuStreamSynchronize", &fn, 12000, 1, &status);
    auto sync = reinterpret_cast<CuResult (*)(void*)>(fn);
    note(launch(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));  // arms the gate, on this thread
    note(sync(stream));
    word->store(2);  // bubble 1 closed
    a = 7;
    b = 9;
    note(launch(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
    long long c = 5;
    void* library_params[] = {&c};
    note(launch(reinterpret_cast<void*>(0xf2), 1, 1, 1, 1, 1, 1, 0, stream, library_params, nullptr));
    a = 0;
    b = 0;
    c = 0;
    note_line("returned with the gate shut");
    word->store(3);  // bubble 1 open again (its deadline is still published)
    note(sync(stream));
    note_line("synchronised");
  } else if (scenario == "ahead-graph-update") {
    // Under launch ahead: a graph launched while the gate is shut is queued;
    // an update of its exec's node made after that launch must not reach the
    // driver before it (the launch would run the updated graph).  Another
    // thread opens the gate a while later.
    std::atomic<uint32_t>* word = MapGateWord();
    void* exec = reinterpret_cast<void*>(0xe1);
    get_proc("cuLaunchKernel", &fn, 12000, 1, &status);
    note(reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));  // arms the gate
    get_proc("cuGraphLaunch", &fn, 12000, 1, &status);
    auto graph_launch = reinterpret_cast<Graph>(fn);
    get_proc("cuGraphExecKernelNodeSetParams", &fn, 12000, 1, &status);
    auto set_params = reinterpret_cast<CuResult (*)(void*, void*, const void*)>(fn);
    get_proc("cuStreamSynchronize", &fn, 12000, 1, &status);
    auto sync = reinterpret_cast<CuResult (*)(void*)>(fn);
    word->store(2);  // bubble 1 closed
    note(graph_launch(exec, stream));
    note_line("graph launch returned");
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      note_line("gate opening");
      word->store(3);  // bubble 1 open again
    });
    int kernel_params = 0;
    note(set_params(exec, reinterpret_cast<void*>(0xa0), &kernel_params));
    note_line("updated");
    opener.join();
    note(sync(stream));
  } else if (scenario == "register-fails") {
    set_register(2);  // CUDA_ERROR_OUT_OF_MEMORY
    get_proc("cuLaunchKernel", &fn, 12000, 1, &status);
    note(reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
    note(reinterpret_cast<Launch>(fn)(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr));
  } else {
    std::printf("unknown scenario\n");
    return 2;
  }
  std::printf("%s%s", log(), results.c_str());
  return 0;
}
