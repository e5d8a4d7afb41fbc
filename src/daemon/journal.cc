#include "daemon/journal.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include "base/clock.h"
#include "base/files.h"

namespace freeride {

namespace {
constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    info_json TEXT NOT NULL,
    updated_unix_ns INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id INTEGER NOT NULL,
    from_state TEXT NOT NULL,
    to_state TEXT NOT NULL,
    unix_ns INTEGER NOT NULL,
    reason TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS transitions_by_task ON transitions(task_id);
  CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value NOT NULL
  );
)sql";

constexpr const char* kHint =
    "the daemon will not start over it. Keep a copy of the state directory; repair the journal "
    "(sqlite3 journal.db .recover) or, to start with what is left, pass --accept-journal-loss "
    "(docs/reliability.md)";

std::string NewUuid() {
  std::random_device random;
  std::uniform_int_distribution<uint32_t> word;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", word(random), word(random), word(random),
                     word(random));
}

ErrorCode CodeOf(int rc) {
  switch (rc & 0xff) {
    case SQLITE_FULL: return ErrorCode::kResourceExhausted;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH: return ErrorCode::kFailedPrecondition;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return ErrorCode::kDataLoss;
    default: return ErrorCode::kUnavailable;
  }
}

}  // namespace

// Finalizes a statement when it goes out of scope.
struct Journal::Statement {
  sqlite3_stmt* stmt = nullptr;
  ~Statement() { sqlite3_finalize(stmt); }
};

Journal::~Journal() { Close(); }

Status Journal::Error(int rc, const std::string& what) const {
  std::string detail = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return {CodeOf(rc), fmt::format("journal {}: {}: {} (SQLite {})", path_, what, detail, rc)};
}

Status Journal::Exec(const char* sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::Ok();
  Status status{CodeOf(rc), fmt::format("journal {}: {}: {} (SQLite {})", path_, sql,
                                        message ? message : sqlite3_errstr(rc), rc)};
  sqlite3_free(message);
  return status;
}

Status Journal::OpenDatabase(const std::string& path) {
  int rc = sqlite3_open_v2(path.c_str(), &db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) return Error(rc, "cannot open it");
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 5000);
  // WAL + synchronous=FULL: a commit survives a crash of the daemon or the
  // machine; the writer thread batches commits so this costs little.
  Status status = Exec("PRAGMA journal_mode=WAL");
  if (status.ok()) status = Exec("PRAGMA synchronous=FULL");
  if (status.ok()) status = CheckIntegrity();
  if (status.ok()) status = Exec(kSchema);
  return status;
}

