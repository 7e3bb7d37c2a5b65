#include "tests/fuzz/fuzz_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace scalescope::fuzz {
namespace {

namespace fs = std::filesystem;

// Removed when the fuzzer exits normally; a crash leaves it in the system temp directory.
struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() / ("scalescope-fuzz-" + std::to_string(getpid()))).string();
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

}  // namespace

const std::string& temp_dir() {
  static const TempDir dir;
  return dir.path;
}

std::string write_temp(const std::string& name, std::string_view bytes) {
  // A plain write: write_file_atomic's fsync would cost more than most inputs' parsing.
  const std::string path = (fs::path(temp_dir()) / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) __builtin_trap();
  return path;
}

std::pair<std::string_view, std::string_view> split_two(std::string_view input) {
  constexpr std::string_view kSeparator = "\n--\n";
  const size_t at = input.find(kSeparator);
  if (at == std::string_view::npos) return {input, input};
  return {input.substr(0, at), input.substr(at + kSeparator.size())};
}

ModelDef tiny_model() {
  ModelDef def;
  def.name = "fuzz-dense-4";
  def.layers = {DenseSpec{4}};
  def.default_input = Shape{kTinyInputs};
  return def;
}

}  // namespace scalescope::fuzz
