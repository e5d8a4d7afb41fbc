// freeride-image: image resize + watermark as a FreeRide iterative side
// task.  Each image goes through three phases, decode, transform (resize +
// watermark) and encode, all row-streamed; a step runs bands of rows of
// whichever phases fit its --step-ms budget, each phase's cost per pixel
// learned from measured bands.
//
//   freeride-image --input photos/ --output small/ --width 640
//   freeride-image --generate 200 --generate-size 1920x1080 --device cuda --passes 0
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "base/files.h"
#include "common/gpu.h"
#include "common/bubble_windows.h"
#include "common/step_sizer.h"
#include "common/task_options.h"
#include "freeride/task.h"
#include "image/image.h"
#include "image/image_codec.h"

namespace freeride::tasks {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::vector<std::string> inputs;
  int generate = 0;
  std::string generate_size = "1920x1080";
  std::string output;
  int width = 640, height = 0;
  std::string watermark;
  float opacity = 0.5f;
  std::string format = "same";  // jpeg, png or same as the input
  int quality = 90;
  int passes = 1;               // 0: until stopped
  bool skip_bad = false;
  double max_megapixels = 256;  // refuses decompression bombs before allocating
  CommonTaskOptions common;
};

struct Source {
  std::string name;  // file name, used for the output
  std::string path;  // empty for generated images
  std::shared_ptr<const std::vector<uint8_t>> bytes;  // generated images only
};

bool HasImageExtension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<Source> ListSources(const std::vector<std::string>& inputs) {
  std::vector<Source> sources;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(input))
        if (entry.is_regular_file() && HasImageExtension(entry.path())) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      if (files.empty()) throw std::runtime_error(input + ": no .jpg, .jpeg or .png files");
      for (const auto& f : files) sources.push_back({f.filename().string(), f.string(), nullptr});
    } else if (fs::is_regular_file(input, ec)) {
      sources.push_back({fs::path(input).filename().string(), input, nullptr});
    } else {
      throw std::runtime_error(input + ": cannot open (no such file or directory)");
    }
  }
  return sources;
}

void ParseSize(const std::string& text, int* w, int* h) {
  if (std::sscanf(text.c_str(), "%dx%d", w, h) != 2 || *w <= 0 || *h <= 0 || *w > 65535 ||
      *h > 65535)
    throw std::runtime_error("--generate-size must be WIDTHxHEIGHT, e.g. 1920x1080, not '" + text +
                             "'");
}

enum Phase { kDecode = 0, kTransform = 1, kEncode = 2 };

// The image being worked on.
struct Work {
  size_t index = 0;
  std::unique_ptr<RowDecoder> decoder;
  uint8_t* source = nullptr;  // decoded RGB, in the task's reused buffer
  uint8_t* output = nullptr;  // transformed RGB, likewise
  TransformGeometry geometry;
  ImageFormat format = ImageFormat::kJpeg;
  std::unique_ptr<RowEncoder> encoder;
  Phase phase = kDecode;
  int row = 0;  // rows done in this phase
  double megapixels = 0;
};

class ImageTask : public IterativeTask {
 public:
  explicit ImageTask(Options o) : o_(std::move(o)) {}
  std::string unit() const override { return "megapixels"; }
  uint64_t peak_memory_bytes() const override { return PeakGpuBytes(); }

