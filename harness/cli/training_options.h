// The training options shared by `train` and `sweep`: optimizer, learning rate and its
// scaling rule, gradient accumulation and buckets, overlap, seed, collective timeout.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "harness/trainer/trainer.h"

namespace scalescope::cli {

// Flags whose value needs interpreting after parsing.
struct TrainingFlags {
  std::string optimizer = "adam";
  std::optional<float> lr;  // default depends on the optimizer
  std::string lr_scaling = "none";
  // Multi-process launches: the processes each node must have (0: whatever was launched).
  int ranks_per_node = 0;
};

// Starting values taken from `o` (a config file may have set them); `lr_set`: o's learning
// rate was chosen rather than defaulted.
TrainingFlags training_flags_from(const TrainOptions& o, bool lr_set);
void add_training_options(CLI::App& cmd, TrainOptions& o, TrainingFlags& flags);
// Refuses a launch whose processes per node differ from --ranks-per-node (when given).
void check_launch(const TrainingFlags& flags, const Cluster& cluster);
// Writes the interpreted flags into `o`; throws Error naming a bad value.
void apply_training_flags(const TrainingFlags& flags, TrainOptions& o);

}  // namespace scalescope::cli
