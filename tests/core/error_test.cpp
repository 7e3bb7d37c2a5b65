#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "core/check.h"
#include "core/error.h"
#include "core/fs.h"

namespace scalescope {
namespace {

TEST(Error, CarriesExpressionLocationLibraryMessageAndRank) {
  set_thread_rank(3);
  try {
    throw Error("NCCL", "ncclAllReduce(...)", "unhandled system error");
  } catch (const Error& e) {
    EXPECT_EQ(e.library(), "NCCL");
    EXPECT_EQ(e.expression(), "ncclAllReduce(...)");
    EXPECT_EQ(e.message(), "unhandled system error");
    EXPECT_EQ(e.rank(), 3);
    EXPECT_GT(e.line(), 0);
    const std::string what = e.what();
    EXPECT_NE(what.find("[rank 3]"), std::string::npos) << what;
    EXPECT_NE(what.find("NCCL error: unhandled system error"), std::string::npos) << what;
    EXPECT_NE(what.find("error_test.cpp:"), std::string::npos) << what;
  }
  set_thread_rank(-1);
}

// What the user did wrong reads without the source line; a fault of ours or of a library
// keeps it, as does a usage error when asked for (--verbose).
TEST(Error, AUsageErrorReadsWithoutItsSourceLocation) {
  const UsageError usage("--lr -1 must be 0 or a positive number");
  EXPECT_EQ(error_text(usage, false), "--lr -1 must be 0 or a positive number");
  EXPECT_NE(error_text(usage, true).find(" at error_test.cpp:"), std::string::npos);
  const Error internal("", "", "bucket 3 of 2");
  EXPECT_NE(error_text(internal, false).find("bucket 3 of 2 at error_test.cpp:"),
            std::string::npos);
  // Classified after the fact, an error keeps its message, origin and rank.
  set_thread_rank(2);
  const Error cause("", "", "cpu:0 has no devices");
  set_thread_rank(-1);
  const UsageError from(cause);
  EXPECT_EQ(error_text(from, false), "[rank 2] cpu:0 has no devices");
  EXPECT_EQ(from.line(), cause.line());
  EXPECT_EQ(std::string(from.what()), std::string(cause.what()));
  EXPECT_EQ(UsageError(cause, "--devices cpu:0: no devices").message(),
            "--devices cpu:0: no devices");
}

TEST(Error, RankIsPerThread) {
  set_thread_rank(1);
  int other_rank = 0;
  std::thread([&] { other_rank = thread_rank(); }).join();
  EXPECT_EQ(other_rank, -1);
  EXPECT_EQ(thread_rank(), 1);
  set_thread_rank(-1);
}

TEST(Check, FormatsTheMessage) {
  try {
    SS_CHECK(1 + 1 == 3, "value {} is not {}", 2, 3);
    FAIL() << "SS_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "value 2 is not 3");
    EXPECT_EQ(e.library(), "");
  }
  EXPECT_NO_THROW(SS_CHECK(true, "never"));
}

TEST(Fs, AtomicWriteReplacesAndReadsBack) {
  const std::string path = testing::TempDir() + "/scalescope_fs_test.txt";
  write_file_atomic(path, "first");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
}

TEST(Fs, ErrorsNameThePath) {
  try {
    write_file_atomic("/nonexistent-dir/x/y.json", "data");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/y.json"), std::string::npos);
  }
  EXPECT_THROW(read_file("/nonexistent-dir/nothing"), Error);
}

}  // namespace
}  // namespace scalescope
