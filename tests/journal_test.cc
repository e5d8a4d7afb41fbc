#include "daemon/journal.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace freeride {
namespace {

TEST(Journal, WhatIsFlushedSurvivesReopening) {
  TempDir dir;
  std::string path = dir.path() + "/journal.db";
  {
    Journal journal;
    std::string error;
    ASSERT_TRUE(journal.Open(path, &error)) << error;
    for (int id = 1; id <= 3; ++id) {
      v1::TaskInfo info;
      info.set_id(id);
      info.mutable_spec()->set_name("task" + std::to_string(id));
      info.set_state("SUBMITTED");
      TransitionRecord t{id, "", "SUBMITTED", 1, "submitted"};
      journal.Record(info, &t);
    }
    v1::TaskInfo update;
    update.set_id(2);
    update.mutable_spec()->set_name("task2");
    update.set_state("RUNNING");
    update.set_progress(42.5);
    TransitionRecord t{2, "PAUSED", "RUNNING", 2, "bubble"};
    journal.Record(update, &t);
    journal.Flush();
  }
  Journal journal;
  std::string error;
  ASSERT_TRUE(journal.Open(path, &error)) << error;
  std::vector<std::string> warnings;
  auto tasks = journal.LoadTasks(&warnings);
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(tasks[1].state(), "RUNNING");
  EXPECT_DOUBLE_EQ(tasks[1].progress(), 42.5);
  EXPECT_EQ(journal.MaxTaskId(), 3);
  auto history = journal.LoadTransitions(2);
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[1].to, "RUNNING");
}

TEST(Journal, RefusesAFileThatIsNotADatabase) {
  TempDir dir;
  std::string path = dir.path() + "/journal.db";
  std::ofstream(path) << "this is not sqlite, and it must not be overwritten\n";
  Journal journal;
  std::string error;
  EXPECT_FALSE(journal.Open(path, &error));
  EXPECT_NE(error.find("journal"), std::string::npos) << error;
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "this is not sqlite, and it must not be overwritten");
}

}  // namespace
}  // namespace freeride
