#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "pipelines/dataset.h"
#include "tests/test_util.h"

namespace scalescope {
namespace {

namespace fs = std::filesystem;
using testing_util::error_of;
using Bytes = std::vector<uint8_t>;

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

// A fresh directory under the test temp dir, one per test, emptied first.
std::string fresh_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(::testing::TempDir()) /
                       (std::string("scalescope_datasets_") + info->test_suite_name() + "_" +
                        info->name() + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

void write_raw(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void put_be32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

Bytes idx_file(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes out;
  put_be32(out, magic);
  for (uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

// A small MNIST-like split: `n` images of h×w whose pixels cover 0 and 255, and labels.
struct SmallIdx {
  uint32_t n = 3, h = 2, w = 4;
  Bytes pixels;
  Bytes labels;
  SmallIdx() {
    for (uint32_t i = 0; i < n * h * w; ++i) pixels.push_back(static_cast<uint8_t>((i * 37) % 256));
    pixels[5] = 255;
    pixels[6] = 0;
    labels = {7, 0, 9};
  }
  Bytes images_file() const { return idx_file(0x803, {n, h, w}, pixels); }
  Bytes labels_file() const { return idx_file(0x801, {n}, labels); }
};

void write_small_idx(const std::string& dir, const std::string& prefix, bool gzip) {
  const SmallIdx s;
  const std::string ext = gzip ? ".gz" : "";
  auto write = gzip ? write_gz : write_raw;
  write(join(dir, prefix + "-images-idx3-ubyte" + ext), s.images_file());
  write(join(dir, prefix + "-labels-idx1-ubyte" + ext), s.labels_file());
}

std::unique_ptr<Dataset> open_idx(const std::string& dir, Split split = Split::kTrain) {
  return open_dataset(parse_data_spec("idx:" + dir), split);
}
std::unique_ptr<Dataset> open_cifar(const std::string& dir, Split split = Split::kTrain) {
  return open_dataset(parse_data_spec("cifar10:" + dir), split);
}

// Every pixel and label of `ds` equals SmallIdx's bytes / 255.
void expect_small_idx(const Dataset& ds) {
  const SmallIdx s;
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.sample_shape(), (Shape{2, 4, 1}));
  EXPECT_EQ(ds.labels().format, LabelFormat::kClassIndex);
  EXPECT_EQ(ds.labels().classes, 10);
  std::vector<float> x(8);
  float y = -1.0f;
  for (int i = 0; i < 3; ++i) {
    ds.read(i, x.data(), &y);
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(x[static_cast<size_t>(j)], s.pixels[static_cast<size_t>(i * 8 + j)] / 255.0f)
          << "sample " << i << " pixel " << j;
    }
    EXPECT_EQ(y, static_cast<float>(s.labels[static_cast<size_t>(i)]));
  }
  ds.read(0, x.data(), &y);
  EXPECT_EQ(x[5], 1.0f);
  EXPECT_EQ(x[6], 0.0f);
}

TEST(IdxDataset, ReadsRawFilesExactly) {
  const std::string dir = fresh_dir();
  write_small_idx(dir, "train", false);
  const auto ds = open_idx(dir, Split::kTrain);
  expect_small_idx(*ds);
  EXPECT_EQ(ds->describe(), "idx train (3 samples, 2x4x1, " + dir + ")");
  std::vector<float> x(8);
  float y = 0.0f;
  EXPECT_THROW(ds->read(3, x.data(), &y), Error);
  EXPECT_THROW(ds->read(-1, x.data(), &y), Error);
}

TEST(IdxDataset, ReadsGzipFilesExactly) {
  const std::string dir = fresh_dir();
  write_small_idx(dir, "t10k", true);
  const auto ds = open_idx(dir, Split::kEval);
  expect_small_idx(*ds);
  EXPECT_EQ(ds->describe(), "idx eval (3 samples, 2x4x1, " + dir + ")");
  // The train split is not there: the error names the files it looked for.
  const std::string e = error_of([&] { open_idx(dir, Split::kTrain); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte.gz");
  EXPECT_CONTAINS(e, "looked for");
}

TEST(IdxDataset, DetectsGzipByContentNotName) {
  const std::string dir = fresh_dir();
  const SmallIdx s;
  write_gz(join(dir, "train-images-idx3-ubyte"), s.images_file());      // gzip, raw name
  write_raw(join(dir, "train-labels-idx1-ubyte.gz"), s.labels_file());  // raw, .gz name
  expect_small_idx(*open_idx(dir));
}

TEST(IdxDataset, PrefersTheRawFileWhenBothExist) {
  const std::string dir = fresh_dir();
  write_small_idx(dir, "train", false);
  // Garbage under the .gz names would fail if read.
  write_raw(join(dir, "train-images-idx3-ubyte.gz"), Bytes{1, 2, 3});
  write_raw(join(dir, "train-labels-idx1-ubyte.gz"), Bytes{1, 2, 3});
  expect_small_idx(*open_idx(dir));
}

TEST(IdxDataset, ChannelStatsMatchADirectComputation) {
  const std::string dir = fresh_dir();
  write_small_idx(dir, "train", false);
  const auto ds = open_idx(dir);
  const SmallIdx s;
  double sum = 0.0, sq = 0.0;
  for (uint8_t p : s.pixels) sum += p / 255.0;
  const double mean = sum / static_cast<double>(s.pixels.size());
  for (uint8_t p : s.pixels) sq += (p / 255.0 - mean) * (p / 255.0 - mean);
  const double stddev = std::sqrt(sq / static_cast<double>(s.pixels.size()));  // population
  std::vector<float> m, sd;
  ds->channel_stats(m, sd);
  ASSERT_EQ(m.size(), 1u);
  ASSERT_EQ(sd.size(), 1u);
  EXPECT_NEAR(m[0], mean, 1e-6);
  EXPECT_NEAR(sd[0], stddev, 1e-6);
  // Cached and thread-safe: concurrent callers see the same values.
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> means(4), stddevs(4);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { ds->channel_stats(means[t], stddevs[t]); });
  }
  for (auto& t : threads) t.join();
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_EQ(means[t], m);
    EXPECT_EQ(stddevs[t], sd);
  }
}

// ---- bad IDX input: each error names the file and the problem ----

TEST(IdxDataset, MissingDirectoryOrFiles) {
  const std::string dir = fresh_dir();
  const std::string missing = join(dir, "nowhere");
  std::string e = error_of([&] { open_idx(missing); });
  EXPECT_CONTAINS(e, missing);
  EXPECT_CONTAINS(e, "does not exist");

  write_raw(join(dir, "plain-file"), Bytes{1});
  e = error_of([&] { open_idx(join(dir, "plain-file")); });
  EXPECT_CONTAINS(e, "not a directory");

  const SmallIdx s;
  write_raw(join(dir, "train-images-idx3-ubyte"), s.images_file());
  e = error_of([&] { open_idx(dir); });
  EXPECT_CONTAINS(e, "train-labels-idx1-ubyte");
  EXPECT_CONTAINS(e, "train-labels-idx1-ubyte.gz");
  EXPECT_CONTAINS(e, "looked for");
}

// Writes a train split whose images file has `images` as content.
std::string dir_with_images(const Bytes& images, bool gzip = false) {
  const std::string dir = fresh_dir();
  const SmallIdx s;
  if (gzip) {
    write_gz(join(dir, "train-images-idx3-ubyte.gz"), images);
  } else {
    write_raw(join(dir, "train-images-idx3-ubyte"), images);
  }
  write_raw(join(dir, "train-labels-idx1-ubyte"), s.labels_file());
  return dir;
}

TEST(IdxDataset, WrongMagicNumber) {
  const SmallIdx s;
  const std::string dir = dir_with_images(idx_file(0x801, {s.n}, s.labels));  // labels as images
  const std::string e = error_of([&] { open_idx(dir); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "wrong magic number 0x00000801");
  EXPECT_CONTAINS(e, "expected 0x00000803");
}

TEST(IdxDataset, RawFileWithAGzipNameAndWrongContentSaysSo) {
  const std::string dir = fresh_dir();
  const SmallIdx s;
  write_raw(join(dir, "train-images-idx3-ubyte.gz"), Bytes{'h', 'e', 'l', 'l', 'o', '!', '!'});
  write_raw(join(dir, "train-labels-idx1-ubyte"), s.labels_file());
  const std::string e = error_of([&] { open_idx(dir); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte.gz");
  EXPECT_CONTAINS(e, "wrong magic number");
  EXPECT_CONTAINS(e, "not gzip-compressed");
}

TEST(IdxDataset, TruncatedOrOverlongRawFile) {
  const SmallIdx s;
  Bytes short_file = s.images_file();
  short_file.pop_back();
  std::string e = error_of([&] { open_idx(dir_with_images(short_file)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "truncated");
  EXPECT_CONTAINS(e, "need 40 bytes, the file has 39");

  e = error_of([&] { open_idx(dir_with_images(Bytes{})); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "truncated");

  e = error_of([&] { open_idx(dir_with_images(Bytes{0, 0, 8, 3, 0, 0})); });  // header cut
  EXPECT_CONTAINS(e, "truncated");
  EXPECT_CONTAINS(e, "header");

  Bytes long_file = s.images_file();
  long_file.push_back(0);
  e = error_of([&] { open_idx(dir_with_images(long_file)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "1 trailing bytes");
}

TEST(IdxDataset, TruncatedOrOverlongGzipPayload) {
  const SmallIdx s;
  Bytes short_file = s.images_file();
  short_file.pop_back();
  std::string e = error_of([&] { open_idx(dir_with_images(short_file, true)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte.gz");
  EXPECT_CONTAINS(e, "truncated");
  EXPECT_CONTAINS(e, "need 24 bytes of data (after gzip decompression), found 23");

  Bytes long_file = s.images_file();
  long_file.push_back(0);
  e = error_of([&] { open_idx(dir_with_images(long_file, true)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte.gz");
  EXPECT_CONTAINS(e, "trailing bytes");
}

TEST(IdxDataset, TruncatedOrCorruptGzipStream) {
  const std::string dir = fresh_dir();
  const std::string gz = join(dir, "scratch.gz");
  const SmallIdx s;
  write_gz(gz, s.images_file());
  const Bytes good = read_raw(gz);
  ASSERT_GT(good.size(), 20u);

  const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2));
  std::string e = error_of([&] { open_idx(dir_with_images(cut)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "the gzip stream is cut short");

  Bytes bad_crc = good;
  bad_crc[bad_crc.size() - 8] ^= 0xff;  // the CRC-32 of the trailer
  e = error_of([&] { open_idx(dir_with_images(bad_crc)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "the gzip stream is corrupt");

  Bytes bad_method = good;
  bad_method[2] = 7;  // gzip magic, but not deflate
  e = error_of([&] { open_idx(dir_with_images(bad_method)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "the gzip stream is corrupt");
}

TEST(IdxDataset, HugeHeaderIsRefusedBeforeAllocating) {
  // 100000 × 100000 × 100000 bytes: refused by the cap, not by a failed allocation.
  const Bytes huge = idx_file(0x803, {100000, 100000, 100000}, Bytes(16, 0));
  std::string e = error_of([&] { open_idx(dir_with_images(huge, true)); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte.gz");
  EXPECT_CONTAINS(e, "limit");
  // Under the cap but far beyond the data: gzip finds out by reading, raw by the file size.
  const Bytes big = idx_file(0x803, {2000, 1000, 1000}, Bytes(16, 0));
  e = error_of([&] { open_idx(dir_with_images(big, true)); });
  EXPECT_CONTAINS(e, "truncated");
  e = error_of([&] { open_idx(dir_with_images(big)); });
  EXPECT_CONTAINS(e, "truncated");
}

TEST(IdxDataset, ZeroDimension) {
  const std::string dir = dir_with_images(idx_file(0x803, {3, 0, 4}, Bytes{}));
  const std::string e = error_of([&] { open_idx(dir); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "zero dimension");
  EXPECT_CONTAINS(e, "3x0x4");
}

TEST(IdxDataset, ImagesAndLabelsCountsDiffer) {
  const std::string dir = fresh_dir();
  const SmallIdx s;
  write_raw(join(dir, "train-images-idx3-ubyte"), s.images_file());
  write_raw(join(dir, "train-labels-idx1-ubyte"), idx_file(0x801, {2}, Bytes{1, 2}));
  const std::string e = error_of([&] { open_idx(dir); });
  EXPECT_CONTAINS(e, "train-images-idx3-ubyte");
  EXPECT_CONTAINS(e, "train-labels-idx1-ubyte");
  EXPECT_CONTAINS(e, "3 images");
  EXPECT_CONTAINS(e, "2 labels");
}

TEST(IdxDataset, LabelOutOfRange) {
  const std::string dir = fresh_dir();
  const SmallIdx s;
  write_raw(join(dir, "train-images-idx3-ubyte"), s.images_file());
  write_gz(join(dir, "train-labels-idx1-ubyte.gz"), idx_file(0x801, {3}, Bytes{1, 10, 2}));
  const std::string e = error_of([&] { open_idx(dir); });
  EXPECT_CONTAINS(e, "train-labels-idx1-ubyte.gz");
  EXPECT_CONTAINS(e, "label out of range");
  EXPECT_CONTAINS(e, "sample 1 has label 10");
}

// ---- CIFAR-10 ----

// Pixel (record r, channel c, row h, column w) of the test files.
uint8_t cifar_pixel(int r, int c, int h, int w) {
  return static_cast<uint8_t>((r * 13 + c * 101 + h * 7 + w * 3) % 256);
}

// `records` records numbered from `first`, with labels (first + i) % 10.
Bytes cifar_file(int first, int records) {
  Bytes out;
  for (int r = first; r < first + records; ++r) {
    out.push_back(static_cast<uint8_t>(r % 10));
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 32; ++h) {
        for (int w = 0; w < 32; ++w) out.push_back(cifar_pixel(r, c, h, w));
      }
    }
  }
  return out;
}

// Train files of 1, 2, 1, 1, 1 records (6 in all) and a test file of 2.
std::string cifar_dir() {
  const std::string dir = fresh_dir();
  const std::array<int, 5> counts = {1, 2, 1, 1, 1};
  int first = 0;
  for (int f = 0; f < 5; ++f) {
    write_raw(join(dir, "data_batch_" + std::to_string(f + 1) + ".bin"),
              cifar_file(first, counts[static_cast<size_t>(f)]));
    first += counts[static_cast<size_t>(f)];
  }
  write_raw(join(dir, "test_batch.bin"), cifar_file(100, 2));
  return dir;
}

TEST(Cifar10Dataset, ReadsPlanarRecordsAsChannelsLast) {
  const std::string dir = cifar_dir();
  const auto train = open_cifar(dir, Split::kTrain);
  ASSERT_EQ(train->size(), 6);
  EXPECT_EQ(train->sample_shape(), (Shape{32, 32, 3}));
  EXPECT_EQ(train->labels().classes, 10);
  EXPECT_EQ(train->describe(), "cifar10 train (6 samples, 32x32x3, " + dir + ")");
  std::vector<float> x(32 * 32 * 3);
  float y = -1.0f;
  const auto at = [&](int h, int w, int c) { return x[static_cast<size_t>((h * 32 + w) * 3 + c)]; };
  for (int r = 0; r < 6; ++r) {  // records in file order across the five files
    train->read(r, x.data(), &y);
    EXPECT_EQ(y, static_cast<float>(r % 10));
    for (int h = 0; h < 32; ++h) {
      for (int w = 0; w < 32; ++w) {
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(at(h, w, c), cifar_pixel(r, c, h, w) / 255.0f)
              << "record " << r << " (h, w, c) = (" << h << ", " << w << ", " << c << ")";
        }
      }
    }
  }
  // Specific positions against the raw record bytes: byte 1 + c*1024 + h*32 + w.
  const Bytes file2 = read_raw(join(dir, "data_batch_2.bin"));  // records 1 and 2
  train->read(2, x.data(), &y);
  const auto raw = [&](int c, int h, int w) {
    return file2[static_cast<size_t>(3073 + 1 + c * 1024 + h * 32 + w)] / 255.0f;
  };
  EXPECT_EQ(at(0, 0, 0), raw(0, 0, 0));
  EXPECT_EQ(at(0, 0, 1), raw(1, 0, 0));
  EXPECT_EQ(at(0, 0, 2), raw(2, 0, 0));
  EXPECT_EQ(at(0, 1, 0), raw(0, 0, 1));
  EXPECT_EQ(at(1, 0, 0), raw(0, 1, 0));
  EXPECT_EQ(at(5, 17, 2), raw(2, 5, 17));
  EXPECT_EQ(at(31, 31, 2), raw(2, 31, 31));
  EXPECT_EQ(y, 2.0f);

  const auto eval = open_cifar(dir, Split::kEval);
  ASSERT_EQ(eval->size(), 2);
  eval->read(1, x.data(), &y);
  EXPECT_EQ(y, 1.0f);  // record 101
  EXPECT_EQ(at(3, 4, 1), cifar_pixel(101, 1, 3, 4) / 255.0f);
}

TEST(Cifar10Dataset, ChannelStatsPerChannel) {
  const auto ds = open_cifar(cifar_dir(), Split::kEval);
  std::vector<float> mean, stddev;
  ds->channel_stats(mean, stddev);
  ASSERT_EQ(mean.size(), 3u);
  ASSERT_EQ(stddev.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    double sum = 0.0, sq = 0.0;
    const double n = 2 * 32 * 32;
    for (int r = 100; r < 102; ++r) {
      for (int h = 0; h < 32; ++h) {
        for (int w = 0; w < 32; ++w) sum += cifar_pixel(r, c, h, w) / 255.0;
      }
    }
    const double m = sum / n;
    for (int r = 100; r < 102; ++r) {
      for (int h = 0; h < 32; ++h) {
        for (int w = 0; w < 32; ++w) {
          const double d = cifar_pixel(r, c, h, w) / 255.0 - m;
          sq += d * d;
        }
      }
    }
    EXPECT_NEAR(mean[static_cast<size_t>(c)], m, 1e-6) << "channel " << c;
    EXPECT_NEAR(stddev[static_cast<size_t>(c)], std::sqrt(sq / n), 1e-6) << "channel " << c;
  }
}

TEST(Cifar10Dataset, BadInputs) {
  std::string dir = fresh_dir();
  std::string e = error_of([&] { open_cifar(join(dir, "nowhere")); });
  EXPECT_CONTAINS(e, "nowhere");
  EXPECT_CONTAINS(e, "does not exist");

  dir = cifar_dir();
  fs::remove(join(dir, "data_batch_3.bin"));
  e = error_of([&] { open_cifar(dir); });
  EXPECT_CONTAINS(e, "data_batch_3.bin");
  EXPECT_CONTAINS(e, "missing");
  EXPECT_CONTAINS(e, "data_batch_1.bin, data_batch_2.bin");

  dir = cifar_dir();
  Bytes cut = cifar_file(0, 2);
  cut.resize(cut.size() - 100);
  write_raw(join(dir, "test_batch.bin"), cut);
  e = error_of([&] { open_cifar(dir, Split::kEval); });
  EXPECT_CONTAINS(e, "test_batch.bin");
  EXPECT_CONTAINS(e, "truncated");
  EXPECT_CONTAINS(e, "6046 bytes");

  write_raw(join(dir, "test_batch.bin"), Bytes{});
  e = error_of([&] { open_cifar(dir, Split::kEval); });
  EXPECT_CONTAINS(e, "test_batch.bin");
  EXPECT_CONTAINS(e, "empty");

  Bytes bad_label = cifar_file(0, 3);
  bad_label[2 * 3073] = 10;
  write_raw(join(dir, "data_batch_4.bin"), bad_label);
  e = error_of([&] { open_cifar(dir, Split::kTrain); });
  EXPECT_CONTAINS(e, "data_batch_4.bin");
  EXPECT_CONTAINS(e, "label out of range");
  EXPECT_CONTAINS(e, "record 2 has label 10");
}

// ---- the real Fashion-MNIST, where Debian's dataset-fashion-mnist is installed ----

TEST(FashionMnist, SizesLabelsAndPixelStatistics) {
  if (!fs::exists(kFashionMnist)) GTEST_SKIP() << kFashionMnist << " is not installed";
  const auto start = std::chrono::steady_clock::now();
  const auto train = open_idx(kFashionMnist, Split::kTrain);
  const double open_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ info     ] opened " << train->describe() << " in " << open_s << " s\n";
  const auto eval = open_idx(kFashionMnist, Split::kEval);
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(eval->size(), 10000);
  EXPECT_EQ(train->sample_shape(), (Shape{28, 28, 1}));
  EXPECT_EQ(eval->sample_shape(), (Shape{28, 28, 1}));
  EXPECT_EQ(train->describe(),
            std::string("idx train (60000 samples, 28x28x1, ") + kFashionMnist + ")");

  std::map<int, int> histogram;
  std::vector<float> x(784);
  float y = 0.0f;
  double sum = 0.0, sq = 0.0;
  for (int64_t i = 0; i < train->size(); ++i) {
    train->read(i, x.data(), &y);
    ++histogram[static_cast<int>(y)];
    for (float v : x) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
  }
  ASSERT_EQ(histogram.size(), 10u);
  for (const auto& [label, count] : histogram) EXPECT_EQ(count, 6000) << "label " << label;
  const double n = 60000.0 * 784.0;
  const double mean = sum / n;
  const double stddev = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.286, 0.002);  // Fashion-MNIST's known mean pixel

  std::vector<float> m, sd;
  train->channel_stats(m, sd);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NEAR(m[0], mean, 1e-5);
  EXPECT_NEAR(sd[0], stddev, 1e-5);
  EXPECT_NEAR(sd[0], 0.353, 0.002);  // and its known standard deviation
}

}  // namespace
}  // namespace scalescope
