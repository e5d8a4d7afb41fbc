// The gate's wrappers against CUDA's own declarations: each entry of
// gated_functions.h must take what the driver's entry point of that
// version takes, or a program's arguments reach the driver shifted.  The
// check is at compile time (this file does not build if one differs); the
// test says which driver typedef each entry was checked against.  Built
// where nvcc is found (FREERIDE_WITH_CUDA; CI has it); entries newer than
// that toolkit are checked where a newer one is.
#include <cudaTypedefs.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "gate/gated_functions.h"
#include "gate/ordered_functions.h"
#include "gate/symbol_table.h"

namespace freeride::gate {
namespace {

// What the x86-64 calling convention sees of a parameter: its size and its
// class (pointer, integer or enum, or a small struct passed by value).
template <typename T>
constexpr int AbiClass() {
  if constexpr (std::is_pointer_v<T>) return 1;
  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) return 2;
  else if constexpr (std::is_class_v<T>) return 3;
  else return 4;
}

template <typename Ours, typename Theirs>
struct SameAbi : std::false_type {};
template <typename... A, typename... B>
struct SameAbi<CuResult (*)(A...), CUresult(CUDAAPI*)(B...)> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(A) != sizeof...(B)) return false;
    else return ((sizeof(A) == sizeof(B) && AbiClass<A>() == AbiClass<B>()) && ...);
  }();
};

// Our parameters of each entry.
#define FREERIDE_GATE_PARAMS(id, base, legacy, per_thread, min_version, params, args, stream) \
  using Ours##id = CuResult(*) params;
FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_PARAMS)
#undef FREERIDE_GATE_PARAMS

// The driver's typedef of each entry: the name's signature at the entry's
// least version, or (an entry whose least version is 0) its only one.
// Entries newer than the toolkit at hand are checked where it has them.
#if CUDA_VERSION >= 12060
#define FREERIDE_GATE_12_6_TYPES(X) X(MemBatchDecompressAsync, PFN_cuMemBatchDecompressAsync_v12060)
#else
#define FREERIDE_GATE_12_6_TYPES(X)
#endif
#if CUDA_VERSION >= 12080
#define FREERIDE_GATE_12_8_TYPES(X)                                                          \
  X(MemcpyBatchAsync, PFN_cuMemcpyBatchAsync_v12080) X(Memcpy3DBatchAsync, PFN_cuMemcpy3DBatchAsync_v12080)
#else
#define FREERIDE_GATE_12_8_TYPES(X)
#endif
#if CUDA_VERSION >= 13000
#define FREERIDE_GATE_13_0_TYPES(X)                                                          \
  X(MemcpyBatchAsyncV2, PFN_cuMemcpyBatchAsync_v13000)                                       \
  X(Memcpy3DBatchAsyncV2, PFN_cuMemcpy3DBatchAsync_v13000)                                   \
  X(MemPrefetchBatchAsync, PFN_cuMemPrefetchBatchAsync_v13000)                               \
  X(MemDiscardAndPrefetchBatchAsync, PFN_cuMemDiscardAndPrefetchBatchAsync_v13000)
