// What the NVIDIA driver says about this node, read through libcuda.so.1
// opened with dlopen: the CLI has no CUDA dependency and runs where there is
// no driver at all.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace freeride::cli {

struct GpuDevice {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;
  int compute_mode = 0;  // CUcomputemode: 0 default, 2 prohibited, 3 exclusive process
  // Stream memory operations (cuStreamWriteValue/WaitValue): -1 when the
  // driver does not know the attribute.
  int stream_mem_ops = -1;
  int stream_mem_ops_64 = -1;
  int stream_wait_value_nor = -1;
};

struct CudaDriverInfo {
  bool library_loaded = false;   // libcuda.so.1 could be opened
  std::string library_error;     // dlerror() when it could not
  int init_result = -1;          // cuInit's CUresult; 0: success
  std::string init_error;        // its name and description
  int driver_version = 0;        // e.g. 13000 for CUDA 13.0
  bool has_launch_host_func = false;  // cuLaunchHostFunc: stream-ordered bubble marks
  std::vector<GpuDevice> gpus;
};

// Opens `library` (normally "libcuda.so.1"), initialises the driver and
// describes each device.  Never throws; what failed is in the result.
// Any thread; the library stays loaded.
CudaDriverInfo ProbeCudaDriver(const std::string& library = "libcuda.so.1");

}  // namespace freeride::cli
