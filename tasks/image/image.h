// Image resize + watermark (the image-processing task of the FreeRide
// paper): bilinear resize of an RGB image and an alpha-blended RGBA
// watermark, computed in bands of output rows so that a band fits a bubble.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "common/gpu.h"
#include "image/pixel_math.h"

namespace freeride::tasks {

// 8-bit pixels, rows packed: channels is 3 (RGB) or 4 (RGBA).
struct Image {
  int width = 0, height = 0, channels = 3;
  std::vector<uint8_t> pixels;
};

// Output size for a source: `width` x `height`, where a 0 keeps the aspect
// ratio from the other; both 0 keep the source size.  At least 1 x 1.
void OutputSize(int src_w, int src_h, int width, int height, int* dst_w, int* dst_h);

// Places the watermark at the bottom-right corner with a small margin,
// clipped to the output.
TransformGeometry PlaceWatermark(int src_w, int src_h, int dst_w, int dst_h, const Image& watermark,
                                 float opacity);

// A built-in RGBA watermark (a translucent striped badge) of w x h.
Image DefaultWatermark(int w, int h);

// A synthetic RGB photograph-like test image (gradients, shapes and noise),
// deterministic for a seed.
Image SyntheticImage(int w, int h, uint64_t seed);

class ImageTransformer {
 public:
  virtual ~ImageTransformer() = default;
  // Starts the next image.  `source` is its host RGB buffer, filled by the
  // decoder afterwards; it must stay valid until the next Begin.
  virtual void Begin(const TransformGeometry& geometry, const uint8_t* source) = 0;
  // Source rows [y0, y1) are decoded (the CUDA engine uploads them here, so
  // the upload is spread over the decode bands instead of one long copy).
  virtual void SourceRowsReady(int y0, int y1) = 0;
  // Computes output rows [y0, y1) into `out` (packed RGB rows); all source
  // rows must be ready.
  virtual void TransformRows(int y0, int y1, uint8_t* out) = 0;
};

// `watermark` (RGBA) must outlive the transformer.
std::unique_ptr<ImageTransformer> MakeImageTransformer(Device device, const Image& watermark);
std::unique_ptr<ImageTransformer> MakeCpuImageTransformer(const Image& watermark);
std::unique_ptr<ImageTransformer> MakeCudaImageTransformer(const Image& watermark);

// Bytes of accelerator memory one image of this size needs.
uint64_t ImageTransformBytes(int src_w, int src_h, int dst_w, int dst_h, const Image& watermark);

}  // namespace freeride::tasks
