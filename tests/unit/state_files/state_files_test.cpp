// Small state files: read whole, replaced whole and durably.
#include "state_files.hpp"
#include "temp_dir.hpp"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>

namespace dowser::state_files {
namespace {

namespace fs = std::filesystem;

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_error(const fs::path& path) {
  try {
    read_whole(path, Access::everyone);
  } catch (const ReadError& error) {
    return error.what();
  }
  return "no error";
}

TEST(StateFiles, AMissingFileIsNoneAndAWrittenOneReadsBack) {
  const test::TempDir dir{"dowser-state"};
  const fs::path file = dir.path() / "sub" / "owners";
  EXPECT_EQ(read_whole(file, Access::everyone), std::nullopt);
  EXPECT_EQ(replace_durably(file, "a\tb\n", Access::everyone), std::nullopt) << "directory made";
  EXPECT_EQ(read_whole(file, Access::everyone), std::optional<std::string>("a\tb\n"));
  EXPECT_EQ(replace_durably(file, "", Access::everyone), std::nullopt);
  EXPECT_EQ(read_whole(file, Access::everyone), std::optional<std::string>(""));
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
  const mode_t umask = ::umask(0);
  ::umask(umask);
  EXPECT_EQ(static_cast<mode_t>(fs::status(file).permissions()), 0644 & ~umask);
}

// Saving over a file that could not be read would lose what it held.
TEST(StateFiles, WhatCannotBeReadIsAnErrorNamingTheFile) {
  const test::TempDir dir{"dowser-state"};
  const fs::path directory = dir.path() / "a-directory";
  fs::create_directories(directory);
  EXPECT_EQ(read_error(directory), "cannot read " + directory.string() + ": Is a directory");
  const fs::path fifo = dir.path() / "a-fifo";  // no writer: must not hang
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_error(fifo), "cannot read " + fifo.string() + ": not a regular file");
  EXPECT_EQ(read_error("/dev/zero"), "cannot read /dev/zero: not a regular file");
}

TEST(StateFiles, AnOwnerOnlyFileIsMadeSoWhenReadAndWhenWritten) {
  const test::TempDir dir{"dowser-state"};
  const fs::path file = dir.path() / "accepted";
  const auto owner_only = fs::perms::owner_read | fs::perms::owner_write;
  std::ofstream(file) << "old\n";
  fs::permissions(file, fs::perms::all);
  EXPECT_EQ(read_whole(file, Access::owner_only), std::optional<std::string>("old\n"));
  EXPECT_EQ(fs::status(file).permissions(), owner_only);

  std::ofstream(file.string() + ".tmp") << "left by a crash\n";
  fs::permissions(file.string() + ".tmp", fs::perms::all);
  fs::remove(file);
  EXPECT_EQ(replace_durably(file, "new\n", Access::owner_only), std::nullopt);
  EXPECT_EQ(fs::status(file).permissions(), owner_only) << "not the leftover's mode";
}

// A write that fails leaves the old text in place, and says what failed.
TEST(StateFiles, AFailedReplaceKeepsTheOldTextAndSaysWhy) {
  const test::TempDir dir{"dowser-state"};
  const fs::path file = dir.path() / "owners";
  ASSERT_EQ(replace_durably(file, "old\n", Access::everyone), std::nullopt);
  fs::create_directories(file.string() + ".tmp/taken");  // the temporary file's name is taken
  const std::optional<std::string> failed = replace_durably(file, "new\n", Access::everyone);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(*failed, "open " + file.string() + ".tmp: Is a directory");
  EXPECT_EQ(text_of(file), "old\n");
}

}  // namespace
}  // namespace dowser::state_files