  void Init() override {
    device_ = ChooseDevice(o_.common.device);
    if (o_.format != "same" && o_.format != "jpeg" && o_.format != "png")
      throw std::runtime_error("--format must be jpeg, png or same, not '" + o_.format + "'");
    if (o_.opacity < 0 || o_.opacity > 1) throw std::runtime_error("--opacity must be in [0, 1]");
    watermark_ = o_.watermark.empty()
                     ? DefaultWatermark(160, 48)
                     : DecodeImage(ReadFileBytes(o_.watermark), o_.watermark, 4);
    if (o_.generate > 0) {
      int w, h;
      ParseSize(o_.generate_size, &w, &h);
      for (int i = 0; i < o_.generate; ++i) {
        auto bytes = std::make_shared<const std::vector<uint8_t>>(
            EncodeImage(SyntheticImage(w, h, 1000 + i), ImageFormat::kJpeg, 90));
        char name[32];
        std::snprintf(name, sizeof name, "generated-%05d.jpg", i);
        sources_.push_back({name, "", std::move(bytes)});
      }
    } else {
      sources_ = ListSources(o_.inputs);
    }
    if (!o_.output.empty()) {
      fs::create_directories(o_.output);
      for (const Source& s : sources_)
        if (!s.path.empty() && fs::equivalent(fs::path(s.path).parent_path(), o_.output))
          throw std::runtime_error("--output " + o_.output +
                                   " holds the input images; choose another folder so that no "
                                   "input is overwritten");
    }
    transformer_ = MakeImageTransformer(device_, watermark_);
    std::fprintf(stderr,
                 "image: %zu images%s, output width %d height %d (0: keep aspect), watermark "
                 "%dx%d at opacity %.2f, on %s\n",
                 sources_.size(), o_.generate > 0 ? " (generated JPEG)" : "", o_.width, o_.height,
                 watermark_.width, watermark_.height, o_.opacity, DeviceName(device_));
  }

  StepResult Step() override {
    // Only the transform runs on the GPU: decoding and encoding are the CPU's.
    if (steps_++ == 0) {
      sizers_[kTransform].set_slow_chunks(SlowChunksForThisStep(device_ == Device::kCuda));
      bubble_steps_.Start(sizers_[kTransform].slow_chunks(), o_.common.fixed_steps);
    }
    const int64_t step_ns = bubble_steps_.TargetNs();
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    double units = 0;
    bool worked = false;
    while (true) {
      if (!work_ && !OpenNext()) return {units, true};
      int64_t left = step_ns - (Clock::now() - start).count();
      if (worked && left <= 0) break;
      Work& w = *work_;
      int width = w.phase == kDecode ? w.geometry.src_w : w.geometry.dst_w;
      int rows_in_phase = w.phase == kDecode ? w.geometry.src_h : w.geometry.dst_h;
      StepSizer& sizer = sizers_[w.phase];
      int64_t rows = sizer.ns_per_item() > 0
                         ? static_cast<int64_t>(left / (sizer.ns_per_item() * width))
                         : 8;
      int group = w.phase == kDecode   ? w.decoder->row_group()
                  : w.phase == kEncode ? w.encoder->row_group()
                                       : 1;
      rows -= rows % group;
      if (rows < group) {
        if (worked) break;  // the next band would overrun the budget
        rows = group;
      }
      rows = std::min<int64_t>(rows, rows_in_phase - w.row);
      try {
        sizer.RunChunk(rows * width, [&] { RunPhase(w, static_cast<int>(rows)); });
      } catch (const std::runtime_error& e) {
        SkipOrThrow(e);
        work_.reset();
        continue;
      }
      worked = true;
      units += w.megapixels / 3 * static_cast<double>(rows) / rows_in_phase;
      w.row += static_cast<int>(rows);
      if (w.row == rows_in_phase) FinishPhase(w);
    }
    bubble_steps_.Record(units);
    return {units, false};
  }

  void Finish() override {
    std::printf(
        "{\"task\":\"image\",\"images\":%lld,\"failed\":%lld,\"megapixels_out\":%.6g,"
        "\"output\":\"%s\"}\n",
        static_cast<long long>(done_), static_cast<long long>(failed_), megapixels_out_,
        o_.output.c_str());
  }

  // The checkpoint records the next image to start; an image that was half
  // done is redone from its start.
  bool Save(const std::string& path) override {
    std::ofstream out(path, std::ios::binary);
    int64_t record[6] = {kMagic, static_cast<int64_t>(sources_.size()), NamesHash(), pass_,
                         static_cast<int64_t>(work_ ? work_->index : next_), done_};
    out.write(reinterpret_cast<const char*>(record), sizeof record);
    return static_cast<bool>(out);
  }

