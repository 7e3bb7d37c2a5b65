#include "pipelines/idx.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/byte_source.h"
#include "core/check.h"

namespace scalescope {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kClasses = 10;
// Read a piece at a time so that a lying gzip header costs at most what arrived.
constexpr size_t kReadChunk = size_t{16} << 20;

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The size of a regular file; throws Error naming it when it is missing or not a file.
uint64_t regular_file_size(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  SS_CHECK_INPUT(fs::exists(status), "idx file '{}': cannot open: no such file", path);
  SS_CHECK_INPUT(fs::is_regular_file(status), "idx file '{}': not a regular file", path);
  const uint64_t size = fs::file_size(path, ec);
  SS_CHECK_INPUT(!ec, "idx file '{}': cannot read its size: {}", path, ec.message());
  return size;
}

// "60000x28x28"
std::string dims_text(const std::vector<int64_t>& dims) {
  return fmt::format("{}", fmt::join(dims, "x"));
}

// Finds `stem` or `stem`.gz in `dir`, raw first (see open_idx_dataset).
std::string find_idx_file(const std::string& dir, const std::string& stem, std::string_view what) {
  const std::string raw = (fs::path(dir) / stem).string();
  const std::string gz = raw + ".gz";
  std::error_code ec;
  if (fs::exists(raw, ec)) return raw;
  if (fs::exists(gz, ec)) return gz;
  throw_usage_error(
      fmt::format("idx: no {} file in '{}': looked for {} and {}.gz", what, dir, stem, stem));
}

class IdxDataset final : public Dataset {
 public:
  IdxDataset(std::string dir, Split split, IdxArray images, IdxArray labels)
      : dir_(std::move(dir)),
        split_(split),
        count_(images.dims[0]),
        height_(images.dims[1]),
        width_(images.dims[2]),
        pixels_(std::move(images.data)),
        labels_(std::move(labels.data)) {}

  std::string describe() const override {
    return fmt::format("idx {} ({} samples, {}x{}x1, {})", to_string(split_), count_, height_,
                       width_, dir_);
  }
  int64_t size() const override { return count_; }
  Shape sample_shape() const override { return Shape{height_, width_, 1}; }
  LabelSpec labels() const override { return LabelSpec{LabelFormat::kClassIndex, kClasses, 1}; }

  void read(int64_t index, float* input, float* label) const override {
    SS_CHECK(index >= 0 && index < count_, "{}: sample index {} out of range [0, {})", describe(),
             index, count_);
    const int64_t features = height_ * width_;
    const uint8_t* p = pixels_.data() + index * features;
    for (int64_t j = 0; j < features; ++j) input[j] = static_cast<float>(p[j]) / 255.0f;
    label[0] = static_cast<float>(labels_[static_cast<size_t>(index)]);
  }

 private:
  std::string dir_;
  Split split_;
  int64_t count_;
  int64_t height_;
  int64_t width_;
  std::vector<uint8_t> pixels_;  // count × height × width; 47 MB for Fashion-MNIST's train
  std::vector<uint8_t> labels_;
};

}  // namespace

