// The daemon's durable task state, in SQLite.
//
// One row per task holds its latest TaskInfo; a second table records every
// lifecycle transition; a third (meta) holds the journal's identity: a UUID
// made when the journal is created, the number of commits so far and the
// highest task id ever stored.  Writes are queued and committed by a writer
// thread in batches, so the lane dispatchers never wait on the disk.
//
// Nothing fails silently.  Every SQLite result is checked: a batch that does
// not commit is rolled back and its records stay queued for the next commit;
// Flush() and Write() say whether what they cover is durable.  Damage and
// loss are loud: Open() refuses a journal that fails SQLite's quick_check, or
// that is older than its mark file (JOURNAL.mark, rewritten after each
// commit: a journal replaced, emptied, or missing the commits of a deleted or
// damaged write-ahead log), unless told to accept the loss.
//
// Threads: Open() and Close() from one owner thread, with no other call in
// flight; every other member from any thread.
#pragma once
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "freeride.pb.h"

namespace freeride {

struct TransitionRecord {
  int64_t task_id = 0;
  std::string from;
  std::string to;
  int64_t unix_ns = 0;
  std::string reason;
};

struct JournalOptions {
  // Open a damaged or stale journal anyway.  A damaged one is moved aside
  // (JOURNAL.damaged-<unix seconds>, with its -wal and -shm) and the rows
  // that can still be read are copied into a fresh one; the mark is reset.
  // Each such step adds a note.
  bool accept_loss = false;
};

class Journal {
 public:
  Journal() = default;
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Opens or creates the database at `path` and starts the writer thread.
  // kFailedPrecondition: it cannot be opened or written (read-only, no
  // permission); kDataLoss: it is damaged or stale (see above) and
  // options.accept_loss is off.  Notes on what was accepted go to *notes.
  Status Open(const std::string& path, const JournalOptions& options,
              std::vector<std::string>* notes);
  // Commits what is queued (one attempt) and closes.  Returns that commit's
  // failure, if any: those records are lost.
  Status Close();

  // The journal's identity, made when it was created (32 hex digits).
  const std::string& uuid() const { return uuid_; }
  // Whether Open() created the database (there was none, or it was empty).
  bool created() const { return created_; }

  // Every stored task, in id order.  A row that cannot be decoded, or a query
  // that stops early, gives kDataLoss; the rows read are still returned and
  // the undecodable rows' ids are listed in *unreadable.
  Status LoadTasks(std::vector<v1::TaskInfo>* tasks, std::vector<int64_t>* unreadable);
  // All transitions of one task, oldest first, appended to *out.  An error
  // when the query fails; the rows read before it stay in *out.
  Status LoadTransitions(int64_t task_id, std::vector<TransitionRecord>* out);
  // The highest task id ever stored (0: none), even if its row is gone.
  Status HighestTaskId(int64_t* id);

  // Queues the task's latest state, and a transition if given.  Never blocks
  // on the disk; a later Flush() says whether it became durable.
  void Record(const v1::TaskInfo& task, const TransitionRecord* transition);
  // Commits the task's state (and transition) with whatever is queued, and
  // returns once it is durable, or failed.  A failed Write is dropped, never
  // retried: the caller tells its client that nothing was stored.
  Status Write(const v1::TaskInfo& task, const TransitionRecord* transition);
  // Blocks until everything queued before the call is durable (OK), or a
  // commit covering it failed (that error; the records stay queued and are
  // retried with later commits).
  Status Flush();

 private:
  struct Outcome {
    bool done = false;
    Status status;
  };
  struct Pending {
    uint64_t seq = 0;
    v1::TaskInfo task;
    bool has_transition = false;
    TransitionRecord transition;
    std::shared_ptr<Outcome> outcome;  // set for Write(): dropped if its commit fails
  };
  void Enqueue(const v1::TaskInfo& task, const TransitionRecord* transition,
               std::shared_ptr<Outcome> outcome);
  void WriterLoop();
  // One attempt to commit the batch; rolled back on failure.  db_mu_ held.
  Status CommitLocked(const std::vector<Pending>& batch);
  Status WriteTaskRowLocked(const v1::TaskInfo& task);
  Status WriteTransitionLocked(const TransitionRecord& transition);
  // After a failed commit: Write()s learn the error, the rest go back to the
  // head of the queue.  mu_ held.
  void RequeueFailedLocked(std::vector<Pending>& batch, const Status& status);
  struct Statement;
  Status Exec(const char* sql);
  // Prepares `sql` into *read and steps it to its first row.  db_mu_ held.
  Status QueryRowLocked(const char* sql, Statement* read, const char* what);
  Status Error(int rc, const std::string& what) const;
  Status OpenDatabase(const std::string& path);
  Status PrepareStatements();
  Status CheckIntegrity();
  Status LoadIdentity();
  Status CheckMark(const JournalOptions& options, std::vector<std::string>* notes);
  Status Salvage(const JournalOptions& options, const std::string& why,
                 std::vector<std::string>* notes);
  void WriteMark();
  void CloseDatabase();

  std::string path_;
  std::string uuid_;
  bool created_ = false;
  uint64_t commit_seq_ = 0;  // db_mu_
  int mark_fd_ = -1;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* upsert_ = nullptr;
  sqlite3_stmt* insert_transition_ = nullptr;
  sqlite3_stmt* bump_meta_ = nullptr;
  std::mutex mu_;
  std::mutex db_mu_;
  std::condition_variable cv_;
  std::condition_variable flushed_cv_;
  std::deque<Pending> queue_;
  uint64_t enqueued_ = 0;
  // Every record with a seq up to durable_through_ is durable (or was a
  // failed Write, dropped); attempted_through_ is the highest seq of the last
  // commit attempt, attempts_ counts them.
  uint64_t durable_through_ = 0;
  uint64_t attempted_through_ = 0;
  uint64_t attempts_ = 0;
  Status last_error_;
  bool stopping_ = false;
  bool writer_running_ = false;
  bool flush_requested_ = false;
  std::chrono::steady_clock::time_point retry_at_{};
  std::thread writer_;
  static constexpr std::chrono::milliseconds kGatherWindow{50};
  static constexpr std::chrono::milliseconds kRetryInterval{1000};
};

}  // namespace freeride
