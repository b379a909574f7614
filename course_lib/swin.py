"""Swin Transformer V1 and V2: attention inside shifted windows (chapter 11).

Notation: an image ``(batch, channels, height, width)`` becomes a feature map
``(batch, H, W, C)`` of patch tokens, kept flat as ``(batch, H * W, C)``
between blocks. ``ws`` is the window side, ``N = ws * ws`` tokens per window,
``nW`` windows per image.

One stage = blocks alternating W-MSA (regular windows) and SW-MSA (windows
shifted by ``ws // 2``, Liu et al., 2021, sec. 3.2), then patch merging
(2x2 neighbours concatenated, ``4C -> 2C``), which halves the resolution.

Attention within a window (V1, eq. 4; V2, Liu et al., 2022, sec. 3.1-3.3)::

    V1: softmax(Q K^T / sqrt(d) + B) V,           B from a learned table indexed
                                                   by the relative position index
    V2: softmax(cos(Q, K) * tau + 16 sigmoid(B)) V, tau = exp(min(t, log 100)) per
                                                   head, B from an MLP of log-spaced
                                                   relative coordinates

Both reach the shared :func:`course_lib.attention.scaled_dot_product_attention`
through its additive ``bias`` hook (position bias plus the shifted-window mask).

Rules copied from Hugging Face ``SwinModel`` / ``Swinv2Model`` so that
converted checkpoints give the same numbers:

* A feature map that does not divide into windows is zero-padded at the
  bottom/right *before* the cyclic shift; padded tokens take part in attention
  (only the shift regions are masked) and are cropped afterwards.
* The shift mask adds -100 (not -inf) between tokens of different regions.
  V2 adds it twice (-200), as HF does.
* Window fitting: when the feature map is no larger than the window
  (``res <= ws``), the window shrinks to ``res`` and the shift is switched off.
  V1 applies this at run time with ``res = min(H, W)`` of the actual feature
  map; V2 applies it once, at construction, with ``res`` = the *height* of the
  configured ``image_size`` at that stage. (HF V1 raises if ``min(H, W) < ws``
  because its bias table no longer fits; here the smaller window reads the
  same table at its own offsets. HF V1 also stores the shrunk window on the
  layer, so later larger inputs keep it; here the rule is applied per call.)
* Odd feature sizes are padded by one row/column before patch merging;
  images are padded to a multiple of the patch size before the patch conv.
* The patch-embedding and patch-merging LayerNorms use eps 1e-5 whatever
  ``norm_eps`` says (HF ignores ``layer_norm_eps`` there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.attention import scaled_dot_product_attention
from course_lib.blocks import Block, BlockConfig
from course_lib.multi_head import MultiHeadAttention, merge_heads, split_heads
from course_lib.norms import LayerNorm
from course_lib.positional import relative_position_index

__all__ = [
    "SwinConfig", "PRESETS", "window_partition", "window_reverse", "relative_position_index",
    "log_spaced_relative_coords", "shifted_window_mask", "fit_window", "SwinPatchEmbed", "PatchMerging",
    "WindowAttention", "swin_block", "SwinStage", "Swin", "shift_regions", "merge_2x2", "cosine_attention",
    "LOGIT_SCALE_MAX", "stage_shapes",
]

MASK_VALUE = -100.0  #: additive score between tokens of different shift regions (HF, original code)
FIXED_EPS = 1e-5  #: eps of the patch-embedding and patch-merging norms
LOGIT_SCALE_MAX = math.log(100.0)  #: V2 clamps the learnable log-temperature here (tau <= 100)


@dataclass
class SwinConfig:
    """Sizes of a Swin (``version=1``) or Swin V2 (``version=2``) model.

    Stage ``i`` has width ``dim * 2**i``, ``depths[i]`` blocks and
    ``n_heads[i]`` heads. ``image_size`` (height, width) is the training
    resolution: V2 fits its windows to it (see the module docstring); any input
    size is accepted. ``pretrained_window_sizes`` (V2): the window the
    continuous position bias was trained with, per stage (0 = this window).
    ``mlp_ratio``: MLP hidden width / stage width; ``act``: its activation (see
    :data:`course_lib.mlp.ACTIVATIONS`). ``qkv_bias``: biases of the query and
    value projections (and of the key projection in V1; V2 has none).
    ``norm_eps``: the block and final norms. ``num_classes=0``: no head.
    ``drop_path_rate``: stochastic depth of the last block, rising linearly from 0.
    ``attn_impl``: ``"eager"`` (math path) or ``"sdpa"`` (fused kernel).
    """

    version: int = 1
    image_size: int | tuple[int, int] = 224
    patch_size: int = 4
    in_chans: int = 3
    dim: int = 96
    depths: tuple[int, ...] = (2, 2, 6, 2)
    n_heads: tuple[int, ...] = (3, 6, 12, 24)
    window_size: int = 7
    mlp_ratio: float = 4.0
    qkv_bias: bool = True
    norm_eps: float = 1e-5
    act: str = "gelu"
    pretrained_window_sizes: tuple[int, ...] | None = None
    num_classes: int = 0
    drop_path_rate: float = 0.0
    attn_impl: str = "sdpa"

    def __post_init__(self):
        if isinstance(self.image_size, int):
            self.image_size = (self.image_size, self.image_size)
        self.image_size = tuple(self.image_size)
        self.depths, self.n_heads = tuple(self.depths), tuple(self.n_heads)
        if self.pretrained_window_sizes is None:
            self.pretrained_window_sizes = (0,) * len(self.depths)
        self.pretrained_window_sizes = tuple(self.pretrained_window_sizes)
        if self.version not in (1, 2):
            raise ValueError(f"version must be 1 (Swin) or 2 (Swin V2), got {self.version!r}")
        if not len(self.depths) == len(self.n_heads) == len(self.pretrained_window_sizes):
            raise ValueError(f"depths {self.depths}, n_heads {self.n_heads} and pretrained_window_sizes "
                             f"{self.pretrained_window_sizes} must have one entry per stage")
        if self.window_size < 1 or self.patch_size < 1:
            raise ValueError(f"window_size ({self.window_size}) and patch_size ({self.patch_size}) must be >= 1")
        for i, heads in enumerate(self.n_heads):
            if self.stage_dim(i) % heads:
                raise ValueError(f"stage {i}: width {self.stage_dim(i)} (dim {self.dim} * 2**{i}) is "
                                 f"not divisible by n_heads={heads}; every head needs an equal share of channels")

    def stage_dim(self, i: int) -> int:
        return self.dim * 2**i

    @property
    def num_features(self) -> int:
        """Width of the last stage (and of ``forward_features``)."""
        return self.stage_dim(len(self.depths) - 1)

    @classmethod
    def preset(cls, name: str, **overrides) -> "SwinConfig":
        """A named size from :data:`PRESETS`, with optional field overrides."""
        if name not in PRESETS:
            raise ValueError(f"unknown Swin preset {name!r}; known: {sorted(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


_T = dict(dim=96, depths=(2, 2, 6, 2), n_heads=(3, 6, 12, 24), num_classes=1000)
_S = dict(_T, depths=(2, 2, 18, 2))
_B = dict(_S, dim=128, n_heads=(4, 8, 16, 32))
_V1, _V2 = dict(version=1, window_size=7, image_size=224), dict(version=2, window_size=8, image_size=256)
_TEST = dict(image_size=32, dim=16, depths=(2, 2), n_heads=(2, 4), window_size=4, num_classes=10)
#: Published sizes (Liu et al., 2021, table 1; 2022, ImageNet-1k at 256 px) and tiny CPU test models.
PRESETS: dict[str, dict] = {
    "swin-t": dict(_V1, **_T), "swin-s": dict(_V1, **_S), "swin-b": dict(_V1, **_B),
    "swinv2-t": dict(_V2, **_T), "swinv2-s": dict(_V2, **_S), "swinv2-b": dict(_V2, **_B),
    "swin-tiny-test": dict(_TEST, version=1), "swinv2-tiny-test": dict(_TEST, version=2),
}


# --------------------------------------------------------------------------
# Windows, indices and masks
# --------------------------------------------------------------------------
def window_partition(x: Tensor, ws: int) -> Tensor:
    """``(B, H, W, C) -> (B * nW, ws * ws, C)``: non-overlapping windows, row-major within and across."""
    b, h, w, c = x.shape
    if h % ws or w % ws:
        raise ValueError(f"feature map {h}x{w} does not divide into windows of {ws}x{ws}; pad it first")
    x = x.view(b, h // ws, ws, w // ws, ws, c).transpose(2, 3)
    return x.reshape(-1, ws * ws, c)


def window_reverse(windows: Tensor, ws: int, h: int, w: int) -> Tensor:
    """``(B * nW, ws * ws, C) -> (B, H, W, C)``; the inverse of :func:`window_partition`."""
    c = windows.shape[-1]
    x = windows.view(-1, h // ws, w // ws, ws, ws, c).transpose(2, 3)
    return x.reshape(-1, h, w, c)


def log_spaced_relative_coords(ws: int, pretrained_ws: int = 0) -> Tensor:
    """Swin V2's CPB input, ``((2ws-1)^2, 2)``: offsets ``(dy, dx)`` in the table order of
    :func:`relative_position_index`, scaled to [-8, 8] by ``pretrained_ws - 1`` (or ``ws - 1``),
    then ``sign(x) * log2(1 + |x|) / log2(8)``: the official code's form of V2's log-spaced
    coordinates ``sign(x) * log(1 + |x|)`` (V2 eq. 4)."""
    r = torch.arange(-(ws - 1), ws, dtype=torch.float32)
    table = torch.stack(torch.meshgrid(r, r, indexing="ij"), dim=-1).reshape(-1, 2)
    span = pretrained_ws if pretrained_ws > 0 else ws
    if span > 1:
        table = table / (span - 1)
    table = table * 8
    return torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8)


def shift_regions(h: int, w: int, ws: int, shift: int, *, device=None) -> Tensor:
    """``(h, w)`` long labels 0..8 of the regions of a map rolled by ``-shift``.

    Each axis is cut into ``[0, n-ws)``, ``[n-ws, n-shift)``, ``[n-shift, n)``
    (0, 1, 2); a token's label is ``3 * row_region + col_region``. Tokens with
    different labels were not neighbours before the roll.
    """
    def regions(n):
        i = torch.arange(n, device=device)
        return (i >= n - ws).long() + (i >= n - shift).long()

    return regions(h)[:, None] * 3 + regions(w)[None, :]


def shifted_window_mask(h: int, w: int, ws: int, shift: int, *, device=None, dtype=torch.float32) -> Tensor:
    """Additive mask ``(nW, N, N)`` of SW-MSA on a (padded) ``h x w`` map shifted by ``shift``.

    After ``roll(-shift)`` the last window of each axis holds tokens from both
    ends of the map. Two tokens of one window whose :func:`shift_regions`
    label differs get ``-100`` (:data:`MASK_VALUE`), others 0.
    """
    label = shift_regions(h, w, ws, shift, device=device).to(dtype)  # (h, w)
    label = window_partition(label[None, :, :, None], ws).squeeze(-1)  # (nW, N)
    differ = label[:, None, :] != label[:, :, None]
    return torch.zeros(differ.shape, device=device, dtype=dtype).masked_fill(differ, MASK_VALUE)


def stage_shapes(cfg: SwinConfig, image_size: int | tuple[int, int] | None = None) -> list[dict]:
    """Per stage: feature-map ``height``, ``width``, channels ``dim``, ``depth``, ``heads``, ``window``, ``tokens``.

    ``image_size`` defaults to ``cfg.image_size``. Stage ``i`` sees
    ``(H / (P 2^i), W / (P 2^i), C 2^i)`` (rounded up, as the model pads).
    """
    size = cfg.image_size if image_size is None else image_size
    h, w = (size, size) if isinstance(size, int) else size
    h, w = -(-h // cfg.patch_size), -(-w // cfg.patch_size)
    rows = []
    for i in range(len(cfg.depths)):
        ws = min(cfg.window_size, h, w) if cfg.version == 1 else fit_window(
            cfg.image_size[0] // cfg.patch_size // 2**i, cfg.window_size, 0)[0]
        rows.append(dict(stage=i + 1, height=h, width=w, dim=cfg.stage_dim(i), depth=cfg.depths[i],
                         heads=cfg.n_heads[i], window=ws, tokens=h * w))
        h, w = -(-h // 2), -(-w // 2)
    return rows


def fit_window(res: int, ws: int, shift: int) -> tuple[int, int]:
    """HF's rule: a map no larger than the window (``res <= ws``) is one window, unshifted."""
    return (res, 0) if res <= ws else (ws, shift)


