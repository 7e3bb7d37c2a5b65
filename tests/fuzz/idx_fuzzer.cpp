// IDX files, raw and gzip-compressed (read_idx_ubyte, as open_dataset("idx:DIR") reads
// images and labels). The first byte picks the case: bit 0, the rest is gzip-compressed here
// first (so that mutations of the IDX content also reach the gzip path; corrupt gzip data comes
// from inputs that start with the gzip magic themselves); bit 1, rank 3 (images) or 1 (labels).
#include <zlib.h>

#include <string>

#include "pipelines/idx.h"
#include "tests/fuzz/fuzz_util.h"

using namespace scalescope;

namespace {

std::string gzip(std::string_view raw) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer rather than zlib's.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    __builtin_trap();
  std::string out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  const int rank = (mode & 2) != 0 ? 3 : 1;
  const std::string path =
      fuzz::write_temp("data-idx-ubyte", (mode & 1) != 0 ? gzip(rest) : std::string(rest));
  fuzz::accept_errors([&] {
    const IdxArray a = read_idx_ubyte(path, rank);
    int64_t n = 1;
    for (int64_t d : a.dims) n *= d;
    if (static_cast<int64_t>(a.dims.size()) != rank || n != static_cast<int64_t>(a.data.size()))
      __builtin_trap();
  });
  return 0;
}