#else
#define FREERIDE_GATE_13_0_TYPES(X)
#endif
#define FREERIDE_GATE_DRIVER_TYPES(X)                                                        \
  FREERIDE_GATE_12_6_TYPES(X) FREERIDE_GATE_12_8_TYPES(X) FREERIDE_GATE_13_0_TYPES(X)        \
  X(LaunchKernel, PFN_cuLaunchKernel_v4000) X(LaunchKernelEx, PFN_cuLaunchKernelEx_v11060)   \
  X(LaunchCooperativeKernel, PFN_cuLaunchCooperativeKernel_v9000)                            \
  X(GraphLaunch, PFN_cuGraphLaunch_v10000) X(MemcpyAsync, PFN_cuMemcpyAsync_v4000)           \
  X(MemcpyPeerAsync, PFN_cuMemcpyPeerAsync_v4000)                                            \
  X(MemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020) X(MemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020) \
  X(MemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020) X(Memcpy2DAsync, PFN_cuMemcpy2DAsync_v3020) \
  X(Memcpy3DAsync, PFN_cuMemcpy3DAsync_v3020) X(Memcpy3DPeerAsync, PFN_cuMemcpy3DPeerAsync_v4000) \
  X(MemsetD8Async, PFN_cuMemsetD8Async_v3020) X(MemsetD16Async, PFN_cuMemsetD16Async_v3020)  \
  X(MemsetD32Async, PFN_cuMemsetD32Async_v3020) X(MemsetD2D8Async, PFN_cuMemsetD2D8Async_v3020) \
  X(MemsetD2D16Async, PFN_cuMemsetD2D16Async_v3020)                                          \
  X(MemsetD2D32Async, PFN_cuMemsetD2D32Async_v3020)                                          \
  X(MemPrefetchAsyncV2, PFN_cuMemPrefetchAsync_v12020)                                       \
  X(MemPrefetchAsync, PFN_cuMemPrefetchAsync_v8000)                                          \
  X(GraphUpload, PFN_cuGraphUpload_v11010) X(Memcpy, PFN_cuMemcpy_v4000)                     \
  X(MemcpyPeer, PFN_cuMemcpyPeer_v4000) X(MemcpyHtoD, PFN_cuMemcpyHtoD_v3020)                \
  X(MemcpyDtoH, PFN_cuMemcpyDtoH_v3020) X(MemcpyDtoD, PFN_cuMemcpyDtoD_v3020)                \
  X(Memcpy2D, PFN_cuMemcpy2D_v3020) X(Memcpy3DPeer, PFN_cuMemcpy3DPeer_v4000)                \
  X(Memcpy3D, PFN_cuMemcpy3D_v3020)                                                          \
  X(MemsetD8, PFN_cuMemsetD8_v3020) X(MemsetD16, PFN_cuMemsetD16_v3020)                      \
  X(MemsetD32, PFN_cuMemsetD32_v3020) X(MemsetD2D8, PFN_cuMemsetD2D8_v3020)                  \
  X(MemsetD2D16, PFN_cuMemsetD2D16_v3020) X(MemsetD2D32, PFN_cuMemsetD2D32_v3020)

#define FREERIDE_GATE_CHECK(id, driver_type)                                               \
  static_assert(SameAbi<Ours##id, driver_type>::value,                                    \
                "gated_functions.h: " #id "'s parameters differ from the driver's " #driver_type);
FREERIDE_GATE_DRIVER_TYPES(FREERIDE_GATE_CHECK)
#undef FREERIDE_GATE_CHECK

// The interposer's one wrapper outside the list (interposer.cc).
static_assert(SameAbi<CuResult (*)(void**, void*, GraphInstantiateParams*), PFN_cuGraphInstantiateWithParams_v12000>::value);
static_assert(sizeof(GraphInstantiateParams) == sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) &&
              offsetof(GraphInstantiateParams, upload_stream) == offsetof(CUDA_GRAPH_INSTANTIATE_PARAMS, hUploadStream) &&
              offsetof(GraphInstantiateParams, result_out) == offsetof(CUDA_GRAPH_INSTANTIATE_PARAMS, result_out) &&
              kGraphInstantiateUpload == CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD &&
              kGraphInstantiateError == CUDA_GRAPH_INSTANTIATE_ERROR);
static_assert(sizeof(MemLocation) == sizeof(CUmemLocation));
// What launch ahead copies of a cuLaunchKernelEx (interposer.cc's TryDefer).
static_assert(sizeof(LaunchConfigWhole) == sizeof(CUlaunchConfig) &&
              offsetof(LaunchConfigWhole, head.stream) == offsetof(CUlaunchConfig, hStream) &&
              offsetof(LaunchConfigWhole, attrs) == offsetof(CUlaunchConfig, attrs) &&
              offsetof(LaunchConfigWhole, num_attrs) == offsetof(CUlaunchConfig, numAttrs) &&
              kLaunchAttributeBytes == sizeof(CUlaunchAttribute));

// The entry points ordered against queued work (ordered_functions.h),
// wrapped under launch ahead: each against the driver's typedef of its
// name at its least version (or its only one).
#define FREERIDE_ORDERED_PARAMS(id, base, legacy, per_thread, min_version, params, args) \
  using OrderedOurs##id = CuResult(*) params;
FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_PARAMS)
#undef FREERIDE_ORDERED_PARAMS
#if CUDA_VERSION >= 13000
#define FREERIDE_ORDERED_13_0_TYPES(X) X(CtxSynchronizeV2, PFN_cuCtxSynchronize_v13000)
#else
#define FREERIDE_ORDERED_13_0_TYPES(X)
#endif
#define FREERIDE_ORDERED_DRIVER_TYPES(X)                                                       \
  FREERIDE_ORDERED_13_0_TYPES(X)                                                               \
  X(EventRecord, PFN_cuEventRecord_v2000) X(EventRecordWithFlags, PFN_cuEventRecordWithFlags_v11010) \
  X(StreamWaitEvent, PFN_cuStreamWaitEvent_v3020) X(StreamSynchronize, PFN_cuStreamSynchronize_v2000) \
  X(StreamQuery, PFN_cuStreamQuery_v2000) X(CtxSynchronize, PFN_cuCtxSynchronize_v2000)         \
  X(LaunchHostFunc, PFN_cuLaunchHostFunc_v10000) X(StreamAddCallback, PFN_cuStreamAddCallback_v5000) \
  X(StreamWaitValue32V2, PFN_cuStreamWaitValue32_v11070) X(StreamWaitValue32, PFN_cuStreamWaitValue32_v8000) \
  X(StreamWaitValue64V2, PFN_cuStreamWaitValue64_v11070) X(StreamWaitValue64, PFN_cuStreamWaitValue64_v9000) \
  X(StreamWriteValue32V2, PFN_cuStreamWriteValue32_v11070)                                      \
  X(StreamWriteValue32, PFN_cuStreamWriteValue32_v8000)                                         \
  X(StreamWriteValue64V2, PFN_cuStreamWriteValue64_v11070)                                      \
  X(StreamWriteValue64, PFN_cuStreamWriteValue64_v9000)                                         \
  X(StreamBeginCapture, PFN_cuStreamBeginCapture_v10010)                                        \
  X(StreamBeginCaptureToGraph, PFN_cuStreamBeginCaptureToGraph_v12030)                          \
  X(StreamEndCapture, PFN_cuStreamEndCapture_v10000) X(MemFree, PFN_cuMemFree_v3020)            \
  X(MemFreeHost, PFN_cuMemFreeHost_v2000) X(MemHostUnregister, PFN_cuMemHostUnregister_v4000)   \
  X(MemFreeAsync, PFN_cuMemFreeAsync_v11020) X(MemUnmap, PFN_cuMemUnmap_v10020)                 \
  X(MemRelease, PFN_cuMemRelease_v10020) X(IpcCloseMemHandle, PFN_cuIpcCloseMemHandle_v4010)    \
  X(StreamDestroy, PFN_cuStreamDestroy_v4000) X(StreamSetAttribute, PFN_cuStreamSetAttribute_v11000) \
  X(GraphExecDestroy, PFN_cuGraphExecDestroy_v10000) X(ModuleUnload, PFN_cuModuleUnload_v2000)  \
  X(GraphExecUpdateV2, PFN_cuGraphExecUpdate_v12000)                                            \
  X(GraphExecUpdate, PFN_cuGraphExecUpdate_v10020)                                              \
  X(GraphExecKernelNodeSetParamsV2, PFN_cuGraphExecKernelNodeSetParams_v12000)                  \
  X(GraphExecKernelNodeSetParams, PFN_cuGraphExecKernelNodeSetParams_v10010)                    \
  X(GraphExecMemcpyNodeSetParams, PFN_cuGraphExecMemcpyNodeSetParams_v10020)                    \
  X(GraphExecMemsetNodeSetParams, PFN_cuGraphExecMemsetNodeSetParams_v10020)                    \
  X(GraphExecHostNodeSetParams, PFN_cuGraphExecHostNodeSetParams_v10020)                        \
  X(GraphExecChildGraphNodeSetParams, PFN_cuGraphExecChildGraphNodeSetParams_v11010)            \
  X(GraphExecEventRecordNodeSetEvent, PFN_cuGraphExecEventRecordNodeSetEvent_v11010)            \
  X(GraphExecEventWaitNodeSetEvent, PFN_cuGraphExecEventWaitNodeSetEvent_v11010)                \
  X(GraphExecExternalSemaphoresSignalNodeSetParams,                                             \
    PFN_cuGraphExecExternalSemaphoresSignalNodeSetParams_v11020)                                \
  X(GraphExecExternalSemaphoresWaitNodeSetParams,                                               \
    PFN_cuGraphExecExternalSemaphoresWaitNodeSetParams_v11020)                                  \
  X(GraphExecBatchMemOpNodeSetParams, PFN_cuGraphExecBatchMemOpNodeSetParams_v11070)            \
  X(GraphNodeSetEnabled, PFN_cuGraphNodeSetEnabled_v11060)                                      \
  X(GraphExecNodeSetParams, PFN_cuGraphExecNodeSetParams_v12020)                                \
  X(LibraryUnload, PFN_cuLibraryUnload_v12000) X(FuncSetAttribute, PFN_cuFuncSetAttribute_v9000) \
  X(KernelSetAttribute, PFN_cuKernelSetAttribute_v12000)                                        \
  X(SignalExternalSemaphoresAsync, PFN_cuSignalExternalSemaphoresAsync_v10000)                  \
  X(WaitExternalSemaphoresAsync, PFN_cuWaitExternalSemaphoresAsync_v10000)                      \
  X(GraphicsUnmapResources, PFN_cuGraphicsUnmapResources_v3000) X(CtxDestroy, PFN_cuCtxDestroy_v4000) \
  X(DevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000)                              \
  X(DevicePrimaryCtxReset, PFN_cuDevicePrimaryCtxReset_v11000)