Status Journal::CheckIntegrity() {
  Statement check;
  int rc = sqlite3_prepare_v2(db_, "PRAGMA quick_check(5)", -1, &check.stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "cannot check it");
  std::vector<std::string> problems;
  while ((rc = sqlite3_step(check.stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(check.stmt, 0));
    std::string line = text ? text : "";
    if (line != "ok") problems.push_back(line);
  }
  if (rc != SQLITE_DONE) {
    Status status = Error(rc, "it is damaged (its integrity check failed)");
    status.code = ErrorCode::kDataLoss;
    return status;
  }
  if (problems.empty()) return Status::Ok();
  return {ErrorCode::kDataLoss,
          fmt::format("journal {} is damaged: {}", path_, fmt::join(problems, "; "))};
}

Status Journal::QueryRowLocked(const char* sql, Statement* read, const char* what) {
  int rc = sqlite3_prepare_v2(db_, sql, -1, &read->stmt, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(read->stmt);
  return rc == SQLITE_ROW ? Status::Ok() : Error(rc, what);
}

Status Journal::LoadIdentity() {
  std::lock_guard<std::mutex> lock(db_mu_);
  Statement read;
  if (Status s = QueryRowLocked("SELECT (SELECT value FROM meta WHERE key='uuid'), "
                                "(SELECT value FROM meta WHERE key='commit_seq'), "
                                "(SELECT COUNT(*) FROM tasks)",
                                &read, "cannot read its identity");
      !s.ok())
    return s;
  const auto* uuid = reinterpret_cast<const char*>(sqlite3_column_text(read.stmt, 0));
  if (uuid) {
    uuid_ = uuid;
    commit_seq_ = static_cast<uint64_t>(sqlite3_column_int64(read.stmt, 1));
    created_ = false;
    return Status::Ok();
  }
  // A new journal, or one made before journals had an identity.
  created_ = sqlite3_column_int64(read.stmt, 2) == 0;
  uuid_ = NewUuid();
  commit_seq_ = 0;
  std::string sql = fmt::format(
      "INSERT INTO meta(key, value) VALUES('uuid', '{}'), ('commit_seq', 0), "
      "('highest_task_id', (SELECT COALESCE(MAX(id), 0) FROM tasks))",
      uuid_);
  return Exec(sql.c_str());
}

Status Journal::CheckMark(const JournalOptions& options, std::vector<std::string>* notes) {
  std::optional<std::string> mark = ReadWholeFile(path_ + ".mark");
  if (!mark) return Status::Ok();  // the first start, or one before marks existed
  std::istringstream in(*mark);
  std::string uuid;
  uint64_t seq = 0;
  in >> uuid >> seq;
  std::string why;
  if (uuid != uuid_) {
    why = fmt::format("journal {} is not the journal this state directory last used (that was "
                      "journal {} after {} commits; this one is {}{})",
                      path_, uuid, seq, uuid_, created_ ? ", new and empty" : "");
  } else if (seq > commit_seq_) {
    why = fmt::format("journal {} is missing its last {} commits (it has {} of {}): its "
                      "write-ahead log ({}-wal) was deleted or damaged",
                      path_, seq - commit_seq_, commit_seq_, seq, path_);
  }
  if (why.empty()) return Status::Ok();
  if (!options.accept_loss) return {ErrorCode::kDataLoss, fmt::format("{}; {}", why, kHint)};
  notes->push_back(why + "; accepted (--accept-journal-loss)");
  return Status::Ok();
}

Status Journal::Salvage(const JournalOptions& options, const std::string& why,
                        std::vector<std::string>* notes) {
  if (!options.accept_loss) return {ErrorCode::kDataLoss, fmt::format("{}; {}", why, kHint)};
  // What can still be read is read before the files move.
  std::vector<v1::TaskInfo> tasks;
  std::vector<int64_t> unreadable;
  int64_t highest = 0;
  if (db_) {
    (void)LoadTasks(&tasks, &unreadable);
    (void)HighestTaskId(&highest);
  }
  for (const v1::TaskInfo& task : tasks) highest = std::max<int64_t>(highest, task.id());
  CloseDatabase();
  std::string aside = fmt::format("{}.damaged-{}", path_, WallNow() / kSecond);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::string from = path_ + suffix;
    if (access(from.c_str(), F_OK) == 0 && rename(from.c_str(), (aside + suffix).c_str()) != 0)
      return {ErrorCode::kFailedPrecondition,
              fmt::format("cannot move the damaged journal {} aside: {}", from,
                          std::strerror(errno))};
  }
  Status status = OpenDatabase(path_);
  if (status.ok()) status = LoadIdentity();
  if (status.ok()) status = PrepareStatements();
  if (!status.ok()) return status;
  std::lock_guard<std::mutex> lock(db_mu_);
  status = Exec("BEGIN IMMEDIATE");
  for (size_t i = 0; status.ok() && i < tasks.size(); ++i) status = WriteTaskRowLocked(tasks[i]);
  if (status.ok()) {
    std::string sql = fmt::format(
        "UPDATE meta SET value = {} WHERE key = 'highest_task_id'", highest);
    status = Exec(sql.c_str());
  }
  if (status.ok()) status = Exec("COMMIT");
  if (!status.ok()) {
    (void)Exec("ROLLBACK");
    return status;
  }
  notes->push_back(fmt::format(
      "{}; accepted (--accept-journal-loss): moved it to {}, kept the {} tasks that could be "
      "read{}",
      why, aside, tasks.size(),
      unreadable.empty() ? "" : fmt::format(" (not tasks {})", fmt::join(unreadable, ", "))));
  return Status::Ok();
}

Status Journal::PrepareStatements() {
  Status status;
  auto prepare = [&](const char* sql, sqlite3_stmt** stmt) {
    int rc = sqlite3_prepare_v2(db_, sql, -1, stmt, nullptr);
    if (rc != SQLITE_OK && status.ok()) status = Error(rc, "cannot prepare its statements");
  };
  prepare("INSERT INTO tasks(id, name, state, info_json, updated_unix_ns) "
          "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(id) DO UPDATE SET "
          "name=excluded.name, state=excluded.state, info_json=excluded.info_json, "
          "updated_unix_ns=excluded.updated_unix_ns",
          &upsert_);
  prepare("INSERT INTO transitions(task_id, from_state, to_state, unix_ns, reason) "
          "VALUES(?1, ?2, ?3, ?4, ?5)",
          &insert_transition_);
  prepare("UPDATE meta SET value = CASE key WHEN 'commit_seq' THEN value + 1 "
          "ELSE max(value, ?1) END WHERE key IN ('commit_seq', 'highest_task_id')",
          &bump_meta_);
  return status;
}

Status Journal::Open(const std::string& path, const JournalOptions& options,
                     std::vector<std::string>* notes) {
  path_ = path;
  Status status = OpenDatabase(path);
  bool salvaged = false;
  if (status.code == ErrorCode::kDataLoss) {
    status = Salvage(options, status.message, notes);
    salvaged = status.ok();
  }
  if (status.ok() && !salvaged) status = LoadIdentity();
  if (status.ok() && !salvaged) status = CheckMark(options, notes);
  if (status.ok()) {
    mark_fd_ = open((path_ + ".mark").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (mark_fd_ < 0)
      status = {ErrorCode::kFailedPrecondition,
                fmt::format("cannot write the journal's mark {}.mark: {}", path_,
                            std::strerror(errno))};
  }
  if (status.ok() && !upsert_) status = PrepareStatements();
  if (!status.ok()) {
    CloseDatabase();
    return status;
  }
  WriteMark();
  stopping_ = false;
  writer_running_ = true;
  writer_ = std::thread([this] { WriterLoop(); });
  return Status::Ok();
}

void Journal::WriteMark() {
  // Fixed width, so one write replaces it whole.  Not synced: it must never
  // be ahead of the database, and it is written after each commit's sync.
  std::string mark = fmt::format("{} {:020}\n", uuid_, commit_seq_);
  if (mark_fd_ >= 0) (void)!pwrite(mark_fd_, mark.data(), mark.size(), 0);
}

void Journal::CloseDatabase() {
  for (sqlite3_stmt** stmt : {&upsert_, &insert_transition_, &bump_meta_}) {
    sqlite3_finalize(*stmt);
    *stmt = nullptr;
  }
  if (db_) sqlite3_close(db_);
  db_ = nullptr;
  if (mark_fd_ >= 0) close(mark_fd_);
  mark_fd_ = -1;
}

Status Journal::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  CloseDatabase();
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return Status::Ok();
  Status lost = last_error_;
  lost.message = fmt::format("{} journal records were not stored: {}", queue_.size(), lost.message);
  queue_.clear();
  return lost;
}

Status Journal::LoadTasks(std::vector<v1::TaskInfo>* tasks, std::vector<int64_t>* unreadable) {
  std::lock_guard<std::mutex> lock(db_mu_);
  Statement read;
  int rc = sqlite3_prepare_v2(db_, "SELECT id, info_json FROM tasks ORDER BY id", -1, &read.stmt,
                              nullptr);
  if (rc != SQLITE_OK) return Error(rc, "cannot read its tasks");
  int64_t last_id = 0;
  while ((rc = sqlite3_step(read.stmt)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(read.stmt, 0);
    last_id = id;
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(read.stmt, 1));
    v1::TaskInfo info;
    auto parsed = google::protobuf::util::JsonStringToMessage(text ? text : "", &info);
    if (!parsed.ok() || info.id() != id) {
      unreadable->push_back(id);
      continue;
    }
    tasks->push_back(std::move(info));
  }
  if (rc != SQLITE_DONE) {
    Status status = Error(rc, fmt::format("reading its tasks stopped after task {}", last_id));
    status.code = ErrorCode::kDataLoss;
    return status;
  }
  if (!unreadable->empty())
    return {ErrorCode::kDataLoss, fmt::format("journal {}: the rows of tasks {} cannot be decoded",
                                              path_, fmt::join(*unreadable, ", "))};
  return Status::Ok();
}

Status Journal::LoadTransitions(int64_t task_id, std::vector<TransitionRecord>* out) {
  std::lock_guard<std::mutex> lock(db_mu_);
  Statement read;
  int rc = sqlite3_prepare_v2(db_,
                              "SELECT from_state, to_state, unix_ns, reason FROM transitions "
                              "WHERE task_id=?1 ORDER BY seq",
                              -1, &read.stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, "cannot read transitions");
  sqlite3_bind_int64(read.stmt, 1, task_id);
  auto text = [&](int column) {
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(read.stmt, column));
    return std::string(t ? t : "");
  };
  while ((rc = sqlite3_step(read.stmt)) == SQLITE_ROW)
    out->push_back({task_id, text(0), text(1), sqlite3_column_int64(read.stmt, 2), text(3)});
  if (rc != SQLITE_DONE) return Error(rc, fmt::format("reading task {}'s transitions", task_id));
  return Status::Ok();
}

