#include "profile/kineto_trace.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <limits>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <cstring>

namespace freeride::profile {
namespace {

// The DOM API dispatches at run time to the CPU's best kernels (AVX2 etc.);
// On-Demand would be fixed at compile time to the portable fallback.
namespace dom = simdjson::dom;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::optional<int> ProfilerStepNumber(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!StartsWith(name, kPrefix)) return std::nullopt;
  int n = 0;
  auto [ptr, ec] = std::from_chars(name.data() + kPrefix.size(), name.data() + name.size(), n);
  if (ec != std::errc() || ptr != name.data() + name.size()) return std::nullopt;
  return n;
}

// NCCL kernels spin on the GPU while they wait for the peer, so their time
// is waiting, not work.
bool IsCommunicationKernel(std::string_view name) {
  return StartsWith(name, "nccl") || name.find("NCCL") != std::string_view::npos;
}

// CPU operators of torch.distributed (c10d::recv_, c10d::allreduce_, ...),
// of its backends and the profiler's record of collectives: a blocking one
// lasts as long as it waits for its peer.
bool IsCommunicationCpuOp(std::string_view name) {
  return StartsWith(name, "c10d::") || StartsWith(name, "gloo:") || StartsWith(name, "nccl:") ||
         StartsWith(name, "record_param_comms") || StartsWith(name, "ProcessGroup");
}

// A thread id: Kineto writes numbers, some tools strings.
int64_t ThreadField(dom::object object) {
  dom::element v;
  if (object["tid"].get(v) != simdjson::SUCCESS) return 0;
  if (v.is_int64()) return v.get_int64().value();
  if (v.is_number()) return static_cast<int64_t>(v.get_double().value());
  if (v.is_string()) return static_cast<int64_t>(std::hash<std::string_view>{}(v.get_string().value()));
  return 0;
}

// A number, or a number written as a string (some tools do); nullopt if the
// field is absent.  Throws simdjson_error for any other type.
std::optional<double> NumberField(dom::object object, std::string_view key) {
  dom::element v;
  if (object[key].get(v) != simdjson::SUCCESS) return std::nullopt;
  if (v.is_number()) return v.get_double().value();
  if (v.is_string()) {
    std::string_view s = v.get_string().value();
    double out = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    // from_chars also reads "nan" and "inf", which no JSON number can be and
    // no time is: a NaN start would break the sorts by time.
    if (ec == std::errc() && p == s.data() + s.size() && std::isfinite(out)) return out;
  }
  if (v.is_null()) return std::nullopt;
  throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
}

// The most ranks a run can have here: a guard against nonsense (1e12), far
// above any cluster's GPUs, and well inside an int.
constexpr int kMaxWorldSize = 1 << 24;

// A rank or world size from distributedInfo: a whole number from lo to hi.
// Anything else names no rank (and casting 1e12 to int is undefined).
int WholeNumberIn(double value, int lo, int hi, std::string_view what, const std::string& path) {
  if (!(value >= lo && value <= hi) || value != std::floor(value))
    throw TraceError(fmt::format("{}: distributedInfo's {} is {}: expected a whole number from {} to {}",
                                 path, what, value, lo, hi));
  return static_cast<int>(value);
}

// The largest whole number a double holds exactly (2^53): ids and byte
// counts read as doubles are checked against it.
constexpr double kMostExact = 9007199254740992.0;

// A device or stream id: a whole number from `lo` to `hi`, or the event is
// malformed (its message gives the event's position); -1 when absent.  A
// JSON integer is read as one (a double would round ids past 2^53); one
// written as a decimal or a string must be a whole number a double holds
// exactly.
int64_t IdField(dom::object object, std::string_view key, int64_t lo, int64_t hi) {
  dom::element e;
  if (object[key].get(e) != simdjson::SUCCESS || e.is_null()) return -1;
  auto in_range = [&](int64_t id) {
    if (id < lo || id > hi) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
    return id;
  };
  if (e.is_int64()) return in_range(e.get_int64().value());
  if (e.is_uint64()) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);  // past INT64_MAX
  const double v = *NumberField(object, key);
  if (!(v >= -kMostExact && v <= kMostExact) || v != std::floor(v))
    throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
  return in_range(static_cast<int64_t>(v));
}

