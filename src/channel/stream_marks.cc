// Stream-ordered bubble marks: the stage enqueues a CUDA host function that
// writes the mark when the GPU stream reaches it.  libcuda is opened with
// dlopen on first use, so libfreeride builds and loads on machines with no
// CUDA at all.
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "freeride/freeride.h"

namespace {

using CuResult = int;
using CuHostFn = void (*)(void*);
using CuLaunchHostFn = CuResult (*)(void* stream, CuHostFn fn, void* user_data);

CuLaunchHostFn LaunchHostFunc() {
  static CuLaunchHostFn fn = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib ? reinterpret_cast<CuLaunchHostFn>(dlsym(lib, "cuLaunchHostFunc")) : nullptr;
  }();
  return fn;
}

enum class MarkKind : uint8_t { kBegin, kEnd };

// What a pending host function will write.  Records live in a per-stage ring
// because the host function runs later, on the driver's thread.
struct PendingMark {
  freeride_stage* stage;
  MarkKind kind;
  uint32_t slot;
  int64_t predicted_ns;
  uint64_t free_memory_bytes;
};

constexpr size_t kPendingMarks = 1024;

struct MarkRing {
  std::array<PendingMark, kPendingMarks> records;
  std::atomic<uint64_t> next{0};
};

// Rings are kept per stage in a small side table, so that the stage struct
// (and the hot path of immediate marks) is unchanged.
struct RingTable {
  std::mutex mu;
  std::array<std::pair<freeride_stage*, MarkRing*>, 64> entries{};
};

RingTable& Rings() {
  static RingTable* table = new RingTable();  // never destroyed: host functions may run late
  return *table;
}

MarkRing* RingFor(freeride_stage* stage) {
  RingTable& table = Rings();
  std::lock_guard<std::mutex> lock(table.mu);
  for (auto& [owner, ring] : table.entries)
    if (owner == stage) return ring;
  for (auto& [owner, ring] : table.entries)
    if (owner == nullptr) {
      owner = stage;
      ring = new MarkRing();
      return ring;
    }
  return nullptr;
}

void RunMark(void* user_data) {
  const PendingMark& mark = *static_cast<PendingMark*>(user_data);
  if (mark.kind == MarkKind::kBegin)
    freeride_bubble_begin(mark.stage, mark.slot, mark.predicted_ns, mark.free_memory_bytes);
  else
    freeride_bubble_end(mark.stage);
}

int Enqueue(freeride_stage* stage, void* stream, PendingMark mark) {
  if (!stage) return 0;
  CuLaunchHostFn launch = LaunchHostFunc();
  if (!launch) return -1;
  // The ring is looked up once per stage and cached by the caller's thread.
  thread_local freeride_stage* cached_stage = nullptr;
  thread_local MarkRing* cached_ring = nullptr;
  if (cached_stage != stage) {
    cached_ring = RingFor(stage);
    cached_stage = stage;
  }
  if (!cached_ring) return -1;
  PendingMark* record =
      &cached_ring->records[cached_ring->next.fetch_add(1, std::memory_order_relaxed) % kPendingMarks];
  *record = mark;
  return launch(stream, RunMark, record) == 0 ? 0 : -1;
}

}  // namespace

extern "C" {

int freeride_bubble_begin_on_stream(freeride_stage* stage, void* cuda_stream, uint32_t slot,
                                    int64_t predicted_ns, uint64_t free_memory_bytes) {
  return Enqueue(stage, cuda_stream,
                 {stage, MarkKind::kBegin, slot, predicted_ns, free_memory_bytes});
}

int freeride_bubble_end_on_stream(freeride_stage* stage, void* cuda_stream) {
  return Enqueue(stage, cuda_stream, {stage, MarkKind::kEnd, 0, 0, 0});
}

}  // extern "C"
