#include "tests/models/reference.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <variant>

#include "core/check.h"
#include "core/overloaded.h"

namespace scalescope {
namespace {

// Index of (n, h, w, c) in an NHWC tensor of dims [N, H, W, C].
size_t nhwc(const Shape& s, int64_t n, int64_t h, int64_t w, int64_t c) {
  return static_cast<size_t>(((n * s[1] + h) * s[2] + w) * s[3] + c);
}

std::vector<double> conv2d(const Conv2DSpec& conv, const Shape& in, const Shape& out,
                           const std::vector<double>& x, const std::vector<double>& weight,
                           const std::vector<double>* bias) {
  const int64_t k = conv.kernel;
  const int64_t cin = in[3];
  const Pads pad_h = conv_padding(conv, in[1]);
  const Pads pad_w = conv_padding(conv, in[2]);
  std::vector<double> y(static_cast<size_t>(out.numel()));
  for (int64_t n = 0; n < out[0]; ++n) {
    for (int64_t oh = 0; oh < out[1]; ++oh) {
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        for (int64_t o = 0; o < out[3]; ++o) {
          double sum = bias == nullptr ? 0.0 : (*bias)[static_cast<size_t>(o)];
          for (int64_t c = 0; c < cin; ++c) {
            for (int64_t kh = 0; kh < k; ++kh) {
              for (int64_t kw = 0; kw < k; ++kw) {
                const int64_t ih = oh * conv.stride - pad_h.before + kh;
                const int64_t iw = ow * conv.stride - pad_w.before + kw;
                if (ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2]) continue;  // zero padding
                // OIHW weights.
                const size_t wi = static_cast<size_t>(((o * cin + c) * k + kh) * k + kw);
                sum += weight[wi] * x[nhwc(in, n, ih, iw, c)];
              }
            }
          }
          y[nhwc(out, n, oh, ow, o)] = sum;
        }
      }
    }
  }
  return y;
}

std::vector<double> max_pool(const MaxPool2DSpec& pool, const Shape& in, const Shape& out,
                             const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(out.numel()));
  for (int64_t n = 0; n < out[0]; ++n) {
    for (int64_t oh = 0; oh < out[1]; ++oh) {
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        for (int64_t c = 0; c < out[3]; ++c) {
          // PyTorch's padding: -inf outside the image, which never wins.
          double best = -std::numeric_limits<double>::infinity();
          for (int64_t kh = 0; kh < pool.pool; ++kh) {
            for (int64_t kw = 0; kw < pool.pool; ++kw) {
              const int64_t h = oh * pool.stride - pool.pad + kh;
              const int64_t w = ow * pool.stride - pool.pad + kw;
              if (h < 0 || h >= in[1] || w < 0 || w >= in[2]) continue;
              best = std::max(best, x[nhwc(in, n, h, w, c)]);
            }
          }
          y[nhwc(out, n, oh, ow, c)] = best;
        }
      }
    }
  }
  return y;
}

// nn.Linear over the last dimension: a sequence's positions are rows like the samples.
std::vector<double> dense(const Shape& in, int64_t units, const std::vector<double>& x,
                          const std::vector<double>& weight, const std::vector<double>* bias) {
  const int64_t features = in[in.rank() - 1];
  const int64_t rows = in.numel() / features;
  std::vector<double> y(static_cast<size_t>(rows * units));
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t o = 0; o < units; ++o) {
      double sum = bias == nullptr ? 0.0 : (*bias)[static_cast<size_t>(o)];
      for (int64_t i = 0; i < features; ++i) {
        sum += weight[static_cast<size_t>(o * features + i)] *
               x[static_cast<size_t>(n * features + i)];
      }
      y[static_cast<size_t>(n * units + o)] = sum;
    }
  }
  return y;
}

std::vector<double> activation(Activation kind, const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    switch (kind) {
      case Activation::kRelu:
        y[i] = x[i] > 0.0 ? x[i] : 0.0;
        break;
      case Activation::kTanh:
        y[i] = std::tanh(x[i]);
        break;
      case Activation::kSigmoid:
        y[i] = 1.0 / (1.0 + std::exp(-x[i]));
        break;
      case Activation::kGelu:  // the tanh approximation, PyTorch's approximate="tanh"
        y[i] = 0.5 * x[i] *
               (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) *
                                (x[i] + 0.044715 * x[i] * x[i] * x[i])));
        break;
    }
  }
  return y;
}

// Each sample's values in PyTorch's (C, H, W) order; non-images are already flat.
std::vector<double> flatten(const Shape& in, const std::vector<double>& x) {
  if (in.rank() != 4) return x;
  const int64_t h_size = in[1], w_size = in[2], c_size = in[3];
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < in[0]; ++n) {
    for (int64_t h = 0; h < h_size; ++h) {
      for (int64_t w = 0; w < w_size; ++w) {
        for (int64_t c = 0; c < c_size; ++c) {
          const int64_t chw = (c * h_size + h) * w_size + w;
          y[static_cast<size_t>(n * c_size * h_size * w_size + chw)] = x[nhwc(in, n, h, w, c)];
        }
      }
    }
  }
  return y;
}

