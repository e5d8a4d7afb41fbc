// The per-pixel arithmetic of resize + watermark, shared by the CPU
// reference and the CUDA kernel so that both compute the same formula (they
// may still differ by one grey level where the GPU fuses a multiply-add).
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define FREERIDE_HOST_DEVICE __host__ __device__
#else
#define FREERIDE_HOST_DEVICE
#endif

namespace freeride::tasks {

// What one output image is made of: an RGB source resized to dst_w x dst_h,
// then an RGBA watermark blended in at (wm_x, wm_y) with `opacity`.
struct TransformGeometry {
  int src_w = 0, src_h = 0;
  int dst_w = 0, dst_h = 0;
  int wm_x = 0, wm_y = 0, wm_w = 0, wm_h = 0;
  float opacity = 0.5f;
};

// Bilinear sample position along one axis, pixel centres aligned (as in
// OpenCV's INTER_LINEAR): the two source indices and the weight of the second.
FREERIDE_HOST_DEVICE inline void BilinearTap(int dst, int dst_len, int src_len, int* i0, int* i1,
                                             float* frac) {
  float s = (static_cast<float>(dst) + 0.5f) * static_cast<float>(src_len) /
                static_cast<float>(dst_len) - 0.5f;
  if (s < 0) s = 0;
  int i = static_cast<int>(s);
  if (i > src_len - 1) i = src_len - 1;
  *i0 = i;
  *i1 = i + 1 < src_len ? i + 1 : src_len - 1;
  *frac = s - static_cast<float>(i);
}

// Writes the three channels of output pixel (x, y).  `src` is RGB rows of
// src_w * 3 bytes; `wm` is RGBA rows of wm_w * 4 bytes.
FREERIDE_HOST_DEVICE inline void OutputPixel(const TransformGeometry& g, const uint8_t* src,
                                             const uint8_t* wm, int x, int y, uint8_t* out) {
  int x0, x1, y0, y1;
  float fx, fy;
  BilinearTap(x, g.dst_w, g.src_w, &x0, &x1, &fx);
  BilinearTap(y, g.dst_h, g.src_h, &y0, &y1, &fy);
  const uint8_t* r0 = src + static_cast<int64_t>(y0) * g.src_w * 3;
  const uint8_t* r1 = src + static_cast<int64_t>(y1) * g.src_w * 3;
  float alpha = 0;
  const uint8_t* mark = nullptr;
  int wx = x - g.wm_x, wy = y - g.wm_y;
  if (wm != nullptr && wx >= 0 && wy >= 0 && wx < g.wm_w && wy < g.wm_h) {
    mark = wm + (static_cast<int64_t>(wy) * g.wm_w + wx) * 4;
    alpha = g.opacity * static_cast<float>(mark[3]) / 255.0f;
  }
  for (int c = 0; c < 3; ++c) {
    float top = r0[x0 * 3 + c] + fx * (r0[x1 * 3 + c] - r0[x0 * 3 + c]);
    float bottom = r1[x0 * 3 + c] + fx * (r1[x1 * 3 + c] - r1[x0 * 3 + c]);
    float v = top + fy * (bottom - top);
    if (mark != nullptr) v += alpha * (static_cast<float>(mark[c]) - v);
    v += 0.5f;
    out[c] = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
  }
}

}  // namespace freeride::tasks
