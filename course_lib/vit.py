"""The Vision Transformer (chapter 09): an image is a sequence of patches.

Dosovitskiy et al. (2021), "An Image is Worth 16x16 Words", section 3.1::

    z_0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos        (eq. 1)
    z'_l = MSA(LN(z_{l-1})) + z_{l-1}                     (eq. 2)
    z_l  = MLP(LN(z'_l)) + z'_l                           (eq. 3)
    y    = LN(z_L^0)                                      (eq. 4)

An image ``(batch, channels, H, W)`` is cut into ``N = (H/P) * (W/P)`` patches
of ``P x P`` pixels, each flattened and projected linearly (``E``) to ``dim``
features; a learned CLS token is prepended and learned positions added. The
encoder is a stack of pre-norm :class:`~course_lib.blocks.Block` s,
the same attention and MLP as every other model of the course.

Notation: ``B`` batch, ``C`` channels, ``P`` patch size, ``(gh, gw)`` the patch
grid, ``N = gh * gw`` patches, ``T`` tokens (prefix tokens + ``N``), ``D`` = ``dim``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import ClassVar, Self

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.blocks import Block, BlockConfig
from course_lib.norms import LayerNorm
from course_lib.positional import relative_position_index, resample_pos_embed

__all__ = ["patchify", "PatchEmbed", "ViTConfig", "SIZES", "PRESETS", "POSITIONS", "ViT", "RelativePositionBias",
           "prepend_cls_add_pos", "vit_forward", "patch_distances", "mean_attention_distance", "variant", "zero_head"]

#: How a ViT knows where a patch sits (the ViT paper's ablation, appendix D.4):
#: ``"learned"`` one learned vector per position of the row-major sequence (1-D, the paper's default);
#: ``"learned_2d"`` a learned row vector (``D/2``) and column vector (``D/2``), concatenated;
#: ``"relative"`` no positions in the input, a learned score bias per head for every 2-D offset between patches;
#: ``"none"`` no position information at all (the patches are a set).
POSITIONS = ("learned", "learned_2d", "relative", "none")


# --------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------
def patchify(images: Tensor, patch: int) -> Tensor:
    """Cut images into non-overlapping ``patch x patch`` squares and flatten each.

    Args:
        images: ``(B, C, H, W)``, ``H`` and ``W`` multiples of ``patch``.
    Returns:
        ``(B, N, C * P * P)``, patches in row-major grid order; each vector is
        ordered ``(channel, row, column)``, the order of a ``Conv2d`` weight
        ``(D, C, P, P)`` flattened, so ``patchify(x) @ W.reshape(D, -1).T + b``
        equals the strided convolution of :class:`PatchEmbed`.
    """
    b, c, h, w = images.shape
    if h % patch or w % patch:
        raise ValueError(f"image size {h}x{w} is not divisible by patch size {patch}")
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, gh, gw, C, P, P)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)


class PatchEmbed(nn.Module):
    """Patches to vectors: a ``Conv2d`` with kernel = stride = ``patch_size``.

    A convolution whose kernel tiles the image without overlap is a linear map
    applied to each patch: the same as :func:`patchify` then ``nn.Linear``
    (see :meth:`forward_unfold`). The convolution is simply the fast way.
    """

    def __init__(self, patch_size: int, in_chans: int, dim: int, *, crop_remainder: bool = False):
        super().__init__()
        self.patch_size, self.in_chans, self.crop_remainder = patch_size, in_chans, crop_remainder
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)

    def grid_size(self, images: Tensor) -> tuple[int, int]:
        """The patch grid ``(gh, gw)`` of ``(B, C, H, W)`` images; ValueError if they do not fit.

        A side that is not a multiple of the patch size is an error, unless
        ``crop_remainder`` is set: then the last ``H mod P`` rows and ``W mod P``
        columns are dropped, as a strided convolution (and Hugging Face) does.
        """
        if images.ndim != 4:
            raise ValueError(f"expected images of shape (batch, channels, height, width), got {tuple(images.shape)}")
        _, c, h, w = images.shape
        p = self.patch_size
        if c != self.in_chans:
            raise ValueError(f"images have {c} channels but the model expects in_chans={self.in_chans}")
        if h < p or w < p:
            raise ValueError(f"image size {h}x{w} (height x width) is smaller than one patch of {p}x{p}")
        if (h % p or w % p) and not self.crop_remainder:
            raise ValueError(f"image size {h}x{w} (height x width) is not divisible by patch_size={p}: "
                             f"height and width must both be multiples of {p} (or set crop_remainder)")
        return h // p, w // p

    def forward(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, N, D)``, patches in row-major order."""
        return self.tokens_and_grid(images)[0]

    def tokens_and_grid(self, images: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """``(B, C, H, W) -> ((B, N, D), (gh, gw))``: the patch embeddings and their grid, checked once."""
        grid = self.grid_size(images)
        return self.proj(images).flatten(2).transpose(1, 2), grid  # the conv drops any remainder itself

    def forward_unfold(self, images: Tensor) -> Tensor:
        """The same result with ``F.unfold`` + a matrix product, for the book's derivation.

        ``F.unfold`` returns ``(B, C * P * P, N)`` with each column ordered
        ``(channel, row, column)``, the same as :func:`patchify` and as the
        flattened conv weight.
        """
        gh, gw = self.grid_size(images)
        images = images[..., : gh * self.patch_size, : gw * self.patch_size]
        cols = F.unfold(images, kernel_size=self.patch_size, stride=self.patch_size).transpose(1, 2)
        return F.linear(cols, self.proj.weight.flatten(1), self.proj.bias)


# --------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------
@dataclass
class ViTConfig:
    """A Vision Transformer's hyper-parameters (defaults: ViT-B/16 at 224 px).

    Attributes:
        image_size: native resolution, ``int`` (square) or ``(H, W)``; sets the
            grid of learned positions, which are resampled for other sizes.
        patch_size, in_chans: patch side ``P`` and input channels ``C``.
        dim, n_layers, n_heads: width ``D``, number of blocks, attention heads.
        mlp_ratio / mlp_hidden: MLP hidden width ``mlp_ratio * dim`` unless
            ``mlp_hidden`` is given.  mlp: ``"gelu"``, ``"gelu_tanh"``, ``"relu"``,
            ``"silu"``, ``"quick_gelu"`` or ``"swiglu"``.
        qkv_bias: biases of the q/k/v projections.  norm_eps: LayerNorm epsilon
            (the JAX original and timm use 1e-6; Hugging Face ViT 1e-12).
        positions: ``"learned"`` (1-D table), ``"learned_2d"``, ``"relative"`` or ``"none"``
            (see :data:`POSITIONS`).
        pool: ``"cls"`` (token 0) or ``"mean"`` (over patch tokens) before the head.
        num_classes: classifier outputs; 0 means no head (``forward`` returns pooled features).
        class_token: prepend a learned CLS token (required by ``pool="cls"``).
        dropout: after the embeddings, inside residual branches and before the head.
        attn_dropout: on the attention weights.
        drop_path_rate: stochastic depth of the last block; block ``i`` gets
            ``drop_path_rate * i / (n_layers - 1)`` (linearly increasing).
        attn_impl: ``"eager"`` (math path) or ``"sdpa"`` (fused kernel).
        layerscale: initial LayerScale gain, or None for none (plain ViT).
        pos_antialias: antialiased bicubic when resampling positions (DINOv2 with registers).
        crop_remainder: accept sides that are not multiples of the patch size and drop
            the remainder, as Hugging Face's models do (the converted models set it);
            by default such an image is a ValueError.
    """

    image_size: int | tuple[int, int] = 224
    patch_size: int = 16
    in_chans: int = 3
    dim: int = 768
    n_layers: int = 12
    n_heads: int = 12
    mlp_ratio: float = 4.0
    mlp_hidden: int | None = None
    mlp: str = "gelu"
    qkv_bias: bool = True
    norm_eps: float = 1e-6
    positions: str = "learned"
    pool: str = "cls"
    num_classes: int = 1000
    class_token: bool = True
    dropout: float = 0.0
    attn_dropout: float = 0.0
    drop_path_rate: float = 0.0
    attn_impl: str = "sdpa"
    layerscale: float | None = None
    pos_antialias: bool = False
    crop_remainder: bool = False

    #: The named configs :meth:`preset` reads: :data:`PRESETS` here; each subclass sets its own table.
    presets: ClassVar[dict[str, dict]] = {}

    def __post_init__(self):
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' or 'mean', got {self.pool!r}")
        if self.pool == "cls" and not self.class_token:
            raise ValueError("pool='cls' needs class_token=True; use pool='mean' without a CLS token")
        if self.dim % self.n_heads:
            raise ValueError(f"dim={self.dim} must be divisible by n_heads={self.n_heads}")
        h, w = self.image_hw
        if h % self.patch_size or w % self.patch_size:
            raise ValueError(f"image_size {h}x{w} is not divisible by patch_size={self.patch_size}")

    @property
    def image_hw(self) -> tuple[int, int]:
        s = self.image_size
        return (s, s) if isinstance(s, int) else (int(s[0]), int(s[1]))

    @property
    def grid(self) -> tuple[int, int]:
        """The native patch grid ``(gh, gw)``."""
        h, w = self.image_hw
        return h // self.patch_size, w // self.patch_size

    def mlp_hidden_dim(self) -> int:
        return self.mlp_hidden if self.mlp_hidden is not None else int(self.dim * self.mlp_ratio)

    def block_config(self, drop_path: float = 0.0) -> BlockConfig:
        return BlockConfig(dim=self.dim, n_heads=self.n_heads, mlp_hidden=self.mlp_hidden_dim(), mlp=self.mlp,
                           norm="layernorm", norm_eps=self.norm_eps, norm_position="pre", qkv_bias=self.qkv_bias,
                           dropout=self.dropout, attn_dropout=self.attn_dropout, layerscale=self.layerscale,
                           drop_path=drop_path, attn_impl=self.attn_impl)

    @classmethod
    def preset(cls, name: str, **overrides) -> Self:
        """A named config from the class's :attr:`presets` (:data:`PRESETS` for a ViT), with optional field
        overrides."""
        if name not in cls.presets:
            family = cls.__name__.removesuffix("Config")
            raise ValueError(f"unknown {family} preset {name!r}; known: {sorted(cls.presets)}")
        return replace(cls(**cls.presets[name]), **overrides)

    def to_dict(self) -> dict:
        return asdict(self)


#: The ViT sizes by letter (Dosovitskiy et al., 2021, table 1: B, L, H; DeiT's Ti and S):
#: blocks ``L``, width ``D``, heads; the MLP is ``4 D`` wide in all of them.
SIZES: dict[str, dict] = {
    "Ti": dict(n_layers=12, dim=192, n_heads=3),
    "S": dict(n_layers=12, dim=384, n_heads=6),
    "B": dict(n_layers=12, dim=768, n_heads=12),
    "L": dict(n_layers=24, dim=1024, n_heads=16),
    "H": dict(n_layers=32, dim=1280, n_heads=16),
}
_TINY = dict(image_size=32, patch_size=8, dim=32, n_layers=2, n_heads=4, num_classes=10)
#: The published models (a size of :data:`SIZES` and a patch side, as :func:`variant` reads their names)
#: and tiny CPU ones.
PRESETS: dict[str, dict] = {
    **{f"vit-{size.lower()}/{patch}": dict(SIZES[size], patch_size=patch)
       for size, patch in (("Ti", 16), ("S", 16), ("B", 16), ("B", 32), ("L", 16), ("H", 14))},
    "vit-tiny-test": dict(_TINY),
    "vit-tiny-mean-test": dict(_TINY, pool="mean", class_token=False),
}
ViTConfig.presets = PRESETS


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------
class ViT(nn.Module):
    """Vision Transformer: patch embedding, CLS token, learned positions, pre-norm encoder, head.

    ``forward_features`` gives the normalized tokens (Hugging Face's
    ``last_hidden_state``), ``forward_head`` pools and classifies them.
    """

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.cfg = cfg
        self.grid = cfg.grid
        self.patch_embed = PatchEmbed(cfg.patch_size, cfg.in_chans, cfg.dim, crop_remainder=cfg.crop_remainder)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim)) if cfg.class_token else None
        n_cls = int(cfg.class_token)  # the CLS token (if any) has a position
        self.pos_embed = self.pos_rows = self.pos_cols = self.rel_pos = None
        if cfg.positions == "learned":
            self.pos_embed = nn.Parameter(torch.randn(1, n_cls + self.grid[0] * self.grid[1], cfg.dim) * 0.02)
        elif cfg.positions == "learned_2d":  # row half and column half; CLS keeps a whole vector of its own
            self.pos_embed = nn.Parameter(torch.randn(1, n_cls, cfg.dim) * 0.02)
            self.pos_rows = nn.Parameter(torch.randn(1, self.grid[0], cfg.dim // 2) * 0.02)
            self.pos_cols = nn.Parameter(torch.randn(1, self.grid[1], cfg.dim - cfg.dim // 2) * 0.02)
        elif cfg.positions == "relative":
            self.rel_pos = nn.ModuleList(RelativePositionBias(self.grid, cfg.n_heads, n_cls)
                                         for _ in range(cfg.n_layers))
        self.pos_drop = nn.Dropout(cfg.dropout)
        rates = [cfg.drop_path_rate * i / max(cfg.n_layers - 1, 1) for i in range(cfg.n_layers)]
        self.blocks = nn.ModuleList(Block(cfg.block_config(r)) for r in rates)
        self.norm = LayerNorm(cfg.dim, cfg.norm_eps)
        self.head_drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.dim, cfg.num_classes) if cfg.num_classes > 0 else nn.Identity()
        self._init_weights()

    def _init_weights(self):
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)
        for table in (self.pos_embed, self.pos_rows, self.pos_cols):
            if table is not None:
                nn.init.trunc_normal_(table, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    @property
    def n_prefix(self) -> int:
        """Tokens before the patches in the sequence (CLS; DINOv2 adds registers)."""
        return int(self.cls_token is not None)

    def pos_embed_for(self, grid: tuple[int, int]) -> Tensor:
        """Positions ``(1, n_pos + gh * gw, D)`` added to the tokens of a patch grid (``n_pos``: prefix tokens with
        a position), resampled bicubically (in float32) from the native grid when it differs.

        ``"learned_2d"``: row ``i`` and column ``j`` vectors concatenated (each resampled along its own axis);
        ``"relative"`` and ``"none"``: zeros, nothing is added to the input.
        """
        positions = self.cfg.positions
        if positions == "learned":
            return resample_pos_embed(self.pos_embed, grid, old_grid=self.grid,
                                      n_prefix=self.pos_embed.shape[1] - self.grid[0] * self.grid[1],
                                      mode="bicubic", antialias=self.cfg.pos_antialias)
        if positions == "learned_2d":
            rows, cols = self.pos_rows, self.pos_cols
            if tuple(grid) != tuple(self.grid):
                rows = F.interpolate(rows.transpose(1, 2).float(), size=grid[0], mode="linear", align_corners=False)
                cols = F.interpolate(cols.transpose(1, 2).float(), size=grid[1], mode="linear", align_corners=False)
                rows, cols = rows.transpose(1, 2).to(self.pos_rows.dtype), cols.transpose(1, 2).to(self.pos_cols.dtype)
            table = torch.cat([rows[:, :, None].expand(-1, -1, grid[1], -1),
                               cols[:, None].expand(-1, grid[0], -1, -1)], dim=-1).flatten(1, 2)  # (1, gh*gw, D)
            return torch.cat([self.pos_embed, table], dim=1)
        n_cls = int(self.cls_token is not None)
        return self.patch_embed.proj.weight.new_zeros(1, n_cls + grid[0] * grid[1], self.cfg.dim)

    def attention_bias(self, layer: int, grid: tuple[int, int]) -> dict:
        """The extra arguments of block ``layer``'s attention: ``{"bias": (heads, T, T)}`` for relative positions,
        else none."""
        if self.rel_pos is None:
            return {}
        if tuple(grid) != tuple(self.grid):
            raise ValueError(f"relative positions were learned on the {self.grid} grid; got a {tuple(grid)} grid")
        return {"bias": self.rel_pos[layer]()}

    def embed(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, 1 + N, D)``: the encoder's input ``z_0`` (eq. 1), by :func:`prepend_cls_add_pos`."""
        return self.embed_patches(*self.patch_embed.tokens_and_grid(images))

    def embed_patches(self, patches: Tensor, grid: tuple[int, int]) -> Tensor:
        """``(B, N, D)`` patch embeddings of a ``(gh, gw)`` grid -> ``(B, 1 + N, D)``: prefix tokens and positions."""
        pos = self.pos_embed_for(grid)
        if self.cls_token is None:  # pool="mean" models without a CLS token: positions only
            return self.pos_drop(patches + pos)
        return self.pos_drop(prepend_cls_add_pos(patches, self.cls_token, pos))

    def encode(self, tokens: Tensor, grid: tuple[int, int] | None = None) -> Tensor:
        """``(B, T, D) -> (B, T, D)``: the blocks (eqs. 2-3) then the final LayerNorm (eq. 4).

        ``grid``: the patch grid of the tokens (the native one if None), for relative positions.
        """
        grid = self.grid if grid is None else grid
        for i, block in enumerate(self.blocks):
            tokens = block(tokens, **self.attention_bias(i, grid))
        return self.norm(tokens)

    def forward_features(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, 1 + N, D)``, the normalized tokens (HF ``last_hidden_state``).

        Any ``H, W`` that are multiples of the patch size work: the positions are
        resampled to the grid (as HF's ``interpolate_pos_encoding=True``).
        """
        patches, grid = self.patch_embed.tokens_and_grid(images)
        return self.encode(self.embed_patches(patches, grid), grid)

    def forward_head(self, features: Tensor, pre_logits: bool = False) -> Tensor:
        """``(B, T, D) -> (B, num_classes)``; ``(B, D)`` pooled features if ``pre_logits``.

        ``pool="cls"`` reads token 0 only; ``"mean"`` averages the patch tokens
        (prefix tokens excluded).
        """
        if self.cfg.pool == "cls":
            pooled = features[:, 0]
        else:
            pooled = features[:, self.n_prefix:].mean(dim=1)
        pooled = self.head_drop(pooled)
        return pooled if pre_logits else self.head(pooled)

    def forward(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, num_classes)`` logits (pooled ``(B, D)`` if ``num_classes == 0``)."""
        return self.forward_head(self.forward_features(images))

    @torch.no_grad()
    def get_attention_maps(self, images: Tensor, layers: Sequence[int] | None = None) -> list[Tensor]:
        """Attention weights of the blocks in ``layers`` (all when None): one tensor ``(B, heads, T, T)`` each.

        A block in ``layers`` (an index, negative from the end) is asked for its
        weights (``return_weights=True``, always the math path); the others run
        as in :meth:`forward_features`, fused, so asking for the last block alone
        costs about one forward pass. The maps come in the order of ``layers``.
        """
        n = len(self.blocks)
        wanted = range(n) if layers is None else [int(i) for i in layers]
        if any(not -n <= i < n for i in wanted):
            raise ValueError(f"layers must be block indices in [{-n}, {n}), got {list(wanted)}")
        asked = {i % n for i in wanted}
        if not asked:
            return []
        patches, grid = self.patch_embed.tokens_and_grid(images)
        x, maps = self.embed_patches(patches, grid), {}
        for i, block in enumerate(self.blocks[: max(asked) + 1]):
            if i in asked:
                x, maps[i] = block(x, return_weights=True, **self.attention_bias(i, grid))
            else:
                x = block(x, **self.attention_bias(i, grid))
        return [maps[i % n] for i in wanted]

    def num_params(self, include_embeddings: bool = True) -> int:
        """Parameter count; without the position table (and CLS) if ``include_embeddings=False``."""
        n = sum(p.numel() for p in self.parameters())
        if not include_embeddings:
            tables = [self.pos_embed, self.pos_rows, self.pos_cols, self.cls_token]
            n -= sum(t.numel() for t in tables if t is not None)
        return n


class RelativePositionBias(nn.Module):
    """A learned attention-score bias per head for every 2-D offset between patches: ``() -> (heads, T, T)``.

    Attention then depends on where a key sits *relative to* the query, not on
    absolute positions (Shaw et al., 2018, in the 2-D form of Swin and BEiT).
    Pairs involving a prefix token (CLS) get one of three extra learned biases
    per head: prefix to patch, patch to prefix, prefix to prefix. The offsets are
    numbered by :func:`~course_lib.positional.relative_position_index`, as Swin's windows.
    """

    def __init__(self, grid: tuple[int, int], n_heads: int, n_prefix: int = 1):
        super().__init__()
        gh, gw = grid
        n_offsets = (2 * gh - 1) * (2 * gw - 1)
        self.table = nn.Parameter(torch.zeros(n_heads, n_offsets + 3))
        index = torch.full((n_prefix + gh * gw,) * 2, n_offsets + 2, dtype=torch.long)  # prefix -> prefix
        index[n_prefix:, n_prefix:] = relative_position_index(grid)
        index[:n_prefix, n_prefix:] = n_offsets      # a prefix token asks a patch
        index[n_prefix:, :n_prefix] = n_offsets + 1  # a patch asks a prefix token
        self.register_buffer("index", index, persistent=False)

    def forward(self) -> Tensor:
        return self.table[:, self.index]


# --------------------------------------------------------------------------
# The same model as plain functions (the book's walk-through and exercises)
# --------------------------------------------------------------------------
def prepend_cls_add_pos(patches: Tensor, cls_token: Tensor, pos_embed: Tensor) -> Tensor:
    """Eq. 1 after the projection: ``[x_class; x_p^1 E; ...; x_p^N E] + E_pos``.

    Args:
        patches: ``(B, N, D)`` projected patches.
        cls_token: ``(1, 1, D)``, the learned CLS vector, shared by every image.
        pos_embed: ``(1, 1 + N, D)``, the learned positions; entry 0 is the CLS token's.
    Returns:
        ``(B, 1 + N, D)``.
    """
    cls = cls_token.expand(patches.shape[0], -1, -1).to(patches.dtype)
    return torch.cat([cls, patches], dim=1) + pos_embed


def vit_forward(images: Tensor, patch_proj: nn.Module, cls_token: Tensor, pos_embed: Tensor, blocks, norm: nn.Module,
                head: nn.Module) -> Tensor:
    """A whole ViT classifier (eqs. 1-4 and the head) from its parts, at the native grid.

    Args:
        images: ``(B, C, H, W)``.
        patch_proj: the ``Conv2d(C, D, kernel_size=P, stride=P)`` patch projection.
        cls_token: ``(1, 1, D)``.  pos_embed: ``(1, 1 + N, D)``.
        blocks: the encoder blocks, applied in order.  norm: the final LayerNorm.
        head: ``D -> num_classes``, applied to the normalized CLS token.
    Returns:
        ``(B, num_classes)`` logits; ``ViT(cfg)(images)`` for a CLS-pooled ``ViT``'s parts.
    """
    patches = patch_proj(images).flatten(2).transpose(1, 2)  # (B, N, D), row-major
    tokens = prepend_cls_add_pos(patches, cls_token, pos_embed)
    for block in blocks:
        tokens = block(tokens)
    return head(norm(tokens)[:, 0])


# --------------------------------------------------------------------------
# What a trained ViT learns
# --------------------------------------------------------------------------
def patch_distances(grid: tuple[int, int], patch: int = 1) -> Tensor:
    """Euclidean distances ``(N, N)`` between patch centres of a row-major ``(gh, gw)`` grid, in pixels."""
    ys, xs = torch.meshgrid(torch.arange(grid[0]), torch.arange(grid[1]), indexing="ij")
    centres = torch.stack([ys.flatten(), xs.flatten()], dim=1).double() * patch
    return torch.cdist(centres, centres)


def mean_attention_distance(weights: Tensor, grid: tuple[int, int], patch: int = 1,
                            n_prefix: int = 1) -> Tensor:
    """Mean attention distance of each head (Dosovitskiy et al., 2021, fig. 7), in pixels.

    For every patch query, the distances to the patch keys are averaged with its
    attention weights (renormalized over the patch keys: prefix tokens such as
    CLS have no place in the image); the result is averaged over queries and images.

    Args:
        weights: ``(B, heads, T, T)`` attention weights, ``T = n_prefix + gh * gw``.
    Returns:
        ``(heads,)`` in the dtype of ``weights``.
    """
    w = weights[..., n_prefix:, n_prefix:].double()
    w = w / w.sum(dim=-1, keepdim=True).clamp_min(1e-12)
    dist = patch_distances(grid, patch).to(w.device)
    return (w * dist).sum(dim=-1).mean(dim=(0, 2)).to(weights.dtype)


# --------------------------------------------------------------------------
# The paper's variants, what one image costs, and the fine-tuning head
# --------------------------------------------------------------------------
def variant(name: str, **overrides) -> ViTConfig:
    """The config of a ViT named as in the paper: ``"ViT-L/16"`` is the Large size with ``16 x 16`` patches.

    ``name`` is ``[ViT-]<size>/<P>`` (any case): a size of :data:`SIZES` and a patch side ``P`` that
    divides the image size (224 unless overridden). ``overrides`` set any other field of
    :class:`ViTConfig` (``image_size``, ``num_classes``...). ``variant("ViT-B/16")`` equals
    ``ViTConfig.preset("vit-b/16")``.
    """
    if not isinstance(name, str):
        raise ValueError(f"variant name must be a string such as 'ViT-L/16', got {name!r}")
    text = name.strip()
    if text.lower().startswith("vit-"):
        text = text[4:]
    size, _, patch = text.partition("/")
    by_lower = {k.lower(): k for k in SIZES}
    if size.lower() not in by_lower or not patch.isdigit() or int(patch) < 1:
        raise ValueError(f"variant name {name!r} must read '[ViT-]<size>/<patch>', with size one of {list(SIZES)} "
                         f"and patch a whole number >= 1 (e.g. 'ViT-L/16')")
    return ViTConfig(**{**SIZES[by_lower[size.lower()]], "patch_size": int(patch), **overrides})  # checks P | size


def zero_head(model: ViT, num_classes: int) -> nn.Linear:
    """Give ``model`` a new, zero-initialised classifier ``D -> num_classes`` (the paper's fine-tuning head).

    The pre-training head is dropped; the new ``nn.Linear`` has zero weights and biases, on the device
    and in the dtype of the patch projection, and ``model.cfg.num_classes`` is updated. Until its first
    update every logit is exactly 0, so the first loss is ``ln K`` and no gradient reaches the
    backbone (every path to it goes through the zero weight matrix). Returns the new head.
    """
    if not isinstance(model, ViT):
        raise ValueError(f"zero_head expects a course_lib ViT, got {type(model).__name__}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes={num_classes!r} must be a whole number >= 1 (the new task's classes)")
    ref = model.patch_embed.proj.weight
    head = nn.Linear(model.cfg.dim, num_classes, device=ref.device, dtype=ref.dtype)
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    model.head = head
    model.cfg = replace(model.cfg, num_classes=num_classes)
    return head
