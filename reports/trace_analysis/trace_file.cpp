#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <fstream>

#include "core/check.h"
#include "core/fs.h"
#include "reports/trace_analysis/readers.h"

namespace scalescope::traces {
namespace {

constexpr char kSqliteMagic[] = "SQLite format 3";  // and a NUL: the first 16 bytes

bool starts_with_bytes(const std::string& path, const char* magic, size_t size) {
  std::ifstream in(path, std::ios::binary);
  std::string head(size, '\0');
  in.read(head.data(), static_cast<std::streamsize>(size));
  return in.gcount() == static_cast<std::streamsize>(size) &&
         std::memcmp(head.data(), magic, size) == 0;
}

// Every gzip member of `data` decompressed (gzip files may hold several, one after another).
std::string gunzip(const std::string& data, const std::string& path) {
  z_stream z{};
  SS_CHECK(inflateInit2(&z, 15 + 32) == Z_OK, "{}: zlib could not start inflating", path);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[1 << 16];
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
    if (rc == Z_STREAM_END && z.avail_in > 0) {
      rc = inflateReset(&z);  // the next member
      if (rc == Z_OK) continue;
    }
    if (rc != Z_OK) break;
    if (z.avail_in == 0 && z.avail_out != 0) break;  // input used up inside a member
  }
  const std::string reason = z.msg != nullptr ? z.msg : "";
  inflateEnd(&z);
  SS_CHECK(rc == Z_STREAM_END, "{}: the gzip stream is {}", path,
           rc == Z_OK || rc == Z_BUF_ERROR ? std::string("cut short (the file is truncated)")
                                           : fmt::format("corrupt ({})", reason));
  return out;
}

}  // namespace

std::string read_maybe_gzipped(const std::string& path) {
  std::string data = read_file(path);
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
      static_cast<unsigned char>(data[1]) == 0x8b) {
    SS_CHECK(data.size() <= 0xffffffffu, "{}: a gzip file over 4 GiB is not supported", path);
    return gunzip(data, path);
  }
  return data;
}

std::vector<RankTrace> read_trace_file(const std::string& path) {
  if (starts_with_bytes(path, kSqliteMagic, sizeof kSqliteMagic)) return read_nsys_export(path);
  return parse_chrome_trace(read_maybe_gzipped(path), path);
}

}  // namespace scalescope::traces
