// libfreeride_gate.so: loaded into a side task with LD_PRELOAD by the
// daemon, it makes every piece of the task's GPU work wait on its lane's
// gate, on the GPU, without any change to the program.
//
// How launches are reached: since CUDA 11.3 the runtime does not call the
// driver by name; it asks cuGetProcAddress for each entry point, and finds
// cuGetProcAddress itself with dlsym on the driver's handle.  So the
// interposer answers dlsym for cuGetProcAddress (and for the gated names,
// for programs that load the driver themselves, as Triton's launcher
// does), answers cuGetProcAddress with its wrappers for the gated entry
// points and refusers for the uncovered ones, and exports the gated names,
// the ordered ones and the uncovered ones (refused; below) for programs
// linked against libcuda.
// Each wrapper asks the process's LaunchGate for a wait on the work's stream
// and then calls the driver's own entry point.
//
// Under launch ahead (FREERIDE_GATE_AHEAD=N, an experiment;
// gate/launch_ahead.h) the asynchronous launches, fills and device copies
// whose arguments can be copied are queued instead, and the process's
// submitter thread makes the gated calls; every other gated call, and every
// entry point ordered against queued work (gate/ordered_functions.h), first
// waits until what was queued before it has been submitted.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "base/settings.h"
#include "gate/copy_split.h"
#include "gate/gate_page.h"
#include "gate/launch_ahead.h"
#include "gate/launch_gate.h"
#include "gate/ordered_functions.h"
#include "gate/piece_key.h"
#include "gate/symbol_table.h"

using namespace freeride::gate;

extern "C" CuResult FreerideGetProcAddressV1(const char*, void**, int, uint64_t);
extern "C" CuResult FreerideGetProcAddressV2(const char*, void**, int, uint64_t, int*);

namespace {

using DlsymFn = void* (*)(void*, const char*);
using GetProcV1 = CuResult (*)(const char*, void**, int, uint64_t);
using GetProcV2 = CuResult (*)(const char*, void**, int, uint64_t, int*);

DlsymFn RealDlsym() {
  static DlsymFn real = [] {
    // glibc 2.34 moved dlsym into libc with a new version; older programs
    // bind the old one.  Either reaches the same function.
    auto fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (!fn) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    return fn;
  }();
  return real;
}

void* LibCuda() {
  static void* handle = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? h : dlopen("libcuda.so.1", RTLD_NOW);
  }();
  return handle;
}

void* DriverSymbol(const char* name) {
  void* lib = LibCuda();
  DlsymFn real = RealDlsym();
  return lib && real ? real(lib, name) : nullptr;
}

bool FromThisLibrary(void* address);

constexpr size_t kGatedCount = static_cast<size_t>(GatedFunction::kCount);
constexpr const char* kLegacyExport[] = {
#define FREERIDE_GATE_EXPORT(id, base, legacy, ...) legacy,
    FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_EXPORT)
#undef FREERIDE_GATE_EXPORT
};
constexpr const char* kPerThreadExport[] = {
#define FREERIDE_GATE_EXPORT(id, base, legacy, per_thread, ...) per_thread,
    FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_EXPORT)
#undef FREERIDE_GATE_EXPORT
};

// The driver's own entry point behind each wrapper, by variant; filled as
// the program looks them up, else from the driver by name on first call.
std::atomic<void*> g_real[kGatedCount][2];
std::atomic<void*> g_real_get_proc_v1{nullptr};
std::atomic<void*> g_real_get_proc_v2{nullptr};

void* Real(GatedFunction function, bool per_thread) {
  size_t i = static_cast<size_t>(function);
  void* fn = g_real[i][per_thread].load(std::memory_order_acquire);
  if (!fn) {
    fn = DriverSymbol(per_thread ? kPerThreadExport[i] : kLegacyExport[i]);
    g_real[i][per_thread].store(fn, std::memory_order_release);
  }
  return fn;
}