Status Journal::HighestTaskId(int64_t* id) {
  std::lock_guard<std::mutex> lock(db_mu_);
  Statement read;
  if (Status s = QueryRowLocked("SELECT max(COALESCE((SELECT MAX(id) FROM tasks), 0), "
                                "COALESCE((SELECT value FROM meta WHERE key='highest_task_id'), 0))",
                                &read, "cannot read the highest task id");
      !s.ok())
    return s;
  *id = sqlite3_column_int64(read.stmt, 0);
  return Status::Ok();
}

void Journal::Enqueue(const v1::TaskInfo& task, const TransitionRecord* transition,
                      std::shared_ptr<Outcome> outcome) {
  Pending pending;
  pending.task = task;
  if (transition) {
    pending.has_transition = true;
    pending.transition = *transition;
  }
  pending.outcome = std::move(outcome);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.seq = ++enqueued_;
    if (pending.outcome) flush_requested_ = true;
    // Later records join the batch being gathered, unless one waits.
    wake = queue_.empty() || flush_requested_;
    queue_.push_back(std::move(pending));
  }
  if (wake) cv_.notify_one();
}

void Journal::Record(const v1::TaskInfo& task, const TransitionRecord* transition) {
  Enqueue(task, transition, nullptr);
}

Status Journal::Write(const v1::TaskInfo& task, const TransitionRecord* transition) {
  auto outcome = std::make_shared<Outcome>();
  Enqueue(task, transition, outcome);
  std::unique_lock<std::mutex> lock(mu_);
  flushed_cv_.wait(lock, [&] { return outcome->done || !writer_running_; });
  if (!outcome->done) return {ErrorCode::kUnavailable, "the journal is closed"};
  return outcome->status;
}