#define FREERIDE_ORDERED_CHECK(id, driver_type)                                                 \
  static_assert(SameAbi<OrderedOurs##id, driver_type>::value,                                   \
                "ordered_functions.h: " #id "'s parameters differ from the driver's " #driver_type);
FREERIDE_ORDERED_DRIVER_TYPES(FREERIDE_ORDERED_CHECK)
#undef FREERIDE_ORDERED_CHECK

struct Checked {
  GatedFunction function;
  const char* driver_type;
};
constexpr Checked kChecked[] = {
#define FREERIDE_GATE_CHECKED(id, driver_type) {GatedFunction::k##id, #driver_type},
    FREERIDE_GATE_DRIVER_TYPES(FREERIDE_GATE_CHECKED)
#undef FREERIDE_GATE_CHECKED
};

int MinVersion(GatedFunction f) {
  constexpr int kMinVersion[] = {
#define FREERIDE_GATE_MIN(id, base, legacy, per_thread, min_version, ...) min_version,
      FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_MIN)
#undef FREERIDE_GATE_MIN
  };
  return kMinVersion[static_cast<size_t>(f)];
}

// The names of a parameter list's parameters ("(void* f, unsigned gx)" ->
// f, gx), or of an argument list's arguments.
std::vector<std::string> NamesIn(std::string list) {
  list = list.substr(list.find('(') + 1, list.rfind(')') - list.find('(') - 1);
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string part = list.substr(start, end - start);
    size_t last = part.find_last_not_of(" \t");
    size_t first = last == std::string::npos ? 0 : part.find_last_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", last);
    names.push_back(last == std::string::npos ? "" : part.substr(first == std::string::npos ? 0 : first + 1,
                                                                  last - (first == std::string::npos ? 0 : first + 1) + 1));
    start = end + 1;
  }
  return names;
}

struct Lists {
  const char* base;
  const char* params;
  const char* args;
  const char* stream;
};
constexpr Lists kLists[] = {
#define FREERIDE_GATE_LISTS(id, base, legacy, per_thread, min_version, params, args, stream) \
  {base, #params, #args, #stream},
    FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_LISTS)
#undef FREERIDE_GATE_LISTS
};

