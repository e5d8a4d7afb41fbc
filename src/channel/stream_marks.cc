// Stream-ordered bubble marks: the stage enqueues a CUDA host function that
// writes the mark when the GPU stream reaches it.  libcuda is opened with
// dlopen on first use, so libfreeride builds and loads on machines with no
// CUDA at all.
#include <dlfcn.h>

#include "channel/stage_handle.h"

namespace {

using freeride::PendingMark;

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

void RunMark(void* user_data) {
  const PendingMark& mark = *static_cast<PendingMark*>(user_data);
  if (mark.begin)
    freeride_bubble_begin(mark.stage, mark.slot, mark.predicted_ns, mark.free_memory_bytes);
  else
    freeride_bubble_end(mark.stage);
}

int Enqueue(freeride_stage* stage, void* stream, const PendingMark& mark) {
  if (!stage) return 0;
  CuLaunchHostFn launch = LaunchHostFunc();
  if (!launch) return -1;
  PendingMark* record = &stage->pending_marks[stage->next_pending_mark++ % freeride::kPendingMarks];
  *record = mark;
  return launch(stream, RunMark, record) == 0 ? 0 : -1;
}

}  // namespace

extern "C" {

int freeride_bubble_begin_on_stream(freeride_stage* stage, void* cuda_stream, uint32_t slot,
                                    int64_t predicted_ns, uint64_t free_memory_bytes) {
  return Enqueue(stage, cuda_stream, {stage, true, slot, predicted_ns, free_memory_bytes});
}

int freeride_bubble_end_on_stream(freeride_stage* stage, void* cuda_stream) {
  return Enqueue(stage, cuda_stream, {stage, false, 0, 0, 0});
}

}  // extern "C"
