// TrimTaskLog on real files: a task's O_APPEND log emptied in place, its
// tail kept beside it, and a disk that cannot take the tail.
#include "daemon/task_logs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace freeride {
namespace {

std::string Numbered(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += "line " + std::to_string(1000 + i) + "\n";  // 10 bytes each
  return text;
}

TEST(TaskLogs, ALogPastTheSizeKeepsItsLastHalfBesideItAndGoesOnAtItsNewEnd) {
  TempDir dir;
  const std::string log = dir.path() + "/stdout.log";
  const std::string text = Numbered(300);  // 3,000 bytes
  std::ofstream(log) << text;
  // The task's own descriptor, opened before, as the daemon's launch opens it.
  const int task_fd = open(log.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(task_fd, 0);
  std::string error;
  EXPECT_FALSE(TrimTaskLog(log, 3000, &error)) << "within the size";
  EXPECT_FALSE(TrimTaskLog(log, 0, &error)) << "0: never";
  EXPECT_EQ(std::filesystem::file_size(log), 3000u);
  ASSERT_TRUE(TrimTaskLog(log, 2000, &error)) << error;
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(FileText(log + ".1"), text.substr(2000)) << "the last 1,000 bytes";
  EXPECT_EQ(std::filesystem::file_size(log), 0u);
  EXPECT_FALSE(std::filesystem::exists(log + ".1.tmp"));
  ASSERT_EQ(write(task_fd, "after\n", 6), 6);
  close(task_fd);
  EXPECT_EQ(FileText(log), "after\n") << "appended at the new end, no hole of zeros before it";
  EXPECT_FALSE(TrimTaskLog(dir.path() + "/none.log", 1, &error));
  EXPECT_TRUE(error.empty()) << error;
}

TEST(TaskLogs, ATailThatCannotBeKeptStillEmptiesTheLogAndSaysSo) {
  TempDir dir;
  const std::string log = dir.path() + "/stderr.log";
  std::ofstream(log) << Numbered(300);
  std::ofstream(log + ".1") << "an older tail";
  // Where the tail's temporary file would go, a directory: as a full disk, the copy fails.
  std::filesystem::create_directory(log + ".1.tmp");
  std::string error;
  EXPECT_TRUE(TrimTaskLog(log, 2000, &error));
  EXPECT_NE(error.find("cannot write " + log + ".1.tmp"), std::string::npos) << error;
  EXPECT_EQ(std::filesystem::file_size(log), 0u) << "emptied all the same";
  EXPECT_FALSE(std::filesystem::exists(log + ".1")) << "no stale tail passed off as the last one";
}

TEST(TaskLogs, ATailIsReadAcrossTheLastTrim) {
  TempDir dir;
  const std::string log = TaskStderrLog(dir.path());
  EXPECT_EQ(log, dir.path() + "/stderr.log");
  std::ofstream(log + ".1") << "kept half\n";
  std::ofstream(log) << "Traceback\n";
  EXPECT_EQ(ReadTaskLogTail(log, 15), "half\nTraceback\n");  // the rest from the kept half
  EXPECT_EQ(ReadTaskLogTail(log, 5), "back\n");              // all in the log
  EXPECT_EQ(ReadTaskLogTail(dir.path() + "/none.log", 5), "");
}

}  // namespace
}  // namespace freeride
