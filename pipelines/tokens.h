// Token datasets for sequence models (a GPT's input is a sequence of token ids, its labels the
// next token at every position): byte-level text from a file, and synthetic sequences.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pipelines/dataset.h"

namespace scalescope {

// What a sequence model reads: `positions` token ids per sample, each below `vocab`.
struct TokenShape {
  int64_t positions = 0;
  int64_t vocab = 0;
};

// The file's bytes as tokens (text:FILE), cut into non-overlapping windows: window k is bytes
// [k·S, k·S + S) as input and the bytes one further as labels, for k < W = (size − 1) / S. The
// last max(1, W / 10) windows are the evaluation split, the rest the training split. Reads the
// whole file now; throws Error naming it when it cannot be read, makes fewer than 2 windows, or
// holds a byte not below `vocab`.
std::unique_ptr<Dataset> open_text_dataset(const std::string& path, Split split, TokenShape shape);

// `size` synthetic sequences that a model can learn from its context: each sample counts up
// from a random token by a stride of its own (1 to 8, modulo the vocabulary), one token in ten
// drawn at random instead. Sample i is a function of (seed, i) alone.
std::unique_ptr<Dataset> make_synthetic_token_dataset(TokenShape shape, int64_t size,
                                                      uint64_t seed);

}  // namespace scalescope