// A count of bytes (a device's memory, the allocator's reserve): a number
// from 0 to 2^53, or the event is malformed; nullopt if absent.  A negative
// or vast one cast to an unsigned count was undefined, and gave a free
// memory above the device's or below 0.
std::optional<uint64_t> ByteCountField(dom::object object, std::string_view key) {
  const std::optional<double> v = NumberField(object, key);
  if (!v) return std::nullopt;
  if (!(*v >= 0 && *v <= kMostExact)) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
  return static_cast<uint64_t>(*v);
}

std::string_view StringField(dom::object object, std::string_view key) {
  dom::element v;
  if (object[key].get(v) != simdjson::SUCCESS || v.is_null()) return {};
  return v.get_string().value();  // throws INCORRECT_TYPE for a non-string
}

// A cheap look at an event's "cat" before parsing it: most events (CPU ops,
// runtime calls, flows) are of no use here.  Returns false only when the
// event certainly has an unwanted category: the first `"cat"` is a key of the
// event object itself (no bracket before it, not escaped, followed by ':')
// and its value is a plain string outside the wanted set.  Kineto writes
// "cat" second, so the scan is short; anything unusual is parsed in full.
bool MayBeWanted(std::string_view text, bool cpu_ops) {
  constexpr std::string_view kKey = "\"cat\"";
  size_t n = text.size(), at = 1;
  for (;; ++at) {
    if (at + kKey.size() > n) return true;
    char c = text[at];
    if (c == '{' || c == '[' || c == '\\') return true;
    if (c == '"' && text[at + 1] == 'c' && text[at + 2] == 'a' && text[at + 3] == 't' &&
        text[at + 4] == '"')
      break;
  }
  size_t i = at + kKey.size();
  while (i < n && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i;
  if (i >= n || text[i] != ':') return true;
  ++i;
  while (i < n && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) ++i;
  if (i >= n || text[i] != '"') return true;
  size_t close = text.find('"', i + 1);
  if (close == std::string_view::npos) return true;
  std::string_view cat = text.substr(i + 1, close - i - 1);
  if (cat.find('\\') != std::string_view::npos) return true;
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" ||
         cat == "user_annotation" || cat == "gpu_user_annotation" || cat == "cpu_instant_event" ||
         (cpu_ops && cat == "cpu_op");
}

class TraceBuilder {
 public:
  TraceBuilder(KinetoTrace* trace, bool cpu_ops) : trace_(trace), cpu_ops_(cpu_ops) {}

  void TopLevel(std::string_view key, std::string_view value) {
    if (key != "deviceProperties" && key != "distributedInfo" && key != "baseTimeNanoseconds")
      return;
    dom::element doc = top_parser_.parse(value.data(), value.size(), /*realloc_if_needed=*/false);
    if (key == "baseTimeNanoseconds") {
      trace_->base_time_ns = doc.is_int64() ? doc.get_int64().value()
                                            : static_cast<int64_t>(doc.get_double().value());
    } else if (key == "deviceProperties") {
      for (dom::element device : doc.get_array()) {
        dom::object d = device.get_object();
        std::optional<double> id = NumberField(d, "id");
        if (!id) continue;
        DeviceInfo& info = trace_->devices[static_cast<int>(*id)];
        info.name = std::string(StringField(d, "name"));
        info.total_memory_bytes = ByteCountField(d, "totalGlobalMem").value_or(0);
      }
    } else {  // distributedInfo
      dom::object info = doc.get_object();
      const std::string& path = trace_->path;
      if (auto size = NumberField(info, "world_size"))
        trace_->world_size = WholeNumberIn(*size, 1, kMaxWorldSize, "world_size", path);
      // Ranks count from 0 to the world size less one.
      const int last_rank = trace_->world_size.value_or(kMaxWorldSize) - 1;
      if (auto rank = NumberField(info, "rank"))
        trace_->rank = WholeNumberIn(*rank, 0, last_rank, "rank", path);
      dom::array groups;
      if (info["pg_config"].get_array().get(groups) == simdjson::SUCCESS) {
        for (dom::element group : groups) {
          dom::array ranks;
          if (group["ranks"].get_array().get(ranks) != simdjson::SUCCESS) continue;
          for (dom::element r : ranks)
            trace_->group_ranks.push_back(
                WholeNumberIn(r.get_double().value(), 0, last_rank, "pg_config rank", path));
          break;
        }
      }
    }
  }

  // Called from the parsing thread only; TopLevel from the reading thread.
  // They fill different fields of the trace.
  void Event(std::string_view text, uint64_t index) {
    dom::element doc = event_parser_.parse(text.data(), text.size(), /*realloc_if_needed=*/false);
    dom::object event;
    if (doc.get_object().get(event) != simdjson::SUCCESS) return;  // not an event object
    std::optional<double> ts = NumberField(event, "ts");
    if (!ts) return;  // metadata
    std::string_view name = StringField(event, "name");
    dom::object args;
    bool has_args = event["args"].get_object().get(args) == simdjson::SUCCESS;
    if (name == "[memory]") {
      if (!has_args) return;
      auto reserved = ByteCountField(args, "Total Reserved");
      // The CPU allocator's events say device -1 (Device Type 0); -1 too
      // when absent.
      const int64_t device = IdField(args, "Device Id", -1, std::numeric_limits<int>::max());
      // Device Type 1 is CUDA in the allocator's events.
      if (reserved && device >= 0 && NumberField(args, "Device Type").value_or(1) == 1) {
        auto& peak = trace_->peak_reserved_bytes[static_cast<int>(device)];
        peak = std::max(peak, *reserved);
      }
      return;
    }
    if (StringField(event, "ph") != "X") return;
    std::string_view cat = StringField(event, "cat");
    bool gpu_op = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
    bool cpu_step = cat == "user_annotation";
    bool gpu_step = cat == "gpu_user_annotation";
    bool cpu_op = cpu_ops_ && cat == "cpu_op";
    if (!gpu_op && !cpu_step && !gpu_step && !cpu_op) return;
    double dur = NumberField(event, "dur").value_or(0);
    if (dur < 0) {
      // No time runs backwards: such an event (older Kineto wrote some from
      // a missing end time) says nothing of when the GPU was busy, and as a
      // zero-length one it would stand where it never ran.  Skipped, counted
      // and said, so that a trace full of them is not taken as idle.
      if (trace_->negative_durations++ == 0) {
        trace_->first_negative_duration_event = index;
        trace_->first_negative_duration = dur;
      }
      return;
    }
    if (cpu_op) {
      trace_->cpu_ops.push_back({*ts, *ts + dur, ThreadField(event), IsCommunicationCpuOp(name)});
      return;
    }
    if (gpu_op) {
      GpuOp op;
      op.start_us = *ts;
      op.end_us = *ts + dur;
      op.communication = cat == "kernel" && IsCommunicationKernel(name);
      if (has_args) {
        // A device is an int; a stream any id (a runtime may name one by a
        // handle's address or an unsigned 32-bit value).
        op.device = static_cast<int>(
            IdField(args, "device", std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
        op.stream = IdField(args, "stream", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
      }
      trace_->gpu_ops.push_back(op);
      return;
    }
    if (auto n = ProfilerStepNumber(name)) {
      StepWindow w{*n, *ts, *ts + dur, ThreadField(event)};
      (cpu_step ? trace_->cpu_steps : trace_->gpu_steps).push_back(w);
    }
  }

 private:
  KinetoTrace* trace_;
  bool cpu_ops_;
  dom::parser top_parser_;
  dom::parser event_parser_;
};

// Parses wanted events on a second thread while the reading thread
// decompresses and splits: the two halves take about the same time.  Events
// are copied into batches, so the reader may reuse its buffer; at most
// kMaxQueued batches wait, which bounds memory.
class EventParseWorker {
 public:
  EventParseWorker(TraceBuilder* builder, std::string path)
      : builder_(builder), path_(std::move(path)), thread_([this] { Loop(); }) {}
  // Never throws: it also runs while an exception from the reader unwinds
  // (a second throw there would terminate the process).
  ~EventParseWorker() { Stop(); }

  void Add(std::string_view event, uint64_t index) {
    current_.spans.push_back({current_.bytes.size(), event.size(), index});
    current_.bytes.append(event);
    if (current_.bytes.size() >= kBatchBytes) Submit();
  }

  // Waits for all events to be parsed; throws the first parse error.
  void Finish() {
    Stop();
    if (!error_.empty()) throw TraceError(error_);
  }

 private:
  void Stop() noexcept {
    if (!thread_.joinable()) return;
    try {
      Submit();
    } catch (...) {
      // Out of memory for the last batch: its events are lost, the error stays.
    }
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    ready_.notify_all();
    thread_.join();
  }


  static constexpr size_t kBatchBytes = 1 << 20;
  static constexpr size_t kMaxQueued = 4;
  struct Span {
    size_t offset, size;
    uint64_t index;
  };
  struct Batch {
    std::string bytes;
    std::vector<Span> spans;
  };

  void Submit() {
    if (current_.spans.empty()) return;
    current_.bytes.append(kTracePadding, ' ');
    std::unique_lock lock(mu_);
    space_.wait(lock, [&] { return queue_.size() < kMaxQueued || failed_; });
    if (failed_) {
      current_ = {};
      return;  // Finish() reports the error
    }
    queue_.push_back(std::move(current_));
    current_ = {};
    ready_.notify_one();
  }

  void Loop() {
    for (;;) {
      Batch batch;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return;
        batch = std::move(queue_.front());
        queue_.pop_front();
      }
      space_.notify_one();
      if (failed_) continue;
      for (const Span& span : batch.spans) {
        std::string_view text(batch.bytes.data() + span.offset, span.size);
        try {
          builder_->Event(text, span.index);
        } catch (const simdjson::simdjson_error& e) {
          std::lock_guard lock(mu_);
          error_ = fmt::format("{}: trace event #{} is malformed ({}): {:.200}", path_,
                               span.index, e.what(), text);
          failed_ = true;
          space_.notify_all();
          break;
        }
      }
    }
  }

  TraceBuilder* builder_;
  std::string path_;
  Batch current_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Batch> queue_;
  bool closed_ = false;
  std::atomic<bool> failed_{false};
  std::string error_;
  std::thread thread_;
};

}  // namespace

namespace {

KinetoTrace ReadTrace(const std::string& path, const TraceStreamOptions& options, bool cpu_ops) {
  KinetoTrace trace;
  trace.path = path;
  TraceBuilder builder(&trace, cpu_ops);
  EventParseWorker worker(&builder, path);
  TraceStreamVisitor visitor;
  uint64_t event_index = 0;
  visitor.on_top_level = [&](std::string_view key, std::string_view value) {
    try {
      builder.TopLevel(key, value);
    } catch (const simdjson::simdjson_error& e) {
      throw TraceError(fmt::format("{}: top-level '{}' is malformed: {}", path, key, e.what()));
    }
  };
  visitor.on_event = [&](std::string_view event) {
    if (MayBeWanted(event, cpu_ops)) worker.Add(event, event_index);
    ++event_index;
  };
  TraceStreamStats stats = StreamTrace(path, visitor, options);
  worker.Finish();
  trace.events = stats.events;
  trace.json_bytes = stats.bytes;
  auto by_start = [](const auto& a, const auto& b) { return a.start_us < b.start_us; };
  std::sort(trace.gpu_ops.begin(), trace.gpu_ops.end(), by_start);
  std::sort(trace.cpu_steps.begin(), trace.cpu_steps.end(), by_start);
  std::sort(trace.gpu_steps.begin(), trace.gpu_steps.end(), by_start);
  std::sort(trace.cpu_ops.begin(), trace.cpu_ops.end(), by_start);
  return trace;
}

}  // namespace

std::string SkippedEventsMessage(const KinetoTrace& trace) {
  if (trace.negative_durations == 0) return "";
  return fmt::format("{}: skipped {} event(s) with a negative duration (the first: trace event #{}, "
                     "\"dur\": {}): a \"dur\" must be 0 or more (no time runs backwards)",
                     trace.path, trace.negative_durations, trace.first_negative_duration_event,
                     trace.first_negative_duration);
}

KinetoTrace LoadKinetoTrace(const std::string& path, const TraceStreamOptions& options) {
  KinetoTrace trace = ReadTrace(path, options, /*cpu_ops=*/false);
  if (!trace.gpu_ops.empty()) return trace;
  return ReadTrace(path, options, /*cpu_ops=*/true);
}

}  // namespace freeride::profile
