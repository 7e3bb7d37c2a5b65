#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

#include "core/check.h"
#include "core/spelling.h"
#include "pipelines/cifar10.h"
#include "pipelines/dataset.h"
#include "pipelines/idx.h"

namespace scalescope {
namespace {

constexpr std::string_view kAcceptedForms =
    "accepted: synthetic, synthetic:device, idx:DIR (MNIST-format IDX files), cifar10:DIR "
    "(CIFAR-10 binary files), text:FILE (a file's bytes as tokens)";

// What an unknown kind most likely meant: a dataset that idx reads, named as itself, or a kind
// a slip away.
std::string kind_meant(std::string_view kind) {
  std::string lower(kind);
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.ends_with("mnist")) {
    return " (MNIST and Fashion-MNIST are IDX files, read as idx:DIR: Debian's "
           "dataset-fashion-mnist is idx:/usr/share/datasets/fashion-mnist)";
  }
  if (lower.starts_with("cifar")) return " (did you mean cifar10:DIR?)";
  return did_you_mean(kind, {"synthetic", "idx", "cifar10", "text"});
}

}  // namespace

DataSpec parse_data_spec(std::string_view text) {
  DataSpec spec;
  spec.text = std::string(text);
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  const bool has_argument = colon != std::string_view::npos;
  const std::string_view argument = has_argument ? text.substr(colon + 1) : std::string_view();

  if (kind == "synthetic") {
    if (!has_argument) {
      spec.kind = DataSpec::Kind::kSynthetic;
      return spec;
    }
    SS_CHECK_INPUT(argument == "device",
                   "data source '{}': synthetic takes no argument or 'device', not '{}'; {}", text,
                   argument, kAcceptedForms);
    spec.kind = DataSpec::Kind::kSyntheticDevice;
    return spec;
  }
  if (kind == "idx" || kind == "cifar10") {
    SS_CHECK_INPUT(!argument.empty(), "data source '{}': {} needs a directory, as in {}:DIR; {}",
                   text, kind, kind, kAcceptedForms);
    spec.kind = kind == "idx" ? DataSpec::Kind::kIdx : DataSpec::Kind::kCifar10;
    spec.path = std::string(argument);
    return spec;
  }
  if (kind == "text") {
    SS_CHECK_INPUT(!argument.empty(), "data source '{}': text needs a file, as in text:FILE; {}",
                   text, kAcceptedForms);
    spec.kind = DataSpec::Kind::kText;
    spec.path = std::string(argument);
    return spec;
  }
  throw_usage_error(fmt::format("data source '{}': unknown kind '{}'{}; {}", text, kind,
                                kind_meant(kind), kAcceptedForms));
}

std::unique_ptr<Dataset> open_dataset(const DataSpec& spec, Split split) {
  switch (spec.kind) {
    case DataSpec::Kind::kIdx:
      return open_idx_dataset(spec.path, split);
    case DataSpec::Kind::kCifar10:
      return open_cifar10_dataset(spec.path, split);
    case DataSpec::Kind::kText:
      throw_usage_error(fmt::format(
          "data source '{}' is text, read as tokens of a sequence model's shape: open it with "
          "open_text_dataset()",
          spec.text));
    case DataSpec::Kind::kSynthetic:
    case DataSpec::Kind::kSyntheticDevice:
      break;
  }
  throw_usage_error(fmt::format(
      "data source '{}' is generated, not opened from files: make it with "
      "make_synthetic_dataset(), which takes the sample shape and labels of the model it feeds",
      spec.text));
}

}  // namespace scalescope
