"""PyTorch twins of scalescope's graph models (models/zoo_resnet.cpp) that torchvision does not
have, named as scalescope's checkpoints name their parameters: the CIFAR ResNet of He et al.
Shared by the interop and training tests (tests/models) and the benchmarks (bench/)."""
import torch
from torch import nn


class PadShortcut(nn.Module):
    """Option A of He et al.: every second pixel, zero channels before and after."""

    def __init__(self, planes):
        super().__init__()
        self.pad = planes // 4

    def forward(self, x):
        return nn.functional.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = PadShortcut(planes)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class CifarResNet(nn.Module):
    """The CIFAR ResNet of He et al. (2016, section 4.2) as its common PyTorch version names it."""

    def __init__(self, depth):
        super().__init__()
        blocks = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        in_planes = 16
        for stage, planes in enumerate((16, 32, 64)):
            layers = []
            for b in range(blocks):
                layers.append(BasicBlock(in_planes, planes, 2 if stage > 0 and b == 0 else 1))
                in_planes = planes
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.linear = nn.Linear(64, 10)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(out.mean(dim=(2, 3)))
