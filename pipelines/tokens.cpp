#include "pipelines/tokens.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/check.h"
#include "core/random.h"

namespace scalescope {
namespace {

// Refuse files that could only be a mistake rather than read them into memory.
constexpr uint64_t kMaxTextBytes = uint64_t{1} << 32;

// What every token dataset shares: samples of `positions` token ids, labelled with the next
// token at each position.
class TokenSequences : public Dataset {
 public:
  explicit TokenSequences(TokenShape shape) : shape_(shape) {}
  Shape sample_shape() const override { return Shape{shape_.positions}; }
  LabelSpec labels() const override {
    return LabelSpec{LabelFormat::kClassIndex, shape_.vocab, shape_.positions};
  }

 protected:
  TokenShape shape_;
};

class TextDataset final : public TokenSequences {
 public:
  TextDataset(std::string path, Split split, TokenShape shape, std::vector<uint8_t> bytes,
              int64_t first, int64_t count)
      : TokenSequences(shape),
        path_(std::move(path)),
        split_(split),
        bytes_(std::move(bytes)),
        first_(first),
        count_(count) {}

  std::string describe() const override {
    return fmt::format("text {} ({} sequences of {} bytes, {})", to_string(split_), count_,
                       shape_.positions, path_);
  }
  int64_t size() const override { return count_; }

  void read(int64_t index, float* input, float* label) const override {
    SS_CHECK(index >= 0 && index < count_, "{}: sample index {} out of range [0, {})", describe(),
             index, count_);
    const uint8_t* window = bytes_.data() + (first_ + index) * shape_.positions;
    for (int64_t j = 0; j < shape_.positions; ++j) {
      input[j] = static_cast<float>(window[j]);
      label[j] = static_cast<float>(window[j + 1]);
    }
  }

 private:
  std::string path_;
  Split split_;
  std::vector<uint8_t> bytes_;
  int64_t first_;  // window index of sample 0
  int64_t count_;
};

std::vector<uint8_t> read_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  SS_CHECK_INPUT(fs::exists(status), "text file '{}' does not exist", path);
  SS_CHECK_INPUT(fs::is_regular_file(status), "text file '{}': not a regular file", path);
  const uint64_t size = fs::file_size(path, ec);
  SS_CHECK_INPUT(!ec, "text file '{}': cannot read its size: {}", path, ec.message());
  SS_CHECK_INPUT(size <= kMaxTextBytes,
                 "text file '{}': {} bytes, more than the {} read into memory", path, size,
                 kMaxTextBytes);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  std::ifstream in(path, std::ios::binary);
  SS_CHECK_INPUT(in.is_open(), "text file '{}': cannot open: {}", path, std::strerror(errno));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  SS_CHECK_INPUT(static_cast<uint64_t>(in.gcount()) == size,
                 "text file '{}': expected {} bytes, read {}", path, size, in.gcount());
  return bytes;
}

class SyntheticTokenDataset final : public TokenSequences {
 public:
  SyntheticTokenDataset(TokenShape shape, int64_t size, uint64_t seed)
      : TokenSequences(shape), size_(size), seed_(seed) {}

  std::string describe() const override {
    return fmt::format("synthetic tokens ({} sequences of {}, vocabulary {}, seed {})", size_,
                       shape_.positions, shape_.vocab, seed_);
  }
  int64_t size() const override { return size_; }

  void read(int64_t index, float* input, float* label) const override {
    SS_CHECK(index >= 0 && index < size_, "{}: sample index {} out of range [0, {})", describe(),
             index, size_);
    Rng rng(seed_, static_cast<uint64_t>(index));
    const auto vocab = static_cast<uint64_t>(shape_.vocab);
    const uint64_t stride = 1 + rng.below(8);
    uint64_t token = rng.below(vocab);
    for (int64_t j = 0; j <= shape_.positions; ++j) {
      if (j < shape_.positions) input[j] = static_cast<float>(token);
      if (j > 0) label[j - 1] = static_cast<float>(token);
      token = rng.below(10) == 0 ? rng.below(vocab) : (token + stride) % vocab;
    }
  }

 private:
  int64_t size_;
  uint64_t seed_;
};

void check_shape(const TokenShape& shape, const std::string& what) {
  SS_CHECK(shape.positions > 0 && shape.vocab >= 2,
           "{}: sequences need positive positions and a vocabulary of at least 2 tokens, not {} "
           "and {}",
           what, shape.positions, shape.vocab);
}

}  // namespace

std::unique_ptr<Dataset> open_text_dataset(const std::string& path, Split split, TokenShape shape) {
  check_shape(shape, fmt::format("text file '{}'", path));
  std::vector<uint8_t> bytes = read_text(path);
  const int64_t windows =
      bytes.empty() ? 0 : static_cast<int64_t>(bytes.size() - 1) / shape.positions;
  SS_CHECK_INPUT(
      windows >= 2,
      "text file '{}': {} bytes make {} sequence(s) of {} tokens and the next; at least 2 "
      "are needed (one to train on, one to evaluate)",
      path, bytes.size(), windows, shape.positions);
  const uint8_t top = *std::max_element(bytes.begin(), bytes.end());
  SS_CHECK_INPUT(
      top < shape.vocab,
      "text file '{}' holds byte {}, which a vocabulary of {} tokens does not (byte-level "
      "text needs vocab >= 256, or above its largest byte)",
      path, top, shape.vocab);
  const int64_t eval = std::max<int64_t>(1, windows / 10);
  const int64_t train = windows - eval;
  return split == Split::kTrain
             ? std::make_unique<TextDataset>(path, split, shape, std::move(bytes), 0, train)
             : std::make_unique<TextDataset>(path, split, shape, std::move(bytes), train, eval);
}

std::unique_ptr<Dataset> make_synthetic_token_dataset(TokenShape shape, int64_t size,
                                                      uint64_t seed) {
  check_shape(shape, "synthetic tokens");
  SS_CHECK(size > 0, "synthetic tokens need a positive number of samples, not {}", size);
  return std::make_unique<SyntheticTokenDataset>(shape, size, seed);
}

}  // namespace scalescope