IdxArray read_idx_ubyte(const std::string& path, int rank) {
  SS_CHECK(rank >= 1 && rank <= 255, "idx: rank {} is not an IDX rank", rank);
  const uint64_t file_bytes = regular_file_size(path);
  ByteSource source(path, fmt::format("idx file '{}'", path));
  const bool gzip = source.gzip();
  const char* const in_what = gzip ? " (after gzip decompression)" : "";
  // A name is only a hint; say so when it disagrees with the content.
  const char* const name_hint = !gzip && path.ends_with(".gz")
                                    ? " (the file is not gzip-compressed despite its name, so "
                                      "it was read as raw IDX)"
                                    : "";

  const auto header_bytes = static_cast<size_t>(4 + 4 * rank);
  std::vector<uint8_t> header(header_bytes);
  const size_t got_header = source.read(reinterpret_cast<char*>(header.data()), header_bytes);
  SS_CHECK_INPUT(got_header >= 4,
                 "idx file '{}': truncated: {} bytes{}, too short for an IDX magic{}", path,
                 got_header, in_what, name_hint);
  const uint32_t magic = big_endian(header.data());
  const uint32_t expected_magic = 0x800u + static_cast<uint32_t>(rank);
  SS_CHECK_INPUT(
      magic == expected_magic,
      "idx file '{}': wrong magic number {:#010x}, expected {:#010x} (unsigned bytes, {} "
      "dimensions){}",
      path, magic, expected_magic, rank, name_hint);
  SS_CHECK_INPUT(got_header == header_bytes,
                 "idx file '{}': truncated: {} bytes{}, its header alone needs {}", path,
                 got_header, in_what, header_bytes);

  IdxArray array;
  int64_t payload = 1;
  for (int d = 0; d < rank; ++d) {
    array.dims.push_back(big_endian(header.data() + 4 + 4 * d));
  }
  for (const int64_t dim : array.dims) {
    SS_CHECK_INPUT(dim > 0, "idx file '{}': dims {} have a zero dimension", path,
                   dims_text(array.dims));
    // payload <= 2^31 and dim < 2^32 before the product: no overflow.
    payload *= dim;
    SS_CHECK_INPUT(payload <= kMaxIdxBytes, "idx file '{}': dims {} exceed the {} byte limit", path,
                   dims_text(array.dims), kMaxIdxBytes);
  }
  const auto expected_bytes = static_cast<uint64_t>(payload) + header_bytes;
  if (!gzip) {
    // The size is known up front: refuse before allocating anything.
    SS_CHECK_INPUT(file_bytes >= expected_bytes,
                   "idx file '{}': truncated: dims {} need {} bytes, the file has {}", path,
                   dims_text(array.dims), expected_bytes, file_bytes);
    SS_CHECK_INPUT(file_bytes == expected_bytes,
                   "idx file '{}': {} trailing bytes after the {} bytes that dims {} describe",
                   path, file_bytes - expected_bytes, expected_bytes, dims_text(array.dims));
  }

  // Grows with the bytes that actually arrive: a lying gzip header costs at most 64 MiB.
  array.data.reserve(gzip ? std::min<size_t>(static_cast<size_t>(payload), kReadChunk * 4)
                          : static_cast<size_t>(payload));
  size_t total = 0;
  while (total < static_cast<size_t>(payload)) {
    const size_t want = std::min(kReadChunk, static_cast<size_t>(payload) - total);
    array.data.resize(total + want);
    const size_t got = source.read(reinterpret_cast<char*>(array.data.data() + total), want);
    total += got;
    if (got < want) break;
  }
  SS_CHECK_INPUT(total == static_cast<size_t>(payload),
                 "idx file '{}': truncated: dims {} need {} bytes of data{}, found {}", path,
                 dims_text(array.dims), payload, in_what, total);
  // Reading past the end also makes zlib verify the gzip trailer (CRC and length).
  char extra = 0;
  SS_CHECK_INPUT(source.read(&extra, 1) == 0,
                 "idx file '{}': trailing bytes{} after the {} bytes of data that dims {} describe",
                 path, in_what, payload, dims_text(array.dims));
  return array;
}

std::unique_ptr<Dataset> open_idx_dataset(const std::string& dir, Split split) {
  std::error_code ec;
  SS_CHECK_INPUT(fs::exists(dir, ec), "idx: data directory '{}' does not exist", dir);
  SS_CHECK_INPUT(fs::is_directory(dir, ec), "idx: data directory '{}' is not a directory", dir);
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_path =
      find_idx_file(dir, prefix + "-images-idx3-ubyte", fmt::format("{} images", to_string(split)));
  const std::string labels_path =
      find_idx_file(dir, prefix + "-labels-idx1-ubyte", fmt::format("{} labels", to_string(split)));

  IdxArray images = read_idx_ubyte(images_path, 3);
  IdxArray labels = read_idx_ubyte(labels_path, 1);
  SS_CHECK_INPUT(images.dims[0] == labels.dims[0],
                 "idx: '{}' holds {} images but '{}' holds {} labels", images_path, images.dims[0],
                 labels_path, labels.dims[0]);
  for (size_t i = 0; i < labels.data.size(); ++i) {
    SS_CHECK_INPUT(labels.data[i] < kClasses,
                   "idx file '{}': label out of range: sample {} has label {}, expected 0..{}",
                   labels_path, i, labels.data[i], kClasses - 1);
  }
  return std::make_unique<IdxDataset>(dir, split, std::move(images), std::move(labels));
}

}  // namespace scalescope
