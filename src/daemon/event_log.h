// The daemon's event log: one JSON object per line (schema in
// docs/event-log.md).  Appends are queued and written by a writer thread so
// that emitting an event never waits on the disk.
//
// Threads: Open and Close from one owner thread, not while Flush runs;
// Emit, EmitLine and Flush from any thread.
#pragma once
#include <fmt/format.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "events/events.h"

namespace freeride {

// Bounds the log's disk use: when the file reaches `max_bytes` it becomes
// PATH.1 (older ones shift to .2 ... .keep, the oldest is deleted) and a new
// PATH is started, so the log takes at most about (keep + 1) x max_bytes.
// When the new PATH cannot be opened, later events are dropped (said on
// stderr): the log is a record, the journal holds the state.
struct EventLogRotation {
  uint64_t max_bytes = 256ULL << 20;  // 0: never rotate
  int keep = 4;                       // rotated files kept; 0: none
};

class EventLog {
 public:
  EventLog() = default;
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Opens path for appending (never truncates) and starts the writer.
  // Closes an open log first.  False with *error when path cannot be opened.
  bool Open(const std::string& path, std::string* error, EventLogRotation rotation = {});
  // Writes what is queued, stops the writer and closes the file.  Later
  // events are dropped.  Idempotent; the destructor calls it.
  void Close();

  // Queues one event; adds "unix_ns" if absent.  No-op when closed.
  void Emit(nlohmann::json event);
  // Queues lines the caller formatted, each a JSON object with "unix_ns",
  // separated by newlines: for the events of every bubble and step, where
  // building a json object would be most of the daemon's CPU time.  No-op
  // when closed.
  void EmitLine(std::string line);
  // Blocks until every event queued before the call is written and flushed
  // (or dropped, when the file is lost); returns at once when the writer is
  // not running.
  void Flush();

 private:
  void WriterLoop();
  // Opens path_ for appending with our buffer; false (and a message on
  // stderr) when it cannot.
  bool OpenFile(std::string* error);
  // Moves the full file aside (see EventLogRotation) and starts a new one.
  // Runs on the writer thread, between batches, so no line is split.
  void Rotate();

  static constexpr size_t kWriteBufferBytes = 1 << 20;
  std::FILE* file_ = nullptr;
  std::unique_ptr<char[]> write_buffer_;  // file_'s stdio buffer; outlives it
  std::string path_;
  EventLogRotation rotation_;
  uint64_t file_bytes_ = 0;  // the current file's size; the writer's own
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable flushed_cv_;
  std::deque<std::string> queue_;
  uint64_t enqueued_ = 0;
  uint64_t written_ = 0;
  bool open_ = false;  // under mu_; file_ itself is the writer's (it rotates)
  bool stopping_ = false;
  bool flush_requested_ = false;
  std::thread writer_;
};

}  // namespace freeride
