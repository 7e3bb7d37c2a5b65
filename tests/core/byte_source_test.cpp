// ByteSource: a file's bytes a piece at a time, gunzipped on the way, whatever the pieces; the
// faults of a gzip stream named.
#include "core/byte_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tests/gzip_util.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

using testing_util::error_of;
using testing_util::gzip;

class ByteSourceTest : public ::testing::Test {
 protected:
  ByteSourceTest()
      : dir_(::testing::TempDir() + "/byte_source_test_" + std::to_string(::getpid())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~ByteSourceTest() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // Everything `source` gives, `piece` bytes a call.
  static std::string read_all(ByteSource& source, size_t piece) {
    std::string out, buffer(piece, '\0');
    while (const size_t got = source.read(buffer.data(), piece)) out.append(buffer, 0, got);
    return out;
  }
  // 3 MiB of bytes that do not compress: more than the source reads from the file at a time.
  static std::string noise() {
    std::mt19937 rng(7);
    std::string s(3 << 20, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  std::string dir_;
};

TEST_F(ByteSourceTest, GivesAFilesBytesInAnyPieces) {
  const std::string bytes = noise();
  const std::string path = write("raw", bytes);
  for (const size_t piece : {size_t{1} << 22, (size_t{1} << 20) + 3, size_t{4093}}) {
    ByteSource source(path, "raw");
    EXPECT_FALSE(source.gzip());
    EXPECT_EQ(source.head(), bytes.substr(0, ByteSource::kHeadBytes));
    EXPECT_EQ(read_all(source, piece), bytes) << "pieces of " << piece;
  }
}

TEST_F(ByteSourceTest, GunzipsEveryMemberOfAGzipFile) {
  const std::string first = noise(), second = "and a second member, as `cat a.gz b.gz` makes";
  const std::string compressed = gzip(first) + gzip(second);
  const std::string path = write("two.gz", compressed);
  for (const size_t piece : {size_t{1} << 22, size_t{4093}}) {
    ByteSource source(path, "two.gz");
    EXPECT_TRUE(source.gzip());
    EXPECT_EQ(source.head(), compressed.substr(0, ByteSource::kHeadBytes));  // as stored
    EXPECT_EQ(read_all(source, piece), first + second) << "pieces of " << piece;
    char more = 0;
    EXPECT_EQ(source.read(&more, 1), 0u);
  }
}

TEST_F(ByteSourceTest, NamesAGzipStreamCutShortOrCorrupt) {
  const std::string compressed = gzip(noise());
  const auto error_reading = [&](const std::string& name, const std::string& bytes) {
    return error_of([&] {
      ByteSource source(write(name, bytes), "trace '" + name + "'");
      read_all(source, 1 << 16);
    });
  };
  EXPECT_CONTAINS(error_reading("cut.gz", compressed.substr(0, compressed.size() / 2)),
                  "trace 'cut.gz': the gzip stream is cut short (the file is truncated)");
  EXPECT_CONTAINS(error_reading("magic.gz", compressed.substr(0, 2)),
                  "trace 'magic.gz': the gzip stream is cut short (the file is truncated)");
  std::string crc = compressed;
  crc[crc.size() - 8] = static_cast<char>(crc[crc.size() - 8] ^ 0xff);  // the trailer's CRC-32
  EXPECT_CONTAINS(error_reading("crc.gz", crc),
                  "trace 'crc.gz': the gzip stream is corrupt (incorrect data check)");
  // What follows a member must be another: zlib's gzread would drop it unsaid.
  EXPECT_CONTAINS(error_reading("tail.gz", compressed + "not gzip"),
                  "trace 'tail.gz': the gzip stream is corrupt (incorrect header check)");
}

TEST_F(ByteSourceTest, AnEmptyFileIsNoBytesAndADirectoryOrAMissingFileIsRefused) {
  ByteSource empty(write("empty", ""), "empty");
  EXPECT_EQ(empty.head(), "");
  char c = 0;
  EXPECT_EQ(empty.read(&c, 1), 0u);
  EXPECT_CONTAINS(error_of([&] { ByteSource(dir_, "dir"); }),
                  "cannot read '" + dir_ + "': it is a directory; name the files in it");
  EXPECT_CONTAINS(error_of([&] { ByteSource(dir_ + "/missing", "missing"); }),
                  "cannot read '" + dir_ + "/missing': No such file or directory");
}

}  // namespace
}  // namespace scalescope
