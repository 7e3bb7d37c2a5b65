#include "tests/models/layer_cases.h"

namespace scalescope {
namespace {

Conv2DSpec conv(int64_t filters, int64_t kernel, int64_t stride, Padding padding) {
  return Conv2DSpec{filters, kernel, stride, padding};
}

// Convolutions: TensorFlow's "same" and "valid" padding and PyTorch's explicit one.
std::vector<LayerCase> convolution_cases() {
  using enum Padding;
  return {
      // "same" with odd sizes and stride 2: H 7 pads (1, 1), W 6 pads (0, 1) (TensorFlow's
      // odd pixel after); an even kernel pads (1, 2) even at stride 1.
      {"conv_same_s1", conv(4, 3, 1, kSame), Shape{2, 5, 7, 3}},
      {"conv_same_s2_odd", conv(3, 3, 2, kSame), Shape{2, 7, 6, 2}},
      {"conv_same_k4_c1", conv(2, 4, 1, kSame), Shape{2, 5, 6, 1}},
      {"conv_same_k5_s2", conv(3, 5, 2, kSame), Shape{3, 9, 8, 2}},
      {"conv_valid_s1_c1", conv(5, 3, 1, kValid), Shape{2, 6, 5, 1}},
      {"conv_valid_s2_leftover", conv(4, 3, 2, kValid), Shape{2, 8, 7, 3}},
      // Channel counts oneDNN blocks by 8: the weights take a layout other than OIHW, so the
      // reorders into and out of PyTorch's layout run. Two threads split the reductions.
      {"conv_blocked_2threads", conv(16, 3, 1, kSame), Shape{2, 6, 5, 8}, 2},
      {"conv_blocked_s2_valid", conv(16, 3, 2, kValid), Shape{2, 7, 6, 16}},
      // PyTorch's padding=1 at stride 2 (ResNets' downsampling convolutions): an even image
      // ends inside the padding, an odd one on the last pixel; ResNets' convolutions have no
      // bias.
      {"conv_explicit_p1_s2_even", Conv2DSpec{4, 3, 2, kExplicit, 1, true}, Shape{2, 6, 6, 3}},
      {"conv_explicit_p1_s2_odd", Conv2DSpec{3, 3, 2, kExplicit, 1, true}, Shape{2, 7, 5, 2}},
      {"conv_no_bias", Conv2DSpec{4, 3, 1, kSame, 0, false}, Shape{2, 5, 4, 3}},
  };
}

// Max pooling, without padding and with PyTorch's.
std::vector<LayerCase> pooling_cases() {
  return {
      {"maxpool_2x2_odd", MaxPool2DSpec{2, 2}, Shape{2, 5, 7, 3}},
      {"maxpool_3s2_overlap", MaxPool2DSpec{3, 2}, Shape{2, 7, 6, 2}},
      {"maxpool_2s1_c1", MaxPool2DSpec{2, 1}, Shape{3, 4, 4, 1}},
      {"maxpool_2s3_gaps", MaxPool2DSpec{2, 3}, Shape{2, 8, 7, 2}},
      {"maxpool_c70_chunks", MaxPool2DSpec{2, 2}, Shape{2, 4, 3, 70}},
      {"maxpool_c16_2threads", MaxPool2DSpec{2, 2}, Shape{2, 4, 6, 16}, 2},
      // PyTorch's padding (ImageNet ResNets' stem pools 3x3, stride 2, pad 1): the border
      // windows hang over the image by a pixel on each side of an even image, on the first
      // side only of an odd one; non-overlapping windows with padding, and gaps.
      {"maxpool_3s2_p1_even", MaxPool2DSpec{3, 2, 1}, Shape{2, 8, 6, 3}},
      {"maxpool_3s2_p1_odd", MaxPool2DSpec{3, 2, 1}, Shape{2, 7, 5, 2}},
      {"maxpool_3s1_p1_same", MaxPool2DSpec{3, 1, 1}, Shape{2, 4, 5, 3}},
      {"maxpool_2s2_p1", MaxPool2DSpec{2, 2, 1}, Shape{2, 5, 4, 2}},
      {"maxpool_3s3_p1_gaps", MaxPool2DSpec{3, 3, 1}, Shape{1, 7, 8, 2}},
      {"maxpool_5s2_p2", MaxPool2DSpec{5, 2, 2}, Shape{1, 6, 7, 2}},
      {"maxpool_p1_c70_2threads", MaxPool2DSpec{3, 2, 1}, Shape{2, 6, 5, 70}, 2},
  };
}

// Dense layers, activations, flatten and global average pooling.
std::vector<LayerCase> elementwise_cases() {
  return {
      {"dense", DenseSpec{5}, Shape{3, 7}},
      {"dense_one_unit", DenseSpec{1}, Shape{2, 4}},
      {"dense_wide_2threads", DenseSpec{16}, Shape{4, 32}, 2},
      // Over the last dimension of a sequence [N, S, D]: N·S rows, one weight.
      {"dense_sequence", DenseSpec{5}, Shape{2, 3, 7}},
      {"dense_no_bias", DenseSpec{4, false}, Shape{3, 6}},
      {"dense_sequence_no_bias", DenseSpec{5, false}, Shape{2, 4, 6}},
      {"dense_sequence_2threads", DenseSpec{16}, Shape{2, 8, 32}, 2},
      // 1024 rows of few weights: fp32's weight gradient (and bias) as matmuls
      // (fp32_weight_gradient_by_matmul in cpu_weighted.cpp), the input gradient by gemm.
      {"dense_1024_rows_2threads", DenseSpec{2}, Shape{4, 256, 3}, 2},
      {"dense_1024_rows_no_bias", DenseSpec{3, false}, Shape{1024, 2}},
      {"relu_image", ActivationSpec{Activation::kRelu}, Shape{2, 3, 4, 5}},
      {"relu_flat", ActivationSpec{Activation::kRelu}, Shape{3, 6}},
      {"tanh", ActivationSpec{Activation::kTanh}, Shape{2, 3, 4, 5}},
      {"sigmoid", ActivationSpec{Activation::kSigmoid}, Shape{3, 7}},
      {"gelu_sequence", ActivationSpec{Activation::kGelu}, Shape{2, 3, 5}},
      {"gelu_flat", ActivationSpec{Activation::kGelu}, Shape{3, 7}},
      // The CPU kernel's tasks are 4096 values, its loops' blocks 256 (prefetch.h): a whole
      // task and the rest, one whole block and part of another, on two threads.
      {"gelu_two_tasks_2threads", ActivationSpec{Activation::kGelu}, Shape{1, 4396}, 2},
      {"flatten_image", FlattenSpec{}, Shape{2, 3, 4, 5}},
      {"flatten_c1", FlattenSpec{}, Shape{2, 3, 5, 1}},
      {"flatten_vector", FlattenSpec{}, Shape{2, 6}},
      {"global_avg_pool", GlobalAvgPoolSpec{}, Shape{2, 3, 5, 4}},
      {"global_avg_pool_c1", GlobalAvgPoolSpec{}, Shape{3, 4, 3, 1}},
  };
}

// Batch norm and the option-A shortcut of the CIFAR ResNets.
std::vector<LayerCase> normalization_cases() {
  return {
      // Training mode: the gradients flow through the batch's statistics too. The kernel sums
      // 60 pixels in 3 chunks (two threads sharing them in the second case), 120 in 7.
      {"batch_norm", BatchNorm2DSpec{}, Shape{3, 4, 5, 6}},
      {"batch_norm_2threads", BatchNorm2DSpec{}, Shape{4, 5, 3, 6}, 2},
      {"batch_norm_c16", BatchNorm2DSpec{1e-3f, 0.3f}, Shape{4, 5, 6, 16}},
      // The odd width keeps columns 0, 2 and 4; 4 channels pad to 8 (2 before, 2 after).
      {"pad_shortcut_odd_width", PadShortcutSpec{2, 8}, Shape{2, 6, 5, 4}},
      {"pad_shortcut_s1", PadShortcutSpec{1, 6}, Shape{2, 3, 3, 2}},
  };
}

// The layers of the GPT decoder.
std::vector<LayerCase> sequence_cases() {
  return {
      // 10 tokens of 5 ids: most ids repeat, so their gradient rows add several positions
      // (in position order, split by columns on 2 threads); some ids never occur (zero rows).
      {"embedding", EmbeddingSpec{7, 3}, Shape{2, 5}},
      {"embedding_wide_2threads", EmbeddingSpec{5, 40}, Shape{3, 4}, 2},
      {"position_embedding", PositionEmbeddingSpec{}, Shape{3, 4, 5}},
      {"position_embedding_2threads", PositionEmbeddingSpec{}, Shape{2, 6, 3}, 2},
      // Rows of 40 values (a full block of 32 lanes and a partial one), of 10 (lanes left
      // empty), of 70 on two threads; 600 rows split the parameter gradients into two parts.
      {"layer_norm_sequence", LayerNormSpec{}, Shape{2, 3, 40}},
      {"layer_norm_flat", LayerNormSpec{}, Shape{3, 10}},
      {"layer_norm_2threads", LayerNormSpec{}, Shape{4, 5, 70}, 2},
      {"layer_norm_eps", LayerNormSpec{0.05f}, Shape{2, 3, 6}},
      {"layer_norm_two_parts", LayerNormSpec{}, Shape{2, 300, 4}, 2},
      // Causal self-attention on [N, S, 3D]: one head (D 4); three heads of 2 channels over 6
      // positions; two threads sharing the rows of a batch of 3; a single position (p = 1).
      {"attention_1head", CausalSelfAttentionSpec{1}, Shape{2, 4, 12}},
      {"attention_3heads_s6", CausalSelfAttentionSpec{3}, Shape{2, 6, 18}},
      {"attention_2heads_2threads", CausalSelfAttentionSpec{2}, Shape{3, 5, 24}, 2},
      {"attention_seq1", CausalSelfAttentionSpec{2}, Shape{2, 1, 12}},
      // Longer than the CPU kernel's 64-key tile: 130 positions are two full tiles and one of
      // 2 (rows whose maximum grows over later tiles, tiles skipped above the diagonal); 64 is
      // exactly one.
      {"attention_s130_tiles", CausalSelfAttentionSpec{2}, Shape{1, 130, 12}, 2},
      {"attention_s64_one_tile", CausalSelfAttentionSpec{1}, Shape{2, 64, 6}},
  };
}

}  // namespace

std::vector<LayerCase> layer_cases() {
  std::vector<LayerCase> cases;
  for (auto* group : {&convolution_cases, &pooling_cases, &elementwise_cases, &normalization_cases,
                      &sequence_cases}) {
    for (LayerCase& c : group()) cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace scalescope
