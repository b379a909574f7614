"""The hybrid CNN-ViT (chapter 09): a convolutional stem's feature map is the ViT's sequence of patches.

Dosovitskiy et al. (2021, sec. 3.1, "Hybrid Architecture") offer an
alternative to raw-pixel patches: run a CNN first and cut its feature map into
patches, in practice of size 1, so that every cell of the map becomes a token.
Their hybrids are a ResNet-50 followed by a ViT; here the stem is the first
stages of the course's own small ResNet (:class:`course_lib.cnn.ConvNet`), and
the Transformer is :class:`course_lib.vit.ViT` unchanged, with ``patch_size=1``
and the stem's channels as its input channels::

    images (B, C, H, W) -> stem -> feature map (B, C_s, H/s, W/s)
                        -> ViT with 1x1 patches: tokens (B, 1 + N, D), N = (H/s)(W/s)
                        -> CLS, positions, pre-norm blocks, head (all the ViT's own)

The stem keeps the resolution in its first stage and halves it in every later
one, so ``s = 2 ** (len(stem_widths) - 1)``. The ViT's 1x1 patch projection is
the paper's projection ``E`` applied to 1x1 patches of the feature map.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor, nn

from course_lib.cnn import ConvNet, ConvNetConfig
from course_lib.vit import ViT, ViTConfig

__all__ = ["HybridConfig", "HybridViT"]


@dataclass
class HybridConfig:
    """A hybrid's sizes: the convolutional stem and the ViT that reads its feature map.

    Attributes:
        image_size: ``int`` (square) or ``(H, W)``; both sides multiples of the stem's stride.
        in_chans: image channels ``C``.
        stem_widths: channels of the stem's stages (``course_lib.cnn.ConvNet``'s
            ``widths``); every stage after the first halves the resolution, so the
            stride is ``2 ** (len(stem_widths) - 1)``.
        stem_blocks: residual blocks per stage; the first stage may have 0 (the
            stem convolution alone), every later one at least 1 (its first block
            does the downsampling).
        dim, n_layers, n_heads, mlp_ratio: the ViT's width ``D``, depth, heads and MLP ratio.
        num_classes: classifier outputs (0: no head).
        positions, pool: as in :class:`~course_lib.vit.ViTConfig`.
        attn_impl: ``"eager"`` or ``"sdpa"``.
    """

    image_size: int | tuple[int, int] = 32
    in_chans: int = 3
    stem_widths: tuple[int, ...] = (16, 32, 64)
    stem_blocks: tuple[int, ...] = (0, 1, 1)
    dim: int = 64
    n_layers: int = 4
    n_heads: int = 4
    mlp_ratio: float = 4.0
    num_classes: int = 10
    positions: str = "learned"
    pool: str = "cls"
    attn_impl: str = "sdpa"

    def __post_init__(self):
        self.stem_widths, self.stem_blocks = tuple(self.stem_widths), tuple(self.stem_blocks)
        if not self.stem_widths or len(self.stem_widths) != len(self.stem_blocks):
            raise ValueError(f"stem_widths {self.stem_widths} and stem_blocks {self.stem_blocks} must be non-empty "
                             f"and of equal length (one entry per stage)")
        if any(w < 1 for w in self.stem_widths):
            raise ValueError(f"stem_widths {self.stem_widths}: every stage needs at least one channel")
        if self.stem_blocks[0] < 0 or any(n < 1 for n in self.stem_blocks[1:]):
            raise ValueError(f"stem_blocks {self.stem_blocks}: every stage after the first needs at least one block "
                             f"(its first block halves the resolution), the first at least 0")
        h, w = self.image_hw
        s = self.stride
        if h % s or w % s:
            raise ValueError(f"image_size {h}x{w} is not divisible by the stem's stride {s} "
                             f"(2 ** (len(stem_widths) - 1)): height and width must be multiples of {s}")
        self.vit_config()  # the ViT's own checks (dim divisible by n_heads, positions, pool)

    @property
    def image_hw(self) -> tuple[int, int]:
        s = self.image_size
        return (s, s) if isinstance(s, int) else (int(s[0]), int(s[1]))

    @property
    def stride(self) -> int:
        """How much the stem shrinks each side: ``2 ** (len(stem_widths) - 1)``."""
        return 2 ** (len(self.stem_widths) - 1)

    @property
    def grid(self) -> tuple[int, int]:
        """The feature map's ``(gh, gw) = (H / stride, W / stride)``: the ViT reads ``gh * gw`` tokens."""
        h, w = self.image_hw
        return h // self.stride, w // self.stride

    def stem_config(self) -> ConvNetConfig:
        return ConvNetConfig(in_chans=self.in_chans, widths=self.stem_widths, blocks=self.stem_blocks,
                             num_classes=1)

    def vit_config(self) -> ViTConfig:
        """The ViT on the feature map: its image is the ``grid``, its patches 1x1, its channels the stem's."""
        return ViTConfig(image_size=self.grid, patch_size=1, in_chans=self.stem_widths[-1], dim=self.dim,
                         n_layers=self.n_layers, n_heads=self.n_heads, mlp_ratio=self.mlp_ratio,
                         num_classes=self.num_classes, positions=self.positions, pool=self.pool,
                         class_token=self.pool == "cls", attn_impl=self.attn_impl)


class HybridViT(nn.Module):
    """A convolutional stem followed by a ViT on its feature map: ``(B, C, H, W) -> (B, num_classes)``.

    ``stem`` is the stem convolution and the stages of a :class:`~course_lib.cnn.ConvNet`
    (its pooling and head are not used); ``vit`` is a :class:`~course_lib.vit.ViT`
    with 1x1 patches, whose CLS token, positions, blocks, final norm and head
    do the rest.
    """

    def __init__(self, cfg: HybridConfig):
        super().__init__()
        self.cfg = cfg
        cnn = ConvNet(cfg.stem_config())
        self.stem = nn.Sequential(cnn.stem, cnn.stages)
        self.vit = ViT(cfg.vit_config())

    def feature_map(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, stem_widths[-1], H / stride, W / stride)``: the stem's output, the ViT's "image"."""
        if images.ndim != 4:
            raise ValueError(f"expected images of shape (batch, channels, height, width), got {tuple(images.shape)}")
        _, c, h, w = images.shape
        s = self.cfg.stride
        if c != self.cfg.in_chans:
            raise ValueError(f"images have {c} channels but the model expects in_chans={self.cfg.in_chans}")
        if h % s or w % s:
            raise ValueError(f"image size {h}x{w} is not divisible by the stem's stride {s}")
        return self.stem(images)

    def forward_features(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, n_prefix + N, D)``, ``N = (H / stride)(W / stride)``: the ViT's normalized tokens."""
        return self.vit.forward_features(self.feature_map(images))

    def forward_head(self, features: Tensor, pre_logits: bool = False) -> Tensor:
        """``(B, T, D) -> (B, num_classes)``: the ViT's pooling and head."""
        return self.vit.forward_head(features, pre_logits)

    def forward(self, images: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(images))

    def get_attention_maps(self, images: Tensor, layers: Sequence[int] | None = None) -> list[Tensor]:
        """The ViT's attention weights on the feature map's tokens, a tensor ``(B, heads, T, T)`` for each block
        in ``layers`` (all when None; see :meth:`ViT.get_attention_maps`)."""
        return self.vit.get_attention_maps(self.feature_map(images), layers)
