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
