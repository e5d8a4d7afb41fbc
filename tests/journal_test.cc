#include "daemon/journal.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace freeride {
namespace {

v1::TaskInfo MakeTask(int64_t id, const std::string& state, size_t padding = 0) {
  v1::TaskInfo info;
  info.set_id(id);
  info.mutable_spec()->set_name("task" + std::to_string(id));
  // Long rows spread the tasks over many pages, as real ones (with their
  // environments) do.
  if (padding) (*info.mutable_spec()->mutable_env())["PAD"] = std::string(padding, 'x');
  info.set_state(state);
  return info;
}

TEST(Journal, WhatIsFlushedSurvivesReopening) {
  TempDir dir;
  std::string path = dir.path() + "/journal.db";
  std::vector<std::string> notes;
  std::string uuid;
  {
    Journal journal;
    ASSERT_TRUE(journal.Open(path, {}, &notes).ok());
    EXPECT_TRUE(journal.created());
    uuid = journal.uuid();
    EXPECT_EQ(uuid.size(), 32u);
    for (int id = 1; id <= 3; ++id) {
      TransitionRecord t{id, "", "SUBMITTED", 1, "submitted"};
      journal.Record(MakeTask(id, "SUBMITTED"), &t);
    }
    v1::TaskInfo update = MakeTask(2, "RUNNING");
    update.set_progress(42.5);
    TransitionRecord t{2, "PAUSED", "RUNNING", 2, "bubble"};
    journal.Record(update, &t);
    EXPECT_TRUE(journal.Flush().ok());
    EXPECT_TRUE(journal.Close().ok());
  }
  Journal journal;
  ASSERT_TRUE(journal.Open(path, {}, &notes).ok());
  EXPECT_FALSE(journal.created());
  EXPECT_EQ(journal.uuid(), uuid) << "the identity is the journal's, kept";
  EXPECT_TRUE(notes.empty());
  std::vector<v1::TaskInfo> tasks;
  std::vector<int64_t> unreadable;
  ASSERT_TRUE(journal.LoadTasks(&tasks, &unreadable).ok());
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[1].state(), "RUNNING");
  EXPECT_DOUBLE_EQ(tasks[1].progress(), 42.5);
  int64_t highest = 0;
  ASSERT_TRUE(journal.HighestTaskId(&highest).ok());
  EXPECT_EQ(highest, 3);
  std::vector<TransitionRecord> history;
  ASSERT_TRUE(journal.LoadTransitions(2, &history).ok());
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[1].to, "RUNNING");
}

TEST(Journal, RefusesAFileThatIsNotADatabase) {
  TempDir dir;
  std::string path = dir.path() + "/journal.db";
  std::ofstream(path) << "this is not sqlite, and it must not be overwritten\n";
  Journal journal;
  std::vector<std::string> notes;
  Status opened = journal.Open(path, {}, &notes);
  EXPECT_EQ(opened.code, ErrorCode::kDataLoss) << opened.message;
  EXPECT_NE(opened.message.find("journal"), std::string::npos) << opened.message;
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "this is not sqlite, and it must not be overwritten");
}

// SQLite errors injected with triggers: a Write that fails is reported and
// never stored; a Flush that fails is reported, and its records are stored
// by a later commit.
TEST(Journal, FailedCommitsAreReportedAndOnlyAcknowledgedWritesAreStored) {
  TempDir dir;
  std::string path = dir.path() + "/journal.db";
  std::vector<std::string> notes;
  {
    Journal journal;
    ASSERT_TRUE(journal.Open(path, {}, &notes).ok());
    ASSERT_TRUE(journal.Write(MakeTask(1, "SUBMITTED"), nullptr).ok());
    ExecSql(path,
           "CREATE TRIGGER refuse_task BEFORE INSERT ON tasks WHEN NEW.id = 2 "
           "BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
           "CREATE TRIGGER refuse_transition BEFORE INSERT ON transitions WHEN NEW.task_id = 3 "
           "BEGIN SELECT RAISE(ABORT, 'injected transition failure'); END;");
    Status refused = journal.Write(MakeTask(2, "SUBMITTED"), nullptr);
    EXPECT_FALSE(refused.ok());
    EXPECT_NE(refused.message.find("injected failure"), std::string::npos) << refused.message;

    TransitionRecord t{3, "", "SUBMITTED", 1, "submitted"};
    journal.Record(MakeTask(3, "SUBMITTED"), &t);
    Status flushed = journal.Flush();
    EXPECT_FALSE(flushed.ok());
    EXPECT_NE(flushed.message.find("injected transition failure"), std::string::npos)
        << flushed.message;
    ExecSql(path, "DROP TRIGGER refuse_transition;");
    EXPECT_TRUE(journal.Flush().ok()) << "the failed records were retried";
    EXPECT_TRUE(journal.Close().ok());
  }
  Journal journal;
  ASSERT_TRUE(journal.Open(path, {}, &notes).ok());
  std::vector<v1::TaskInfo> tasks;
  std::vector<int64_t> unreadable;
  ASSERT_TRUE(journal.LoadTasks(&tasks, &unreadable).ok());
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].id(), 1);
  EXPECT_EQ(tasks[1].id(), 3);
  std::vector<TransitionRecord> history;
  ASSERT_TRUE(journal.LoadTransitions(3, &history).ok());
  EXPECT_EQ(history.size(), 1u);
}

