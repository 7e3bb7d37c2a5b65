// The zoo's families that are graphs rather than sequences, built in files of their own;
// zoo.cpp parses their specs and registers them.
#pragma once

#include <cstdint>
#include <string>

#include "models/zoo.h"

namespace scalescope {

// He et al.'s CIFAR ResNet of `depth` = 6n + 2 layers (3 stages of n basic blocks, 16/32/64
// channels, option-A shortcuts), named as the common PyTorch implementation of the paper
// (conv1, bn1, layer1.0.conv1, ..., linear). Throws Error for a depth not of that form.
ModelDef cifar_resnet(const std::string& name, int64_t depth);

}  // namespace scalescope
