#include "profile/trace_stream.h"

#include <fmt/format.h>
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace freeride::profile {
namespace {

constexpr size_t kChunkBytes = size_t{8} << 20;

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

// A source of decompressed JSON bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes into dst; 0 means the end.  Throws TraceError.
  virtual size_t Read(char* dst, size_t n) = 0;
};

class PlainSource : public ByteSource {
 public:
  PlainSource(File file, std::string path) : file_(std::move(file)), path_(std::move(path)) {}
  size_t Read(char* dst, size_t n) override {
    size_t got = std::fread(dst, 1, n, file_.get());
    if (got == 0 && std::ferror(file_.get()))
      throw TraceError(fmt::format("{}: read failed: {}", path_, std::strerror(errno)));
    return got;
  }

 private:
  File file_;
  std::string path_;
};

class GzipSource : public ByteSource {
 public:
  GzipSource(File file, std::string path) : file_(std::move(file)), path_(std::move(path)) {
    // 15 + 32: accept gzip or zlib headers.
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw TraceError(path_ + ": zlib init failed");
    in_.resize(1 << 20);
  }
  ~GzipSource() override { inflateEnd(&zs_); }

  size_t Read(char* dst, size_t n) override {
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    while (zs_.avail_out > 0 && !done_) {
      if (zs_.avail_in == 0) {
        size_t got = std::fread(in_.data(), 1, in_.size(), file_.get());
        if (got == 0) {
          if (std::ferror(file_.get()))
            throw TraceError(fmt::format("{}: read failed: {}", path_, std::strerror(errno)));
          if (!member_done_)
            throw TraceError(path_ + ": gzip data is truncated (the file ends mid-stream)");
          done_ = true;
          break;
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(got);
      }
      if (member_done_) {  // another gzip member follows (concatenated .gz)
        inflateReset(&zs_);
        member_done_ = false;
      }
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw TraceError(fmt::format("{}: bad gzip data: {}", path_, zs_.msg ? zs_.msg : "error"));
      }
    }
    return n - zs_.avail_out;
  }

 private:
  File file_;
  std::string path_;
  z_stream zs_{};
  std::vector<char> in_;
  bool member_done_ = false;
  bool done_ = false;
};

// Whole-file decompression into one buffer; nullptr where the file does not
// qualify (too big, multi-member) so the caller streams instead.
std::unique_ptr<std::vector<char>> TryOneShotGunzip(FILE* f, uint64_t limit) {
  if (std::fseek(f, 0, SEEK_END) != 0) return nullptr;
  long compressed = std::ftell(f);
  if (compressed < 18 || std::fseek(f, compressed - 4, SEEK_SET) != 0) return nullptr;
  unsigned char tail[4];
  if (std::fread(tail, 1, 4, f) != 4) return nullptr;
  // ISIZE is the inflated size mod 2^32; smaller than the input means wrapped.
  uint64_t inflated = tail[0] | tail[1] << 8 | tail[2] << 16 | uint64_t{tail[3]} << 24;
  std::rewind(f);
  if (inflated > limit || inflated < static_cast<uint64_t>(compressed) / 2) return nullptr;
  std::vector<char> in(compressed);
  if (std::fread(in.data(), 1, in.size(), f) != in.size()) {
    std::rewind(f);
    return nullptr;
  }
  std::rewind(f);
  auto out = std::make_unique<std::vector<char>>(inflated + kTracePadding);
  libdeflate_decompressor* d = libdeflate_alloc_decompressor();
  size_t in_used = 0, out_size = 0;
  libdeflate_result rc = libdeflate_gzip_decompress_ex(d, in.data(), in.size(), out->data(),
                                                      inflated, &in_used, &out_size);
  libdeflate_free_decompressor(d);
  if (rc != LIBDEFLATE_SUCCESS || in_used != in.size() || out_size != inflated) return nullptr;
  out->resize(inflated);
  return out;
}

struct BlockMasks {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0;
};

// Bit k describes byte p[k].
BlockMasks ClassifyBlock(const char* p) {
  BlockMasks m;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  // '[' | 0x20 == '{' and ']' | 0x20 == '}', so one compare finds both kinds.
  const __m128i case_bit = _mm_set1_epi8(0x20);
  const __m128i open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
  for (int j = 0; j < 4; ++j) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * j));
    __m128i folded = _mm_or_si128(v, case_bit);
    auto mask = [&](__m128i eq) {
      return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(eq))) << (16 * j);
    };
    m.quote |= mask(_mm_cmpeq_epi8(v, quote));
    m.backslash |= mask(_mm_cmpeq_epi8(v, backslash));
    m.open |= mask(_mm_cmpeq_epi8(folded, open));
    m.close |= mask(_mm_cmpeq_epi8(folded, close));
  }
#else
  for (int k = 0; k < 64; ++k) {
    uint64_t bit = uint64_t{1} << k;
    char c = p[k];
    if (c == '"') m.quote |= bit;
    else if (c == '\\') m.backslash |= bit;
    else if (c == '{' || c == '[') m.open |= bit;
    else if (c == '}' || c == ']') m.close |= bit;
  }
