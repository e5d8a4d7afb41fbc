// Error checking and tracked allocation for the tasks' CUDA code.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define CUDA_CHECK(expr)                                                               \
  do {                                                                                 \
    cudaError_t err_ = (expr);                                                         \
    if (err_ != cudaSuccess)                                                           \
      throw std::runtime_error(std::string(#expr) + ": " + cudaGetErrorString(err_));  \
  } while (0)

namespace freeride::tasks {

// cudaMalloc / cudaFree that keep the process's peak for task-profile.
void* GpuAlloc(size_t bytes);
void GpuFree(void* p, size_t bytes);

// A device buffer of T, freed on destruction.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n), p_(static_cast<T*>(GpuAlloc(n * sizeof(T)))) {}
  ~DeviceBuffer() { GpuFree(p_, n_ * sizeof(T)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : n_(o.n_), p_(o.p_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(n_, o.n_);
    std::swap(p_, o.p_);
    return *this;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  void CopyFrom(const T* host, size_t n) {
    CUDA_CHECK(cudaMemcpy(p_, host, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  void CopyTo(T* host, size_t n) const {
    CUDA_CHECK(cudaMemcpy(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost));
  }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace freeride::tasks
