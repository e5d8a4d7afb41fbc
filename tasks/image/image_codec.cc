#include "image/image_codec.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <png.h>

namespace freeride::tasks {
namespace {

[[noreturn]] void Fail(const std::string& name, const std::string& why) {
  throw std::runtime_error(name + ": cannot decode image: " + why);
}

// libjpeg reports errors by calling error_exit, which must not return; we
// jump back into the C++ frame that called libjpeg and throw from there.
// Warnings (emit_message level -1: e.g. "premature end of data", after
// which libjpeg pads with grey) are errors too.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0) JpegErrorExit(cinfo);
}

void InstallJpegErrors(JpegError* err) {
  jpeg_std_error(&err->mgr);
  err->mgr.error_exit = JpegErrorExit;
  err->mgr.emit_message = JpegEmitMessage;
  err->message[0] = '\0';
}

class JpegDecoder : public RowDecoder {
 public:
  JpegDecoder(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name)
      : bytes_(std::move(bytes)), name_(std::move(name)) {
    cinfo_.err = &err_.mgr;
    InstallJpegErrors(&err_);
    if (setjmp(err_.jump)) Fail(name_, err_.message);
    jpeg_create_decompress(&cinfo_);
    created_ = true;
    jpeg_mem_src(&cinfo_, bytes_->data(), bytes_->size());
    jpeg_read_header(&cinfo_, TRUE);
    cinfo_.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo_);
    width_ = static_cast<int>(cinfo_.output_width);
    height_ = static_cast<int>(cinfo_.output_height);
    // libjpeg decodes a whole MCU row when asked for its first line and
    // hands out the rest from a buffer.
    row_group_ = cinfo_.max_v_samp_factor * DCTSIZE;
  }
  ~JpegDecoder() override {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }

  void ReadRows(int n, uint8_t* out) override {
    if (setjmp(err_.jump)) Fail(name_, err_.message);
    for (int i = 0; i < n && rows_done_ < height_;) {
      JSAMPROW row = out + static_cast<size_t>(i) * width_ * 3;
      JDIMENSION got = jpeg_read_scanlines(&cinfo_, &row, 1);
      if (got == 0) Fail(name_, "no more rows");
      ++i;
      ++rows_done_;
    }
    if (rows_done_ == height_) jpeg_finish_decompress(&cinfo_);
  }

 private:
  std::shared_ptr<const std::vector<uint8_t>> bytes_;
  std::string name_;
  jpeg_decompress_struct cinfo_{};
  JpegError err_{};
  bool created_ = false;
};

// libpng's error callback must not return either.
struct PngIo {
  std::string name;
  const std::vector<uint8_t>* bytes = nullptr;
  size_t offset = 0;
  std::string error;
};

void PngErrorFn(png_structp png, png_const_charp message) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  io->error = message;
  png_longjmp(png, 1);
}
void PngWarningFn(png_structp, png_const_charp) {}

void PngReadFn(png_structp png, png_bytep out, png_size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (io->offset + n > io->bytes->size()) png_error(png, "the file is truncated");
  std::memcpy(out, io->bytes->data() + io->offset, n);
  io->offset += n;
}

class PngDecoder : public RowDecoder {
 public:
  PngDecoder(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name, int channels)
      : bytes_(std::move(bytes)), channels_(channels) {
    io_.name = std::move(name);
    io_.bytes = bytes_.get();
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io_, PngErrorFn, PngWarningFn);
    if (png_ == nullptr) Fail(io_.name, "out of memory");
    info_ = png_create_info_struct(png_);
    if (setjmp(png_jmpbuf(png_))) Fail(io_.name, io_.error);
    png_set_read_fn(png_, &io_, PngReadFn);
    png_read_info(png_, info_);
    int color = png_get_color_type(png_, info_);
    if (png_get_interlace_type(png_, info_) != PNG_INTERLACE_NONE)
      png_error(png_, "interlaced PNGs cannot be decoded row by row");
    png_set_expand(png_);  // palette and low-bit grey to 8 bits, tRNS to alpha
    png_set_strip_16(png_);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA)
      png_set_gray_to_rgb(png_);
    if (channels_ == 3)
      png_set_strip_alpha(png_);
    else
      png_set_add_alpha(png_, 0xff, PNG_FILLER_AFTER);
    png_read_update_info(png_, info_);
    width_ = static_cast<int>(png_get_image_width(png_, info_));
    height_ = static_cast<int>(png_get_image_height(png_, info_));
    if (static_cast<int>(png_get_rowbytes(png_, info_)) != width_ * channels_)
      png_error(png_, "unexpected row layout");
  }
  ~PngDecoder() override { png_destroy_read_struct(&png_, &info_, nullptr); }

  void ReadRows(int n, uint8_t* out) override {
    if (setjmp(png_jmpbuf(png_))) Fail(io_.name, io_.error);
    for (int i = 0; i < n && rows_done_ < height_; ++i, ++rows_done_)
      png_read_row(png_, out + static_cast<size_t>(i) * width_ * channels_, nullptr);
    if (rows_done_ == height_) png_read_end(png_, nullptr);
  }

 private:
  std::shared_ptr<const std::vector<uint8_t>> bytes_;
  int channels_;
  PngIo io_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

[[noreturn]] void FailEncode(const std::string& why) {
  throw std::runtime_error("cannot encode image: " + why);
}

