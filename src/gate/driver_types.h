// The few CUDA driver types the gate needs, declared here rather than taken
// from cuda.h: cuda.h renames entry points by macro (cuMemcpyHtoD becomes
// cuMemcpyHtoD_v2, or _v2_ptds under per-thread streams), which would hide
// the exact names the interposer must export, and the gate then builds on
// machines without CUDA.  The layouts are the driver's ABI on LP64 Linux.
#pragma once
#include <cstddef>
#include <cstdint>

namespace freeride::gate {

using CuResult = int;  // CUresult
using CuStream = void*;  // CUstream
using CuDevicePtr = unsigned long long;  // CUdeviceptr
using CuEvent = void*;  // CUevent

constexpr CuResult kCudaSuccess = 0;
constexpr CuResult kCudaErrorInvalidValue = 1;
constexpr CuResult kCudaErrorNotSupported = 801;
constexpr CuResult kCudaErrorNotPermitted = 800;
constexpr CuResult kCudaErrorHostMemoryAlreadyRegistered = 712;
constexpr CuResult kCudaErrorNotReady = 600;
constexpr CuResult kCudaErrorStreamCaptureImplicit = 906;

// CU_STREAM_PER_THREAD: the calling thread's default stream, explicitly.
inline const CuStream kPerThreadStream = reinterpret_cast<CuStream>(0x2);
constexpr unsigned kStreamWaitValueAnd = 0x2;  // CU_STREAM_WAIT_VALUE_AND
constexpr unsigned kEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING
constexpr unsigned kHostRegisterPortable = 0x1;
constexpr unsigned kHostRegisterDeviceMap = 0x2;
constexpr uint64_t kProcAddressPerThreadStream = 1u << 1;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
constexpr int kProcAddressVersionNotSufficient = 2;  // CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
constexpr int kCaptureStatusNone = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
constexpr int kCaptureModeRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED

// CUmemLocation (its type and id), passed by value to cuMemPrefetchAsync_v2.
struct MemLocation {
  int type;
  int id;
};

// CUDA_GRAPH_INSTANTIATE_PARAMS, and its flag that uploads the graph as it
// is instantiated (CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD).
struct GraphInstantiateParams {
  uint64_t flags;
  CuStream upload_stream;
  void* error_node_out;
  int result_out;
};
constexpr uint64_t kGraphInstantiateUpload = 2;
constexpr int kGraphInstantiateError = 1;  // CUDA_GRAPH_INSTANTIATE_ERROR: the return value says why

// CUlaunchConfig's leading fields; the stream is all the gate reads.
struct LaunchConfigHead {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_mem_bytes;
  CuStream stream;
};

// CUlaunchConfig whole (launch ahead copies it, with its attributes), and
// the size of one CUlaunchAttribute.
struct LaunchConfigWhole {
  LaunchConfigHead head;
  void* attrs;
  unsigned num_attrs;
};
constexpr size_t kLaunchAttributeBytes = 72;

// The driver entry points the gate itself calls.  The interposer fills them
// from the real driver; tests fill them with fakes.
struct DriverApi {
  CuResult (*stream_wait_value32)(CuStream stream, CuDevicePtr address, uint32_t value,
                                  unsigned flags) = nullptr;
  CuResult (*stream_is_capturing)(CuStream stream, int* status) = nullptr;
  CuResult (*mem_host_register)(void* pointer, size_t bytes, unsigned flags) = nullptr;
  CuResult (*mem_host_get_device_pointer)(CuDevicePtr* device, void* host, unsigned flags) = nullptr;
  // For timing sampled pieces of work; without them nothing is timed.
  CuResult (*event_create)(CuEvent* event, unsigned flags) = nullptr;
  CuResult (*event_record)(CuEvent event, CuStream stream) = nullptr;
  CuResult (*event_query)(CuEvent event) = nullptr;
  CuResult (*event_elapsed_time)(float* ms, CuEvent start, CuEvent end) = nullptr;
  CuResult (*event_destroy)(CuEvent event) = nullptr;
  // Lets this thread query and record events while another thread captures
  // a graph in global mode (null: not done).
  CuResult (*thread_exchange_capture_mode)(int* mode) = nullptr;
};

}  // namespace freeride::gate