# --------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------
class SwinPatchEmbed(nn.Module):
    """Patch partition + linear embedding as one strided conv, then LayerNorm.

    ``(B, in_chans, height, width) -> ((B, H * W, dim), (H, W))`` with
    ``H = ceil(height / patch)``: the image is zero-padded at the bottom/right.
    ViT's :class:`~course_lib.vit.PatchEmbed` is the same conv without the padding
    and the norm, and returns the tokens alone.
    """

    def __init__(self, patch: int, in_chans: int, dim: int):
        super().__init__()
        self.patch, self.in_chans = patch, in_chans
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch, stride=patch)
        self.norm = LayerNorm(dim, FIXED_EPS)

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        if x.ndim != 4 or x.shape[1] != self.in_chans:
            raise ValueError(f"expected images (batch, {self.in_chans}, height, width), got shape "
                             f"{tuple(x.shape)}: the channel count must equal in_chans={self.in_chans}")
        h, w = x.shape[-2:]
        if h < self.patch or w < self.patch:
            raise ValueError(f"image {h}x{w} is smaller than one patch ({self.patch}x{self.patch}); "
                             f"height and width must be >= patch_size")
        x = F.pad(x, (0, -w % self.patch, 0, -h % self.patch))
        x = self.proj(x)
        hw = (x.shape[-2], x.shape[-1])
        return self.norm(x.flatten(2).transpose(1, 2)), hw