Status Journal::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t target = enqueued_;
  if (durable_through_ >= target) return Status::Ok();
  uint64_t attempts_before = attempts_;
  flush_requested_ = true;
  cv_.notify_one();
  flushed_cv_.wait(lock, [&] {
    return durable_through_ >= target || (attempts_ > attempts_before && attempted_through_ >= target) ||
           !writer_running_;
  });
  if (durable_through_ >= target) return Status::Ok();
  if (last_error_.ok()) return {ErrorCode::kUnavailable, "the journal is closed"};
  return last_error_;
}

void Journal::WriterLoop() {
  std::vector<Pending> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        if (stopping_ || (!queue_.empty() && flush_requested_)) break;
        if (queue_.empty()) {
          cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
          continue;
        }
        // After a failed commit, wait a while before trying again, unless
        // someone waits for durability.
        if (std::chrono::steady_clock::now() < retry_at_) {
          cv_.wait_until(lock, retry_at_, [&] { return stopping_ || flush_requested_; });
          continue;
        }
        // Gather for a moment: one commit (one fsync) then covers many
        // pause/run transitions.
        cv_.wait_for(lock, kGatherWindow, [&] { return stopping_ || flush_requested_; });
        break;
      }
      if (queue_.empty() && stopping_) break;
      flush_requested_ = false;
      while (!queue_.empty()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    Status status;
    {
      std::lock_guard<std::mutex> lock(db_mu_);
      status = CommitLocked(batch);
    }
    bool give_up = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++attempts_;
      attempted_through_ = batch.back().seq;
      if (status.ok()) {
        durable_through_ = attempted_through_;
        for (Pending& p : batch)
          if (p.outcome) p.outcome->done = true;
      } else {
        last_error_ = status;
        retry_at_ = std::chrono::steady_clock::now() + kRetryInterval;
        RequeueFailedLocked(batch, status);
        give_up = stopping_;  // Close() reports what is left
      }
    }
    batch.clear();
    flushed_cv_.notify_all();
    if (give_up) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  writer_running_ = false;
  for (Pending& p : queue_)
    if (p.outcome) {
      p.outcome->done = true;
      p.outcome->status = {ErrorCode::kUnavailable, "the journal closed before storing it"};
    }
  flushed_cv_.notify_all();
}