std::vector<double> global_avg_pool(const Shape& in, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(in[0] * in[3]));
  for (int64_t n = 0; n < in[0]; ++n) {
    for (int64_t c = 0; c < in[3]; ++c) {
      double sum = 0.0;
      for (int64_t h = 0; h < in[1]; ++h) {
        for (int64_t w = 0; w < in[2]; ++w) sum += x[nhwc(in, n, h, w, c)];
      }
      y[static_cast<size_t>(n * in[3] + c)] = sum / static_cast<double>(in[1] * in[2]);
    }
  }
  return y;
}

// Straight from PadShortcutSpec's definition: strided pixels, zero channels around.
std::vector<double> pad_shortcut(const PadShortcutSpec& p, const Shape& in, const Shape& out,
                                 const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(out.numel()), 0.0);
  const int64_t before = (out[3] - in[3]) / 2;
  for (int64_t n = 0; n < out[0]; ++n) {
    for (int64_t h = 0; h < out[1]; ++h) {
      for (int64_t w = 0; w < out[2]; ++w) {
        for (int64_t c = 0; c < in[3]; ++c) {
          y[nhwc(out, n, h, w, c + before)] = x[nhwc(in, n, h * p.stride, w * p.stride, c)];
        }
      }
    }
  }
  return y;
}

// PyTorch's BatchNorm2d in training: each channel normalized with the batch's mean and
// biased variance over its N·H·W values, then scaled by γ and shifted by β.
std::vector<double> batch_norm(const BatchNorm2DSpec& spec, const Shape& in,
                               const std::vector<double>& x, const std::vector<double>& gamma,
                               const std::vector<double>& beta) {
  const int64_t count = in[0] * in[1] * in[2];
  std::vector<double> y(x.size());
  for (int64_t c = 0; c < in[3]; ++c) {
    double sum = 0.0;
    for (int64_t p = 0; p < count; ++p) sum += x[static_cast<size_t>(p * in[3] + c)];
    const double mean = sum / static_cast<double>(count);
    double squares = 0.0;
    for (int64_t p = 0; p < count; ++p) {
      const double d = x[static_cast<size_t>(p * in[3] + c)] - mean;
      squares += d * d;
    }
    const double var = squares / static_cast<double>(count);
    const double invstd = 1.0 / std::sqrt(var + static_cast<double>(spec.eps));
    const size_t ci = static_cast<size_t>(c);
    for (int64_t p = 0; p < count; ++p) {
      const size_t i = static_cast<size_t>(p * in[3] + c);
      y[i] = gamma[ci] * (x[i] - mean) * invstd + beta[ci];
    }
  }
  return y;
}

}  // namespace

std::vector<double> reference_forward(const LayerSpec& layer, const Shape& in,
                                      const std::vector<double>& input,
                                      const std::vector<std::vector<double>>& params) {
  SS_CHECK(static_cast<int64_t>(input.size()) == in.numel(), "reference: {} inputs for shape {}",
           input.size(), in.to_string());
  const Shape out = output_shape(layer, in.without_batch()).with_batch(in[0]);
  const std::vector<ParamSpec> specs = param_specs(layer, in.without_batch());
  SS_CHECK(params.size() == specs.size(), "reference: {} parameters for {}, expected {}",
           params.size(), describe(layer), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    SS_CHECK(static_cast<int64_t>(params[i].size()) == specs[i].shape.numel(),
             "reference: parameter {} of {} has {} values", i, describe(layer), params[i].size());
  }
  return std::visit(
      Overloaded{
          [&](const Conv2DSpec& c) {
            return conv2d(c, in, out, input, params[0], c.bias ? &params[1] : nullptr);
          },
          [&](const MaxPool2DSpec& p) { return max_pool(p, in, out, input); },
          [&](const DenseSpec& d) {
            return dense(in, d.units, input, params[0], d.bias ? &params[1] : nullptr);
          },
          [&](const ActivationSpec& a) { return activation(a.kind, input); },
          [&](const FlattenSpec&) { return flatten(in, input); },
          [&](const GlobalAvgPoolSpec&) { return global_avg_pool(in, input); },
          [&](const BatchNorm2DSpec& b) { return batch_norm(b, in, input, params[0], params[1]); },
          [&](const PadShortcutSpec& p) { return pad_shortcut(p, in, out, input); },
          [&](const AddSpec&) -> std::vector<double> {
            throw_error("reference: Add takes two inputs; the model test checks it");
          },
          [&](const LayerNormSpec& n) {
            return reference_layer_norm(n, in, input, params[0], params[1]);
          },
          [&](const CausalSelfAttentionSpec& a) { return reference_attention(a, in, input); },
          [&](const EmbeddingSpec& e) { return reference_embedding(e, in, input, params[0]); },
          [&](const PositionEmbeddingSpec&) {
            return reference_position_embedding(in, input, params[0]);
          },
          [&](const DropoutSpec&) -> std::vector<double> {
            throw_error("reference: dropout's mask depends on the pass; dropout_test checks it");
          },
      },
      layer);
}

}  // namespace scalescope