// The sizes and classes above cannot see two parameters of one type passed
// in each other's place: each wrapper must pass its parameters on in their
// order, and find its stream in one of them.
TEST(GateSignatures, EachWrapperPassesItsParametersOnInTheirOrderAndReadsItsStreamFromOne) {
  for (const Lists& l : kLists) {
    const std::vector<std::string> params = NamesIn(l.params), args = NamesIn(l.args);
    EXPECT_EQ(params, args) << l.base << ": " << l.params << " passed on as " << l.args;
    const std::string stream = l.stream;
    const bool names_a_parameter =
        std::any_of(params.begin(), params.end(), [&](const std::string& p) {
          return !p.empty() && (stream == p || stream.find(p + "->") != std::string::npos ||
                                stream.find(p + " ?") != std::string::npos);
        });
    EXPECT_TRUE(stream == "nullptr" || names_a_parameter) << l.base << "'s stream " << stream;
  }
  EXPECT_EQ(NamesIn("(unsigned long long flags, CuStream s)"), (std::vector<std::string>{"flags", "s"}));
  EXPECT_EQ(NamesIn("(d, pitch, v)"), (std::vector<std::string>{"d", "pitch", "v"}));
}

TEST(GateSignatures, EveryOrderedEntryIsCheckedAgainstTheDriversTypedefAndPassesItsParametersOnInOrder) {
  struct Ordered {
    const char* base;
    int min_version;
    const char* params;
    const char* args;
  };
  constexpr Ordered kOrdered[] = {
#define FREERIDE_ORDERED_LISTS(id, base, legacy, per_thread, min_version, params, args) \
  {base, min_version, #params, #args},
      FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_LISTS)
#undef FREERIDE_ORDERED_LISTS
  };
  const std::vector<std::string> checked = {
#define FREERIDE_ORDERED_CHECKED(id, driver_type) #driver_type,
      FREERIDE_ORDERED_DRIVER_TYPES(FREERIDE_ORDERED_CHECKED)
#undef FREERIDE_ORDERED_CHECKED
  };
  for (size_t i = 0; i < std::size(kOrdered); ++i) {
    const Ordered& o = kOrdered[i];
    EXPECT_EQ(NamesIn(o.params), NamesIn(o.args)) << o.base << ": " << o.params << " passed on as " << o.args;
    if (o.min_version > CUDA_VERSION) continue;
    const std::string prefix = std::string("PFN_") + o.base + "_v";
    const auto found = std::find_if(checked.begin(), checked.end(), [&](const std::string& type) {
      return type.rfind(prefix, 0) == 0 && (o.min_version == 0 || std::stoi(type.substr(prefix.size())) == o.min_version);
    });
    EXPECT_NE(found, checked.end()) << o.base << " at version " << o.min_version << " is not checked against cuda.h";
    EXPECT_EQ(BaseName(OrderedFunction(i)), std::string(o.base));
  }
}

TEST(GateSignatures, EveryGatedEntryIsCheckedOnceAgainstTheDriversTypedefOfItsNameAndVersion) {
  bool seen[static_cast<size_t>(GatedFunction::kCount)] = {};
  for (const Checked& c : kChecked) {
    const size_t i = static_cast<size_t>(c.function);
    EXPECT_FALSE(seen[i]) << c.driver_type << ": its entry is checked twice";
    seen[i] = true;
    const std::string type = c.driver_type;
    const std::string prefix = std::string("PFN_") + BaseName(c.function) + "_v";
    ASSERT_EQ(type.rfind(prefix, 0), 0u) << type << " is not a typedef of " << BaseName(c.function);
    const int version = std::stoi(type.substr(prefix.size()));
    // An entry with a least version is checked at that version's signature.
    if (MinVersion(c.function) > 0) {
      EXPECT_EQ(version, MinVersion(c.function)) << type;
    }
  }
  for (size_t i = 0; i < std::size(seen); ++i) {
    if (MinVersion(GatedFunction(i)) <= CUDA_VERSION) {
      EXPECT_TRUE(seen[i]) << BaseName(GatedFunction(i)) << " (entry " << i << ") is not checked against cuda.h";
    }
  }
}

}  // namespace
}  // namespace freeride::gate
