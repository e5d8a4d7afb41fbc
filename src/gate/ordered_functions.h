// The driver entry points that are ordered against a program's earlier GPU
// work but submit none the gate must hold: synchronisations, events and
// stream-ordered signals, frees of what queued work may use, captures, and
// changes that later launches see (a kernel's attributes, an instantiated
// graph's nodes: a graph launch already queued must run the graph as it
// was).  Under launch ahead (gate/launch_ahead.h) each first waits until
// every piece deferred before it has been submitted, so it acts where the
// program put it.  Without launch ahead their wrappers call the driver at
// once.
//
// X(id, base name (what cuGetProcAddress is asked), legacy export, per-thread
//   export (the legacy one again where there is none), least cudaVersion
//   whose entry point has this signature, (parameters), (arguments))
// Where one base name has had two signatures, each has its entry, the newer
// first, as in gated_functions.h.
//
// Left out, on purpose: event queries and synchronisations (an event is
// recorded only after the pieces before it were submitted, so it already
// stands behind them), allocations (memory given out earlier in stream order
// than needed is not misused), and stream or event creation.  Not covered
// (a program that does these under launch ahead may see a deferred piece
// run with the newer state): texture or surface objects destroyed while a
// deferred piece uses them.
#pragma once
#include "gate/driver_types.h"