void Journal::RequeueFailedLocked(std::vector<Pending>& batch, const Status& status) {
  for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
    if (it->outcome) {
      it->outcome->done = true;
      it->outcome->status = status;
    } else {
      queue_.push_front(std::move(*it));
    }
  }
}

Status Journal::CommitLocked(const std::vector<Pending>& batch) {
  Status status = Exec("BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  // Only the newest row of each task is written; every transition is kept.
  std::map<int64_t, size_t> newest;
  for (size_t i = 0; i < batch.size(); ++i) newest[batch[i].task.id()] = i;
  for (auto it = newest.begin(); status.ok() && it != newest.end(); ++it)
    status = WriteTaskRowLocked(batch[it->second].task);
  for (size_t i = 0; status.ok() && i < batch.size(); ++i)
    if (batch[i].has_transition) status = WriteTransitionLocked(batch[i].transition);
  if (status.ok()) {
    sqlite3_bind_int64(bump_meta_, 1, newest.empty() ? 0 : newest.rbegin()->first);
    int rc = sqlite3_step(bump_meta_);
    if (rc != SQLITE_DONE) status = Error(rc, "cannot count the commit");
    sqlite3_reset(bump_meta_);
  }
  if (status.ok()) status = Exec("COMMIT");
  if (!status.ok()) {
    if (!sqlite3_get_autocommit(db_)) (void)Exec("ROLLBACK");
    return status;
  }
  ++commit_seq_;
  WriteMark();
  return Status::Ok();
}

Status Journal::WriteTaskRowLocked(const v1::TaskInfo& task) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(task, &json, options).ok())
    return {ErrorCode::kInvalidArgument, fmt::format("task {} cannot be encoded", task.id())};
  sqlite3_bind_int64(upsert_, 1, task.id());
  sqlite3_bind_text(upsert_, 2, task.spec().name().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(upsert_, 3, task.state().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(upsert_, 4, json.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(upsert_, 5, task.updated_unix_ns());
  int rc = sqlite3_step(upsert_);
  Status status = rc == SQLITE_DONE ? Status::Ok()
                                    : Error(rc, fmt::format("cannot store task {}", task.id()));
  sqlite3_reset(upsert_);
  return status;
}

Status Journal::WriteTransitionLocked(const TransitionRecord& t) {
  sqlite3_bind_int64(insert_transition_, 1, t.task_id);
  sqlite3_bind_text(insert_transition_, 2, t.from.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(insert_transition_, 3, t.to.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(insert_transition_, 4, t.unix_ns);
  sqlite3_bind_text(insert_transition_, 5, t.reason.c_str(), -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(insert_transition_);
  Status status = rc == SQLITE_DONE
                      ? Status::Ok()
                      : Error(rc, fmt::format("cannot store a transition of task {}", t.task_id));
  sqlite3_reset(insert_transition_);
  return status;
}

}  // namespace freeride