#endif
  return m;
}

// Bit k of the result is the parity of bits 0..k: inside a string or not.
uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

// Walks the top level of the document.  Data live in buf_[0, end_); begin
// marks the first byte still needed, so Fill() may drop what lies before it.
class Splitter {
 public:
  Splitter(std::string path, ByteSource* source, std::vector<char> preloaded, size_t max_value)
      : path_(std::move(path)), source_(source), max_value_(max_value) {
    if (source_ == nullptr) {
      end_ = preloaded.size();
      preloaded.resize(end_ + kTracePadding, ' ');
      buf_ = std::move(preloaded);
    } else {
      buf_.assign(kChunkBytes + kTracePadding, ' ');
    }
  }

  TraceStreamStats Run(const TraceStreamVisitor& visitor) {
    SkipWhitespace();
    if (Peek() != '{')
      Fail(At() == 0 && AtEnd() ? "the file is empty"
                                : "the top level is not a JSON object (is this a Kineto trace?)");
    ++pos_;
    bool first = true;
    while (NextMember('}', &first, "top-level keys")) {
      if (Peek() != '"') Fail("expected a key string");
      std::string_view quoted = ScanValue();
      std::string key(quoted.substr(1, quoted.size() - 2));
      SkipWhitespace();
      if (Peek() != ':') Fail("expected ':' after a key");
      ++pos_;
      SkipWhitespace();
      if (key == "traceEvents") {
        ScanEvents(visitor);
      } else {
        std::string_view value = ScanValue();
        if (visitor.on_top_level) visitor.on_top_level(key, value);
      }
    }
    SkipWhitespace();
    if (!AtEnd()) Fail("unexpected data after the end of the top-level object");
    stats_.bytes = consumed_ + end_;
    return stats_;
  }

 private:
  void ScanEvents(const TraceStreamVisitor& visitor) {
    if (Peek() != '[') Fail("traceEvents is not an array");
    ++pos_;
    bool first = true;
    while (NextMember(']', &first, "trace events")) {
      std::string_view event = ScanValue();
      ++stats_.events;
      if (visitor.on_event) visitor.on_event(event);
    }
  }

  // Moves to the next member of an object or array whose opening bracket
  // has been read: past the comma, or past the closing bracket (then false).
  bool NextMember(char close, bool* first, const char* between) {
    SkipWhitespace();
    if (Peek() == close) {
      ++pos_;
      return false;
    }
    if (!*first) {
      if (Peek() != ',') Fail(fmt::format("expected ',' or '{}' between {}", close, between));
      ++pos_;
      SkipWhitespace();
    }
    *first = false;
    return true;
  }

  // The byte at pos_, reading more if needed; '\0' at the end of the data.
  char Peek() {
    if (pos_ >= end_ && !Fill(pos_)) return '\0';
    return buf_[pos_];
  }
  bool AtEnd() { return Peek() == '\0' && pos_ >= end_; }
  uint64_t At() const { return consumed_ + pos_; }

  void SkipWhitespace() {
    for (;;) {
      if (pos_ >= end_ && !Fill(pos_)) return;
      char c = buf_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++pos_;
    }
  }

  // Reads more input, dropping buf_[0, keep) first (keep <= pos_).  Returns
  // false at the end of the data.  Indices held by the caller must be
  // reduced by last_shift_ afterwards.
  bool Fill(size_t keep) {
    last_shift_ = 0;
    if (source_ == nullptr) return false;
    size_t live = end_ - keep;
    if (live > max_value_)
      Fail(fmt::format("a single JSON value is larger than {} MiB", max_value_ >> 20));
    if (keep > 0) {
      std::memmove(buf_.data(), buf_.data() + keep, live);
      consumed_ += keep;
      pos_ -= keep;
      end_ = live;
      last_shift_ = keep;
    }
    if (buf_.size() - kTracePadding - end_ < kChunkBytes / 2)
      buf_.resize(buf_.size() + kChunkBytes, ' ');
    stats_.peak_buffer_bytes = std::max(stats_.peak_buffer_bytes, buf_.size());
    size_t got = source_->Read(buf_.data() + end_, buf_.size() - kTracePadding - end_);
    end_ += got;
    std::memset(buf_.data() + end_, ' ', kTracePadding);  // block scans read past end_
    return got > 0;
  }