def merge_2x2(x: Tensor, hw: tuple[int, int]) -> tuple[Tensor, tuple[int, int]]:
    """``((B, H*W, C), (H, W)) -> ((B, H2*W2, 4C), (H2, W2))``, ``H2 = ceil(H/2)``: each 2x2 neighbourhood
    concatenated along channels in the order ``x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]``
    (top-left, bottom-left, top-right, bottom-right); an odd side is zero-padded by one first."""
    (h, w), (b, _, c) = hw, x.shape
    x = F.pad(x.view(b, h, w, c), (0, 0, 0, w % 2, 0, h % 2))
    x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
    return x.reshape(b, -1, 4 * c), (x.shape[1], x.shape[2])


class PatchMerging(nn.Module):
    """Concatenate each 2x2 neighbourhood and project: ``((B, H*W, C), (H, W)) -> (B, ceil(H/2)*ceil(W/2), 2C)``.

    Channel order of the concatenation: ``x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]``.
    V1 normalizes then reduces (LayerNorm(4C), Linear 4C->2C); V2 reduces then
    normalizes (LayerNorm(2C)). An odd side is zero-padded by one first.
    """

    def __init__(self, dim: int, *, norm_after: bool = False):
        super().__init__()
        self.norm_after = norm_after
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = LayerNorm(2 * dim if norm_after else 4 * dim, FIXED_EPS)

    def forward(self, x: Tensor, hw: tuple[int, int]) -> tuple[Tensor, tuple[int, int]]:
        x, hw = merge_2x2(x, hw)
        x = self.norm(self.reduction(x)) if self.norm_after else self.reduction(self.norm(x))
        return x, hw


