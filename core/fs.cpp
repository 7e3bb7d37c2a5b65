#include "core/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace scalescope {

namespace {

namespace fs = std::filesystem;

std::string kind_of(fs::file_type type) {
  switch (type) {
    case fs::file_type::character:
      return "character device";
    case fs::file_type::block:
      return "block device";
    case fs::file_type::fifo:
      return "pipe";
    case fs::file_type::socket:
      return "socket";
    default:
      return "special file";
  }
}

// The file a write to `path` replaces. A new file is renamed onto it, which would replace a
// device or a pipe (as root, `-o /dev/null` made /dev/null a regular file holding the report)
// and a symbolic link instead of writing through them: such outputs are refused, and a link
// (to a regular file, or to none yet) is followed so that it stays a link.
std::string output_target(const std::string& path) {
  std::error_code ignored;
  const fs::file_status status = fs::status(path, ignored);  // through links, /proc's too
  SS_CHECK(!fs::is_directory(status), "cannot write '{}': it is a directory; name a file in it",
           path);
  SS_CHECK(!fs::exists(status) || fs::is_regular_file(status),
           "cannot write '{}': it is a {}, not a regular file; name a regular file (a result "
           "replaces its file whole, by renaming a new file onto it)",
           path, kind_of(status.type()));
  fs::path target = path;
  for (int hops = 0; hops < 40 && fs::is_symlink(target, ignored); ++hops) {
    const fs::path next = fs::read_symlink(target, ignored);
    if (next.empty()) break;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  return target.string();
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view data) {
  const std::string target = output_target(path);
  const std::string tmp = fmt::format("{}.tmp.{}", target, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SS_CHECK(fd >= 0, "cannot write '{}': {}", path, std::strerror(errno));
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw_error(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int sync_err = errno;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = synced ? errno : sync_err;
    ::unlink(tmp.c_str());
    throw_error(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
}

void check_can_write(const std::string& path) {
  // The write at the end of the run would fail on what output_target refuses, or in a
  // directory that takes no files: its results lost.
  const std::string target = output_target(path);
  const size_t slash = target.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : target.substr(0, std::max<size_t>(slash, 1));
  const std::string probe = fmt::format("{}/.scalescope-probe.{}", dir, ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) return;  // another probe of ours: creating files works
  SS_CHECK(fd >= 0, "cannot write '{}': cannot create files in directory '{}': {}", path, dir,
           std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string previous_path(const std::string& path) {
  const fs::path p(path);
  if (!p.has_extension()) return path + ".old";
  return (p.parent_path() / (p.stem().string() + ".old" + p.extension().string())).string();
}

std::string keep_previous(const std::string& path) {
  const std::string target = output_target(path);
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(target, ec))) return "";
  const uintmax_t bytes = fs::file_size(target, ec);
  if (ec || bytes == 0) return "";
  const std::string old = previous_path(target);
  SS_CHECK(::rename(target.c_str(), old.c_str()) == 0,
           "cannot keep '{}' as '{}' before writing it anew: {}", target, old,
           std::strerror(errno));
  return old;
}

void check_readable(const std::string& path) {
  // A directory opens as a stream that reads nothing: it was then "not valid JSON".
  std::error_code ignored;
  const std::filesystem::file_status status = std::filesystem::status(path, ignored);
  SS_CHECK_INPUT(!std::filesystem::is_directory(status),
                 "cannot read '{}': it is a directory; name the files in it", path);
  // /dev/zero as a report or a trace was read until memory ran out. A pipe stays readable
  // (`analyze <(zcat trace.json.gz)`).
  SS_CHECK_INPUT(
      !std::filesystem::is_character_file(status) && !std::filesystem::is_block_file(status),
      "cannot read '{}': it is a device, not a file", path);
}

std::string read_file(const std::string& path) {
  check_readable(path);
  std::ifstream in(path, std::ios::binary);
  SS_CHECK_INPUT(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  SS_CHECK_INPUT(!in.bad(), "cannot read '{}': read error", path);
  return std::move(contents).str();
}

}  // namespace scalescope
