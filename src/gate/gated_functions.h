// The driver entry points through which a program submits GPU work, and how
// the gate finds the stream of each.  One list, expanded by the interposer
// into its wrappers and by the symbol table into its names.
//
// X(id, base name (what cuGetProcAddress is asked), legacy export, per-thread
//   export, least cudaVersion whose entry point has this signature,
//   (parameters), (arguments), stream expression)
// A stream expression of nullptr means the call is synchronous and runs on
// the default stream (the legacy one, or the thread's own for _ptds).
// Where one base name has had two signatures, each has its entry, the newer
// first: a look-up gets the first whose least version it meets.
#pragma once
#include "gate/driver_types.h"

#define FREERIDE_GATED_FUNCTIONS(X)                                                              \
  X(LaunchKernel, "cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel_ptsz", 0,                  \
    (void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,      \
     unsigned shm, CuStream s, void** p, void** e),                                              \
    (f, gx, gy, gz, bx, by, bz, shm, s, p, e), s)                                                \
  X(LaunchKernelEx, "cuLaunchKernelEx", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", 0,          \
    (const LaunchConfigHead* c, void* f, void** p, void** e), (c, f, p, e),                      \
    (c ? c->stream : nullptr))                                                                   \
  X(LaunchCooperativeKernel, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel",           \
    "cuLaunchCooperativeKernel_ptsz", 0,                                                         \
    (void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,      \
     unsigned shm, CuStream s, void** p),                                                        \
    (f, gx, gy, gz, bx, by, bz, shm, s, p), s)                                                   \
  X(GraphLaunch, "cuGraphLaunch", "cuGraphLaunch", "cuGraphLaunch_ptsz", 0,                      \
    (void* exec, CuStream s), (exec, s), s)                                                      \
  X(MemcpyAsync, "cuMemcpyAsync", "cuMemcpyAsync", "cuMemcpyAsync_ptsz", 0,                      \
    (CuDevicePtr d, CuDevicePtr src, size_t n, CuStream s), (d, src, n, s), s)                   \
  X(MemcpyPeerAsync, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz", 0,      \
    (CuDevicePtr d, void* dc, CuDevicePtr src, void* sc, size_t n, CuStream s),                  \
    (d, dc, src, sc, n, s), s)                                                                   \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz",   \
    3020, (CuDevicePtr d, const void* src, size_t n, CuStream s), (d, src, n, s), s)             \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz",   \
    3020, (void* d, CuDevicePtr src, size_t n, CuStream s), (d, src, n, s), s)                   \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz",   \
    3020, (CuDevicePtr d, CuDevicePtr src, size_t n, CuStream s), (d, src, n, s), s)             \
  X(Memcpy2DAsync, "cuMemcpy2DAsync", "cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz", 3020,     \
    (const void* desc, CuStream s), (desc, s), s)                                                \
  X(Memcpy3DAsync, "cuMemcpy3DAsync", "cuMemcpy3DAsync_v2", "cuMemcpy3DAsync_v2_ptsz", 3020,     \
    (const void* desc, CuStream s), (desc, s), s)                                                \
  X(Memcpy3DPeerAsync, "cuMemcpy3DPeerAsync", "cuMemcpy3DPeerAsync",                             \
    "cuMemcpy3DPeerAsync_ptsz", 0, (const void* desc, CuStream s), (desc, s), s)                 \
  /* Batched copies (CUDA 12.8's signatures had a failure index, 13.0's have none). */           \
  X(MemcpyBatchAsyncV2, "cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz", \
    13000, (CuDevicePtr* d, CuDevicePtr* src, size_t* n, size_t count, void* attrs, size_t* idxs,  \
            size_t num_attrs, CuStream s), (d, src, n, count, attrs, idxs, num_attrs, s), s)      \
  X(MemcpyBatchAsync, "cuMemcpyBatchAsync", "cuMemcpyBatchAsync", "cuMemcpyBatchAsync_ptsz", 12080, \
    (CuDevicePtr* d, CuDevicePtr* src, size_t* n, size_t count, void* attrs, size_t* idxs,        \
     size_t num_attrs, size_t* fail_idx, CuStream s), (d, src, n, count, attrs, idxs, num_attrs, fail_idx, s), s) \
  X(Memcpy3DBatchAsyncV2, "cuMemcpy3DBatchAsync", "cuMemcpy3DBatchAsync_v2",                     \
    "cuMemcpy3DBatchAsync_v2_ptsz", 13000, (size_t ops, void* list, unsigned long long flags, CuStream s), \
    (ops, list, flags, s), s)                                                                    \
  X(Memcpy3DBatchAsync, "cuMemcpy3DBatchAsync", "cuMemcpy3DBatchAsync", "cuMemcpy3DBatchAsync_ptsz", 12080, \
    (size_t ops, void* list, size_t* fail_idx, unsigned long long flags, CuStream s),             \
    (ops, list, fail_idx, flags, s), s)                                                          \
  X(MemsetD8Async, "cuMemsetD8Async", "cuMemsetD8Async", "cuMemsetD8Async_ptsz", 0,              \
    (CuDevicePtr d, unsigned char v, size_t n, CuStream s), (d, v, n, s), s)                     \
  X(MemsetD16Async, "cuMemsetD16Async", "cuMemsetD16Async", "cuMemsetD16Async_ptsz", 0,          \
    (CuDevicePtr d, unsigned short v, size_t n, CuStream s), (d, v, n, s), s)                    \
  X(MemsetD32Async, "cuMemsetD32Async", "cuMemsetD32Async", "cuMemsetD32Async_ptsz", 0,          \
    (CuDevicePtr d, unsigned v, size_t n, CuStream s), (d, v, n, s), s)                          \
  X(MemsetD2D8Async, "cuMemsetD2D8Async", "cuMemsetD2D8Async", "cuMemsetD2D8Async_ptsz", 0,      \
    (CuDevicePtr d, size_t pitch, unsigned char v, size_t w, size_t h, CuStream s),              \
    (d, pitch, v, w, h, s), s)                                                                   \
  X(MemsetD2D16Async, "cuMemsetD2D16Async", "cuMemsetD2D16Async", "cuMemsetD2D16Async_ptsz", 0,  \
    (CuDevicePtr d, size_t pitch, unsigned short v, size_t w, size_t h, CuStream s),             \
    (d, pitch, v, w, h, s), s)                                                                   \
  X(MemsetD2D32Async, "cuMemsetD2D32Async", "cuMemsetD2D32Async", "cuMemsetD2D32Async_ptsz", 0,  \
    (CuDevicePtr d, size_t pitch, unsigned v, size_t w, size_t h, CuStream s),                   \
    (d, pitch, v, w, h, s), s)                                                                   \
  /* Managed memory moved ahead of use: copy-engine work on a stream (12.2 gave it a location). */ \
  X(MemPrefetchAsyncV2, "cuMemPrefetchAsync", "cuMemPrefetchAsync_v2", "cuMemPrefetchAsync_v2_ptsz", \
    12020, (CuDevicePtr d, size_t n, MemLocation to, unsigned flags, CuStream s), (d, n, to, flags, s), s) \
  X(MemPrefetchAsync, "cuMemPrefetchAsync", "cuMemPrefetchAsync", "cuMemPrefetchAsync_ptsz", 8000, \
    (CuDevicePtr d, size_t n, int device, CuStream s), (d, n, device, s), s)                      \
  X(MemPrefetchBatchAsync, "cuMemPrefetchBatchAsync", "cuMemPrefetchBatchAsync",                 \
    "cuMemPrefetchBatchAsync_ptsz", 13000,                                                       \
    (CuDevicePtr* d, size_t* n, size_t count, MemLocation* to, size_t* to_idxs, size_t num_to,   \
     unsigned long long flags, CuStream s), (d, n, count, to, to_idxs, num_to, flags, s), s)     \
  X(MemDiscardAndPrefetchBatchAsync, "cuMemDiscardAndPrefetchBatchAsync",                        \
    "cuMemDiscardAndPrefetchBatchAsync", "cuMemDiscardAndPrefetchBatchAsync_ptsz", 13000,        \
    (CuDevicePtr* d, size_t* n, size_t count, MemLocation* to, size_t* to_idxs, size_t num_to,   \
     unsigned long long flags, CuStream s), (d, n, count, to, to_idxs, num_to, flags, s), s)     \
  /* The copy engines' decompression of a batch (CUDA 12.6). */                                  \
  X(MemBatchDecompressAsync, "cuMemBatchDecompressAsync", "cuMemBatchDecompressAsync",           \
    "cuMemBatchDecompressAsync_ptsz", 12060, (void* params, size_t count, unsigned flags, size_t* error_idx, \
                                              CuStream s), (params, count, flags, error_idx, s), s) \
  /* A graph's work descriptors uploaded ahead of its launch. */                                 \
  X(GraphUpload, "cuGraphUpload", "cuGraphUpload", "cuGraphUpload_ptsz", 11010,                   \
    (void* exec, CuStream s), (exec, s), s)                                                      \
  X(Memcpy, "cuMemcpy", "cuMemcpy", "cuMemcpy_ptds", 0,                                          \
    (CuDevicePtr d, CuDevicePtr src, size_t n), (d, src, n), nullptr)                            \
  X(MemcpyPeer, "cuMemcpyPeer", "cuMemcpyPeer", "cuMemcpyPeer_ptds", 0,                          \
    (CuDevicePtr d, void* dc, CuDevicePtr src, void* sc, size_t n), (d, dc, src, sc, n), nullptr) \
  X(MemcpyHtoD, "cuMemcpyHtoD", "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds", 3020,                 \
    (CuDevicePtr d, const void* src, size_t n), (d, src, n), nullptr)                            \
  X(MemcpyDtoH, "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds", 3020,                 \
    (void* d, CuDevicePtr src, size_t n), (d, src, n), nullptr)                                  \
  X(MemcpyDtoD, "cuMemcpyDtoD", "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds", 3020,                 \
    (CuDevicePtr d, CuDevicePtr src, size_t n), (d, src, n), nullptr)                            \
  X(Memcpy2D, "cuMemcpy2D", "cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds", 3020, (const void* desc),     \
    (desc), nullptr)                                                                             \
  X(Memcpy3DPeer, "cuMemcpy3DPeer", "cuMemcpy3DPeer", "cuMemcpy3DPeer_ptds", 0, (const void* desc), \
    (desc), nullptr)                                                                             \
  X(Memcpy3D, "cuMemcpy3D", "cuMemcpy3D_v2", "cuMemcpy3D_v2_ptds", 3020, (const void* desc),     \
    (desc), nullptr)                                                                             \
  X(MemsetD8, "cuMemsetD8", "cuMemsetD8_v2", "cuMemsetD8_v2_ptds", 3020,                         \
    (CuDevicePtr d, unsigned char v, size_t n), (d, v, n), nullptr)                              \
  X(MemsetD16, "cuMemsetD16", "cuMemsetD16_v2", "cuMemsetD16_v2_ptds", 3020,                     \
    (CuDevicePtr d, unsigned short v, size_t n), (d, v, n), nullptr)                             \
  X(MemsetD32, "cuMemsetD32", "cuMemsetD32_v2", "cuMemsetD32_v2_ptds", 3020,                     \
    (CuDevicePtr d, unsigned v, size_t n), (d, v, n), nullptr)                                   \
  X(MemsetD2D8, "cuMemsetD2D8", "cuMemsetD2D8_v2", "cuMemsetD2D8_v2_ptds", 3020,                 \
    (CuDevicePtr d, size_t pitch, unsigned char v, size_t w, size_t h), (d, pitch, v, w, h), nullptr) \
  X(MemsetD2D16, "cuMemsetD2D16", "cuMemsetD2D16_v2", "cuMemsetD2D16_v2_ptds", 3020,             \
    (CuDevicePtr d, size_t pitch, unsigned short v, size_t w, size_t h), (d, pitch, v, w, h), nullptr) \
  X(MemsetD2D32, "cuMemsetD2D32", "cuMemsetD2D32_v2", "cuMemsetD2D32_v2_ptds", 3020,             \
    (CuDevicePtr d, size_t pitch, unsigned v, size_t w, size_t h), (d, pitch, v, w, h), nullptr)

