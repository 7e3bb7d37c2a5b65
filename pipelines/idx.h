// Internal to pipelines: the IDX format of MNIST-style datasets (yann.lecun.com/exdb/mnist),
// raw or gzip-compressed. The public way in is open_dataset() with an idx:DIR spec.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipelines/dataset.h"

namespace scalescope {

// An IDX array of unsigned bytes as stored: dims outermost first, data row-major.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// The largest payload read_idx_ubyte() accepts. A gzip file's decompressed size is unknown
// until it has been read, so the header's dims are checked against this cap before anything
// is read, and the data buffer grows only as decompressed bytes actually arrive.
inline constexpr int64_t kMaxIdxBytes = int64_t{1} << 31;

// Reads an IDX file of unsigned bytes with `rank` dimensions (magic 0x00000800 + rank).
// Compression is detected by content (gzip magic 1f 8b), not by the file's name. The file
// must hold exactly the data its header describes.
// Throws Error naming `path` and the problem: missing or unreadable, wrong magic number, a
// zero dimension, too large, truncated, trailing bytes, corrupt gzip data.
IdxArray read_idx_ubyte(const std::string& path, int rank);

// The `split` of an MNIST-format directory: train-{images-idx3,labels-idx1}-ubyte or
// t10k-… for eval, each raw or with a .gz suffix; when both exist the raw file is used
// (it is what a user who decompressed the files meant, and faster to read). Labels must be
// class indices below 10. Reads and checks everything now; throws Error naming the file.
std::unique_ptr<Dataset> open_idx_dataset(const std::string& dir, Split split);

}  // namespace scalescope
