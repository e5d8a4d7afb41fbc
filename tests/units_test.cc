#include "base/units.h"

#include <gtest/gtest.h>
#include <fstream>
#include <filesystem>
#include "test_util.h"
#include "base/files.h"
#include "sdk/checkpoint_progress.h"
#include "sdk/checkpoint_schedule.h"

#include <sys/stat.h>

namespace freeride {
namespace {

TEST(ParseBytes, AcceptsBinaryDecimalAndBareNumbers) {
  std::string error;
  EXPECT_EQ(ParseBytes("2GiB", &error).value(), 2ULL << 30);
  EXPECT_EQ(ParseBytes("512MiB", &error).value(), 512ULL << 20);
  EXPECT_EQ(ParseBytes("1.5G", &error).value(), 1500000000ULL);
  EXPECT_EQ(ParseBytes("4096", &error).value(), 4096ULL);
  EXPECT_EQ(ParseBytes(" 64 kib ", &error).value(), 65536ULL);
  EXPECT_EQ(ParseBytes("0", &error).value(), 0ULL);
}

TEST(ParseBytes, SizesAbove2To63AreExact) {
  std::string error;
  EXPECT_EQ(ParseBytes("10000000T", &error).value(), 10'000'000'000'000'000'000ULL) << error;
  EXPECT_EQ(ParseBytes("16000000TiB", &error).value(), 16000000ULL << 40) << error;
  EXPECT_FALSE(ParseBytes("17000000TiB", &error).has_value()) << "past 2^64";
}

TEST(ParseBytes, RejectsGarbageWithAMessage) {
  for (const char* bad : {"", "GiB", "2XB", "-1GiB", "1e30TiB", "abc", "1.2.3G"}) {
    std::string error;
    EXPECT_FALSE(ParseBytes(bad, &error).has_value()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(ParseDuration, UnitsAndDefaultMilliseconds) {
  std::string error;
  EXPECT_EQ(ParseDuration("250ms", &error).value(), 250'000'000);
  EXPECT_EQ(ParseDuration("1.5s", &error).value(), 1'500'000'000);
  EXPECT_EQ(ParseDuration("20us", &error).value(), 20'000);
  EXPECT_EQ(ParseDuration("7", &error).value(), 7'000'000);
  EXPECT_FALSE(ParseDuration("5 parsecs", &error).has_value());
  EXPECT_FALSE(ParseDuration("-3ms", &error).has_value());
}

TEST(FormatBytes, PicksAReadableUnit) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3ULL << 30), "3.00 GiB");
  EXPECT_EQ(FormatDuration(1500), "1.5 us");
  EXPECT_EQ(FormatDuration(2'500'000'000), "2.50 s");
}

}  // namespace
TEST(Files, ReplacementIsAllOrNothing) {
  TempDir dir;
  std::string path = dir.path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "first"));
  EXPECT_EQ(FileText(path), "first");
  std::string error;
  // A writer that fails half-way: the old content stays, no temporary is left.
  EXPECT_FALSE(ReplaceFileAtomically(
      path,
      [](const std::string& tmp) {
        std::ofstream(tmp) << "torn";
        return false;
      },
      &error));
  EXPECT_EQ(FileText(path), "first");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_NE(error.find("cannot write"), std::string::npos) << error;
  EXPECT_FALSE(WriteFileAtomically(dir.path() + "/no/such/dir/f", "x", &error));
  EXPECT_NE(error.find("no/such/dir/f.tmp"), std::string::npos) << error;
}

TEST(CheckpointSchedule, QuickSavesKeepTheBaseIntervalAndSlowOnesAreSpacedByTheirCost) {
  CheckpointSchedule schedule(5 * kSecond, 0);
  EXPECT_FALSE(schedule.Due(5 * kSecond - 1));
  EXPECT_TRUE(schedule.Due(5 * kSecond));
  // A 20 ms save (a small model): 50 times it is 1 s, under the base.
  schedule.Attempted(5 * kSecond, 5 * kSecond + 20 * kMillisecond);
  EXPECT_EQ(schedule.due(), 10 * kSecond + 20 * kMillisecond);
  // A 1.5 s save (VGG-19 with its optimizer): the next comes 75 s after it ends, so saving
  // takes 2% of the task's time, not the 23% that one every 5 s would.
  schedule.Attempted(11 * kSecond, 12500 * kMillisecond);
  EXPECT_FALSE(schedule.Due(12500 * kMillisecond + 74 * kSecond));
  EXPECT_TRUE(schedule.Due(12500 * kMillisecond + 75 * kSecond));
  // A save that failed at once is tried again after the base interval, not at the next bubble.
  schedule.Attempted(100 * kSecond, 100 * kSecond);
  EXPECT_EQ(schedule.due(), 105 * kSecond);
  // A very slow save (a minute) still leaves a recent checkpoint: at most ten minutes apart.
  schedule.Attempted(200 * kSecond, 260 * kSecond);
  EXPECT_EQ(schedule.due(), 260 * kSecond + CheckpointSchedule::kLongestSpacing);
}

// The sidecar is the task's to write: a negative step count is refused, not
// read as 2^64 - 1.
TEST(CheckpointProgress, ANegativeStepCountInTheSidecarIsRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/ckpt";
  ASSERT_TRUE(SaveCheckpointWithProgress(
      path, [](const std::string& tmp) { return static_cast<bool>(std::ofstream(tmp) << "w"); },
      {5.0, 7}));
  std::optional<CheckpointProgress> read = ReadCheckpointProgress(path);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->steps, 7u);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  std::ofstream(path + ".progress", std::ios::trunc)
      << st.st_ino << " " << st.st_size << " 5 -1\n";
  EXPECT_FALSE(ReadCheckpointProgress(path).has_value());
}

}  // namespace freeride
