"""A small residual CNN: the convolutional baseline that chapter 09 sets beside the ViT.

A convolution builds in two assumptions that a ViT has to learn from data
(Dosovitskiy et al., 2021, sec. 3.1): **locality** (each output sees a small
neighbourhood) and **translation equivariance** (the same filter everywhere).
This network is the plainest modern form of that idea, a ResNet (He et al.,
2016) in miniature::

    stem:   conv 3x3 (in_chans -> widths[0]), BatchNorm, ReLU
    stage i: blocks[i] residual blocks at width widths[i]; the first block of
            every stage after the first halves the resolution (stride 2)
    head:   global average pooling, linear -> num_classes

A residual block is ``relu(x + bn(conv(relu(bn(conv(x))))))``, with a 1x1
strided convolution on the skip path when the shape changes.
``(batch, in_chans, height, width) -> (batch, num_classes)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ConvNetConfig", "ResidualConvBlock", "ConvNet"]


@dataclass
class ConvNetConfig:
    """Sizes of a :class:`ConvNet`: ``widths[i]`` channels and ``blocks[i]`` residual blocks in stage ``i``."""

    in_chans: int = 3
    widths: tuple[int, ...] = (32, 64, 128)
    blocks: tuple[int, ...] = (1, 1, 1)
    num_classes: int = 10

    def __post_init__(self):
        self.widths, self.blocks = tuple(self.widths), tuple(self.blocks)
        if len(self.widths) != len(self.blocks) or not self.widths:
            raise ValueError(f"widths {self.widths} and blocks {self.blocks} must be non-empty and of equal length")


class ResidualConvBlock(nn.Module):
    """``relu(skip(x) + bn2(conv2(relu(bn1(conv1(x))))))``:
    ``(B, c_in, H, W) -> (B, c_out, H / stride, W / stride)``."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.skip = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.skip(x) + self.bn2(self.conv2(h)))


class ConvNet(nn.Module):
    """The baseline CNN: ``forward_features`` ``(B, C, H, W) -> (B, widths[-1])``, ``forward_head`` -> logits."""

    def __init__(self, cfg: ConvNetConfig):
        super().__init__()
        self.cfg = cfg
        self.stem = nn.Sequential(nn.Conv2d(cfg.in_chans, cfg.widths[0], 3, padding=1, bias=False),
                                  nn.BatchNorm2d(cfg.widths[0]), nn.ReLU())
        layers, c = [], cfg.widths[0]
        for i, (width, n) in enumerate(zip(cfg.widths, cfg.blocks)):
            for j in range(n):
                layers.append(ResidualConvBlock(c, width, stride=2 if i > 0 and j == 0 else 1))
                c = width
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(c, cfg.num_classes)

    def forward_features(self, x: Tensor) -> Tensor:
        return self.stages(self.stem(x)).mean(dim=(-2, -1))

    def forward_head(self, x: Tensor) -> Tensor:
        return self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))
