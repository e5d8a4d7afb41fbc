// Row-streamed JPEG (libjpeg-turbo) and PNG (libpng) decoding and encoding,
// so that decoding or encoding one image can be spread over several steps.
// Every error, including libjpeg's "corrupt data" warnings, is thrown as a
// std::runtime_error that names the image: a damaged image is never turned
// silently into grey pixels.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "image/image.h"

namespace freeride::tasks {

enum class ImageFormat { kJpeg, kPng };

// The format from the file's first bytes; throws for anything else.
ImageFormat DetectImageFormat(const std::vector<uint8_t>& bytes, const std::string& name);
const char* ImageFormatExtension(ImageFormat format);  // "jpg" or "png"

class RowDecoder {
 public:
  virtual ~RowDecoder() = default;
  int width() const { return width_; }
  int height() const { return height_; }
  int rows_done() const { return rows_done_; }
  // Decodes the next n rows (n <= height - rows_done) into `out`, as
  // channels() bytes per pixel.
  virtual void ReadRows(int n, uint8_t* out) = 0;
  // Rows the codec works on at once (JPEG: an MCU row, e.g. 16); reading
  // whole groups makes the cost of a band proportional to its rows.
  int row_group() const { return row_group_; }

 protected:
  int width_ = 0, height_ = 0, rows_done_ = 0, row_group_ = 1;
};

// Reads the header of `bytes` (kept alive by the decoder) and prepares to
// decode rows as RGB (channels 3) or RGBA (channels 4, PNG only).
std::unique_ptr<RowDecoder> OpenImageDecoder(std::shared_ptr<const std::vector<uint8_t>> bytes,
                                             const std::string& name, int channels = 3);

class RowEncoder {
 public:
  virtual ~RowEncoder() = default;
  // Encodes the next n packed rows.
  virtual void WriteRows(const uint8_t* rows, int n) = 0;
  // After all rows: the encoded file.
  virtual std::vector<uint8_t> Finish() = 0;
  // As RowDecoder::row_group.
  int row_group() const { return row_group_; }

 protected:
  int row_group_ = 1;
};

// `quality` (1..100) applies to JPEG.  Channels must be 3 for JPEG.
std::unique_ptr<RowEncoder> MakeImageEncoder(ImageFormat format, int width, int height,
                                             int channels, int quality = 90);

// Whole-image conveniences.
Image DecodeImage(const std::vector<uint8_t>& bytes, const std::string& name, int channels = 3);
std::vector<uint8_t> EncodeImage(const Image& image, ImageFormat format, int quality = 90);
std::vector<uint8_t> ReadFileBytes(const std::string& path);  // throws with the path

}  // namespace freeride::tasks
