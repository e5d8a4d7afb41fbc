#include "daemon/event_log.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/clock.h"
#include "base/files.h"
#include "base/say.h"

namespace freeride {

EventLog::~EventLog() { Close(); }

bool EventLog::Open(const std::string& path, std::string* error, EventLogRotation rotation) {
  Close();
  path_ = path;
  rotation_ = rotation;
  if (!write_buffer_) write_buffer_ = std::make_unique<char[]>(kWriteBufferBytes);
  if (!OpenFile(error)) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
    open_ = true;
  }
  writer_ = std::thread([this] { WriterLoop(); });
  return true;
}

bool EventLog::OpenFile(std::string* error) {
  file_ = std::fopen(path_.c_str(), "ae");
  if (!file_) {
    *error = fmt::format("cannot open event log {}: {}", path_, std::strerror(errno));
    return false;
  }
  // A batch is flushed whole (WriterLoop); a large buffer makes that one
  // write instead of one per 4 KiB.  (glibc sizes its own buffer by the
  // file's block size whatever it is asked, so the buffer is ours.)
  std::setvbuf(file_, write_buffer_.get(), _IOFBF, kWriteBufferBytes);
  std::error_code ec;
  uintmax_t size = std::filesystem::file_size(path_, ec);
  file_bytes_ = ec ? 0 : size;
  // A daemon killed mid-write leaves a cut last line: the next event starts
  // a line of its own, so that it stays readable.
  if (!ec && size > 0) {
    if (FILE* in = std::fopen(path_.c_str(), "re")) {
      bool ends_with_newline = std::fseek(in, -1, SEEK_END) == 0 && std::fgetc(in) == '\n';
      std::fclose(in);
      if (!ends_with_newline) {
        std::fputc('\n', file_);
        ++file_bytes_;
      }
    }
  }
  return true;
}

void EventLog::Rotate() {
  std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  if (rotation_.keep <= 0) {
    std::filesystem::remove(path_, ec);
  } else {
    std::filesystem::remove(RotatedFilePath(path_, rotation_.keep), ec);
    for (int i = rotation_.keep - 1; i >= 1; --i) {
      std::string from = RotatedFilePath(path_, i);
      if (std::filesystem::exists(from, ec))
        std::filesystem::rename(from, RotatedFilePath(path_, i + 1), ec);
    }
    std::filesystem::rename(path_, RotatedFilePath(path_, 1), ec);
  }
  std::string error;
  // Without a file, later events are dropped: the log is a record, the
  // journal holds the state, and the daemon must go on.
  if (!OpenFile(&error)) Say(stderr, "freeride daemon: {}; events are dropped\n", error);
}

void EventLog::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    open_ = false;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

void EventLog::Emit(nlohmann::json event) {
  if (!event.contains("unix_ns")) event["unix_ns"] = WallNow();
  EmitLine(event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void EventLog::EmitLine(std::string line) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_ || stopping_) return;
    first = queue_.empty();
    queue_.push_back(std::move(line));
    ++enqueued_;
  }
  // Only the first event of a batch wakes the writer; it then gathers for a
  // while, and waking it for every later event would cost a context switch
  // each (most of the daemon's CPU at hundreds of bubbles a second).
  if (first) cv_.notify_one();
}

void EventLog::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t target = enqueued_;
  flush_requested_ = true;
  cv_.notify_one();
  flushed_cv_.wait(lock, [&] { return written_ >= target || !writer_.joinable(); });
}

void EventLog::WriterLoop() {
  std::vector<std::string> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      // Gather briefly so a burst of events costs one wake-up and one write.
      if (!stopping_ && !flush_requested_)
        cv_.wait_for(lock, std::chrono::milliseconds(50),
                     [&] { return stopping_ || flush_requested_; });
      flush_requested_ = false;
      if (queue_.empty() && stopping_) break;
      while (!queue_.empty()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (file_) {
      for (const std::string& line : batch) {
        std::fwrite(line.data(), 1, line.size(), file_);
        std::fputc('\n', file_);
        file_bytes_ += line.size() + 1;
      }
      std::fflush(file_);
      if (rotation_.max_bytes > 0 && file_bytes_ >= rotation_.max_bytes) Rotate();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      written_ += batch.size();
    }
    batch.clear();
    flushed_cv_.notify_all();
  }
  flushed_cv_.notify_all();
}

}  // namespace freeride