// Bytes overwritten in the middle of the file: the journal is refused with
// the damage named, never opened with rows missing; told to accept the loss,
// it moves the damaged file aside and keeps what can be read, and the
// highest id stays known.
TEST(Journal, MidFileCorruptionIsRefusedAndSalvagedOnlyWhenAccepted) {
  TempDir dir;
  std::string path = dir.path() + "/journal.db";
  std::vector<std::string> notes;
  {
    Journal journal;
    ASSERT_TRUE(journal.Open(path, {}, &notes).ok());
    for (int id = 1; id <= 6; ++id)
      ASSERT_TRUE(journal.Write(MakeTask(id, "SUBMITTED", 6000), nullptr).ok());
    ASSERT_TRUE(journal.Close().ok());
  }
  auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 8u * 4096) << "rows spread over pages";
  OverwriteBytes(path, size / 2 / 4096 * 4096, 4096);
  {
    Journal journal;
    Status refused = journal.Open(path, {}, &notes);
    EXPECT_EQ(refused.code, ErrorCode::kDataLoss) << refused.message;
    EXPECT_NE(refused.message.find("--accept-journal-loss"), std::string::npos) << refused.message;
  }
  Journal journal;
  ASSERT_TRUE(journal.Open(path, {.accept_loss = true}, &notes).ok());
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.back().find("moved it to"), std::string::npos) << notes.back();
  bool kept_aside = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    kept_aside |= entry.path().filename().string().rfind("journal.db.damaged-", 0) == 0;
  EXPECT_TRUE(kept_aside);
  std::vector<v1::TaskInfo> tasks;
  std::vector<int64_t> unreadable;
  EXPECT_TRUE(journal.LoadTasks(&tasks, &unreadable).ok());
  EXPECT_LT(tasks.size(), 6u);
  int64_t highest = 0;
  ASSERT_TRUE(journal.HighestTaskId(&highest).ok());
  EXPECT_GE(highest, static_cast<int64_t>(tasks.empty() ? 0 : tasks.back().id()));
}

// A journal replaced by another (or emptied), or rewound to an older copy
// (its last commits lost with a deleted write-ahead log), disagrees with
// its mark and is refused unless the loss is accepted.
TEST(Journal, AReplacedOrRewoundJournalIsRefused) {
  TempDir dir;
  std::string path = dir.path() + "/journal.db";
  std::string copy = dir.path() + "/old.db";
  std::vector<std::string> notes;
  {
    Journal journal;
    ASSERT_TRUE(journal.Open(path, {}, &notes).ok());
    ASSERT_TRUE(journal.Write(MakeTask(1, "SUBMITTED"), nullptr).ok());
    ASSERT_TRUE(journal.Close().ok());
  }
  std::filesystem::copy_file(path, copy);
  {
    Journal journal;
    ASSERT_TRUE(journal.Open(path, {}, &notes).ok());
    ASSERT_TRUE(journal.Write(MakeTask(2, "SUBMITTED"), nullptr).ok());
    ASSERT_TRUE(journal.Write(MakeTask(3, "SUBMITTED"), nullptr).ok());
    ASSERT_TRUE(journal.Close().ok());
  }
  std::filesystem::copy_file(copy, path, std::filesystem::copy_options::overwrite_existing);
  {
    Journal journal;
    Status refused = journal.Open(path, {}, &notes);
    EXPECT_EQ(refused.code, ErrorCode::kDataLoss);
    EXPECT_NE(refused.message.find("missing its last 2 commits"), std::string::npos)
        << refused.message;
  }
  std::filesystem::remove(path);
  {
    Journal journal;
    Status refused = journal.Open(path, {}, &notes);
    EXPECT_EQ(refused.code, ErrorCode::kDataLoss);
    EXPECT_NE(refused.message.find("not the journal this state directory last used"),
              std::string::npos)
        << refused.message;
  }
  Journal journal;
  ASSERT_TRUE(journal.Open(path, {.accept_loss = true}, &notes).ok());
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes.back().find("accepted"), std::string::npos);
  ASSERT_TRUE(journal.Close().ok());
  notes.clear();
  ASSERT_TRUE(journal.Open(path, {}, &notes).ok()) << "once accepted, the new journal is the one";
}

}  // namespace
}  // namespace freeride
