#include "daemon/journal.h"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include <map>

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
)sql";
}  // namespace

Journal::~Journal() { Close(); }

bool Journal::Exec(const char* sql, std::string* error) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    *error = message ? message : "unknown SQLite error";
    sqlite3_free(message);
    return false;
  }
  return true;
}

bool Journal::Open(const std::string& path, std::string* error) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                              SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    *error = fmt::format("cannot open journal {}: {}", path, db_ ? sqlite3_errmsg(db_) : "?");
    Close();
    return false;
  }
  sqlite3_busy_timeout(db_, 5000);
  std::string sql_error;
  // WAL + synchronous=FULL: a commit survives a crash of the daemon or the
  // machine; the writer thread batches commits so this costs little.
  if (!Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", &sql_error) ||
      !Exec(kSchema, &sql_error)) {
    *error = fmt::format("journal {} is not usable: {}", path, sql_error);
    Close();
    return false;
  }
  sqlite3_prepare_v2(db_,
                     "INSERT INTO tasks(id, name, state, info_json, updated_unix_ns) "
                     "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(id) DO UPDATE SET "
                     "name=excluded.name, state=excluded.state, info_json=excluded.info_json, "
                     "updated_unix_ns=excluded.updated_unix_ns",
                     -1, &upsert_, nullptr);
  sqlite3_prepare_v2(db_,
                     "INSERT INTO transitions(task_id, from_state, to_state, unix_ns, reason) "
                     "VALUES(?1, ?2, ?3, ?4, ?5)",
                     -1, &insert_transition_, nullptr);
  if (!upsert_ || !insert_transition_) {
    *error = fmt::format("journal {}: {}", path, sqlite3_errmsg(db_));
    Close();
    return false;
  }
  stopping_ = false;
  writer_ = std::thread([this] { WriterLoop(); });
  return true;
}

void Journal::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (upsert_) sqlite3_finalize(upsert_);
  if (insert_transition_) sqlite3_finalize(insert_transition_);
  upsert_ = insert_transition_ = nullptr;
  if (db_) sqlite3_close(db_);
  db_ = nullptr;
}

std::vector<v1::TaskInfo> Journal::LoadTasks(std::vector<std::string>* warnings) {
  std::lock_guard<std::mutex> lock(db_mu_);
  std::vector<v1::TaskInfo> tasks;
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db_, "SELECT id, info_json FROM tasks ORDER BY id", -1, &stmt, nullptr);
  while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(stmt, 0);
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1));
    v1::TaskInfo info;
    auto status = google::protobuf::util::JsonStringToMessage(text ? text : "", &info);
    if (!status.ok() || info.id() != id) {
      if (warnings) warnings->push_back(fmt::format("task {}: unreadable journal row", id));
      continue;
    }
    tasks.push_back(std::move(info));
  }
  sqlite3_finalize(stmt);
  return tasks;
}

std::vector<TransitionRecord> Journal::LoadTransitions(int64_t task_id) {
  std::lock_guard<std::mutex> lock(db_mu_);
  std::vector<TransitionRecord> out;
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db_,
                     "SELECT from_state, to_state, unix_ns, reason FROM transitions "
                     "WHERE task_id=?1 ORDER BY seq",
                     -1, &stmt, nullptr);
  sqlite3_bind_int64(stmt, 1, task_id);
  while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
    TransitionRecord t;
    t.task_id = task_id;
    t.from = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    t.to = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1));
    t.unix_ns = sqlite3_column_int64(stmt, 2);
    t.reason = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
    out.push_back(std::move(t));
  }
  sqlite3_finalize(stmt);
  return out;
}

int64_t Journal::MaxTaskId() {
  std::lock_guard<std::mutex> lock(db_mu_);
  sqlite3_stmt* stmt = nullptr;
  int64_t max_id = 0;
  sqlite3_prepare_v2(db_, "SELECT COALESCE(MAX(id), 0) FROM tasks", -1, &stmt, nullptr);
  if (stmt && sqlite3_step(stmt) == SQLITE_ROW) max_id = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return max_id;
}

void Journal::Record(const v1::TaskInfo& task, const TransitionRecord* transition) {
  Pending pending;
  pending.task = task;
  if (transition) {
    pending.has_transition = true;
    pending.transition = *transition;
  }
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = queue_.empty();
    queue_.push_back(std::move(pending));
    ++enqueued_;
  }
  if (first) cv_.notify_one();  // later records join the batch being gathered
}

void Journal::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t target = enqueued_;
  flush_requested_ = true;
  cv_.notify_one();
  flushed_cv_.wait(lock, [&] { return written_ >= target || !writer_.joinable(); });
}

void Journal::WriterLoop() {
  std::vector<Pending> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      // Gather for a moment unless someone waits for durability: one commit
      // (one fsync) then covers many pause/run transitions.
      if (!stopping_ && !flush_requested_)
        cv_.wait_for(lock, kGatherWindow, [&] { return stopping_ || flush_requested_; });
      if (queue_.empty() && stopping_) break;
      flush_requested_ = false;
      while (!queue_.empty()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    Commit(batch);
    {
      std::lock_guard<std::mutex> lock(mu_);
      written_ += batch.size();
    }
    batch.clear();
    flushed_cv_.notify_all();
  }
  flushed_cv_.notify_all();
}

void Journal::Commit(std::vector<Pending>& batch) {
  std::lock_guard<std::mutex> lock(db_mu_);
  std::string ignored;
  Exec("BEGIN IMMEDIATE", &ignored);
  // Only the newest row of each task is written; every transition is kept.
  std::map<int64_t, size_t> newest;
  for (size_t i = 0; i < batch.size(); ++i) newest[batch[i].task.id()] = i;
  for (auto [id, index] : newest) WriteTaskRow(batch[index].task);
  for (const Pending& p : batch)
    if (p.has_transition) WriteTransition(p.transition);
  Exec("COMMIT", &ignored);
}

void Journal::WriteTaskRow(const v1::TaskInfo& task) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(task, &json, options);
  sqlite3_bind_int64(upsert_, 1, task.id());
  sqlite3_bind_text(upsert_, 2, task.spec().name().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(upsert_, 3, task.state().c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(upsert_, 4, json.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(upsert_, 5, task.updated_unix_ns());
  sqlite3_step(upsert_);
  sqlite3_reset(upsert_);
}

void Journal::WriteTransition(const TransitionRecord& t) {
  sqlite3_bind_int64(insert_transition_, 1, t.task_id);
  sqlite3_bind_text(insert_transition_, 2, t.from.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(insert_transition_, 3, t.to.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(insert_transition_, 4, t.unix_ns);
  sqlite3_bind_text(insert_transition_, 5, t.reason.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_step(insert_transition_);
  sqlite3_reset(insert_transition_);
}

}  // namespace freeride
