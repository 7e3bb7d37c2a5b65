// Internal to pipelines: the CIFAR-10 binary format (www.cs.toronto.edu/~kriz/cifar.html).
// The public way in is open_dataset() with a cifar10:DIR spec.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pipelines/dataset.h"

namespace scalescope {

// One record: a label byte, then a 32×32 image channel-planar (1024 R, 1024 G, 1024 B bytes,
// each plane row-major).
inline constexpr int64_t kCifarSide = 32;
inline constexpr int64_t kCifarPixels = kCifarSide * kCifarSide * 3;
inline constexpr int64_t kCifarRecord = 1 + kCifarPixels;

// The `split` of a CIFAR-10 binary directory: data_batch_1.bin … data_batch_5.bin for train,
// test_batch.bin for eval. Every file must hold whole records (any number of them) with
// labels below 10. Samples are [32, 32, 3] channels last. Reads and checks everything now;
// throws Error naming the file and the problem.
std::unique_ptr<Dataset> open_cifar10_dataset(const std::string& dir, Split split);

}  // namespace scalescope