LaunchGate& TheGate() {
  static LaunchGate* gate = [] {
    DriverApi api;
    api.stream_wait_value32 =
        reinterpret_cast<decltype(api.stream_wait_value32)>(DriverSymbol("cuStreamWaitValue32_v2"));
    api.stream_is_capturing =
        reinterpret_cast<decltype(api.stream_is_capturing)>(DriverSymbol("cuStreamIsCapturing"));
    api.mem_host_register =
        reinterpret_cast<decltype(api.mem_host_register)>(DriverSymbol("cuMemHostRegister_v2"));
    api.mem_host_get_device_pointer = reinterpret_cast<decltype(api.mem_host_get_device_pointer)>(
        DriverSymbol("cuMemHostGetDevicePointer_v2"));
    api.event_create = reinterpret_cast<decltype(api.event_create)>(DriverSymbol("cuEventCreate"));
    api.event_record = reinterpret_cast<decltype(api.event_record)>(DriverSymbol("cuEventRecord"));
    api.event_query = reinterpret_cast<decltype(api.event_query)>(DriverSymbol("cuEventQuery"));
    api.event_elapsed_time =
        reinterpret_cast<decltype(api.event_elapsed_time)>(DriverSymbol("cuEventElapsedTime_v2"));
    if (!api.event_elapsed_time)
      api.event_elapsed_time =
          reinterpret_cast<decltype(api.event_elapsed_time)>(DriverSymbol("cuEventElapsedTime"));
    api.event_destroy = reinterpret_cast<decltype(api.event_destroy)>(DriverSymbol("cuEventDestroy_v2"));
    api.thread_exchange_capture_mode = reinterpret_cast<decltype(api.thread_exchange_capture_mode)>(
        DriverSymbol("cuThreadExchangeStreamCaptureMode"));
    // Never unmapped: a thread held at exit still reads it (LaunchGate's hold).
    static freeride::GatePage& page = *new freeride::GatePage;
    std::string error;
    const char* path = std::getenv("FREERIDE_GATE_PAGE");
    if (!path || !*path) {
      error = "FREERIDE_GATE_PAGE is not set: this process was not started by a FreeRide daemon "
              "with a gate";
    } else if (page.Open(path, &error)) {
      page.layout()->interposers_attached.fetch_add(1);
    }
    freeride::GateTaskSlot* slot = page.is_open() ? page.ClaimTaskSlot(getpid()) : nullptr;
    const char* strict = std::getenv("FREERIDE_GATE_STRICT");
    // An experiment: queued work predicted at the pieces' mean (launch_gate.h's QueueEstimate).
    const QueueEstimate queue_estimate =
        freeride::ChoiceSetting("freeride-gate", "FREERIDE_GATE_QUEUE_ESTIMATE", {"p95", "mean"}, 0) == 1
            ? QueueEstimate::kMean
            : QueueEstimate::kP95;
    // Experiments: how much the gate economises far inside an open bubble (GateTuning).
    GateTuning tuning;
    tuning.run = static_cast<uint32_t>(
        freeride::WholeNumberSetting("freeride-gate", "FREERIDE_GATE_RUN", tuning.run, 1, GateTuning::kMostRun));
    tuning.sample_every = freeride::WholeNumberSetting("freeride-gate", "FREERIDE_GATE_SAMPLE_EVERY", tuning.sample_every,
                                                       1, GateTuning::kMostSampleEvery);
    // An experiment: pieces predicted by their kind's learned length (GateTuning).
    tuning.lengths_by_kind =
        freeride::ChoiceSetting("freeride-gate", "FREERIDE_GATE_LENGTHS", {"common", "kind"}, 0) == 1;
    tuning.room_pct = static_cast<int>(freeride::WholeNumberSetting("freeride-gate", "FREERIDE_GATE_ROOM",
                                                                     tuning.room_pct, 100, GateTuning::kMostRoomPct, "percent"));
    // An experiment: how a held thread watches an iteration's first bubble (GateTuning).
    tuning.watch_spins = freeride::ChoiceSetting("freeride-gate", "FREERIDE_GATE_WATCH", {"sleep", "spin"}, 0) == 1;
    return new LaunchGate(api, page.is_open() ? page.page() : nullptr, error, slot, RealHostClock(),
                          strict && std::string(strict) == "1", queue_estimate, tuning);
  }();
  return *gate;
}

template <typename Fn>
Fn RealAs(GatedFunction function, bool per_thread) {
  return reinterpret_cast<Fn>(Real(function, per_thread));
}

// The ordinal of the device whose own memory `address` is (memory type
// device, not managed: managed pages may lie on the host), or -1 (host
// memory, managed memory, or the driver cannot say).
int DeviceOrdinalOf(CuDevicePtr address) {
  using GetAttribute = CuResult (*)(void* data, int attribute, CuDevicePtr pointer);
  static const auto get_attribute = reinterpret_cast<GetAttribute>(DriverSymbol("cuPointerGetAttribute"));
  constexpr int kMemoryType = 2;      // CU_POINTER_ATTRIBUTE_MEMORY_TYPE (a 4-byte CUmemorytype)
  constexpr int kIsManaged = 8;       // CU_POINTER_ATTRIBUTE_IS_MANAGED
  constexpr int kDeviceOrdinal = 9;   // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL (an int)
  constexpr uint32_t kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE
  if (!get_attribute) return -1;
  // Zeroed 8 bytes each, read at their low 4: a flag written as one byte or four reads the same.
  uint64_t type = 0, managed = 0, ordinal = 0;
  if (get_attribute(&type, kMemoryType, address) != kCudaSuccess || static_cast<uint32_t>(type) != kMemoryTypeDevice)
    return -1;
  if (get_attribute(&managed, kIsManaged, address) != kCudaSuccess || static_cast<uint32_t>(managed) != 0) return -1;
  if (get_attribute(&ordinal, kDeviceOrdinal, address) != kCudaSuccess) return -1;
  return static_cast<int>(static_cast<uint32_t>(ordinal));
}

// Whether a copy between `dst` and `src` stays in one device's own memory.
bool OnOneDevice(CuDevicePtr dst, CuDevicePtr src) {
  const int device = DeviceOrdinalOf(dst);
  return device >= 0 && DeviceOrdinalOf(src) == device;
}

// A batched copy of CUDA 12.8's signature, or a batched decompression,
// refused before the driver saw it: its failure index says no single one
// failed (SIZE_MAX, as the driver writes for such errors).  Nothing for
// other entry points.
template <GatedFunction f, typename... Args>
void RefusedBatch(Args... args) {
  auto all = std::tuple<Args...>(args...);
  size_t* fail_idx = nullptr;
  if constexpr (f == GatedFunction::kMemcpyBatchAsync) fail_idx = std::get<7>(all);
  if constexpr (f == GatedFunction::kMemcpy3DBatchAsync) fail_idx = std::get<2>(all);
  if constexpr (f == GatedFunction::kMemBatchDecompressAsync) fail_idx = std::get<3>(all);
  if (fail_idx) *fail_idx = SIZE_MAX;
}

// --- launch ahead ------------------------------------------------------------

#define FREERIDE_UNPAREN(...) __VA_ARGS__

// The process's launch-ahead queue, or null when FREERIDE_GATE_AHEAD is unset
// or 0 (its value: pieces queued at most).
LaunchAhead* TheAhead() {
  static LaunchAhead* ahead = []() -> LaunchAhead* {
    const uint64_t most = freeride::WholeNumberSetting("freeride-gate", "FREERIDE_GATE_AHEAD", 0, 0,
                                                       LaunchAhead::kMostQueued);
    if (most == 0) return nullptr;
    // How long the submitter and a barrier look before they sleep
    // (bench/launch_ahead_bench.cc: far quicker hand-offs with a core free,
    // slower ones where every core is taken).
    const uint64_t spin_us = freeride::WholeNumberSetting(
        "freeride-gate", "FREERIDE_GATE_AHEAD_SPIN_US",
        static_cast<uint64_t>(LaunchAhead::kSpinFor.count()), 0, LaunchAhead::kMostSpin.count());
    // Never destroyed: a program's last pieces may still be queued at exit.
    return new LaunchAhead(most, std::chrono::microseconds(spin_us));
  }();
  return ahead;
}