// Not gated, on purpose: stream memory writes (cuStreamWriteValue32/64: a
// few bytes each, no GPU time to speak of, ordered after the stream's gated
// work); stream-ordered allocations, discards (cuMemDiscardBatchAsync moves
// no data), host functions, event and semaphore signals, which queue no work
// for the GPU's engines.  (cuGraphInstantiateWithParams, which uploads its
// graph when asked, has a wrapper of its own in the interposer: it uploads
// through the gated cuGraphUpload.)

// Entry points that submit GPU work the gate does not cover.  A program
// that calls one is refused at that call (it fails with
// CUDA_ERROR_NOT_SUPPORTED and a message), never run ungated, whether it
// was looked up or called by name; looking one up is allowed, since
// runtimes look up entry points they never call.
#define FREERIDE_UNCOVERED_FUNCTIONS(X)                                              \
  X(LaunchCooperativeKernelMultiDevice, "cuLaunchCooperativeKernelMultiDevice")     \
  X(StreamBatchMemOp, "cuStreamBatchMemOp") X(MemcpyHtoA, "cuMemcpyHtoA")            \
  X(MemcpyAtoH, "cuMemcpyAtoH") X(MemcpyHtoAAsync, "cuMemcpyHtoAAsync")              \
  X(MemcpyAtoHAsync, "cuMemcpyAtoHAsync") X(MemcpyAtoD, "cuMemcpyAtoD")              \
  X(MemcpyDtoA, "cuMemcpyDtoA") X(MemcpyAtoA, "cuMemcpyAtoA")                        \
  X(Memcpy2DUnaligned, "cuMemcpy2DUnaligned") X(LaunchGrid, "cuLaunchGrid")          \
  X(LaunchGridAsync, "cuLaunchGridAsync") X(Launch, "cuLaunch")

