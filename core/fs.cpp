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

void write_file_atomic(const std::string& path, std::string_view data) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
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
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = synced ? errno : sync_err;
    ::unlink(tmp.c_str());
    throw_error(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
}

void check_can_write(const std::string& path) {
  // The write replaces `path` by renaming a new file onto it, which a directory refuses: at the
  // end of the run, its results lost.
  std::error_code ignored;
  SS_CHECK(!std::filesystem::is_directory(path, ignored),
           "cannot write '{}': it is a directory; name a file in it", path);
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
  const std::string probe = fmt::format("{}/.scalescope-probe.{}", dir, ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) return;  // another probe of ours: creating files works
  SS_CHECK(fd >= 0, "cannot write '{}': cannot create files in directory '{}': {}", path, dir,
           std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string read_file(const std::string& path) {
  // A directory opens as a stream that reads nothing: it was then "not valid JSON".
  std::error_code ignored;
  SS_CHECK_INPUT(!std::filesystem::is_directory(path, ignored),
                 "cannot read '{}': it is a directory; name the files in it", path);
  std::ifstream in(path, std::ios::binary);
  SS_CHECK_INPUT(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  SS_CHECK_INPUT(!in.bad(), "cannot read '{}': read error", path);
  return std::move(contents).str();
}

}  // namespace scalescope
