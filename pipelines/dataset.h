// Datasets: indexed collections of labelled samples, read concurrently by pipeline workers.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"
#include "pipelines/batch.h"

namespace scalescope {

enum class Split { kTrain, kEval };
const char* to_string(Split split);

class Dataset {
 public:
  virtual ~Dataset() = default;
  // "idx train (60000 samples, 28x28x1, /usr/share/datasets/fashion-mnist)"
  virtual std::string describe() const = 0;
  virtual int64_t size() const = 0;
  // One sample, channels last for images ([28, 28, 1], [32, 32, 3], [8000]).
  virtual Shape sample_shape() const = 0;
  virtual LabelSpec labels() const = 0;
  // Writes sample `index` as floats (pixels scaled to [0, 1]) into `input` (sample_shape()
  // values) and its label into `label` (labels().width() values).
  // REQUIRES: 0 <= index < size(). Thread-safe: workers call it concurrently.
  virtual void read(int64_t index, float* input, float* label) const = 0;
  // Per-channel mean and (population) standard deviation of the inputs as read() returns
  // them, over the whole split, for normalisation. Channels are the last dimension of an
  // image [H, W, C]; any other sample is one channel. Computed once, when first asked, by a
  // scan of the split; thread-safe.
  void channel_stats(std::vector<float>& mean, std::vector<float>& stddev) const;

 private:
  void compute_channel_stats() const;

  mutable std::once_flag stats_once_;
  mutable std::vector<float> mean_;
  mutable std::vector<float> stddev_;
};

// A data source as the command line names it:
//   synthetic            generated on the host for every batch (costs input time)
//   synthetic:device     generated once and reused from device memory (no input cost)
//   idx:DIR              MNIST-format IDX files (raw or .gz): DIR/{train,t10k}-{images-idx3,
//                        labels-idx1}-ubyte[.gz], as Debian's dataset-fashion-mnist installs
//   cifar10:DIR          CIFAR-10 binary: DIR/data_batch_{1..5}.bin and DIR/test_batch.bin
//   text:FILE            a file's bytes as tokens, for sequence models (pipelines/tokens.h)
struct DataSpec {
  enum class Kind { kSynthetic, kSyntheticDevice, kIdx, kCifar10, kText };
  Kind kind = Kind::kSynthetic;
  std::string path;  // for idx, cifar10 and text
  std::string text;  // as given
};

// Throws Error naming the text and listing the accepted forms.
DataSpec parse_data_spec(std::string_view text);

// Opens `split` of a file-backed source of images or features (idx, cifar10): reads and
// checks every file now, so a bad file is an error naming it before training starts. Text is
// opened for a sequence model's shape by open_text_dataset (pipelines/tokens.h).
std::unique_ptr<Dataset> open_dataset(const DataSpec& spec, Split split);

// A synthetic dataset of `size` samples with learnable labels (each class a fixed random
// template plus uniform noise), generated on read() from (seed, index): the same sample for
// the same index whatever reads it.
std::unique_ptr<Dataset> make_synthetic_dataset(Shape sample_shape, LabelSpec labels, int64_t size,
                                                uint64_t seed, float noise = 1.0f);

}  // namespace scalescope
