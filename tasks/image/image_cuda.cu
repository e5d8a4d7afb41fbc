// Resize + watermark on the GPU: one thread per output pixel, the same
// per-pixel formula as the CPU reference (pixel_math.h).  The source is
// uploaded once per image; each band of output rows is computed and copied
// back in its own step.
#include "common/cuda_check.h"
#include <algorithm>

#include "image/image.h"

namespace freeride::tasks {
namespace {

__global__ void TransformBand(TransformGeometry g, const uint8_t* src, const uint8_t* wm, int y0,
                              int y1, uint8_t* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = y0 + blockIdx.y;
  if (x >= g.dst_w || y >= y1) return;
  // `out` starts at row y0.
  OutputPixel(g, src, wm, x, y, out + (static_cast<size_t>(y - y0) * g.dst_w + x) * 3);
}

// Grows a device buffer to at least n bytes (never shrinks).
void Reserve(DeviceBuffer<uint8_t>* buffer, size_t n) {
  if (buffer->size() < n) *buffer = DeviceBuffer<uint8_t>(n);
}

class CudaImageTransformer : public ImageTransformer {
 public:
  explicit CudaImageTransformer(const Image& watermark) {
    if (!watermark.pixels.empty()) {
      wm_ = DeviceBuffer<uint8_t>(watermark.pixels.size());
      wm_.CopyFrom(watermark.pixels.data(), watermark.pixels.size());
    }
  }

  void Begin(const TransformGeometry& g, const uint8_t* source) override {
    g_ = g;
    host_source_ = source;
    Reserve(&src_, static_cast<size_t>(g.src_w) * g.src_h * 3);
    Reserve(&out_, static_cast<size_t>(g.dst_w) * g.dst_h * 3);
  }

  void SourceRowsReady(int y0, int y1) override {
    size_t row = static_cast<size_t>(g_.src_w) * 3;
    CUDA_CHECK(cudaMemcpy(src_.get() + y0 * row, host_source_ + y0 * row, (y1 - y0) * row,
                          cudaMemcpyHostToDevice));
  }

  void TransformRows(int y0, int y1, uint8_t* out) override {
    if (y1 <= y0) return;
    // A grid's y dimension is at most 65535 rows.
    for (int band = y0; band < y1; band += 65535) {
      int end = std::min(y1, band + 65535);
      dim3 block(128), grid((g_.dst_w + 127) / 128, end - band);
      TransformBand<<<grid, block>>>(g_, src_.get(), wm_.size() ? wm_.get() : nullptr, band, end,
                                     out_.get() + static_cast<size_t>(band - y0) * g_.dst_w * 3);
      CUDA_CHECK(cudaGetLastError());
    }
    size_t n = static_cast<size_t>(y1 - y0) * g_.dst_w * 3;
    CUDA_CHECK(cudaMemcpy(out, out_.get(), n, cudaMemcpyDeviceToHost));
  }

 private:
  TransformGeometry g_;
  const uint8_t* host_source_ = nullptr;
  DeviceBuffer<uint8_t> src_, out_, wm_;
};

}  // namespace

std::unique_ptr<ImageTransformer> MakeCudaImageTransformer(const Image& watermark) {
  if (!watermark.pixels.empty() && watermark.channels != 4)
    throw std::runtime_error("the watermark must be RGBA");
  return std::make_unique<CudaImageTransformer>(watermark);
}

}  // namespace freeride::tasks