  // Scans one complete value starting at pos_ and returns its text; pos_
  // moves past it.  Checks bracket nesting and string termination.
  std::string_view ScanValue() {
    size_t start = pos_;
    size_t i = pos_;
    auto need = [&]() {
      bool more = Fill(start);
      i -= last_shift_;
      start -= last_shift_;
      return more;
    };
    if (i >= end_ && !need()) Fail("the file ends where a value should start (truncated?)");
    char first = buf_[i];
    if (first != '{' && first != '[' && first != '"') {  // number, true, false, null
      for (;;) {
        if (i >= end_ && !need()) break;
        char c = buf_[i];
        if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
          break;
        if (c == '{' || c == '[' || c == '"' || c == ':') Fail("malformed JSON value");
        ++i;
      }
      if (i == start) Fail("expected a JSON value");
      pos_ = i;
      return {buf_.data() + start, i - start};
    }
    if (first == '"') return ScanString(start);
    // An object or array: 64-byte blocks, as in simdjson's first stage.
    nesting_.clear();
    bool in_string = false, escape_carry = false;
    for (;;) {
      if (end_ - i < 64 && need()) continue;  // more data arrived; i was shifted
      if (i >= end_) break;
      uint64_t valid = end_ - i >= 64 ? ~uint64_t{0} : (uint64_t{1} << (end_ - i)) - 1;
      BlockMasks m = ClassifyBlock(buf_.data() + i);  // bytes past end_ are padding
      uint64_t escaped = 0;
      if ((m.backslash & valid) != 0 || escape_carry) {
        for (int k = 0; k < 64; ++k) {  // rare: only blocks with backslashes
          if (escape_carry) {
            escaped |= uint64_t{1} << k;
            escape_carry = false;
          } else if ((m.backslash >> k) & 1) {
            escape_carry = true;
          }
        }
      }
      uint64_t quotes = m.quote & ~escaped & valid;
      uint64_t inside = PrefixXor(quotes) ^ (in_string ? ~uint64_t{0} : 0);
      in_string = (inside >> 63) & 1;
      uint64_t structural = (m.open | m.close) & ~inside & valid;
      while (structural != 0) {
        int k = __builtin_ctzll(structural);
        structural &= structural - 1;
        char c = buf_[i + k];
        if (c == '{' || c == '[') {
          if (nesting_.size() >= 1024) Fail("JSON nested deeper than 1024 levels");
          nesting_.push_back(c);
          continue;
        }
        if (nesting_.empty() || (nesting_.back() == '{') != (c == '}'))
          Fail(fmt::format("mismatched '{}'", c));
        nesting_.pop_back();
        if (nesting_.empty()) {
          pos_ = i + k + 1;
          return {buf_.data() + start, pos_ - start};
        }
      }
      if (valid != ~uint64_t{0}) break;
      i += 64;
    }
    Fail(in_string ? "the file ends inside a string (truncated?)"
                   : "the file ends inside an object or array (truncated?)");
  }

  // A string value starting at buf_[start] (the opening quote).
  std::string_view ScanString(size_t start) {
    size_t i = start + 1;
    auto need = [&]() {
      bool more = Fill(start);
      i -= last_shift_;
      start -= last_shift_;
      if (!more) Fail("the file ends inside a string (truncated?)");
    };
    for (;;) {
      if (i >= end_) need();
      const char* p = buf_.data() + i;
      const char* q = static_cast<const char*>(std::memchr(p, '"', end_ - i));
      const char* b =
          static_cast<const char*>(std::memchr(p, '\\', (q ? q : buf_.data() + end_) - p));
      if (b != nullptr) {  // skip the escaped character
        size_t at = b - buf_.data();
        i = at + 2;
        if (at + 1 >= end_) {
          i = at;
          need();
          i += 2;
        }
        continue;
      }
      if (q == nullptr) {
        i = end_;
        continue;
      }
      pos_ = q - buf_.data() + 1;
      return {buf_.data() + start, pos_ - start};
    }
  }

  [[noreturn]] void Fail(const std::string& what) {
    throw TraceError(fmt::format("{}: malformed trace JSON at byte {}: {}", path_, At(), what));
  }

  std::string path_;
  ByteSource* source_;
  size_t max_value_;
  std::vector<char> buf_;
  std::vector<char> nesting_;  // open brackets of the value being scanned
  size_t pos_ = 0, end_ = 0, last_shift_ = 0;
  uint64_t consumed_ = 0;  // bytes dropped from the front of buf_
  TraceStreamStats stats_;
};

}  // namespace

TraceStreamStats StreamTrace(const std::string& path, const TraceStreamVisitor& visitor,
                             const TraceStreamOptions& options) {
  size_t max_value_bytes = options.max_value_bytes;
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw TraceError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  unsigned char magic[2] = {0, 0};
  size_t got = std::fread(magic, 1, 2, file.get());
  std::rewind(file.get());
  bool gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (gzip) {
    if (auto whole = TryOneShotGunzip(file.get(), options.one_shot_gunzip_limit)) {
      Splitter splitter(path, nullptr, std::move(*whole), max_value_bytes);
      return splitter.Run(visitor);
    }
    GzipSource source(std::move(file), path);
    Splitter splitter(path, &source, {}, max_value_bytes);
    return splitter.Run(visitor);
  }
  PlainSource source(std::move(file), path);
  Splitter splitter(path, &source, {}, max_value_bytes);
  return splitter.Run(visitor);
}

}  // namespace freeride::profile