  bool Restore(const std::string& path) override {
    std::ifstream in(path, std::ios::binary);
    int64_t record[6];
    if (!in.read(reinterpret_cast<char*>(record), sizeof record) || record[0] != kMagic)
      return false;
    if (record[1] != static_cast<int64_t>(sources_.size()) || record[2] != NamesHash()) {
      std::fprintf(stderr, "image: checkpoint is for other images; starting over\n");
      return false;
    }
    pass_ = static_cast<int>(record[3]);
    next_ = static_cast<size_t>(record[4]);
    done_ = record[5];
    return true;
  }

 private:
  static constexpr int64_t kMagic = 0x46524947414d4531;  // "FRIGAME1"

  int64_t NamesHash() const {
    uint64_t h = 1469598103934665603ull;
    for (const Source& s : sources_)
      for (char c : s.name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return static_cast<int64_t>(h >> 1);
  }

  // Starts the next image (next pass when the list is done); false when all
  // passes are done.  Undecodable headers are skipped with --skip-bad.
  bool OpenNext() {
    while (true) {
      if (next_ >= sources_.size()) {
        if (o_.passes != 0 && pass_ + 1 >= o_.passes) return false;
        ++pass_;
        next_ = 0;
      }
      size_t index = next_++;
      try {
        work_ = Open(index);
        return true;
      } catch (const std::runtime_error& e) {
        SkipOrThrow(e);
      }
    }
  }

  // With --skip-bad a damaged image is counted and skipped, unless none of
  // the images can be processed (then repeating passes would spin forever).
  void SkipOrThrow(const std::runtime_error& e) {
    if (!o_.skip_bad) throw e;
    std::fprintf(stderr, "image: skipping %s\n", e.what());
    ++failed_;
    if (failed_ >= static_cast<int64_t>(sources_.size()) && done_ == 0)
      throw std::runtime_error("no image could be decoded");
  }

  std::unique_ptr<Work> Open(size_t index) {
    const Source& s = sources_[index];
    auto bytes = s.bytes ? s.bytes
                         : std::make_shared<const std::vector<uint8_t>>(ReadFileBytes(s.path));
    auto w = std::make_unique<Work>();
    w->index = index;
    w->decoder = OpenImageDecoder(bytes, s.name);
    int sw = w->decoder->width(), sh = w->decoder->height();
    double megapixels = static_cast<double>(sw) * sh / 1e6;
    if (megapixels > o_.max_megapixels)
      throw std::runtime_error(s.name + ": " + std::to_string(sw) + "x" + std::to_string(sh) +
                               " is larger than --max-megapixels " +
                               std::to_string(o_.max_megapixels));
    int dw, dh;
    OutputSize(sw, sh, o_.width, o_.height, &dw, &dh);
    CheckMemoryFits(ImageTransformBytes(sw, sh, dw, dh, watermark_), MemoryLimitBytes(),
                    s.name + " (" + std::to_string(sw) + "x" + std::to_string(sh) + ")");
    w->geometry = PlaceWatermark(sw, sh, dw, dh, watermark_, o_.opacity);
    w->format = o_.format == "png"    ? ImageFormat::kPng
                : o_.format == "jpeg" ? ImageFormat::kJpeg
                                      : DetectImageFormat(*bytes, s.name);
    w->source = source_buffer_.Reserve(static_cast<size_t>(sw) * sh * 3);
    w->output = output_buffer_.Reserve(static_cast<size_t>(dw) * dh * 3);
    w->megapixels = megapixels;
    return w;
  }

  void RunPhase(Work& w, int rows) {
    const TransformGeometry& g = w.geometry;
    switch (w.phase) {
      case kDecode:
        if (w.row == 0) transformer_->Begin(g, w.source);
        w.decoder->ReadRows(rows, w.source + static_cast<size_t>(w.row) * g.src_w * 3);
        transformer_->SourceRowsReady(w.row, w.row + rows);
        break;
      case kTransform:
        transformer_->TransformRows(w.row, w.row + rows,
                                    w.output + static_cast<size_t>(w.row) * g.dst_w * 3);
        break;
      case kEncode:
        w.encoder->WriteRows(w.output + static_cast<size_t>(w.row) * g.dst_w * 3, rows);
        break;
    }
  }

  void FinishPhase(Work& w) {
    w.row = 0;
    if (w.phase == kDecode) {
      w.decoder.reset();
      w.phase = kTransform;
      return;
    }
    if (w.phase == kTransform) {
      w.encoder = MakeImageEncoder(w.format, w.geometry.dst_w, w.geometry.dst_h, 3, o_.quality);
      w.phase = kEncode;
      return;
    }
    std::vector<uint8_t> encoded = w.encoder->Finish();
    if (!o_.output.empty()) WriteOutput(sources_[w.index].name, w.format, encoded);
    ++done_;
    megapixels_out_ += static_cast<double>(w.geometry.dst_w) * w.geometry.dst_h / 1e6;
    work_.reset();
  }

  // Never a half-written image under the final name, even after a stop.
  void WriteOutput(const std::string& name, ImageFormat format, const std::vector<uint8_t>& bytes) {
    fs::path path =
        fs::path(o_.output) / (fs::path(name).stem().string() + "." + ImageFormatExtension(format));
    std::string error;
    if (!WriteFileAtomically(
            path.string(),
            std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), &error))
      throw std::runtime_error(error);
  }

