// Settings read from the environment (base/settings.h): a value the setting
// does not take is named, with what is used instead, and never fails.
#include "base/settings.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>

#include <string>

namespace freeride {
namespace {

// Sets `name` for one test and restores it after.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    if (value) setenv(name, value, 1); else unsetenv(name);
  }
  ~ScopedVariable() {
    if (had_) setenv(name_, old_.c_str(), 1); else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

constexpr const char* kName = "FREERIDE_SETTINGS_TEST";

uint64_t Number(const char* value, std::string* warning) {
  ScopedVariable v(kName, value);
  testing::internal::CaptureStderr();
  const uint64_t n = WholeNumberSetting("who", kName, 8, 1, 256);
  *warning = testing::internal::GetCapturedStderr();
  return n;
}

TEST(Settings, AWholeNumberInItsBoundsIsTakenAndAnythingElseIsNamedAndTheDefaultUsed) {
  std::string warning;
  EXPECT_EQ(Number(nullptr, &warning), 8u);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Number("", &warning), 8u);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Number("1", &warning), 1u);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Number("256", &warning), 256u);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Number("007", &warning), 7u);
  EXPECT_EQ(warning, "");
  for (const char* bad : {"0", "257", "-3", " 4", "4 ", "+4", "4x", "0x10", "99999999999999999999999"}) {
    EXPECT_EQ(Number(bad, &warning), 8u) << bad;
    EXPECT_EQ(warning, std::string("who: FREERIDE_SETTINGS_TEST=") + bad +
                           " is not a whole number from 1 to 256; using 8\n")
        << bad;
  }
}

int Choice(const char* value, std::string* warning) {
  ScopedVariable v(kName, value);
  testing::internal::CaptureStderr();
  const int n = ChoiceSetting("who", kName, {"auto", "stream", "memset"}, 0);
  *warning = testing::internal::GetCapturedStderr();
  return n;
}

TEST(Settings, AChoiceIsTakenByItsIndexAndAnythingElseIsNamedWithTheChoices) {
  std::string warning;
  EXPECT_EQ(Choice(nullptr, &warning), 0);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Choice("", &warning), 0);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Choice("stream", &warning), 1);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Choice("memset", &warning), 2);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(Choice("Stream", &warning), 0);
  EXPECT_EQ(warning, "who: FREERIDE_SETTINGS_TEST=Stream is not auto, stream or memset; using auto\n");
}

TEST(Settings, TwoChoicesAreListedWithOrAndAWarningGivesTheNumbersUnit) {
  {
    ScopedVariable v(kName, "median");
    testing::internal::CaptureStderr();
    EXPECT_EQ(ChoiceSetting("who", kName, {"p95", "mean"}, 0), 0);
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "who: FREERIDE_SETTINGS_TEST=median is not p95 or mean; using p95\n");
  }
  ScopedVariable v(kName, "0.5ms");
  testing::internal::CaptureStderr();
  EXPECT_EQ(WholeNumberSetting("who", kName, 20, 1, 10000, "microseconds"), 20u);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "who: FREERIDE_SETTINGS_TEST=0.5ms is not a whole number of microseconds from 1 to 10000; using 20\n");
}

TEST(Settings, ReadingASettingLeavesTheCallersErrnoAsItWas) {
  ScopedVariable v(kName, "99999999999999999999999");  // strtoull's ERANGE
  testing::internal::CaptureStderr();
  errno = EINTR;
  EXPECT_EQ(WholeNumberSetting("who", kName, 8, 1, 256), 8u);
  EXPECT_EQ(errno, EINTR);
  testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace freeride