// Streams being captured into graphs, counted at the ordered wrappers of
// capture's begin and end: while any is, nothing is deferred (a capture
// takes its work on the thread and in the order the program makes it).
std::atomic<int> g_captures{0};

// The context current on the calling thread (null: none, or no driver).
void* CurrentContext() {
  using Get = CuResult (*)(void**);
  static const auto get = reinterpret_cast<Get>(DriverSymbol("cuCtxGetCurrent"));
  void* context = nullptr;
  if (!get || get(&context) != kCudaSuccess) return nullptr;
  return context;
}

// Makes `context` current on the submitter, which submits for any thread.
void MakeCurrent(void* context) {
  using Set = CuResult (*)(void*);
  static const auto set = reinterpret_cast<Set>(DriverSymbol("cuCtxSetCurrent"));
  thread_local void* current = nullptr;
  if (context == current || !set) return;
  if (set(context) == kCudaSuccess) current = context;
}

// The sizes of a kernel's parameters, from the driver (CUDA 12.4's
// cuFuncGetParamInfo, or cuKernelGetParamInfo for a library's kernel passed
// as a function); empty optional: the driver cannot say, so its launches
// are not deferred.  Kept per function until a module or library is unloaded.
using ParamSizes = std::vector<uint32_t>;
std::shared_mutex g_param_sizes_mutex;
std::unordered_map<void*, std::optional<ParamSizes>> g_param_sizes;  // under g_param_sizes_mutex

std::optional<ParamSizes> QueryParamSizes(void* function) {
  using Info = CuResult (*)(void*, size_t, size_t*, size_t*);
  static const auto by_function = reinterpret_cast<Info>(DriverSymbol("cuFuncGetParamInfo"));
  static const auto by_kernel = reinterpret_cast<Info>(DriverSymbol("cuKernelGetParamInfo"));
  constexpr size_t kMostParams = 4096;  // a kernel's parameters fit in 32 KiB
  // Both forms are asked, and "no parameters" is believed only where neither
  // names one: how a driver answers a handle of the other kind (a runtime's
  // CUkernel passed as a CUfunction) is not documented, and a launch deferred
  // with its parameters dropped would run with garbage.
  std::optional<ParamSizes> none;
  for (Info info : {by_function, by_kernel}) {
    if (!info) continue;
    ParamSizes sizes;
    for (size_t i = 0; i < kMostParams; ++i) {
      size_t offset = 0, size = 0;
      const CuResult r = info(function, i, &offset, &size);
      if (r == kCudaErrorInvalidValue) {  // past the last parameter (at 0: none)
        if (!sizes.empty()) return sizes;
        none = ParamSizes{};
        break;
      }
      if (r != kCudaSuccess) break;  // not this form's handle
      sizes.push_back(static_cast<uint32_t>(size));
    }
  }
  return none;
}

std::optional<ParamSizes> ParamSizesOf(void* function) {
  {
    std::shared_lock lock(g_param_sizes_mutex);
    if (auto it = g_param_sizes.find(function); it != g_param_sizes.end()) return it->second;
  }
  std::optional<ParamSizes> sizes = QueryParamSizes(function);
  std::unique_lock lock(g_param_sizes_mutex);
  g_param_sizes.emplace(function, sizes);
  return sizes;
}

void ForgetParamSizes() {
  std::unique_lock lock(g_param_sizes_mutex);
  g_param_sizes.clear();
}

// A kernel's arguments, copied: the values its kernelParams point to, or
// the buffer its `extra` names (CU_LAUNCH_PARAM_BUFFER_POINTER/_SIZE).
class CopiedArguments {
 public:
  // False: they cannot be copied (sizes unknown, an `extra` this does not
  // read, or both forms at once); the launch is then not deferred.
  bool Copy(void* function, void** params, void** extra) {
    if (params && extra) return false;
    if (extra) return CopyExtra(extra);
    const std::optional<ParamSizes> sizes = ParamSizesOf(function);
    if (!sizes) return false;
    if (!sizes->empty() && !params) return false;
    for (size_t i = 0; i < sizes->size(); ++i) {
      const size_t at = (bytes_.size() + 15) & ~size_t{15};
      bytes_.resize(at + (*sizes)[i]);
      std::memcpy(bytes_.data() + at, params[i], (*sizes)[i]);
      offsets_.push_back(at);
    }
    return true;
  }
  // The copies as the driver takes them (valid until this is destroyed).
  void** Params() {
    if (has_extra_) return nullptr;
    pointers_.resize(offsets_.size());
    for (size_t i = 0; i < offsets_.size(); ++i) pointers_[i] = bytes_.data() + offsets_[i];
    return pointers_.empty() ? nullptr : pointers_.data();
  }
  void** Extra() {
    if (!has_extra_) return nullptr;
    extra_ = {reinterpret_cast<void*>(1), bytes_.data(), reinterpret_cast<void*>(2), &extra_size_, nullptr};
    return extra_.data();
  }

 private:
  bool CopyExtra(void** extra) {
    const void* buffer = nullptr;
    const size_t* size = nullptr;
    for (size_t i = 0; i < 64; i += 2) {
      const auto key = reinterpret_cast<uintptr_t>(extra[i]);
      if (key == 0) {
        if (!buffer || !size) return false;
        bytes_.assign(static_cast<const unsigned char*>(buffer), static_cast<const unsigned char*>(buffer) + *size);
        extra_size_ = *size;
        has_extra_ = true;
        return true;
      }
      if (key == 1) buffer = extra[i + 1];
      else if (key == 2) size = static_cast<const size_t*>(extra[i + 1]);
      else return false;
    }
    return false;
  }
  std::vector<unsigned char> bytes_;
  std::vector<size_t> offsets_;
  std::vector<void*> pointers_;
  std::vector<void*> extra_;
  size_t extra_size_ = 0;
  bool has_extra_ = false;
};

