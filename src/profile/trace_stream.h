// Streams a Chrome/Kineto trace file (plain JSON or gzip) and hands out its
// parts one at a time: each top-level value, and each element of the
// `traceEvents` array, as raw JSON text.  Memory stays bounded by the largest
// single element, not by the file: a 1 GB trace is read in fixed chunks.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace freeride::profile {

// Every problem with a trace file: unreadable, truncated, malformed, or
// missing what the profiler needs.  The message names the file.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TraceStreamVisitor {
  // A top-level key other than traceEvents, with its value's JSON text.
  std::function<void(std::string_view key, std::string_view value)> on_top_level;
  // One element of traceEvents.  The text is followed in memory by at least
  // kTracePadding readable bytes, so that simdjson can parse it in place.
  std::function<void(std::string_view event)> on_event;
};

inline constexpr size_t kTracePadding = 64;

struct TraceStreamStats {
  uint64_t bytes = 0;   // JSON bytes after decompression
  uint64_t events = 0;  // traceEvents elements
  size_t peak_buffer_bytes = 0;
};

struct TraceStreamOptions {
  size_t max_value_bytes = size_t{256} << 20;  // one event or top-level value
  // Gzip files inflating to at most this are decompressed in one call
  // (libdeflate: 6.6 ms for a 20 MB trace, against 44 ms through zlib in
  // Python's gzip); larger ones stream in 8 MiB chunks.
  uint64_t one_shot_gunzip_limit = uint64_t{256} << 20;
};

// Reads `path` to the end, calling the visitor in file order.  Throws
// TraceError for I/O errors, bad gzip data, malformed or truncated JSON, a
// top level that is not an object, or a single value over max_value_bytes.
TraceStreamStats StreamTrace(const std::string& path, const TraceStreamVisitor& visitor,
                             const TraceStreamOptions& options = {});

}  // namespace freeride::profile