  // Pixel buffers reused from image to image: allocating and zeroing 36 MB
  // for each 12-megapixel photo took longer than a whole step.
  class PixelBuffer {
   public:
    uint8_t* Reserve(size_t n) {
      if (n > size_) {
        data_ = std::make_unique_for_overwrite<uint8_t[]>(n);
        size_ = n;
      }
      return data_.get();
    }

   private:
    std::unique_ptr<uint8_t[]> data_;
    size_t size_ = 0;
  };

  Options o_;
  PixelBuffer source_buffer_, output_buffer_;
  Device device_ = Device::kCpu;
  Image watermark_;
  std::vector<Source> sources_;
  std::unique_ptr<ImageTransformer> transformer_;
  // The step time aimed at: --step-ms, or behind a gate bubble-sized.
  BubbleSizedSteps bubble_steps_{static_cast<int64_t>(o_.common.step_ms * 1e6)};
  StepSizer sizers_[3] = {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}};
  uint64_t steps_ = 0;
  std::unique_ptr<Work> work_;
  size_t next_ = 0;
  int pass_ = 0;
  int64_t done_ = 0, failed_ = 0;
  double megapixels_out_ = 0;
};

}  // namespace
}  // namespace freeride::tasks

int main(int argc, char** argv) {
  freeride::tasks::Options o;
  CLI::App app{"Image resize + watermark as a FreeRide side task"};
  auto* in = app.add_option("--input", o.inputs, "Image files or folders (.jpg, .jpeg, .png)");
  auto* gen = app.add_option("--generate", o.generate, "Generate this many JPEG images instead")
                  ->check(CLI::PositiveNumber);
  in->excludes(gen);
  app.add_option("--generate-size", o.generate_size, "Size of generated images")
      ->capture_default_str();
  app.add_option("--output", o.output, "Folder for the results (none: encode and discard)");
  app.add_option("--width", o.width, "Output width (0: from --height and the aspect ratio)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--height", o.height, "Output height (0: from --width and the aspect ratio)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--watermark", o.watermark, "RGBA PNG watermark (default: a built-in badge)");
  app.add_option("--opacity", o.opacity, "Watermark opacity, 0..1")->capture_default_str();
  app.add_option("--format", o.format, "Output format: jpeg, png or same")->capture_default_str();
  app.add_option("--quality", o.quality, "JPEG quality")->capture_default_str()->check(
      CLI::Range(1, 100));
  app.add_option("--passes", o.passes, "Passes over the images (0: until stopped)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--skip-bad", o.skip_bad, "Skip images that cannot be decoded, and count them");
  app.add_option("--max-megapixels", o.max_megapixels, "Refuse larger images")
      ->capture_default_str();
  return freeride::tasks::RunTaskMain<freeride::tasks::ImageTask>(
      app, o, argc, argv, [](const auto& o) { return !o.inputs.empty() || o.generate != 0; },
      "freeride-image: give --input FILES_OR_FOLDERS or --generate N");
}