def cosine_attention(q: Tensor, k: Tensor, v: Tensor, logit_scale: Tensor, bias: Tensor | None = None, *,
                     dropout_p: float = 0.0, attn_impl: str = "eager") -> Tensor:
    """Swin V2's scaled cosine attention (Liu et al., 2022, eq. 2)::

        softmax(cos(q_i, k_j) * tau + bias_ij) v,   tau = exp(min(logit_scale, log 100))

    ``q``, ``k``: ``(..., heads, n, d)``; ``v``: ``(..., heads, n, d_v)``;
    ``logit_scale``: ``(heads, 1, 1)`` (learned, log of the temperature);
    ``bias``: additive, broadcastable to ``(..., heads, n, n)``, or None.
    Cosines lie in [-1, 1], so the scores before the bias are bounded by ``tau <= 100``.
    """
    tau = logit_scale.clamp(max=LOGIT_SCALE_MAX).exp()
    q, k = F.normalize(q, dim=-1) * tau, F.normalize(k, dim=-1)
    return scaled_dot_product_attention(q, k, v, bias=bias, scale=1.0, dropout_p=dropout_p, attn_impl=attn_impl)


class WindowAttention(nn.Module):
    """(S)W-MSA: multi-head self-attention within (shifted) windows, with a relative position bias.

    ``((B, H*W, C), (H, W)) -> (B, H*W, C)``: the attention module that Swin
    plugs into the shared :class:`~course_lib.blocks.Block`. The projections are
    a shared :class:`~course_lib.multi_head.MultiHeadAttention` (``self.mha``);
    the position bias and the shift mask enter through its additive ``bias`` hook.
    ``shift`` is 0 (W-MSA) or ``ws // 2`` (SW-MSA).

    * V1: ``relative_position_bias_table`` ``((2ws-1)^2, heads)``, read through
      :func:`relative_position_index`.
    * V2: cosine attention: queries and keys are L2-normalized, the scores
      multiplied by ``exp(min(logit_scale, log 100))`` per head, and the bias is
      ``16 * sigmoid(cpb_mlp(log-spaced offsets))``. The key projection has no
      bias (only query and value do), and the shift mask is added twice.
    """

    def __init__(self, dim: int, n_heads: int, ws: int, shift: int = 0, *, version: int = 1, qkv_bias: bool = True,
                 pretrained_ws: int = 0, attn_impl: str = "sdpa"):
        super().__init__()
        self.version, self.n_heads, self.window_size, self.shift = version, n_heads, ws, shift
        self.mha = MultiHeadAttention(dim, n_heads, qkv_bias=qkv_bias, k_bias=qkv_bias and version == 1,
                                      attn_impl=attn_impl)
        self.register_buffer("rel_index", relative_position_index(ws), persistent=False)
        if version == 1:
            self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, n_heads))
        else:
            self.logit_scale = nn.Parameter(torch.full((n_heads, 1, 1), math.log(10.0)))
            self.cpb_mlp = nn.Sequential(nn.Linear(2, 512), nn.ReLU(), nn.Linear(512, n_heads, bias=False))
            self.register_buffer("rel_coords", log_spaced_relative_coords(ws, pretrained_ws), persistent=False)

    def position_bias(self, ws: int) -> Tensor:
        """``(heads, N, N)`` bias for a window of side ``ws`` (V1 may run a window smaller than the table's)."""
        index = self.rel_index if ws == self.window_size else relative_position_index(ws, self.window_size)
        if self.version == 1:
            table = self.relative_position_bias_table
        else:
            table = 16 * torch.sigmoid(self.cpb_mlp(self.rel_coords))
        return table[index.to(table.device)].permute(2, 0, 1)

    def cosine_scale(self) -> Tensor:
        """V2's per-head temperature ``exp(min(logit_scale, log 100))``, ``(heads, 1, 1)``."""
        return self.logit_scale.clamp(max=LOGIT_SCALE_MAX).exp()

    def attend_windows(self, x: Tensor, ws: int, mask: Tensor | None = None) -> Tensor:
        """``x``: ``(B * nW, N, C)`` windows; ``mask``: ``(nW, N, N)`` additive or None. Returns ``(B * nW, N, C)``."""
        bias = self.position_bias(ws)[None]  # (1, heads, N, N)
        if mask is not None:
            mask = mask if self.version == 1 else mask + mask  # HF V2 adds the mask twice
            bias = (bias + mask[:, None]).repeat(x.shape[0] // mask.shape[0], 1, 1, 1)  # (B * nW, heads, N, N)
        if self.version == 1:
            return self.mha(x, bias=bias)
        m = self.mha
        q, k, v = (split_heads(proj(x), self.n_heads) for proj in (m.q_proj, m.k_proj, m.v_proj))
        p = m.dropout if self.training else 0.0
        out = cosine_attention(q, k, v, self.logit_scale, bias, dropout_p=p, attn_impl=m.attn_impl)
        return m.out_proj(merge_heads(out))

    def forward(self, x: Tensor, hw: tuple[int, int]) -> Tensor:
        """Pad, shift, partition, attend, merge, unshift, crop: ``(B, H*W, C) -> (B, H*W, C)``."""
        (h, w), (b, _, c) = hw, x.shape
        ws, shift = self.window_size, self.shift
        if self.version == 1:
            ws, shift = fit_window(min(h, w), ws, shift)
        x = F.pad(x.view(b, h, w, c), (0, 0, 0, -w % ws, 0, -h % ws))  # pad *before* the roll, as HF
        hp, wp = x.shape[1], x.shape[2]
        mask = None
        if shift:
            x = torch.roll(x, (-shift, -shift), dims=(1, 2))
            mask = shifted_window_mask(hp, wp, ws, shift, device=x.device, dtype=x.dtype)
        x = window_reverse(self.attend_windows(window_partition(x, ws), ws, mask), ws, hp, wp)
        if shift:
            x = torch.roll(x, (shift, shift), dims=(1, 2))
        return x[:, :h, :w].reshape(b, h * w, c)


def swin_block(dim: int, n_heads: int, ws: int, shift: int, *, version: int = 1, mlp_ratio: float = 4.0,
               qkv_bias: bool = True, eps: float = 1e-5, act: str = "gelu", drop_path: float = 0.0,
               pretrained_ws: int = 0, attn_impl: str = "sdpa") -> Block:
    """A Swin block: the shared :class:`~course_lib.blocks.Block` with :class:`WindowAttention` plugged in.

    Called as ``block(x, hw=(H, W))``: ``(B, H*W, C) -> (B, H*W, C)``. V1 is
    pre-norm, ``x + attn(norm(x))``; V2 is res-post-norm, ``x + norm(attn(x))``
    (V2 sec. 3.1). ``shift`` is 0 (W-MSA) or ``ws // 2`` (SW-MSA).
    """
    cfg = BlockConfig(dim=dim, n_heads=n_heads, mlp_hidden=int(mlp_ratio * dim), mlp=act, norm_eps=eps,
                      norm_position="pre" if version == 1 else "res_post", drop_path=drop_path, attn_impl=attn_impl)
    attn = WindowAttention(dim, n_heads, ws, shift, version=version, qkv_bias=qkv_bias, pretrained_ws=pretrained_ws,
                           attn_impl=attn_impl)
    return Block(cfg, attn=attn)


class SwinStage(nn.Module):
    """``depth`` blocks, alternately unshifted and shifted, then (except last) patch merging."""

    def __init__(self, cfg: SwinConfig, i: int, drop_paths: list[float]):
        super().__init__()
        dim, ws, shift = cfg.stage_dim(i), cfg.window_size, cfg.window_size // 2
        if cfg.version == 2:  # fitted once, to the configured image height at this stage
            ws, shift = fit_window(cfg.image_size[0] // cfg.patch_size // 2**i, ws, shift)
        self.blocks = nn.ModuleList(
            swin_block(dim, cfg.n_heads[i], ws, shift if j % 2 else 0, version=cfg.version, mlp_ratio=cfg.mlp_ratio,
                       qkv_bias=cfg.qkv_bias, eps=cfg.norm_eps, act=cfg.act, drop_path=drop_paths[j],
                       pretrained_ws=cfg.pretrained_window_sizes[i], attn_impl=cfg.attn_impl)
            for j in range(cfg.depths[i]))
        last = i == len(cfg.depths) - 1
        self.merge = None if last else PatchMerging(dim, norm_after=cfg.version == 2)

    def forward(self, x: Tensor, hw: tuple[int, int]) -> tuple[Tensor, tuple[int, int]]:
        for block in self.blocks:
            x = block(x, hw=hw)
        return (x, hw) if self.merge is None else self.merge(x, hw)


class Swin(nn.Module):
    """Swin Transformer (V1 or V2, by ``cfg.version``).

    ``forward_features``: ``(B, in_chans, height, width) -> (B, N_last, C_last)``, the final
    LayerNorm included (HF's ``last_hidden_state``). ``forward_head``: average over tokens, then
    the linear head. ``forward``: both.
    """

    def __init__(self, cfg: SwinConfig):
        super().__init__()
        self.cfg = cfg
        self.patch_embed = SwinPatchEmbed(cfg.patch_size, cfg.in_chans, cfg.dim)
        n = sum(cfg.depths)
        rates = [cfg.drop_path_rate * i / max(n - 1, 1) for i in range(n)]  # linearly increasing
        starts = [sum(cfg.depths[:i]) for i in range(len(cfg.depths))]
        self.stages = nn.ModuleList(SwinStage(cfg, i, rates[s:s + d])
                                    for i, (s, d) in enumerate(zip(starts, cfg.depths)))
        self.norm = LayerNorm(cfg.num_features, cfg.norm_eps)
        self.head = nn.Linear(cfg.num_features, cfg.num_classes) if cfg.num_classes else nn.Identity()
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward_features(self, x: Tensor) -> Tensor:
        x, hw = self.patch_embed(x)
        for stage in self.stages:
            x, hw = stage(x, hw)
        return self.norm(x)

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        """``(B, N, C) -> (B, num_classes)`` (or the pooled ``(B, C)`` with ``pre_logits``)."""
        x = x.mean(dim=1)
        return x if pre_logits else self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))