// The names by which a program linked against libcuda reaches each of them,
// under which the interposer exports a refuser: a call by name binds to it at
// load time, never to the driver.  From CUDA 13's cuda.h: the name each
// #define makes (cuMemcpyHtoA: cuMemcpyHtoA_v2), its per-thread form under
// CUDA_API_PER_THREAD_DEFAULT_STREAM (__CUDA_API_PTDS/PTSZ: _ptds for the
// synchronous copies, _ptsz for the rest), and the unversioned first form
// that binaries built before the _v2 bind (the 32-bit-offset copies, CUDA
// 8-11.6's cuStreamBatchMemOp and its _ptsz).  Listed one by one, not made
// as every suffix of every name: the driver has no cuMemcpyHtoA_ptds nor
// cuLaunch_ptsz, and a name exported that no driver has would let a program
// linked against it load under the gate where it would not load without it
// (docs/gate.md's limits).
#define FREERIDE_UNCOVERED_EXPORTS(X)                                                        \
  X(LaunchCooperativeKernelMultiDevice, cuLaunchCooperativeKernelMultiDevice)               \
  X(StreamBatchMemOp, cuStreamBatchMemOp) X(StreamBatchMemOp, cuStreamBatchMemOp_ptsz)      \
  X(StreamBatchMemOp, cuStreamBatchMemOp_v2) X(StreamBatchMemOp, cuStreamBatchMemOp_v2_ptsz) \
  X(MemcpyHtoA, cuMemcpyHtoA) X(MemcpyHtoA, cuMemcpyHtoA_v2) X(MemcpyHtoA, cuMemcpyHtoA_v2_ptds) \
  X(MemcpyAtoH, cuMemcpyAtoH) X(MemcpyAtoH, cuMemcpyAtoH_v2) X(MemcpyAtoH, cuMemcpyAtoH_v2_ptds) \
  X(MemcpyHtoAAsync, cuMemcpyHtoAAsync) X(MemcpyHtoAAsync, cuMemcpyHtoAAsync_v2)            \
  X(MemcpyHtoAAsync, cuMemcpyHtoAAsync_v2_ptsz)                                             \
  X(MemcpyAtoHAsync, cuMemcpyAtoHAsync) X(MemcpyAtoHAsync, cuMemcpyAtoHAsync_v2)            \
  X(MemcpyAtoHAsync, cuMemcpyAtoHAsync_v2_ptsz)                                             \
  X(MemcpyAtoD, cuMemcpyAtoD) X(MemcpyAtoD, cuMemcpyAtoD_v2) X(MemcpyAtoD, cuMemcpyAtoD_v2_ptds) \
  X(MemcpyDtoA, cuMemcpyDtoA) X(MemcpyDtoA, cuMemcpyDtoA_v2) X(MemcpyDtoA, cuMemcpyDtoA_v2_ptds) \
  X(MemcpyAtoA, cuMemcpyAtoA) X(MemcpyAtoA, cuMemcpyAtoA_v2) X(MemcpyAtoA, cuMemcpyAtoA_v2_ptds) \
  X(Memcpy2DUnaligned, cuMemcpy2DUnaligned) X(Memcpy2DUnaligned, cuMemcpy2DUnaligned_v2)    \
  X(Memcpy2DUnaligned, cuMemcpy2DUnaligned_v2_ptds)                                         \
  X(LaunchGrid, cuLaunchGrid) X(LaunchGridAsync, cuLaunchGridAsync) X(Launch, cuLaunch)

namespace freeride::gate {

enum class GatedFunction {
#define FREERIDE_GATE_ENUM(id, ...) k##id,
  FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_ENUM)
#undef FREERIDE_GATE_ENUM
  kCount
};

enum class UncoveredFunction {
#define FREERIDE_GATE_ENUM(id, name) k##id,
  FREERIDE_UNCOVERED_FUNCTIONS(FREERIDE_GATE_ENUM)
#undef FREERIDE_GATE_ENUM
  kCount
};

}  // namespace freeride::gate