// Whether work on `stream` means the same on the submitter as on the caller:
// not the calling thread's own default stream.
bool SameStreamOnAnyThread(CuStream stream, bool per_thread) {
  if (stream == kPerThreadStream) return false;
  return !(per_thread && stream == nullptr);
}

// Queues the piece `f(args...)` for the submitter when launch ahead may take
// it, and says so (kCudaSuccess: queued; the program's call returns that);
// empty: submit it on this thread, after a barrier.  `submit` is the
// legacy-stream wrapper the submitter calls.
template <GatedFunction f, bool kPerThread, typename Submit, typename... Args>
std::optional<CuResult> TryDefer(LaunchAhead& ahead, Submit submit, Args... args) {
  constexpr bool kKernel = f == GatedFunction::kLaunchKernel || f == GatedFunction::kLaunchKernelEx;
  constexpr bool kPlain = f == GatedFunction::kGraphLaunch || f == GatedFunction::kMemsetD8Async ||
                          f == GatedFunction::kMemsetD16Async || f == GatedFunction::kMemsetD32Async ||
                          f == GatedFunction::kMemsetD2D8Async || f == GatedFunction::kMemsetD2D16Async ||
                          f == GatedFunction::kMemsetD2D32Async || f == GatedFunction::kMemcpyDtoDAsync ||
                          f == GatedFunction::kMemcpyAsync;
  if constexpr (!kKernel && !kPlain) {
    return std::nullopt;
  } else {
    // Armed on the program's own thread (a refusal is then returned by its call).
    if (TheGate().state() != GateState::kArmed || g_captures.load(std::memory_order_acquire) > 0) return std::nullopt;
    void* const context = CurrentContext();
    if (!context) return std::nullopt;
    if constexpr (f == GatedFunction::kLaunchKernel) {
      auto [fn, gx, gy, gz, bx, by, bz, shm, stream, params, extra] = std::tuple<Args...>(args...);
      if (!SameStreamOnAnyThread(stream, kPerThread)) return std::nullopt;
      auto copied = std::make_shared<CopiedArguments>();
      if (!copied->Copy(fn, params, extra)) return std::nullopt;
      ahead.Defer([=, fn = fn, stream = stream] {
        MakeCurrent(context);
        return submit(fn, gx, gy, gz, bx, by, bz, shm, stream, copied->Params(), copied->Extra());
      });
      return kCudaSuccess;
    } else if constexpr (f == GatedFunction::kLaunchKernelEx) {
      auto [config, fn, params, extra] = std::tuple<Args...>(args...);
      if (!config || !SameStreamOnAnyThread(config->stream, kPerThread)) return std::nullopt;
      const auto* whole = reinterpret_cast<const LaunchConfigWhole*>(config);
      if (whole->num_attrs > 0 && !whole->attrs) return std::nullopt;
      auto copied = std::make_shared<CopiedArguments>();
      if (!copied->Copy(fn, params, extra)) return std::nullopt;
      auto attributes = std::make_shared<std::vector<unsigned char>>(
          static_cast<const unsigned char*>(whole->attrs),
          static_cast<const unsigned char*>(whole->attrs) + whole->num_attrs * kLaunchAttributeBytes);
      const LaunchConfigWhole kept = *whole;
      ahead.Defer([=, fn = fn] {
        MakeCurrent(context);
        LaunchConfigWhole config = kept;
        config.attrs = attributes->empty() ? nullptr : attributes->data();
        return submit(&config.head, fn, copied->Params(), copied->Extra());
      });
      return kCudaSuccess;
    } else {
      const auto all = std::tuple<Args...>(args...);
      if (!SameStreamOnAnyThread(std::get<sizeof...(Args) - 1>(all), kPerThread)) return std::nullopt;
      if constexpr (f == GatedFunction::kMemcpyAsync)
        if (!OnOneDevice(std::get<0>(all), std::get<1>(all))) return std::nullopt;  // host memory: may be pageable
      ahead.Defer([=] {
        MakeCurrent(context);
        return std::apply(submit, all);
      });
      return kCudaSuccess;
    }
  }
}

// One wrapper per entry point and variant: GatedPiece submits one piece of
// work; Gated first cuts a long one-dimensional copy into pieces
// (gate/copy_split.h), unless its stream is capturing into a graph.
#define FREERIDE_GATE_WRAPPER(id, base, legacy, per_thread, min_version, params, args, stream) \
  template <bool kPerThread>                                                                \
  CuResult GatedPiece##id params {                                                          \
    /* A stream expression of nullptr: a synchronous call, neither timed nor fenced. */   \
    constexpr bool kSynchronous = std::is_same_v<std::decay_t<decltype(stream)>, std::nullptr_t>; \
    WorkSample sample;                                                                      \
    if constexpr (!kSynchronous)                                                            \
      if (TheGate().learns_kinds()) sample.key = PieceKeyOf<GatedFunction::k##id> args;     \
    sample.whole_graph = GatedFunction::k##id == GatedFunction::kGraphLaunch;               \
    CuResult gated = TheGate().BeforeWork(stream, kPerThread, kSynchronous ? nullptr : &sample); \
    if (gated != kCudaSuccess) return RefusedBatch<GatedFunction::k##id> args, gated;         \
    using Fn = CuResult(*) params;                                                          \
    Fn fn = RealAs<Fn>(GatedFunction::k##id, kPerThread);                                   \
    if (!fn) return RefusedBatch<GatedFunction::k##id> args, kCudaErrorNotSupported;          \
    CuResult result = fn args;                                                              \
    if (result != kCudaSuccess) sample.queued = false; /* nothing was queued to count */    \
    TheGate().AfterWork(sample);                                                            \
    return result;                                                                          \
  }                                                                                         \
  template <bool kPerThread, bool kMayDefer = true>                                         \
  CuResult Gated##id params {                                                               \
    constexpr bool kSynchronous = std::is_same_v<std::decay_t<decltype(stream)>, std::nullptr_t>; \
    LaunchAhead* ahead = LaunchAhead::OnSubmitter() ? nullptr : TheAhead();                 \
    if (ahead) {                                                                            \
      if constexpr (kMayDefer)                                                              \
        if (auto queued = TryDefer<GatedFunction::k##id, kPerThread>(*ahead, &Gated##id<false>, \
                                                                     FREERIDE_UNPAREN args))         \
          return *queued;                                                                   \
      ahead->Barrier();                                                                     \
    }                                                                                       \
    const CuResult result = CutOrSubmit<GatedFunction::k##id>(                              \
        &GatedPiece##id<kPerThread>,                                                        \
        [&] { return !kSynchronous && TheGate().Capturing(stream, kPerThread); },           \
        &OnOneDevice) args;                                                                 \
    return ahead && result == kCudaSuccess ? ahead->TakeError() : result;                   \
  }
FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_WRAPPER)
#undef FREERIDE_GATE_WRAPPER

void* const kWrapper[kGatedCount][2] = {
#define FREERIDE_GATE_WRAPPER_PTR(id, ...) \
  {reinterpret_cast<void*>(&Gated##id<false>), reinterpret_cast<void*>(&Gated##id<true>)},
    FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_WRAPPER_PTR)
#undef FREERIDE_GATE_WRAPPER_PTR
};

// cuGraphInstantiateWithParams uploads the graph as it instantiates it when
// asked (the upload flag), on the stream it names: work the gate must see.
// Its wrapper instantiates without the flag, then uploads through the gated
// cuGraphUpload on that stream: the same work, in two calls.  Without the
// flag, instantiation queues no work and passes through.
constexpr const char* kInstantiateBase = "cuGraphInstantiateWithParams";
constexpr const char* kInstantiateExport[2] = {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz"};
std::atomic<void*> g_real_instantiate[2];

template <bool kPerThread>
CuResult GatedInstantiateWithParams(void** exec, void* graph, GraphInstantiateParams* params) {
  using Fn = CuResult (*)(void**, void*, GraphInstantiateParams*);
  auto real = reinterpret_cast<Fn>(g_real_instantiate[kPerThread].load(std::memory_order_acquire));
  if (!real) {
    real = reinterpret_cast<Fn>(DriverSymbol(kInstantiateExport[kPerThread]));
    g_real_instantiate[kPerThread].store(reinterpret_cast<void*>(real), std::memory_order_release);
  }
  if (!real) return kCudaErrorNotSupported;
  if (!LaunchAhead::OnSubmitter())
    if (LaunchAhead* ahead = TheAhead()) ahead->Barrier();
  if (!params || !(params->flags & kGraphInstantiateUpload)) return real(exec, graph, params);
  // The caller's own struct, its flag cleared for the call and put back:
  // the driver writes its outputs there, whatever the struct's size.
  params->flags &= ~kGraphInstantiateUpload;
  const CuResult result = real(exec, graph, params);
  params->flags |= kGraphInstantiateUpload;
  if (result != kCudaSuccess || !exec) return result;
  const CuResult uploaded = GatedGraphUpload<kPerThread>(*exec, params->upload_stream);
  if (uploaded != kCudaSuccess) {
    // As one call that failed: no exec is left behind (a graph with memory
    // nodes may have one exec at a time), and the result says why.
    using Destroy = CuResult (*)(void*);
    if (auto destroy = reinterpret_cast<Destroy>(DriverSymbol("cuGraphExecDestroy"))) destroy(*exec);
    *exec = nullptr;
    params->error_node_out = nullptr;
    params->result_out = kGraphInstantiateError;
  }
  return uploaded;
}
void* const kInstantiateWrapper[2] = {reinterpret_cast<void*>(&GatedInstantiateWithParams<false>),
                                      reinterpret_cast<void*>(&GatedInstantiateWithParams<true>)};

// Our wrapper of variant `per_thread`, keeping the driver's `real` (unless
// it is our own export, found first by name).
void* InstantiateWrapper(bool per_thread, void* real) {
  if (!FromThisLibrary(real)) g_real_instantiate[per_thread].store(real, std::memory_order_release);
  return kInstantiateWrapper[per_thread];
}

// Our wrapper for `name` (an exported name of cuGraphInstantiateWithParams),
// keeping the driver's `real`; null for any other name.
void* InstantiateByExportName(const char* name, void* real) {
  for (int per_thread = 0; per_thread < 2; ++per_thread)
    if (std::strcmp(name, kInstantiateExport[per_thread]) == 0) return InstantiateWrapper(per_thread, real);
  return nullptr;
}

// The entry points ordered against queued work (gate/ordered_functions.h):
// under launch ahead each first waits for what was queued before it, then
// calls the driver; a piece that failed on the submitter since is reported
// by the first such call that succeeds.  Handed out by look-ups only under
// launch ahead; exported under the driver's names always (below: a program
// linked against libcuda binds those at load time), passing straight to the
// driver without it.
constexpr size_t kOrderedCount = static_cast<size_t>(OrderedFunction::kCount);
constexpr const char* kOrderedExport[kOrderedCount][2] = {
#define FREERIDE_ORDERED_EXPORT(id, base, legacy, per_thread, ...) {legacy, per_thread},
    FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_EXPORT)
#undef FREERIDE_ORDERED_EXPORT
};

// The names the uncovered entry points' refusers are exported as (below).
constexpr const char* kUncoveredExport[] = {
#define FREERIDE_UNCOVERED_EXPORT(id, name) #name,
    FREERIDE_UNCOVERED_EXPORTS(FREERIDE_UNCOVERED_EXPORT)
#undef FREERIDE_UNCOVERED_EXPORT
};

// Whether `name` is exported here other than as ordered entry `self`'s own:
// a gated, instantiation, refused or look-up name, or another ordered entry's.
constexpr bool ExportedElsewhere(std::string_view name, size_t self) {
  for (size_t i = 0; i < kGatedCount; ++i)
    if (name == kLegacyExport[i] || name == kPerThreadExport[i]) return true;
  for (std::string_view other : kInstantiateExport)
    if (name == other) return true;
  for (std::string_view other : kUncoveredExport)
    if (name == other) return true;
  for (std::string_view other : {"cuGetProcAddress", "cuGetProcAddress_v2", "dlsym"})
    if (name == other) return true;
  for (size_t i = 0; i < kOrderedCount; ++i)
    if (i != self && (name == kOrderedExport[i][0] || name == kOrderedExport[i][1])) return true;
  return false;
}
// A per-thread export is weak (interposer_per_thread.cc) and gives way, at
// link time, to a strong definition of its name: that must be its own
// entry's legacy export (the same wrapper, the same driver symbol), never
// another function's.
static_assert(
    [] {
      for (size_t i = 0; i < kOrderedCount; ++i)
        for (const char* name : kOrderedExport[i])
          if (ExportedElsewhere(name, i)) return false;
      return true;
    }(),
    "an ordered entry point's exported name is exported by another entry too");
std::atomic<void*> g_real_ordered[kOrderedCount][2];

void* RealOrdered(OrderedFunction function, bool per_thread) {
  const size_t i = static_cast<size_t>(function);
  void* fn = g_real_ordered[i][per_thread].load(std::memory_order_acquire);
  if (!fn) {
    fn = DriverSymbol(kOrderedExport[i][per_thread]);
    g_real_ordered[i][per_thread].store(fn, std::memory_order_release);
  }
  return fn;
}

// What an ordered call changes for launch ahead: captures begun and ended,
// kernels unloaded (their parameter sizes are asked again).
void AfterOrdered(OrderedFunction function, CuResult result) {
  switch (function) {
    case OrderedFunction::kStreamBeginCapture:
    case OrderedFunction::kStreamBeginCaptureToGraph:
      if (result == kCudaSuccess) g_captures.fetch_add(1, std::memory_order_acq_rel);
      break;
    case OrderedFunction::kStreamEndCapture: {
      int n = g_captures.load(std::memory_order_acquire);
      while (n > 0 && !g_captures.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
      }
      break;
    }
    case OrderedFunction::kModuleUnload:
    case OrderedFunction::kLibraryUnload:
      ForgetParamSizes();
      break;
    default:
      break;
  }
}

#define FREERIDE_ORDERED_WRAPPER(id, base, legacy, per_thread, min_version, params, args) \
  template <bool kPerThread>                                                            \
  CuResult Ordered##id params {                                                         \
    LaunchAhead* ahead = LaunchAhead::OnSubmitter() ? nullptr : TheAhead();             \
    if (ahead) ahead->Barrier();                                                        \
    using Fn = CuResult(*) params;                                                      \
    auto real = reinterpret_cast<Fn>(RealOrdered(OrderedFunction::k##id, kPerThread));  \
    if (!real) return kCudaErrorNotSupported;                                           \
    const CuResult result = real args;                                                  \
    AfterOrdered(OrderedFunction::k##id, result);                                       \
    return ahead && result == kCudaSuccess ? ahead->TakeError() : result;               \
  }
FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_WRAPPER)
#undef FREERIDE_ORDERED_WRAPPER

void* const kOrderedWrapper[kOrderedCount][2] = {
#define FREERIDE_ORDERED_WRAPPER_PTR(id, ...) \
  {reinterpret_cast<void*>(&Ordered##id<false>), reinterpret_cast<void*>(&Ordered##id<true>)},
    FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_WRAPPER_PTR)
#undef FREERIDE_ORDERED_WRAPPER_PTR
};

// Our ordered wrapper for a look-up that found `ordered`, keeping the driver's `real`.
void* SubstituteOrdered(void* real, OrderedSymbol ordered) {
  const size_t i = static_cast<size_t>(ordered.function);
  if (!FromThisLibrary(real)) g_real_ordered[i][ordered.per_thread].store(real, std::memory_order_release);
  return kOrderedWrapper[i][ordered.per_thread];
}

// Entry points the gate does not cover: calling one fails with a message
// (the x86-64 calling convention lets a function of no parameters stand in
// for any signature: the caller cleans up its arguments).
template <UncoveredFunction kFunction>
CuResult RefuseUncovered() {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    std::fprintf(stderr,
                 "freeride-gate: %s submits GPU work that the gate does not cover; it is refused "
                 "(CUDA_ERROR_NOT_SUPPORTED) rather than run outside the bubbles\n",
                 BaseName(kFunction));
  return kCudaErrorNotSupported;
}
void* const kRefuser[] = {
#define FREERIDE_GATE_REFUSER(id, name) reinterpret_cast<void*>(&RefuseUncovered<UncoveredFunction::k##id>),
    FREERIDE_UNCOVERED_FUNCTIONS(FREERIDE_GATE_REFUSER)
#undef FREERIDE_GATE_REFUSER
};

// Whether `address` lies in this library: dlsym(RTLD_DEFAULT, name) finds
// our own export of a gated name before the driver's.
bool FromThisLibrary(void* address) {
  static void* our_base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(&FromThisLibrary), &info) ? info.dli_fbase : nullptr;
  }();
  Dl_info info{};
  return our_base && dladdr(address, &info) && info.dli_fbase == our_base;
}

// What the program gets for `name`, whose driver entry point is `real`
// (the variant chosen by `gated`): our wrapper, our refuser, or `real`.
void* Substitute(const char* name, void* real, std::optional<GatedSymbol> gated) {
  if (gated) {
    size_t i = static_cast<size_t>(gated->function);
    void* ours = kWrapper[i][gated->per_thread];
    // Our own export stands for the driver's, which Real() finds by name.
    if (!FromThisLibrary(real)) g_real[i][gated->per_thread].store(real, std::memory_order_release);
    return ours;
  }
  if (auto uncovered = UncoveredByName(name)) return kRefuser[static_cast<size_t>(*uncovered)];
  return real;
}

CuResult AnswerProcLookup(const char* name, void** pfn, int version, uint64_t flags, CuResult real_result) {
  if (real_result != kCudaSuccess || !pfn || !*pfn || !name) return real_result;
  if (std::strcmp(name, "cuGetProcAddress") == 0) {
    bool v2 = version >= 12000;
    (v2 ? g_real_get_proc_v2 : g_real_get_proc_v1).store(*pfn);
    *pfn = v2 ? reinterpret_cast<void*>(&FreerideGetProcAddressV2)
              : reinterpret_cast<void*>(&FreerideGetProcAddressV1);
    return real_result;
  }
  if (std::strcmp(name, kInstantiateBase) == 0) {
    *pfn = InstantiateWrapper((flags & kProcAddressPerThreadStream) != 0, *pfn);
    return real_result;
  }
  if (TheAhead())
    if (auto ordered = OrderedByBaseName(name, version, flags)) {
      *pfn = SubstituteOrdered(*pfn, *ordered);
      return real_result;
    }
  *pfn = Substitute(name, *pfn, GatedByBaseName(name, version, flags));
  return real_result;
}

void ReportAtExit() {
  const char* stats = std::getenv("FREERIDE_GATE_STATS");
  const char* verbose = std::getenv("FREERIDE_GATE_VERBOSE");
  if (!(stats && *stats) && !(verbose && *verbose == '1')) return;
  GateCounters c = TheGate().counters();
  LaunchAhead* ahead = TheAhead();
  const LaunchAheadCounters a = ahead ? ahead->counters() : LaunchAheadCounters{};
  const char* state = TheGate().state() == GateState::kArmed     ? "armed"
                      : TheGate().state() == GateState::kRefused ? "refused"
                                                                 : "unarmed";
  char line[1280];
  std::snprintf(line, sizeof line,
                "{\"pid\": %d, \"state\": \"%s\", \"waits\": %llu, \"unwaited\": %llu, \"captured\": %llu, "
                "\"failed_waits\": %llu, \"refused\": %llu, \"held\": %llu, \"passes\": %llu, "
                "\"held_unpublished_ns\": %lld, \"held_drain_ns\": %lld, \"held_fit_ns\": %lld, \"kinds\": %llu, \"kinds_forgotten\": %llu, "
                "\"windows_forgotten\": %llu, \"ahead\": %llu, \"ahead_deferred\": %llu, \"ahead_failed\": %llu, "
                "\"ahead_barriers_waited\": %llu, \"ahead_full_waits\": %llu, \"ahead_wakes\": %llu, \"ahead_most_queued\": %llu}\n",
                static_cast<int>(getpid()), state, static_cast<unsigned long long>(c.waits),
                static_cast<unsigned long long>(c.unwaited),
                static_cast<unsigned long long>(c.captured),
                static_cast<unsigned long long>(c.failed_waits),
                static_cast<unsigned long long>(c.refused), static_cast<unsigned long long>(c.held),
                static_cast<unsigned long long>(c.passes), static_cast<long long>(c.held_unpublished_ns),
                static_cast<long long>(c.held_drain_ns), static_cast<long long>(c.held_fit_ns),
                static_cast<unsigned long long>(c.kinds), static_cast<unsigned long long>(c.kinds_forgotten),
                static_cast<unsigned long long>(c.windows_forgotten),
                static_cast<unsigned long long>(ahead ? ahead->most_queued() : 0),
                static_cast<unsigned long long>(a.deferred), static_cast<unsigned long long>(a.failed),
                static_cast<unsigned long long>(a.barriers_waited), static_cast<unsigned long long>(a.full_waits),
                static_cast<unsigned long long>(a.wakes),
                static_cast<unsigned long long>(a.most_queued));
  if (stats && *stats) {
    if (FILE* f = std::fopen(stats, "a")) {
      std::fputs(line, f);
      std::fclose(f);
    }
  }
  if (verbose && *verbose == '1') std::fprintf(stderr, "freeride-gate: %s", line);
}

__attribute__((constructor)) void RegisterExitReport() { std::atexit(ReportAtExit); }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CuResult FreerideGetProcAddressV2(const char* name, void** pfn,
                                                                          int version, uint64_t flags,
                                                                          int* status) {
  if (LookupRefusedForVersion(name, version)) {
    if (pfn) *pfn = nullptr;
    if (status) *status = kProcAddressVersionNotSufficient;
    return kCudaErrorNotSupported;
  }
  auto real = reinterpret_cast<GetProcV2>(g_real_get_proc_v2.load());
  if (!real) real = reinterpret_cast<GetProcV2>(DriverSymbol("cuGetProcAddress_v2"));
  if (!real) return kCudaErrorNotSupported;
  return AnswerProcLookup(name, pfn, version, flags, real(name, pfn, version, flags, status));
}

__attribute__((visibility("default"))) CuResult FreerideGetProcAddressV1(const char* name, void** pfn,
                                                                          int version, uint64_t flags) {
  if (LookupRefusedForVersion(name, version)) {
    if (pfn) *pfn = nullptr;
    return kCudaErrorNotSupported;
  }
  auto real = reinterpret_cast<GetProcV1>(g_real_get_proc_v1.load());
  if (!real) real = reinterpret_cast<GetProcV1>(DriverSymbol("cuGetProcAddress"));
  if (!real) return kCudaErrorNotSupported;
  return AnswerProcLookup(name, pfn, version, flags, real(name, pfn, version, flags));
}

// The driver's own names, for programs linked against libcuda.
CuResult cuGetProcAddress_v2(const char* name, void** pfn, int version, uint64_t flags, int* status)
    __attribute__((visibility("default"), alias("FreerideGetProcAddressV2")));
CuResult cuGetProcAddress(const char* name, void** pfn, int version, uint64_t flags)
    __attribute__((visibility("default"), alias("FreerideGetProcAddressV1")));

#define FREERIDE_GATE_DIRECT(id, base, legacy, per_thread, min_version, params, args, stream) \
  __attribute__((visibility("default"))) CuResult FreerideDirect##id params __asm__(legacy);  \
  CuResult FreerideDirect##id params { return Gated##id<false, false> args; }                \
  __attribute__((visibility("default"))) CuResult FreerideDirectPt##id params                \
      __asm__(per_thread);                                                                    \
  CuResult FreerideDirectPt##id params { return Gated##id<true, false> args; }
FREERIDE_GATED_FUNCTIONS(FREERIDE_GATE_DIRECT)
#undef FREERIDE_GATE_DIRECT

// The ordered entry points under the driver's names, for the same
// programs.  The exports above never queue (kMayDefer false: each waits for the queue, then
// submits on the caller's thread), but a program's runtime looks its launches
// up, and those are queued: a synchronisation that a library linked against
// libcuda makes by name must still wait for them.  Their wrappers find the
// driver's own symbol with dlsym on the driver's handle (RealOrdered), never
// these.  Only the legacy names here: for many entries the per-thread name is
// the legacy one again, and one object cannot define a name twice (nor can the
// preprocessor compare two names), so interposer_per_thread.cc exports the
// per-thread names, weak, through FreerideOrderedPt##id; where a name is both,
// this strong definition wins the link, and the static_assert above keeps a
// weak one from giving way to any other entry's.  (The dynamic linker takes a
// weak definition in a preloaded library as it takes a strong one, unless
// LD_DYNAMIC_WEAK is set.)
#define FREERIDE_ORDERED_DIRECT(id, base, legacy, per_thread, min_version, params, args)         \
  __attribute__((visibility("default"))) CuResult FreerideOrderedDirect##id params __asm__(legacy); \
  CuResult FreerideOrderedDirect##id params { return Ordered##id<false> args; }                 \
  CuResult FreerideOrderedPt##id params { return Ordered##id<true> args; }
FREERIDE_ORDERED_FUNCTIONS(FREERIDE_ORDERED_DIRECT)
#undef FREERIDE_ORDERED_DIRECT

__attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  DlsymFn real_dlsym = RealDlsym();
  if (!real_dlsym) return nullptr;
  void* real = real_dlsym(handle, name);
  // (`name` is declared nonnull: the driver's dlsym has found nothing for a null one.)
  if (!real || name[0] != 'c' || name[1] != 'u') return real;
  // Our exports of the driver's names are found first; a name this driver
  // lacks (cuCtxSynchronize_v2 before CUDA 13) is absent, as without us, so
  // a program that probes for it takes its own fallback.
  const bool ours = FromThisLibrary(real);
  if (ours && !DriverSymbol(name)) return nullptr;
  if (std::strcmp(name, "cuGetProcAddress_v2") == 0) {
    if (!ours) g_real_get_proc_v2.store(real);
    return reinterpret_cast<void*>(&FreerideGetProcAddressV2);
  }
  if (std::strcmp(name, "cuGetProcAddress") == 0) {
    if (!ours) g_real_get_proc_v1.store(real);
    return reinterpret_cast<void*>(&FreerideGetProcAddressV1);
  }
  if (void* ours = InstantiateByExportName(name, real)) return ours;
  if (TheAhead())
    if (auto ordered = OrderedByExportName(name)) return SubstituteOrdered(real, *ordered);
  return Substitute(name, real, GatedByExportName(name));
}

