// A program's own progress, read from its output or a file
// (daemon/progress_watch.h).
#include "daemon/progress_watch.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace freeride {
namespace {

TEST(ProgressWatch, ACaptureGroupIsTheProgressSoFar) {
  ProgressWatch watch(R"(iteration (\d+):)", "", "");
  EXPECT_FALSE(watch.progress());
  watch.Feed("loading\niteration 1: loss 2.3\niteration 2: loss 2.1\n");
  EXPECT_EQ(watch.progress(), 2);
  watch.Feed("iteration 10");  // not a whole line yet
  EXPECT_EQ(watch.progress(), 2);
  watch.Feed("0: loss 1.0\n");
  EXPECT_EQ(watch.progress(), 100);
}

TEST(ProgressWatch, WithoutAGroupEachMatchingLineCountsOne) {
  ProgressWatch watch("generated .* batches", "", "");
  watch.Feed("generated 1 batches\nwarning: slow\ngenerated 2 batches\n");
  EXPECT_EQ(watch.progress(), 2);
}

TEST(ProgressWatch, TheOutputIsReadAsItGrowsAndAFileByItsLastNumber) {
  TempDir dir;
  const std::string out = dir.path() + "/stdout.log", file = dir.path() + "/progress";
  ProgressWatch watch(R"(step (\d+))", out, file);
  EXPECT_FALSE(watch.Poll());
  std::ofstream(out) << "step 1\nstep 2\n";
  EXPECT_EQ(watch.Poll(), 2);
  std::ofstream(out, std::ios::app) << "step 3\n";
  EXPECT_EQ(watch.Poll(), 3);
  std::ofstream(file) << "done 7.5 of 100\n";  // a file, when given, is read last
  EXPECT_EQ(watch.Poll(), 100);
  std::ofstream(file) << "41\n";
  EXPECT_EQ(watch.Poll(), 41);
}

TEST(ProgressWatch, BadExpressionsAreRefusedWithTheReason) {
  EXPECT_EQ(ProgressWatch::Check(R"(it (\d+))"), "");
  EXPECT_NE(ProgressWatch::Check("it (\\d+").find("does not compile"), std::string::npos);
  EXPECT_NE(ProgressWatch::Check(R"((\d+) of (\d+))").find("more than one capture group"),
            std::string::npos);
}

}  // namespace
}  // namespace freeride