class JpegEncoder : public RowEncoder {
 public:
  JpegEncoder(int width, int height, int quality) : width_(width) {
    cinfo_.err = &err_.mgr;
    InstallJpegErrors(&err_);
    if (setjmp(err_.jump)) FailEncode(err_.message);
    jpeg_create_compress(&cinfo_);
    created_ = true;
    jpeg_mem_dest(&cinfo_, &buffer_, &size_);
    cinfo_.image_width = static_cast<JDIMENSION>(width);
    cinfo_.image_height = static_cast<JDIMENSION>(height);
    cinfo_.input_components = 3;
    cinfo_.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo_);
    jpeg_set_quality(&cinfo_, quality, TRUE);
    jpeg_start_compress(&cinfo_, TRUE);
    row_group_ = cinfo_.max_v_samp_factor * DCTSIZE;  // encoded when an MCU row is full
  }
  ~JpegEncoder() override {
    if (created_) jpeg_destroy_compress(&cinfo_);
    std::free(buffer_);
  }

  void WriteRows(const uint8_t* rows, int n) override {
    if (setjmp(err_.jump)) FailEncode(err_.message);
    for (int i = 0; i < n; ++i) {
      auto row = const_cast<JSAMPROW>(rows + static_cast<size_t>(i) * width_ * 3);
      jpeg_write_scanlines(&cinfo_, &row, 1);
    }
  }

  std::vector<uint8_t> Finish() override {
    if (setjmp(err_.jump)) FailEncode(err_.message);
    jpeg_finish_compress(&cinfo_);
    return {buffer_, buffer_ + size_};
  }

 private:
  int width_;
  jpeg_compress_struct cinfo_{};
  JpegError err_{};
  bool created_ = false;
  unsigned char* buffer_ = nullptr;
  unsigned long size_ = 0;
};

void PngWriteFn(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
void PngFlushFn(png_structp) {}

class PngEncoder : public RowEncoder {
 public:
  PngEncoder(int width, int height, int channels) : width_(width), channels_(channels) {
    png_ = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io_, PngErrorFn, PngWarningFn);
    if (png_ == nullptr) FailEncode("out of memory");
    info_ = png_create_info_struct(png_);
    if (setjmp(png_jmpbuf(png_))) FailEncode(io_.error);
    png_set_write_fn(png_, &out_, PngWriteFn, PngFlushFn);
    // Level 3 is about twice as fast as the default 6 and barely larger.
    png_set_compression_level(png_, 3);
    png_set_IHDR(png_, info_, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
                 channels == 4 ? PNG_COLOR_TYPE_RGBA : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png_, info_);
  }
  ~PngEncoder() override { png_destroy_write_struct(&png_, &info_); }

  void WriteRows(const uint8_t* rows, int n) override {
    if (setjmp(png_jmpbuf(png_))) FailEncode(io_.error);
    for (int i = 0; i < n; ++i)
      png_write_row(png_, rows + static_cast<size_t>(i) * width_ * channels_);
  }

  std::vector<uint8_t> Finish() override {
    if (setjmp(png_jmpbuf(png_))) FailEncode(io_.error);
    png_write_end(png_, nullptr);
    return std::move(out_);
  }

 private:
  int width_, channels_;
  PngIo io_;
  std::vector<uint8_t> out_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

}  // namespace

ImageFormat DetectImageFormat(const std::vector<uint8_t>& b, const std::string& name) {
  if (b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return ImageFormat::kJpeg;
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return ImageFormat::kPng;
  Fail(name, b.empty() ? "the file is empty" : "not a JPEG or PNG file");
}

const char* ImageFormatExtension(ImageFormat format) {
  return format == ImageFormat::kJpeg ? "jpg" : "png";
}

std::unique_ptr<RowDecoder> OpenImageDecoder(std::shared_ptr<const std::vector<uint8_t>> bytes,
                                             const std::string& name, int channels) {
  if (channels != 3 && channels != 4) Fail(name, "channels must be 3 or 4");
  if (DetectImageFormat(*bytes, name) == ImageFormat::kJpeg) {
    if (channels != 3) Fail(name, "JPEG has no alpha channel; use a PNG");
    return std::make_unique<JpegDecoder>(std::move(bytes), name);
  }
  return std::make_unique<PngDecoder>(std::move(bytes), name, channels);
}

std::unique_ptr<RowEncoder> MakeImageEncoder(ImageFormat format, int width, int height,
                                             int channels, int quality) {
  if (width <= 0 || height <= 0) FailEncode("empty image");
  if (format == ImageFormat::kJpeg) {
    if (channels != 3) FailEncode("JPEG output must be RGB");
    return std::make_unique<JpegEncoder>(width, height, quality);
  }
  return std::make_unique<PngEncoder>(width, height, channels);
}

Image DecodeImage(const std::vector<uint8_t>& bytes, const std::string& name, int channels) {
  auto decoder =
      OpenImageDecoder(std::make_shared<const std::vector<uint8_t>>(bytes), name, channels);
  Image image{decoder->width(), decoder->height(), channels, {}};
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * channels);
  decoder->ReadRows(image.height, image.pixels.data());
  return image;
}

std::vector<uint8_t> EncodeImage(const Image& image, ImageFormat format, int quality) {
  auto encoder = MakeImageEncoder(format, image.width, image.height, image.channels, quality);
  encoder->WriteRows(image.pixels.data(), image.height);
  return encoder->Finish();
}

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace freeride::tasks
