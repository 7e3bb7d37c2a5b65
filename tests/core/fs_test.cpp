// Faults around files: a disk that fills while a result is written, a directory that cannot
// take files, and the signal flag that stops work.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

// An empty directory of this test process's own: one an earlier process of the same pid left
// (process ids come round again, and runs leave these behind) made mkfifo and create_symlink
// fail on the names it still held.
std::string temp_dir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/fs_test_" + std::to_string(::getpid()) + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `f` in a child process whose files may not grow past `limit` bytes (RLIMIT_FSIZE, as
// a full disk: writes past it fail with EFBIG instead of raising SIGXFSZ). Returns the
// child's output: "ok" or the error's message.
std::string with_file_size_limit(rlim_t limit, const std::function<void()>& f) {
  return testing_util::in_child_process([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit r{limit, limit};
    return ::setrlimit(RLIMIT_FSIZE, &r) == 0 ? testing_util::error_of(f)
                                              : std::string("setrlimit failed");
  });
}

TEST(Fs, ADiskThatFillsWhileWritingLeavesThePreviousFileWhole) {
  const std::string dir = temp_dir("full");
  const std::string path = dir + "/report.json";
  write_file_atomic(path, std::string(1000, 'a'));
  const std::string error =
      with_file_size_limit(4096, [&] { write_file_atomic(path, std::string(100'000, 'b')); });
  EXPECT_CONTAINS(error, "cannot write '" + path + "'");
  EXPECT_CONTAINS(error, "File too large");
  EXPECT_EQ(read_file(path), std::string(1000, 'a'));
  // Nothing left behind but the report itself.
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
  // Under the limit the same call works: the limit, not the call, made it fail.
  EXPECT_EQ(with_file_size_limit(4096, [&] { write_file_atomic(path, "small"); }),
            "<no error thrown>");
  EXPECT_EQ(read_file(path), "small");
}

TEST(Fs, ADirectoryThatTakesNoFilesIsFoundBeforeAnyWork) {
  const std::string dir = temp_dir("writable");
  EXPECT_NO_THROW(check_can_write(dir + "/report.json"));
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // the probe is gone
  // sysfs refuses new files even to root, which ignores permission bits.
  EXPECT_CONTAINS(testing_util::error_of([] { check_can_write("/sys/report.json"); }),
                  "cannot write '/sys/report.json': cannot create files in directory '/sys'");
  EXPECT_CONTAINS(testing_util::error_of([&] { check_can_write(dir + "/missing/report.json"); }),
                  "No such file or directory");
  write_file_atomic(dir + "/plain", "x");
  EXPECT_CONTAINS(testing_util::error_of([&] { check_can_write(dir + "/plain/report.json"); }),
                  "Not a directory");
  if (::geteuid() != 0) {
    const std::string ro = temp_dir("readonly");
    ::chmod(ro.c_str(), 0555);
    EXPECT_CONTAINS(testing_util::error_of([&] { check_can_write(ro + "/r.json"); }),
                    "Permission denied");
    ::chmod(ro.c_str(), 0755);
  }
}

// A directory named where a file is read (`analyze DIR`, `report DIR`) read as empty text,
// which then was "not valid JSON"; a file that is not there, or not a file, is the user's to
// fix: a UsageError, printed without our source line. So is a device.
TEST(Fs, ReadingADirectoryOrAMissingFileSaysWhich) {
  const std::string dir = temp_dir("_read");
  EXPECT_CONTAINS(testing_util::error_of([&] { (void)read_file(dir); }),
                  "cannot read '" + dir + "': it is a directory; name the files in it");
  EXPECT_THROW((void)read_file(dir), UsageError);
  EXPECT_THROW((void)read_file(dir + "/missing.json"), UsageError);
  // Read until memory ran out.
  EXPECT_CONTAINS(testing_util::error_of([&] { (void)read_file("/dev/zero"); }),
                  "cannot read '/dev/zero': it is a device, not a file");
}

// An output path that is a directory could not be replaced by the write at the end of a run
// (`train -o DIR` trained, then failed, its results lost): refused before any work.
TEST(Fs, AnOutputThatIsADirectoryIsFoundBeforeAnyWork) {
  const std::string dir = temp_dir("_out");
  EXPECT_CONTAINS(testing_util::error_of([&] { check_can_write(dir); }),
                  "cannot write '" + dir + "': it is a directory; name a file in it");
  EXPECT_NO_THROW(check_can_write(dir + "/run.json"));
}

// A result is written by renaming a new file onto its path. Onto a device or a pipe that
// replaced them (as root, `sweep -o /dev/full` made /dev/full a regular file holding the
// report, where a disk-full error was due), and onto a link it replaced the link.
TEST(Fs, AnOutputThatIsADeviceOrAPipeIsRefusedAndALinkIsWrittenThrough) {
  const std::string dir = temp_dir("_special");
  const std::string pipe = dir + "/pipe";
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  const std::string refused = "cannot write '" + pipe + "': it is a pipe, not a regular file";
  EXPECT_CONTAINS(testing_util::error_of([&] { check_can_write(pipe); }), refused);
  EXPECT_CONTAINS(testing_util::error_of([&] { write_file_atomic(pipe, "x"); }), refused);
  EXPECT_TRUE(std::filesystem::is_fifo(pipe));
  // Only probed, never written: the check cannot harm /dev/null if it lets it through.
  EXPECT_CONTAINS(testing_util::error_of([] { check_can_write("/dev/null"); }),
                  "cannot write '/dev/null': it is a character device, not a regular file");

  write_file_atomic(dir + "/real.json", "old");
  std::filesystem::create_symlink("real.json", dir + "/link.json");
  EXPECT_NO_THROW(check_can_write(dir + "/link.json"));
  write_file_atomic(dir + "/link.json", "new");
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.json"));
  EXPECT_EQ(read_file(dir + "/real.json"), "new");
  // A link to a file not there yet creates that file, as a shell's `>` does.
  std::filesystem::create_symlink(dir + "/later.json", dir + "/dangling.json");
  write_file_atomic(dir + "/dangling.json", "made");
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/dangling.json"));
  EXPECT_EQ(read_file(dir + "/later.json"), "made");
}

// A result written where the last run wrote one keeps the last one beside it, once.
TEST(Fs, ThePreviousFileIsKeptOneGenerationBack) {
  EXPECT_EQ(previous_path("runs/sweep.json"), "runs/sweep.old.json");
  EXPECT_EQ(previous_path("sweep"), "sweep.old");
  EXPECT_EQ(previous_path("a.b/.json"), "a.b/.json.old");
  const std::string dir = temp_dir("keep");
  const std::string path = dir + "/report.json";
  const std::string old = dir + "/report.old.json";
  std::filesystem::remove(path);
  std::filesystem::remove(old);
  EXPECT_EQ(keep_previous(path), "");  // nothing there
  write_file_atomic(path, "");
  EXPECT_EQ(keep_previous(path), "");  // nothing in it
  write_file_atomic(path, "first");
  EXPECT_EQ(keep_previous(path), old);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(read_file(old), "first");
  write_file_atomic(path, "second");
  EXPECT_EQ(keep_previous(path), old);
  EXPECT_EQ(read_file(old), "second");  // the older one replaced
  // Through a link, the file it names moves and the link stays for the new result.
  const std::string link = dir + "/latest.json";
  std::filesystem::remove(link);
  write_file_atomic(path, "third");
  std::filesystem::create_symlink("report.json", link);
  EXPECT_EQ(keep_previous(link), old);
  EXPECT_EQ(read_file(old), "third");
  EXPECT_TRUE(std::filesystem::is_symlink(link));
}

TEST(Interrupt, ASignalIsRecordedAndStopsWorkWithTheShellsExitStatus) {
  clear_interrupt();
  install_interrupt_handlers();
  EXPECT_NO_THROW(throw_if_interrupted("nothing"));
  ::raise(SIGINT);  // handled: the test process goes on
  EXPECT_EQ(interrupt_signal(), SIGINT);
  try {
    throw_if_interrupted("the sweep stopped");
    FAIL() << "no Interrupted thrown";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.exit_status(), 130);
    EXPECT_CONTAINS(e.what(), "interrupted by SIGINT: the sweep stopped");
  }
  clear_interrupt();
  // The handler gave way to the default action: a second Ctrl-C ends a run that hangs.
  struct sigaction now {};
  ::sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

}  // namespace
}  // namespace scalescope
