#include "cli/cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace freeride::cli {
namespace {

// CUDA driver API values (cuda.h); the attributes of stream memory
// operations were renumbered in CUDA 12, so both sets are asked.
constexpr int kAttrComputeMode = 20;
constexpr int kAttrComputeMajor = 75;
constexpr int kAttrComputeMinor = 76;
constexpr int kAttrStreamMemOpsV1 = 92;
constexpr int kAttr64BitStreamMemOpsV1 = 93;
constexpr int kAttrWaitValueNorV1 = 94;
constexpr int kAttr64BitStreamMemOps = 122;
constexpr int kAttrWaitValueNor = 123;

using CuInit = int (*)(unsigned);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceTotalMem = int (*)(size_t*, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuGetErrorString = int (*)(int, const char**);

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace

CudaDriverInfo ProbeCudaDriver(const std::string& library) {
  CudaDriverInfo info;
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    info.library_error = why ? why : "dlopen failed";
    return info;
  }
  info.library_loaded = true;
  auto init = Symbol<CuInit>(lib, "cuInit");
  auto version = Symbol<CuDriverGetVersion>(lib, "cuDriverGetVersion");
  auto count = Symbol<CuDeviceGetCount>(lib, "cuDeviceGetCount");
  auto get = Symbol<CuDeviceGet>(lib, "cuDeviceGet");
  auto name = Symbol<CuDeviceGetName>(lib, "cuDeviceGetName");
  auto memory = Symbol<CuDeviceTotalMem>(lib, "cuDeviceTotalMem_v2");
  auto attribute = Symbol<CuDeviceGetAttribute>(lib, "cuDeviceGetAttribute");
  auto error_string = Symbol<CuGetErrorString>(lib, "cuGetErrorString");
  auto error_name = Symbol<CuGetErrorString>(lib, "cuGetErrorName");
  info.has_launch_host_func = dlsym(lib, "cuLaunchHostFunc") != nullptr;
  if (!init || !version || !count || !get || !name || !memory || !attribute) {
    info.init_error = fmt::format("{} lacks the driver API's basic functions", library);
    return info;
  }
  version(&info.driver_version);
  info.init_result = init(0);
  if (info.init_result != 0) {
    const char* text = nullptr;
    const char* code = nullptr;
    if (error_string) error_string(info.init_result, &text);
    if (error_name) error_name(info.init_result, &code);
    info.init_error = fmt::format("cuInit: {} ({})", code ? code : std::to_string(info.init_result),
                                  text ? text : "no description");
    return info;
  }
  int devices = 0;
  if (count(&devices) != 0) return info;
  for (int i = 0; i < devices; ++i) {
    int device = 0;
    if (get(&device, i) != 0) continue;
    GpuDevice gpu;
    gpu.index = i;
    char text[256] = {};
    if (name(text, sizeof(text) - 1, device) == 0) gpu.name = text;
    size_t bytes = 0;
    if (memory(&bytes, device) == 0) gpu.memory_bytes = bytes;
    auto ask = [&](int attr) {
      int value = 0;
      return attribute(&value, attr, device) == 0 ? value : -1;
    };
    gpu.compute_mode = ask(kAttrComputeMode);
    gpu.compute_major = ask(kAttrComputeMajor);
    gpu.compute_minor = ask(kAttrComputeMinor);
    if (info.driver_version >= 12000) {
      // Since CUDA 12, 32-bit operations are always there; the rest is asked.
      gpu.stream_mem_ops = 1;
      gpu.stream_mem_ops_64 = ask(kAttr64BitStreamMemOps);
      gpu.stream_wait_value_nor = ask(kAttrWaitValueNor);
    } else {
      gpu.stream_mem_ops = ask(kAttrStreamMemOpsV1);
      gpu.stream_mem_ops_64 = ask(kAttr64BitStreamMemOpsV1);
      gpu.stream_wait_value_nor = ask(kAttrWaitValueNorV1);
    }
    info.gpus.push_back(gpu);
  }
  return info;
}

}  // namespace freeride::cli
