// One gzip member of some bytes, in memory: what the tests and fuzzers of the gzip readers
// (core/byte_source.h) compress their inputs with.
#pragma once

#include <zlib.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace scalescope::testing_util {

inline std::string gzip(std::string_view raw, int level = Z_DEFAULT_COMPRESSION) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer rather than zlib's.
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace scalescope::testing_util
