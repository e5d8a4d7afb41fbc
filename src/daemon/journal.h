// The daemon's durable task state, in SQLite.
//
// One row per task holds its latest TaskInfo; a second table records every
// lifecycle transition.  Writes are queued and committed by a writer thread
// in batches, so the lane dispatchers never wait on the disk; Flush() waits
// for everything queued so far to be durable (used before acknowledging a
// submission and after a task ends).
#pragma once
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "freeride.pb.h"

namespace freeride {

struct TransitionRecord {
  int64_t task_id = 0;
  std::string from;
  std::string to;
  int64_t unix_ns = 0;
  std::string reason;
};

class Journal {
 public:
  Journal() = default;
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Opens or creates the database at path and starts the writer thread.
  bool Open(const std::string& path, std::string* error);
  void Close();

  // All stored tasks, in id order.  Rows that cannot be decoded are skipped
  // and reported in *warnings (never silently dropped from disk).
  std::vector<v1::TaskInfo> LoadTasks(std::vector<std::string>* warnings);
  // All transitions of one task, oldest first.
  std::vector<TransitionRecord> LoadTransitions(int64_t task_id);
  int64_t MaxTaskId();

  // Queues the task's latest state, and a transition if given.
  void Record(const v1::TaskInfo& task, const TransitionRecord* transition);
  // Blocks until everything queued before the call is committed.
  void Flush();

 private:
  struct Pending {
    v1::TaskInfo task;
    bool has_transition = false;
    TransitionRecord transition;
  };
  void WriterLoop();
  bool Exec(const char* sql, std::string* error);
  void Commit(std::vector<Pending>& batch);
  void WriteTaskRow(const v1::TaskInfo& task);
  void WriteTransition(const TransitionRecord& transition);

  sqlite3* db_ = nullptr;
  sqlite3_stmt* upsert_ = nullptr;
  sqlite3_stmt* insert_transition_ = nullptr;
  std::mutex mu_;
  std::mutex db_mu_;
  std::condition_variable cv_;
  std::condition_variable flushed_cv_;
  std::deque<Pending> queue_;
  uint64_t enqueued_ = 0;
  uint64_t written_ = 0;
  bool stopping_ = false;
  bool flush_requested_ = false;
  std::thread writer_;
  static constexpr std::chrono::milliseconds kGatherWindow{50};
};

}  // namespace freeride
