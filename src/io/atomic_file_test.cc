#include "io/atomic_file.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/error.h"

namespace orrery::io {
namespace {

TEST(AtomicFile, WritesCreatesParentsAndLeavesNoTemporary) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "orrery_atomic_test";
  fs::remove_all(dir);
  const std::string path = (dir / "sub" / "out.json").string();
  write_file_atomic(path, "{\"a\": 1}\n");
  EXPECT_EQ(read_file(path), "{\"a\": 1}\n");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "sub")) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);  // no .tmp left behind
  fs::remove_all(dir);
}

TEST(AtomicFile, UnwritableTargetThrowsAndLeavesNothing) {
  EXPECT_THROW(write_file_atomic("/proc/orrery-cannot-write/x.json", "x"), std::runtime_error);
}

// A path the user gave that cannot be written is bad input (exit 2 in the CLI), and the error names it:
// here a file name of 300 bytes, over Linux's 255-byte NAME_MAX, in a writable directory.
TEST(AtomicFile, AnUnwritablePathIsAnInputErrorNamingItAndLeavesNothing) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "orrery_atomic_long_name";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / std::string(300, 'x')).string();
  try {
    write_file_atomic(path, "x");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, path);
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST(ReadFile, MissingFileIsAnInputErrorNamingThePath) {
  try {
    read_file("/nonexistent/config.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().file, "/nonexistent/config.json");
  }
}

}  // namespace
}  // namespace orrery::io
