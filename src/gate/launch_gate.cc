#include "gate/launch_gate.h"

#include <cstdio>
#include <utility>

namespace freeride::gate {

LaunchGate::LaunchGate(const DriverApi& api, void* page, std::string page_error)
    : api_(api), page_(page), refusal_(std::move(page_error)) {}

CuResult LaunchGate::Arm() {
  std::lock_guard<std::mutex> lock(arm_mutex_);
  GateState state = state_.load(std::memory_order_relaxed);
  if (state != GateState::kUnarmed) return state == GateState::kArmed ? kCudaSuccess : kCudaErrorNotPermitted;
  auto refuse = [&](std::string why) {
    refusal_ = std::move(why);
    std::fprintf(stderr,
                 "freeride-gate: this program's GPU work cannot be gated (%s); it is refused "
                 "rather than run outside the bubbles\n",
                 refusal_.c_str());
    state_.store(GateState::kRefused, std::memory_order_release);
    return kCudaErrorNotPermitted;
  };
  if (!page_) return refuse(refusal_.empty() ? "no gate page" : refusal_);
  if (!api_.stream_wait_value32 || !api_.mem_host_register || !api_.mem_host_get_device_pointer)
    return refuse("the CUDA driver lacks stream memory operations or host registration");
  CuResult r = api_.mem_host_register(page_, 4096, kHostRegisterPortable | kHostRegisterDeviceMap);
  if (r != kCudaSuccess && r != kCudaErrorHostMemoryAlreadyRegistered)
    return refuse("cuMemHostRegister of the gate page failed with CUDA error " + std::to_string(r));
  CuDevicePtr device = 0;
  r = api_.mem_host_get_device_pointer(&device, page_, 0);
  if (r != kCudaSuccess || device == 0)
    return refuse("cuMemHostGetDevicePointer of the gate page failed with CUDA error " +
                  std::to_string(r));
  word_ = device;
  state_.store(GateState::kArmed, std::memory_order_release);
  return kCudaSuccess;
}

CuResult LaunchGate::BeforeWork(CuStream stream, bool per_thread) {
  GateState state = state_.load(std::memory_order_acquire);
  if (state != GateState::kArmed) {
    CuResult armed = state == GateState::kUnarmed ? Arm() : kCudaErrorNotPermitted;
    if (armed != kCudaSuccess) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return armed;
    }
  }
  CuStream target = (stream == nullptr && per_thread) ? kPerThreadStream : stream;
  if (api_.stream_is_capturing) {
    int capture = kCaptureStatusNone;
    if (api_.stream_is_capturing(target, &capture) == kCudaSuccess && capture != kCaptureStatusNone) {
      captured_.fetch_add(1, std::memory_order_relaxed);
      return kCudaSuccess;
    }
  }
  CuResult r = api_.stream_wait_value32(target, word_, 1u, kStreamWaitValueAnd);
  if (r != kCudaSuccess) {
    failed_waits_.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  waits_.fetch_add(1, std::memory_order_relaxed);
  return kCudaSuccess;
}

GateCounters LaunchGate::counters() const {
  return {waits_.load(std::memory_order_relaxed), captured_.load(std::memory_order_relaxed),
          failed_waits_.load(std::memory_order_relaxed), refused_.load(std::memory_order_relaxed)};
}

}  // namespace freeride::gate
