// A file's bytes in order, decompressed on the way when they start with gzip's magic: how the
// readers of large inputs (IDX datasets, traces) take a file a piece at a time, so that neither
// its bytes nor their decompressed form is ever held whole. One open of the file, so a pipe
// (`analyze <(zcat trace.json.gz)`) reads as a file does.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

struct z_stream_s;  // zlib's

namespace scalescope {

class ByteSource {
 public:
  // Opens `path` (a file or a pipe; a directory or a device is refused as read_file refuses it)
  // and reads its first bytes. `what` names it in the errors of read() ("idx file 'x'").
  // Throws UsageError naming the path when it cannot be read.
  ByteSource(const std::string& path, std::string what);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // The file's first bytes as stored (compressed, if it is), up to kHeadBytes; fewer only when
  // the file is shorter.
  static constexpr size_t kHeadBytes = 64;
  std::string_view head() const { return head_; }
  bool gzip() const { return gzip_; }

  // Up to `n` bytes of the content into `dst`; fewer only at its end (then 0 on every call).
  // Throws UsageError naming `what` on a read error and on a gzip stream that is corrupt or cut
  // short (gzip files may hold several members, one after another: all are read).
  size_t read(char* dst, size_t n);

 private:
  // Raw bytes into buffer_ from its start; false at the end of the file.
  bool refill();
  size_t read_raw(char* dst, size_t n);
  size_t inflate_into(char* dst, size_t n);
  [[noreturn]] void gzip_error(int rc) const;

  std::string path_;
  std::string what_;
  std::string head_;
  std::ifstream in_;
  std::vector<char> buffer_;  // raw bytes read from in_ and not yet consumed: [next_, end_)
  size_t next_ = 0, end_ = 0;
  bool gzip_ = false;
  bool done_ = false;        // the gzip content ended
  z_stream_s* z_ = nullptr;  // inflating, for a gzip file
};

}  // namespace scalescope
