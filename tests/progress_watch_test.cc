// A program's own progress, read from its output or a file
// (daemon/progress_watch.h).
#include "daemon/progress_watch.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "test_util.h"

namespace freeride {
namespace {

TEST(ProgressWatch, ACaptureGroupIsTheProgressSoFar) {
  ProgressWatch watch(R"(iteration (\d+):)", {}, "");
  EXPECT_FALSE(watch.progress());
  watch.Feed("loading\niteration 1: loss 2.3\niteration 2: loss 2.1\n");
  EXPECT_EQ(watch.progress(), 2);
  watch.Feed("iteration 10");  // not a whole line yet
  EXPECT_EQ(watch.progress(), 2);
  watch.Feed("0: loss 1.0\n");
  EXPECT_EQ(watch.progress(), 100);
}

// A capture whose last number is negative (a date, "3-100") is no count of
// work: the line is not a progress line, as a progress file's is not, and
// the event log never gets a negative progress.
TEST(ProgressWatch, ANegativeCaptureIsNoProgress) {
  ProgressWatch watch(R"(step ([\d-]+))", {}, "");
  watch.Feed("step 7\n");
  EXPECT_EQ(watch.progress(), 7);
  watch.Feed("step 3-100\nstep 2024-06-01\n");
  EXPECT_EQ(watch.progress(), 7);
  watch.Feed("step 8\n");
  EXPECT_EQ(watch.progress(), 8);
}

// A log emptied in place (--task-log-max-size) and written past its old
// length before the next poll was taken for more of the old file: the
// reading went on from the old offset and skipped the new progress line.
TEST(ProgressWatch, AnOutputEmptiedInPlaceIsReadFromItsStart) {
  TempDir dir;
  const std::string out = dir.path() + "/stdout.log";
  ProgressWatch watch(R"(step (\d+))", {out}, "");
  std::ofstream(out, std::ios::app) << "step 5\n";
  EXPECT_EQ(watch.Poll(), 5);
  std::ofstream(out, std::ios::trunc) << "step 9\n" << std::string(40, 'x') << "\n";
  watch.Emptied(out);
  EXPECT_EQ(watch.Poll(), 9);
}

TEST(ProgressWatch, WithoutAGroupEachMatchingLineCountsOne) {
  ProgressWatch watch("generated .* batches", {}, "");
  watch.Feed("generated 1 batches\nwarning: slow\ngenerated 2 batches\n");
  EXPECT_EQ(watch.progress(), 2);
}

TEST(ProgressWatch, TheOutputIsReadAsItGrowsAndAFileByItsLastNumber) {
  TempDir dir;
  const std::string out = dir.path() + "/stdout.log", file = dir.path() + "/progress";
  ProgressWatch watch(R"(step (\d+))", {out}, file);
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

// tqdm and Python's logging write to standard error, print to standard
// output: a regex reads both.  The output with more matching lines carries
// the progress, so a one-off number on the other (a warning naming a step)
// does not take its place, and a step logged to both counts once.
TEST(ProgressWatch, BothOutputsAreReadAndTheOneWithMoreMatchesCarriesTheProgress) {
  TempDir dir;
  const std::string out = dir.path() + "/stdout.log", err = dir.path() + "/stderr.log";
  ProgressWatch watch(R"(step (\d+))", {out, err}, "");
  std::ofstream(err) << "INFO step 1\nINFO step 2\n";
  EXPECT_EQ(watch.Poll(), 2);
  std::ofstream(out) << "step 1\nstep 2\nstep 3\n";
  EXPECT_EQ(watch.Poll(), 3);
  std::ofstream(err, std::ios::app) << "INFO step 3\n";
  EXPECT_EQ(watch.Poll(), 3);
  std::ofstream(out, std::ios::app) << "step 4\n";
  EXPECT_EQ(watch.Poll(), 4);

  const std::string out2 = dir.path() + "/stdout2.log", err2 = dir.path() + "/stderr2.log";
  ProgressWatch one_off(R"(step (\d+))", {out2, err2}, "");
  std::ofstream(out2) << "step 1\nstep 2\nstep 3\n";
  std::ofstream(err2) << "WARNING: checkpoint from step 5000 ignored\n";
  EXPECT_EQ(one_off.Poll(), 3) << "a one-off number on the other output does not pin the progress";

  ProgressWatch counted("processed batch", {"", ""}, "");  // two outputs, given by Feed
  counted.Feed("processed batch 1\nprocessed batch 2\n", 0);
  counted.Feed("INFO processed batch 1\nINFO processed batch 2\n", 1);
  EXPECT_EQ(counted.progress(), 2) << "each step logged to both outputs counts once";
  counted.Feed("INFO processed batch 3\n", 1);
  EXPECT_EQ(counted.progress(), 3);
  // A line split between reads of one output is not mixed with the other's.
  ProgressWatch split(R"(^step (\d+)$)", {"", ""}, "");
  split.Feed("step 1", 0);
  split.Feed("7\n", 1);
  EXPECT_FALSE(split.progress());
  split.Feed("2\n", 0);
  EXPECT_EQ(split.progress(), 12);
}

// A relaunched task appends to its logs: the earlier attempt's lines are
// its progress, which the daemon keeps apart (base_progress), not the new
// attempt's.
TEST(ProgressWatch, OutputWrittenBeforeTheWatchWasMadeIsNotRead) {
  TempDir dir;
  const std::string out = dir.path() + "/stdout.log";
  std::ofstream(out) << "done\ndone\ndone\n";  // the first attempt's
  ProgressWatch watch("^done$", {out}, "");
  EXPECT_FALSE(watch.Poll());
  std::ofstream(out, std::ios::app) << "done\n";
  EXPECT_EQ(watch.Poll(), 1);
}

TEST(ProgressWatch, BadExpressionsAreRefusedWithTheReason) {
  EXPECT_EQ(ProgressWatch::Check(R"(it (\d+))"), "");
  EXPECT_NE(ProgressWatch::Check("it (\\d+").find("does not compile"), std::string::npos);
  EXPECT_NE(ProgressWatch::Check(R"((\d+) of (\d+))").find("more than one capture group"),
            std::string::npos);
}

TEST(ProgressWatch, ExpressionsAreRe2sAndGroupsThatDoNotCaptureAreFine) {
  EXPECT_EQ(ProgressWatch::Check(R"((?:step|iteration) (\d+))"), "");
  // Lookaround and backreferences are not RE2's: refused, and the syntax named.
  const std::string lookahead = ProgressWatch::Check(R"(step (\d+)(?= done))");
  EXPECT_NE(lookahead.find("does not compile"), std::string::npos) << lookahead;
  EXPECT_NE(lookahead.find("RE2"), std::string::npos) << lookahead;
  EXPECT_NE(ProgressWatch::Check(R"((a)\1)").find("does not compile"), std::string::npos);
}

// A hostile user's regex and output: a common prefix `.*` over one line of
// 1 MiB (std::regex recursed once per character there and overflowed the
// daemon's stack), and a nested quantifier over a line that does not match
// (std::regex backtracked for seconds at 30 characters, doubling with each).
TEST(ProgressWatch, LongLinesAndNestedQuantifiersAreMatchedWithoutRecursionOrBacktracking) {
  ProgressWatch greedy(R"(.*iteration (\d+))", {}, "");
  greedy.Feed(std::string(1 << 20, 'x') + " iteration 17\n");
  EXPECT_EQ(greedy.progress(), 17);
  ProgressWatch nested(R"((?:a+)+b (\d+))", {}, "");
  nested.Feed(std::string(4096, 'a') + "\n" + std::string(64, 'a') + "b 9\n");
  EXPECT_EQ(nested.progress(), 9);
  ProgressWatch counted("(?:a+)+b", {}, "");
  counted.Feed(std::string(4096, 'a') + "\nab\n");
  EXPECT_EQ(counted.progress(), 1);
}

TEST(ProgressWatch, ACrLfEndsOneLineEvenWhenAReadEndsBetweenItsBytes) {
  ProgressWatch watch("x*", {}, "");  // matches any line, the empty one too
  watch.Feed("a\r\nb\r");
  watch.Feed("\nc\n");
  EXPECT_EQ(watch.progress(), 3);
  ProgressWatch latin1(R"(epoch (\d+).*done)", {}, "");  // output that is not UTF-8 is still matched
  latin1.Feed("epoch 4 \xe9t\xe9 done\n");
  EXPECT_EQ(latin1.progress(), 4);
}

TEST(ProgressWatch, AProgressBarThatRewritesItsLineIsReadAsItGoes) {
  ProgressWatch watch(R"((\d+)/100 \[)", {}, "");
  watch.Feed("  1%|          | 1/100 [00:01<01:39]\r  2%|          | 2/100 [00:02<01:38]\r");
  EXPECT_EQ(watch.progress(), 2);
  watch.Feed(" 57%|#####     | 57/100 [");  // the bar's next rewrite, not ended yet
  EXPECT_EQ(watch.progress(), 2);
  watch.Feed("00:57<00:43]\r");
  EXPECT_EQ(watch.progress(), 57);
}

// A progress file that is no regular file (a FIFO no one writes, /dev/zero)
// would block the daemon's read or never end it: it is not read, and a
// submission naming one is refused.
TEST(ProgressWatch, OnlyARegularFileOfAtMost4KiBIsReadAsTheProgressFile) {
  TempDir dir;
  const std::string fifo = dir.path() + "/fifo", big = dir.path() + "/big";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ProgressWatch from_fifo("", {}, fifo);
  EXPECT_FALSE(from_fifo.Poll());  // returns: opened without blocking, and not read
  ProgressWatch from_zero("", {}, "/dev/zero");
  EXPECT_FALSE(from_zero.Poll());
  std::ofstream(big) << std::string(5000, ' ') << "12\n";
  ProgressWatch from_big("", {}, big);
  EXPECT_FALSE(from_big.Poll());
  std::ofstream(big) << "12\n";
  EXPECT_EQ(from_big.Poll(), 12);

  EXPECT_NE(ProgressWatch::CheckFile(fifo).find("not a regular file"), std::string::npos);
  EXPECT_NE(ProgressWatch::CheckFile("/dev/zero").find("not a regular file"), std::string::npos);
  EXPECT_NE(ProgressWatch::CheckFile(dir.path()).find("not a regular file"), std::string::npos);
  EXPECT_EQ(ProgressWatch::CheckFile(big), "");
  EXPECT_EQ(ProgressWatch::CheckFile(dir.path() + "/not-yet"), "");  // the program makes it later
}

}  // namespace
}  // namespace freeride
