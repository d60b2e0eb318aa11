// udev's glob semantics: fnmatch per '|' alternative, whole-string, never a regex.
#include "udev_glob.hpp"

#include <gtest/gtest.h>

#include <string>

namespace udev_handler {
namespace {

TEST(UdevGlob, StarAndQuestionMarkAsUdevUsesThem) {
  EXPECT_TRUE(glob_match("video*", "video0"));
  EXPECT_TRUE(glob_match("video*", "video"));
  EXPECT_FALSE(glob_match("video*", "vide"));  // a regex would accept "vide" + "o*"
  EXPECT_TRUE(glob_match("?*", "x"));
  EXPECT_FALSE(glob_match("?*", ""));  // "non-empty", the classic udev idiom
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "/devices/a/b"));  // '*' crosses '/' (no FNM_PATHNAME)
}

TEST(UdevGlob, BracketsRangesAndNegation) {
  EXPECT_TRUE(glob_match("video[0-9]", "video7"));
  EXPECT_FALSE(glob_match("video[0-9]", "video10"));
  EXPECT_TRUE(glob_match("video[0-9]*", "video10"));
  EXPECT_TRUE(glob_match("tag[!0-2]", "tag3"));
  EXPECT_FALSE(glob_match("tag[!0-2]", "tag1"));
  EXPECT_TRUE(glob_match("[", "["));  // an unclosed bracket is a literal, not an error
}

TEST(UdevGlob, AlternativesMatchTheWholeText) {
  EXPECT_TRUE(glob_match("video*|vbi*", "vbi0"));
  EXPECT_TRUE(glob_match("a|ab", "ab"));  // leftmost-first regex matching got this wrong
  EXPECT_FALSE(glob_match("a|ab", "abc"));
  EXPECT_TRUE(glob_match("x|", ""));  // an empty alternative matches the empty text
  EXPECT_FALSE(glob_match("x|y", ""));
}

TEST(UdevGlob, ExactAndEscapedValues) {
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "x"));
  EXPECT_TRUE(glob_match(":capture:", ":capture:"));
  EXPECT_TRUE(glob_match("a\\*", "a*"));
  EXPECT_FALSE(glob_match("a\\*", "ab"));
  EXPECT_FALSE(glob_match("a", std::string("a\0b", 3)));  // NUL never matches
}

}  // namespace
}  // namespace udev_handler
