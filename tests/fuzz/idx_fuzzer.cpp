// IDX files, raw and gzip-compressed (read_idx_ubyte, as open_dataset("idx:DIR") reads
// images and labels). The first byte picks the case: bit 0, the rest is gzip-compressed here
// first (so that mutations of the IDX content also reach the gzip path; corrupt gzip data comes
// from inputs that start with the gzip magic themselves); bit 1, rank 3 (images) or 1 (labels).
#include <string>

#include "pipelines/idx.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/gzip_util.h"

using namespace scalescope;
using testing_util::gzip;

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
