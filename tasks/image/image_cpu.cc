#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "image/image.h"

namespace freeride::tasks {

void OutputSize(int src_w, int src_h, int width, int height, int* dst_w, int* dst_h) {
  if (width <= 0 && height <= 0) {
    width = src_w;
    height = src_h;
  } else if (height <= 0) {
    height = static_cast<int>(std::lround(static_cast<double>(src_h) * width / src_w));
  } else if (width <= 0) {
    width = static_cast<int>(std::lround(static_cast<double>(src_w) * height / src_h));
  }
  *dst_w = std::max(1, width);
  *dst_h = std::max(1, height);
}

TransformGeometry PlaceWatermark(int src_w, int src_h, int dst_w, int dst_h, const Image& watermark,
                                 float opacity) {
  TransformGeometry g;
  g.src_w = src_w, g.src_h = src_h, g.dst_w = dst_w, g.dst_h = dst_h;
  g.opacity = opacity;
  int margin = std::max(2, std::min(dst_w, dst_h) / 50);
  g.wm_w = watermark.width;
  g.wm_h = watermark.height;
  g.wm_x = dst_w - margin - watermark.width;
  g.wm_y = dst_h - margin - watermark.height;
  return g;  // pixels outside the output are simply never visited
}

Image DefaultWatermark(int w, int h) {
  Image wm{w, h, 4, std::vector<uint8_t>(static_cast<size_t>(w) * h * 4)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &wm.pixels[(static_cast<size_t>(y) * w + x) * 4];
      bool border = x < 3 || y < 3 || x >= w - 3 || y >= h - 3;
      bool stripe = ((x + y) / 6) % 2 == 0;
      p[0] = 255, p[1] = border ? 200 : 255, p[2] = border ? 40 : 255;
      p[3] = border ? 255 : (stripe ? 180 : 60);
    }
  return wm;
}

Image SyntheticImage(int w, int h, uint64_t seed) {
  Image image{w, h, 3, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0, 1);
  float cx = unit(rng) * w, cy = unit(rng) * h, radius = (0.1f + 0.3f * unit(rng)) * std::min(w, h);
  float tint[3] = {unit(rng), unit(rng), unit(rng)};
  std::normal_distribution<float> noise(0, 4);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * w + x) * 3];
      bool inside = std::hypot(x - cx, y - cy) < radius;
      for (int c = 0; c < 3; ++c) {
        float v = 255.0f * (c == 0 ? float(x) / w : c == 1 ? float(y) / h : 0.5f);
        if (inside) v = 255.0f * tint[c];
        v += noise(rng);
        p[c] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
      }
    }
  return image;
}

uint64_t ImageTransformBytes(int src_w, int src_h, int dst_w, int dst_h, const Image& watermark) {
  return static_cast<uint64_t>(src_w) * src_h * 3 + static_cast<uint64_t>(dst_w) * dst_h * 3 +
         watermark.pixels.size();
}

namespace {

class CpuImageTransformer : public ImageTransformer {
 public:
  explicit CpuImageTransformer(const Image& watermark) : wm_(watermark) {}

  void Begin(const TransformGeometry& g, const uint8_t* source) override {
    src_ = source;
    g_ = g;
  }
  void SourceRowsReady(int, int) override {}

  void TransformRows(int y0, int y1, uint8_t* out) override {
    const uint8_t* wm = wm_.pixels.empty() ? nullptr : wm_.pixels.data();
    for (int y = y0; y < y1; ++y)
      for (int x = 0; x < g_.dst_w; ++x)
        OutputPixel(g_, src_, wm, x, y, out + (static_cast<size_t>(y - y0) * g_.dst_w + x) * 3);
  }

 private:
  const Image& wm_;
  const uint8_t* src_ = nullptr;
  TransformGeometry g_;
};

}  // namespace

std::unique_ptr<ImageTransformer> MakeCpuImageTransformer(const Image& watermark) {
  if (!watermark.pixels.empty() && watermark.channels != 4)
    throw std::runtime_error("the watermark must be RGBA");
  return std::make_unique<CpuImageTransformer>(watermark);
}

#ifndef FREERIDE_WITH_CUDA
std::unique_ptr<ImageTransformer> MakeCudaImageTransformer(const Image&) {
  throw std::runtime_error("this build has no CUDA");
}
#endif

std::unique_ptr<ImageTransformer> MakeImageTransformer(Device device, const Image& watermark) {
  return device == Device::kCuda ? MakeCudaImageTransformer(watermark)
                                 : MakeCpuImageTransformer(watermark);
}

}  // namespace freeride::tasks