// The uncovered entry points under the names a program linked against
// libcuda calls them by (gated_functions.h): refused there as when looked up.
// Each is a function of no parameters standing in for the entry's signature,
// as RefuseUncovered is (x86-64: the caller passes and cleans up the
// arguments, which the callee may ignore).  Defined under the names
// themselves: a name listed twice, or exported as a wrapper above too, fails
// the build (a redefinition, or the assembler's "already defined"), and
// ExportedElsewhere keeps an ordered entry's weak per-thread export from
// giving way to one.
#define FREERIDE_UNCOVERED_DIRECT(id, name)                 \
  __attribute__((visibility("default"))) CuResult name() { \
    return RefuseUncovered<UncoveredFunction::k##id>();     \
  }
FREERIDE_UNCOVERED_EXPORTS(FREERIDE_UNCOVERED_DIRECT)
#undef FREERIDE_UNCOVERED_DIRECT

// The driver's names of the instantiation that can upload, for programs
// linked against libcuda.
__attribute__((visibility("default"))) CuResult FreerideDirectInstantiate(void** exec, void* graph,
                                                                           GraphInstantiateParams* params)
    __asm__("cuGraphInstantiateWithParams");
CuResult FreerideDirectInstantiate(void** exec, void* graph, GraphInstantiateParams* params) {
  return GatedInstantiateWithParams<false>(exec, graph, params);
}
__attribute__((visibility("default"))) CuResult FreerideDirectInstantiatePt(void** exec, void* graph,
                                                                             GraphInstantiateParams* params)
    __asm__("cuGraphInstantiateWithParams_ptsz");
CuResult FreerideDirectInstantiatePt(void** exec, void* graph, GraphInstantiateParams* params) {
  return GatedInstantiateWithParams<true>(exec, graph, params);
}

}  // extern "C"
