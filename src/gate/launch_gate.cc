#include "gate/launch_gate.h"

#include <cstdio>
#include <utility>

namespace freeride::gate {

LaunchGate::LaunchGate(const DriverApi& api, void* page, std::string page_error, GateTaskSlot* slot)
    : api_(api), page_(page), refusal_(std::move(page_error)), slot_(slot) {}

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

CuResult LaunchGate::BeforeWork(CuStream stream, bool per_thread, WorkSample* sample) {
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
  uint64_t n = waits_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (pending_count_.load(std::memory_order_relaxed) > 0) CollectSamples();
  // Synchronous copies (the default stream, legacy or the thread's own)
  // are not timed: the caller waits for them anyway.
  if (sample && stream != nullptr && n % kSampleEvery == 0) StartSample(target, sample);
  return kCudaSuccess;
}

void LaunchGate::StartSample(CuStream stream, WorkSample* sample) {
  if (!slot_ || !api_.event_create || !api_.event_record || !api_.event_query ||
      !api_.event_elapsed_time || !api_.event_destroy)
    return;
  if (pending_count_.load(std::memory_order_relaxed) >= 64) return;  // reading back lags: skip
  CuEvent start = nullptr, end = nullptr;
  if (api_.event_create(&start, 0) != kCudaSuccess) return;
  if (api_.event_create(&end, 0) != kCudaSuccess || api_.event_record(start, stream) != kCudaSuccess) {
    api_.event_destroy(start);
    if (end) api_.event_destroy(end);
    return;
  }
  *sample = {start, end, stream};
}

void LaunchGate::AfterWork(const WorkSample& sample) {
  if (!sample.start) return;
  if (api_.event_record(sample.end, sample.stream) != kCudaSuccess) {
    api_.event_destroy(sample.start);
    api_.event_destroy(sample.end);
    return;
  }
  std::lock_guard<std::mutex> lock(samples_mutex_);
  pending_.push_back(sample);
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
}

void LaunchGate::CollectSamples() {
  std::unique_lock<std::mutex> lock(samples_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it
  size_t done = 0;
  for (const WorkSample& sample : pending_) {
    CuResult r = api_.event_query(sample.end);
    if (r == kCudaErrorNotReady) break;  // in order on its stream; later ones may be on others, but wait
    float ms = 0;
    if (r == kCudaSuccess && api_.event_elapsed_time(&ms, sample.start, sample.end) == kCudaSuccess)
      lengths_.Add(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
    api_.event_destroy(sample.start);
    api_.event_destroy(sample.end);
    ++done;
  }
  if (done == 0) return;
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
  slot_->work_p95_ns.store(lengths_.P95(), std::memory_order_relaxed);
  slot_->samples.fetch_add(done, std::memory_order_relaxed);
}

int64_t LaunchGate::work_p95_ns() const {
  return slot_ ? slot_->work_p95_ns.load(std::memory_order_relaxed) : 0;
}

GateCounters LaunchGate::counters() const {
  return {waits_.load(std::memory_order_relaxed), captured_.load(std::memory_order_relaxed),
          failed_waits_.load(std::memory_order_relaxed), refused_.load(std::memory_order_relaxed)};
}

}  // namespace freeride::gate
