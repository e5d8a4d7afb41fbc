// base/utf8.h: text from tasks made valid before it goes into a protobuf
// string, and cut only on a character's boundary.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace freeride {
namespace {

const std::string kE = "\xC3\xA9";  // é, two bytes

TEST(Utf8, ACharacterCutShortAtTheEndIsDroppedAndOtherBadBytesBecomeTheReplacement) {
  std::string sixteen;
  for (int i = 0; i < 16; ++i) sixteen += kE;
  const std::string cut = sixteen.substr(0, 31);  // the old SDK's cut: half of the last é
  EXPECT_EQ(ValidUtf8(cut), sixteen.substr(0, 30));
  EXPECT_EQ(ValidUtf8(sixteen), sixteen);
  EXPECT_EQ(ValidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");  // a byte no character starts with
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // an overlong '/': two bad bytes
  EXPECT_EQ(ValidUtf8("x\xE2\x82"), "x");                         // € cut after two of its three bytes
  EXPECT_EQ(ValidUtf8("\xE2\x82" "y"), "\xEF\xBF\xBD\xEF\xBF\xBD" "y");  // cut, but not at the end
  EXPECT_EQ(ValidUtf8(""), "");
}

TEST(Utf8, APrefixNeverEndsInsideACharacter) {
  const std::string text = "ab" + kE + "\xE2\x82\xAC";  // a b é €: 2 + 2 + 3 bytes
  EXPECT_EQ(Utf8Prefix(text, 100), text);
  EXPECT_EQ(Utf8Prefix(text, 7), text);
  EXPECT_EQ(Utf8Prefix(text, 6), "ab" + kE);
  EXPECT_EQ(Utf8Prefix(text, 5), "ab" + kE);
  EXPECT_EQ(Utf8Prefix(text, 3), "ab");
  EXPECT_EQ(Utf8Prefix(text, 0), "");
  // A tail cut at a byte count: from the first whole character.
  EXPECT_EQ(Utf8SuffixFromACharacter(std::string_view(text).substr(5)), "");  // the last two bytes of €
  EXPECT_EQ(Utf8SuffixFromACharacter(std::string_view(text).substr(3)), "\xE2\x82\xAC");
  EXPECT_EQ(Utf8SuffixFromACharacter(text), text);
}

}  // namespace
}  // namespace freeride
