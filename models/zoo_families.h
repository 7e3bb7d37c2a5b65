// The zoo's families that are graphs rather than sequences, built in files of their own;
// zoo.cpp parses their specs and registers them.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "models/zoo.h"

namespace scalescope {

// He et al.'s CIFAR ResNet of `depth` = 6n + 2 layers (3 stages of n basic blocks, 16/32/64
// channels, option-A shortcuts), named as the common PyTorch implementation of the paper
// (conv1, bn1, layer1.0.conv1, ..., linear). Throws Error for a depth not of that form.
ModelDef cifar_resnet(const std::string& name, int64_t depth);

// The smallest image an ImageNet ResNet takes: its stem and stages divide the image by 32.
constexpr int64_t kMinImageNetResNetImage = 32;

// torchvision 0.14's ImageNet ResNet of `depth` 18, 34 (BasicBlock), 50, 101 or 152
// (Bottleneck, stride on the 3x3) on image×image×3, 1000 classes, with the given channels of
// stages 1-4 (torchvision's 64, 128, 256, 512; the stem has stage 1's). Parameters are named
// and laid out as torchvision's (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, ..., fc).
// Throws Error for another depth or an image under kMinImageNetResNetImage.
ModelDef imagenet_resnet(const std::string& name, int64_t depth, int64_t image,
                         const std::array<int64_t, 4>& stage_planes);

}  // namespace scalescope
