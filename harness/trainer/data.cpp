#include "harness/trainer/data.h"

#include "core/check.h"
#include "core/enum_names.h"
#include "harness/trainer/labels.h"
#include "pipelines/subset.h"
#include "pipelines/tokens.h"

namespace scalescope {
namespace {

// Synthetic data: 50,000 training and 10,000 evaluation samples (CIFAR-10's split), drawn
// from one generator so that both share the class templates.
constexpr int64_t kSyntheticTrain = 50000;
constexpr int64_t kSyntheticEval = 10000;

const char* format_name(LabelFormat f) {
  static constexpr auto kNames = enum_names<LabelFormat>("class-index", "one-hot", "binary");
  return kNames(f).data();
}

// The model must take the samples and the labels. Where its family takes classes=K, a
// mismatch names the spec that fits the data.
void check_model_takes(const ModelDef& model, const RunData& data) {
  Shape output;
  try {
    output = summarize(model, data.sample_shape).output;
  } catch (const Error& e) {
    throw_usage_error(fmt::format("model '{}' cannot take the samples of {} (shape {}): {}",
                                  model.name, data.train->describe(), data.sample_shape.to_string(),
                                  e.message()));
  }
  const LabelSpec wanted = label_spec_for(model.loss, output);
  const LabelSpec have = data.train->labels();
  if (wanted.format == have.format && wanted.classes == have.classes) return;
  const std::string fix = wanted.format == have.format ? with_classes(model, have.classes) : "";
  throw_usage_error(fmt::format(
      "model '{}' ({} loss) needs {} labels over {} classes, but {} has {} labels over {} "
      "classes{}",
      model.name, to_string(model.loss), format_name(wanted.format), wanted.classes,
      data.train->describe(), format_name(have.format), have.classes,
      fix.empty() ? "" : fmt::format("; with classes={} it takes them: '{}'", have.classes, fix)));
}

}  // namespace

RunData open_run_data(const DataOptions& o, const ModelDef& model, uint64_t seed) {
  SS_CHECK_INPUT(o.workers >= 1 && o.workers <= 256, "workers {} must be between 1 and 256",
                 o.workers);
  SS_CHECK_INPUT(o.queue_depth >= 1 && o.queue_depth <= 1024,
                 "queue_depth {} must be between 1 and 1024", o.queue_depth);
  SS_CHECK_INPUT(o.crop_padding >= 0, "crop_padding {} must not be negative", o.crop_padding);
  SS_CHECK_INPUT(o.decode_cost_us >= 0, "decode_cost_us {} must not be negative", o.decode_cost_us);
  SS_CHECK_INPUT(o.train_samples >= 0, "train_samples {} must not be negative", o.train_samples);
  RunData data;
  data.spec = parse_data_spec(o.spec);
  const bool synthetic = data.spec.kind == DataSpec::Kind::kSynthetic ||
                         data.spec.kind == DataSpec::Kind::kSyntheticDevice;
  const int64_t vocab = input_vocab(model);
  const TokenShape tokens{vocab > 0 ? model.default_input[0] : 0, vocab};
  if (synthetic) {
    data.sample_shape = model.default_input;
    const Shape output = summarize(model, data.sample_shape).output;
    const int64_t size = kSyntheticTrain + kSyntheticEval;
    std::shared_ptr<const Dataset> all =
        vocab > 0 ? make_synthetic_token_dataset(tokens, size, seed)
                  : make_synthetic_dataset(data.sample_shape, label_spec_for(model.loss, output),
                                           size, seed);
    data.train = std::make_shared<SubsetDataset>(all, 0, kSyntheticTrain, "synthetic train");
    data.eval =
        std::make_shared<SubsetDataset>(all, kSyntheticTrain, kSyntheticEval, "synthetic eval");
    data.device_resident = data.spec.kind == DataSpec::Kind::kSyntheticDevice;
  } else if (data.spec.kind == DataSpec::Kind::kText) {
    SS_CHECK_INPUT(vocab > 0,
                   "data source '{}' is text, read as byte tokens, but model '{}' takes samples of "
                   "shape {}, not token ids (text is for sequence models such as gpt)",
                   data.spec.text, model.name, model.default_input.to_string());
    data.train = open_text_dataset(data.spec.path, Split::kTrain, tokens);
    data.eval = open_text_dataset(data.spec.path, Split::kEval, tokens);
    data.sample_shape = model.default_input;
  } else {
    SS_CHECK_INPUT(vocab == 0,
                   "model '{}' reads token ids; data source '{}' holds images or features (use "
                   "text:FILE or synthetic)",
                   model.name, data.spec.text);
    data.train = open_dataset(data.spec, Split::kTrain);
    data.eval = open_dataset(data.spec, Split::kEval);
    data.sample_shape = data.train->sample_shape();
    SS_CHECK_INPUT(data.eval->sample_shape() == data.sample_shape,
                   "{} has samples of shape {} but {} of shape {}", data.train->describe(),
                   data.sample_shape.to_string(), data.eval->describe(),
                   data.eval->sample_shape().to_string());
  }

  if (o.train_samples > 0) {
    SS_CHECK_INPUT(o.train_samples <= data.train->size(),
                   "train_samples {} is more than the {} samples of {}", o.train_samples,
                   data.train->size(), data.train->describe());
    data.train = std::make_shared<SubsetDataset>(data.train, 0, o.train_samples, "first samples");
  }

  check_model_takes(model, data);

  TransformConfig t;
  // Token ids are indices, not measurements: never normalized.
  if (o.normalize && !synthetic && vocab == 0) {
    data.train->channel_stats(t.mean, t.stddev);
    for (size_t c = 0; c < t.stddev.size(); ++c) {
      SS_CHECK_INPUT(t.stddev[c] > 0.0f,
                     "{}: channel {} holds {} in every sample, which normalising would divide by "
                     "its spread of 0 (give --no-normalize to train on it as it is)",
                     data.train->describe(), c, t.mean[c]);
    }
  }
  data.eval_transforms = t;
  t.crop_padding = o.crop_padding;
  t.flip = o.flip;
  t.decode_cost_us = o.decode_cost_us;
  validate(t, data.sample_shape);
  data.train_transforms = t;
  return data;
}

}  // namespace scalescope