#define FREERIDE_ORDERED_FUNCTIONS(X)                                                            \
  X(EventRecord, "cuEventRecord", "cuEventRecord", "cuEventRecord_ptsz", 0,                      \
    (CuEvent e, CuStream s), (e, s))                                                             \
  X(EventRecordWithFlags, "cuEventRecordWithFlags", "cuEventRecordWithFlags",                    \
    "cuEventRecordWithFlags_ptsz", 11010, (CuEvent e, CuStream s, unsigned f), (e, s, f))        \
  X(StreamWaitEvent, "cuStreamWaitEvent", "cuStreamWaitEvent", "cuStreamWaitEvent_ptsz", 0,      \
    (CuStream s, CuEvent e, unsigned f), (s, e, f))                                              \
  X(StreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize", "cuStreamSynchronize_ptsz", \
    0, (CuStream s), (s))                                                                        \
  X(StreamQuery, "cuStreamQuery", "cuStreamQuery", "cuStreamQuery_ptsz", 0, (CuStream s), (s))   \
  X(CtxSynchronizeV2, "cuCtxSynchronize", "cuCtxSynchronize_v2", "cuCtxSynchronize_v2", 13000,   \
    (void* ctx), (ctx))                                                                          \
  X(CtxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize", "cuCtxSynchronize", 0, (), ())       \
  X(LaunchHostFunc, "cuLaunchHostFunc", "cuLaunchHostFunc", "cuLaunchHostFunc_ptsz", 10000,      \
    (CuStream s, void* callback, void* data), (s, callback, data))                                           \
  X(StreamAddCallback, "cuStreamAddCallback", "cuStreamAddCallback", "cuStreamAddCallback_ptsz", \
    0, (CuStream s, void* callback, void* data, unsigned f), (s, callback, data, f))                         \
  X(StreamWaitValue32V2, "cuStreamWaitValue32", "cuStreamWaitValue32_v2",                        \
    "cuStreamWaitValue32_v2_ptsz", 11070, (CuStream s, CuDevicePtr a, uint32_t v, unsigned f),   \
    (s, a, v, f))                                                                                \
  X(StreamWaitValue32, "cuStreamWaitValue32", "cuStreamWaitValue32", "cuStreamWaitValue32_ptsz", \
    8000, (CuStream s, CuDevicePtr a, uint32_t v, unsigned f), (s, a, v, f))                     \
  X(StreamWaitValue64V2, "cuStreamWaitValue64", "cuStreamWaitValue64_v2",                        \
    "cuStreamWaitValue64_v2_ptsz", 11070, (CuStream s, CuDevicePtr a, uint64_t v, unsigned f),   \
    (s, a, v, f))                                                                                \
  X(StreamWaitValue64, "cuStreamWaitValue64", "cuStreamWaitValue64", "cuStreamWaitValue64_ptsz", \
    9000, (CuStream s, CuDevicePtr a, uint64_t v, unsigned f), (s, a, v, f))                     \
  X(StreamWriteValue32V2, "cuStreamWriteValue32", "cuStreamWriteValue32_v2",                     \
    "cuStreamWriteValue32_v2_ptsz", 11070, (CuStream s, CuDevicePtr a, uint32_t v, unsigned f),  \
    (s, a, v, f))                                                                                \
  X(StreamWriteValue32, "cuStreamWriteValue32", "cuStreamWriteValue32",                          \
    "cuStreamWriteValue32_ptsz", 8000, (CuStream s, CuDevicePtr a, uint32_t v, unsigned f),      \
    (s, a, v, f))                                                                                \
  X(StreamWriteValue64V2, "cuStreamWriteValue64", "cuStreamWriteValue64_v2",                     \
    "cuStreamWriteValue64_v2_ptsz", 11070, (CuStream s, CuDevicePtr a, uint64_t v, unsigned f),  \
    (s, a, v, f))                                                                                \
  X(StreamWriteValue64, "cuStreamWriteValue64", "cuStreamWriteValue64",                          \
    "cuStreamWriteValue64_ptsz", 9000, (CuStream s, CuDevicePtr a, uint64_t v, unsigned f),      \
    (s, a, v, f))                                                                                \
  X(StreamBeginCapture, "cuStreamBeginCapture", "cuStreamBeginCapture_v2",                       \
    "cuStreamBeginCapture_v2_ptsz", 10010, (CuStream s, int mode), (s, mode))                    \
  X(StreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph",     \
    "cuStreamBeginCaptureToGraph_ptsz", 12030,                                                   \
    (CuStream s, void* graph, const void* deps, const void* data, size_t n, int mode),           \
    (s, graph, deps, data, n, mode))                                                             \
  X(StreamEndCapture, "cuStreamEndCapture", "cuStreamEndCapture", "cuStreamEndCapture_ptsz", 0,  \
    (CuStream s, void** graph), (s, graph))                                                      \
  X(MemFree, "cuMemFree", "cuMemFree_v2", "cuMemFree_v2", 3020, (CuDevicePtr p), (p))            \
  X(MemFreeHost, "cuMemFreeHost", "cuMemFreeHost", "cuMemFreeHost", 0, (void* p), (p))           \
  X(MemHostUnregister, "cuMemHostUnregister", "cuMemHostUnregister", "cuMemHostUnregister", 0,   \
    (void* p), (p))                                                                              \
  X(MemFreeAsync, "cuMemFreeAsync", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", 0,                  \
    (CuDevicePtr p, CuStream s), (p, s))                                                         \
  X(MemUnmap, "cuMemUnmap", "cuMemUnmap", "cuMemUnmap", 0, (CuDevicePtr p, size_t n), (p, n))    \
  X(MemRelease, "cuMemRelease", "cuMemRelease", "cuMemRelease", 0,                               \
    (unsigned long long handle), (handle))                                                       \
  X(IpcCloseMemHandle, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle", "cuIpcCloseMemHandle", 0,   \
    (CuDevicePtr p), (p))                                                                        \
  X(StreamDestroy, "cuStreamDestroy", "cuStreamDestroy_v2", "cuStreamDestroy_v2", 4000,          \
    (CuStream s), (s))                                                                           \
  X(StreamSetAttribute, "cuStreamSetAttribute", "cuStreamSetAttribute",                          \
    "cuStreamSetAttribute_ptsz", 0, (CuStream s, int attr, const void* value), (s, attr, value)) \
  X(GraphExecDestroy, "cuGraphExecDestroy", "cuGraphExecDestroy", "cuGraphExecDestroy", 0,       \
    (void* exec), (exec))                                                                        \
  /* Updates of an instantiated graph (XLA's command buffers update theirs between launches) */  \
  X(GraphExecUpdateV2, "cuGraphExecUpdate", "cuGraphExecUpdate_v2", "cuGraphExecUpdate_v2",      \
    12000, (void* exec, void* graph, void* info), (exec, graph, info))                           \
  X(GraphExecUpdate, "cuGraphExecUpdate", "cuGraphExecUpdate", "cuGraphExecUpdate", 10020,       \
    (void* exec, void* graph, void** error_node, int* update_result),                            \
    (exec, graph, error_node, update_result))                                                    \
  X(GraphExecKernelNodeSetParamsV2, "cuGraphExecKernelNodeSetParams",                            \
    "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams_v2", 12000,             \
    (void* exec, void* node, const void* params), (exec, node, params))                          \
  X(GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams",                              \
    "cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams", 10010,                   \
    (void* exec, void* node, const void* params), (exec, node, params))                          \
  X(GraphExecMemcpyNodeSetParams, "cuGraphExecMemcpyNodeSetParams",                              \
    "cuGraphExecMemcpyNodeSetParams", "cuGraphExecMemcpyNodeSetParams", 0,                       \
    (void* exec, void* node, const void* copy, void* ctx), (exec, node, copy, ctx))              \
  X(GraphExecMemsetNodeSetParams, "cuGraphExecMemsetNodeSetParams",                              \
    "cuGraphExecMemsetNodeSetParams", "cuGraphExecMemsetNodeSetParams", 0,                       \
    (void* exec, void* node, const void* fill, void* ctx), (exec, node, fill, ctx))              \
  X(GraphExecHostNodeSetParams, "cuGraphExecHostNodeSetParams", "cuGraphExecHostNodeSetParams",  \
    "cuGraphExecHostNodeSetParams", 0, (void* exec, void* node, const void* params),             \
    (exec, node, params))                                                                        \
  X(GraphExecChildGraphNodeSetParams, "cuGraphExecChildGraphNodeSetParams",                      \
    "cuGraphExecChildGraphNodeSetParams", "cuGraphExecChildGraphNodeSetParams", 0,               \
    (void* exec, void* node, void* child), (exec, node, child))                                  \
  X(GraphExecEventRecordNodeSetEvent, "cuGraphExecEventRecordNodeSetEvent",                      \
    "cuGraphExecEventRecordNodeSetEvent", "cuGraphExecEventRecordNodeSetEvent", 0,               \
    (void* exec, void* node, CuEvent e), (exec, node, e))                                        \
  X(GraphExecEventWaitNodeSetEvent, "cuGraphExecEventWaitNodeSetEvent",                          \
    "cuGraphExecEventWaitNodeSetEvent", "cuGraphExecEventWaitNodeSetEvent", 0,                   \
    (void* exec, void* node, CuEvent e), (exec, node, e))                                        \
  X(GraphExecExternalSemaphoresSignalNodeSetParams,                                              \
    "cuGraphExecExternalSemaphoresSignalNodeSetParams",                                          \
    "cuGraphExecExternalSemaphoresSignalNodeSetParams",                                          \
    "cuGraphExecExternalSemaphoresSignalNodeSetParams", 0,                                       \
    (void* exec, void* node, const void* params), (exec, node, params))                          \
  X(GraphExecExternalSemaphoresWaitNodeSetParams,                                                \
    "cuGraphExecExternalSemaphoresWaitNodeSetParams",                                            \
    "cuGraphExecExternalSemaphoresWaitNodeSetParams",                                            \
    "cuGraphExecExternalSemaphoresWaitNodeSetParams", 0,                                         \
    (void* exec, void* node, const void* params), (exec, node, params))                          \
  X(GraphExecBatchMemOpNodeSetParams, "cuGraphExecBatchMemOpNodeSetParams",                      \
    "cuGraphExecBatchMemOpNodeSetParams", "cuGraphExecBatchMemOpNodeSetParams", 0,               \
    (void* exec, void* node, const void* params), (exec, node, params))                          \
  X(GraphNodeSetEnabled, "cuGraphNodeSetEnabled", "cuGraphNodeSetEnabled",                       \
    "cuGraphNodeSetEnabled", 0, (void* exec, void* node, unsigned enabled),                      \
    (exec, node, enabled))                                                                       \
  X(GraphExecNodeSetParams, "cuGraphExecNodeSetParams", "cuGraphExecNodeSetParams",              \
    "cuGraphExecNodeSetParams", 0, (void* exec, void* node, void* params), (exec, node, params)) \
  X(ModuleUnload, "cuModuleUnload", "cuModuleUnload", "cuModuleUnload", 0, (void* m), (m))       \
  X(LibraryUnload, "cuLibraryUnload", "cuLibraryUnload", "cuLibraryUnload", 0, (void* l), (l))   \
  X(FuncSetAttribute, "cuFuncSetAttribute", "cuFuncSetAttribute", "cuFuncSetAttribute", 0,       \
    (void* f, int attr, int value), (f, attr, value))                                            \
  X(KernelSetAttribute, "cuKernelSetAttribute", "cuKernelSetAttribute", "cuKernelSetAttribute",  \
    0, (int attr, int value, void* kernel, int device), (attr, value, kernel, device))           \
  X(SignalExternalSemaphoresAsync, "cuSignalExternalSemaphoresAsync",                            \
    "cuSignalExternalSemaphoresAsync", "cuSignalExternalSemaphoresAsync_ptsz", 0,                \
    (const void* sems, const void* params, unsigned n, CuStream s), (sems, params, n, s))        \
  X(WaitExternalSemaphoresAsync, "cuWaitExternalSemaphoresAsync",                                \
    "cuWaitExternalSemaphoresAsync", "cuWaitExternalSemaphoresAsync_ptsz", 0,                    \
    (const void* sems, const void* params, unsigned n, CuStream s), (sems, params, n, s))        \
  X(GraphicsUnmapResources, "cuGraphicsUnmapResources", "cuGraphicsUnmapResources",              \
    "cuGraphicsUnmapResources_ptsz", 0, (unsigned n, void* resources, CuStream s),               \
    (n, resources, s))                                                                           \
  X(CtxDestroy, "cuCtxDestroy", "cuCtxDestroy_v2", "cuCtxDestroy_v2", 4000, (void* ctx), (ctx))  \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2",        \
    "cuDevicePrimaryCtxRelease_v2", 11000, (int device), (device))                               \
  X(DevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2",              \
    "cuDevicePrimaryCtxReset_v2", 11000, (int device), (device))

namespace freeride::gate {

enum class OrderedFunction {
#define FREERIDE_ORDERED_ENUM(id, ...) k##id,
  FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_ENUM)
#undef FREERIDE_ORDERED_ENUM
  kCount
};

}  // namespace freeride::gate
