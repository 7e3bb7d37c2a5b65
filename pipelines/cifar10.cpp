#include "pipelines/cifar10.h"

#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <system_error>
#include <vector>

#include "core/check.h"

namespace scalescope {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kClasses = 10;
constexpr int64_t kPlane = kCifarSide * kCifarSide;

std::vector<std::string> split_files(Split split) {
  if (split == Split::kEval) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back(fmt::format("data_batch_{}.bin", i));
  return names;
}

class Cifar10Dataset final : public Dataset {
 public:
  Cifar10Dataset(std::string dir, Split split, std::vector<uint8_t> records)
      : dir_(std::move(dir)),
        split_(split),
        count_(static_cast<int64_t>(records.size()) / kCifarRecord),
        records_(std::move(records)) {}

  std::string describe() const override {
    return fmt::format("cifar10 {} ({} samples, {}x{}x3, {})", to_string(split_), count_,
                       kCifarSide, kCifarSide, dir_);
  }
  int64_t size() const override { return count_; }
  Shape sample_shape() const override { return Shape{kCifarSide, kCifarSide, 3}; }
  LabelSpec labels() const override { return LabelSpec{LabelFormat::kClassIndex, kClasses, 1}; }

  void read(int64_t index, float* input, float* label) const override {
    SS_CHECK(index >= 0 && index < count_, "{}: sample index {} out of range [0, {})", describe(),
             index, count_);
    const uint8_t* record = records_.data() + index * kCifarRecord;
    label[0] = static_cast<float>(record[0]);
    // Planar (c, h, w) on disk to channels last (h, w, c) in memory.
    const uint8_t* planes = record + 1;
    for (int64_t p = 0; p < kPlane; ++p) {
      for (int64_t c = 0; c < 3; ++c) {
        input[p * 3 + c] = static_cast<float>(planes[c * kPlane + p]) / 255.0f;
      }
    }
  }

 private:
  std::string dir_;
  Split split_;
  int64_t count_;
  // The files' records back to back, as stored (150 MB for the train split).
  std::vector<uint8_t> records_;
};

}  // namespace

std::unique_ptr<Dataset> open_cifar10_dataset(const std::string& dir, Split split) {
  std::error_code ec;
  SS_CHECK_INPUT(fs::exists(dir, ec), "cifar10: data directory '{}' does not exist", dir);
  SS_CHECK_INPUT(fs::is_directory(dir, ec), "cifar10: data directory '{}' is not a directory", dir);
  const std::vector<std::string> names = split_files(split);

  // Every size is checked before anything is read, so the buffer is sized by real files.
  std::vector<std::string> paths;
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  for (const std::string& name : names) {
    const std::string path = (fs::path(dir) / name).string();
    const fs::file_status status = fs::status(path, ec);
    SS_CHECK_INPUT(fs::exists(status), "cifar10: missing file '{}' (the {} split needs {} in '{}')",
                   path, to_string(split), fmt::join(names, ", "), dir);
    SS_CHECK_INPUT(fs::is_regular_file(status), "cifar10 file '{}': not a regular file", path);
    const uint64_t bytes = fs::file_size(path, ec);
    SS_CHECK_INPUT(!ec, "cifar10 file '{}': cannot read its size: {}", path, ec.message());
    SS_CHECK_INPUT(bytes > 0, "cifar10 file '{}': empty (0 bytes)", path);
    SS_CHECK_INPUT(
        bytes % kCifarRecord == 0,
        "cifar10 file '{}': truncated: {} bytes is not a whole number of {}-byte records "
        "(its last record has only {} bytes)",
        path, bytes, kCifarRecord, bytes % kCifarRecord);
    paths.push_back(path);
    sizes.push_back(bytes);
    total += bytes;
  }

  std::vector<uint8_t> records(static_cast<size_t>(total));
  uint64_t offset = 0;
  for (size_t f = 0; f < paths.size(); ++f) {
    std::ifstream in(paths[f], std::ios::binary);
    SS_CHECK_INPUT(in.is_open(), "cifar10 file '{}': cannot open: {}", paths[f],
                   std::strerror(errno));
    in.read(reinterpret_cast<char*>(records.data() + offset),
            static_cast<std::streamsize>(sizes[f]));
    const auto got = static_cast<uint64_t>(in.gcount());
    SS_CHECK_INPUT(got == sizes[f], "cifar10 file '{}': truncated: expected {} bytes, read {}",
                   paths[f], sizes[f], got);
    for (uint64_t r = 0; r < sizes[f] / kCifarRecord; ++r) {
      const uint8_t label = records[offset + r * kCifarRecord];
      SS_CHECK_INPUT(
          label < kClasses,
          "cifar10 file '{}': label out of range: record {} has label {}, expected 0..{}", paths[f],
          r, label, kClasses - 1);
    }
    offset += sizes[f];
  }
  return std::make_unique<Cifar10Dataset>(dir, split, std::move(records));
}

}  // namespace scalescope
