"""Token embeddings and positional information (chapter 01).

Attention is permutation-equivariant: without positions, "herbivores eat
plants" and "plants eat herbivores" are the same bag of tokens. This module
holds every way the course injects order:

* :class:`TokenEmbedding`: lookup scaled by ``sqrt(dim)`` (Vaswani et al., 2017, sec. 3.4);
* :func:`sinusoidal_encoding`: ``PE[pos, 2i] = sin(pos / base^(2i/d))``,
  ``PE[pos, 2i+1] = cos(pos / base^(2i/d))`` (sec. 3.5), and the module
  :class:`SinusoidalPositionalEncoding`; :func:`offset_rotation`, the matrix
  that moves an encoding ``k`` positions on;
* :class:`LearnedPositionalEmbedding`: one trained vector per position (BERT, ViT);
* rotary position embedding (RoPE; Su et al., 2024): :class:`RotaryEmbedding`,
  :func:`apply_rope`, in the *half-split* layout (``rotate_half``) that
  Hugging Face's Llama uses, with :func:`interleaved_to_half_split` converting
  weights written for the interleaved layout;
* :func:`sincos_2d`: fixed 2-D sin-cos positions for an image grid;
* :func:`relative_position_index`: the number of every 2-D offset between two
  tokens of a grid, which indexes a learned table of relative position biases
  (ViT's relative positions, Swin's windows);
* :func:`resample_pos_embed`: resize a ViT's learned grid of positions to
  another resolution (bicubic, as in ViT's fine-tuning at higher resolution).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "TokenEmbedding",
    "sinusoidal_encoding",
    "offset_rotation",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "rope_cos_sin",
    "rotate_half",
    "apply_rope",
    "RotaryEmbedding",
    "interleaved_to_half_split",
    "sincos_2d",
    "relative_position_index",
    "resample_pos_embed",
]


class TokenEmbedding(nn.Module):
    """Token ids ``(batch, seq)`` -> vectors ``(batch, seq, dim)``, times ``sqrt(dim)`` if ``scale``.

    The lookup equals a one-hot row vector times the ``(vocab, dim)`` matrix.
    The 2017 Transformer multiplies by ``sqrt(dim)`` (sec. 3.4 gives no
    reason; a common reading is that this matrix is shared with the output
    projection, whose initialisation keeps entries small).
    """

    def __init__(self, vocab_size: int, dim: int, *, scale: bool = True, padding_idx: int | None = None):
        super().__init__()
        self.dim, self.scale = dim, scale
        self.weight = nn.Parameter(torch.empty(vocab_size, dim))
        self.padding_idx = padding_idx
        nn.init.normal_(self.weight, std=dim**-0.5 if scale else 0.02)
        if padding_idx is not None:
            with torch.no_grad():
                self.weight[padding_idx].zero_()

    def forward(self, ids: Tensor) -> Tensor:
        x = F.embedding(ids, self.weight, self.padding_idx)
        return x * math.sqrt(self.dim) if self.scale else x


def sinusoidal_encoding(n_positions: int, dim: int, base: float = 10000.0, *, offset: int = 0,
                        device=None, dtype=torch.float32) -> Tensor:
    """The fixed sinusoidal table ``(n_positions, dim)``: sines in even columns, cosines in odd ones.

    Pair ``i`` (columns ``2i, 2i+1``) rotates with angular frequency
    ``base^(-2i/dim)``, wavelengths from ``2 pi`` to ``2 pi * base``. Moving
    ``k`` positions rotates every pair by the angle ``k * frequency``, a linear
    map that does not depend on the position: ``PE[pos + k] = R_k PE[pos]``.
    """
    if dim % 2:
        raise ValueError(f"dim must be even for sinusoidal encodings, got {dim}")
    pos = torch.arange(offset, offset + n_positions, device=device, dtype=torch.float64)[:, None]
    freq = base ** (-torch.arange(0, dim, 2, device=device, dtype=torch.float64) / dim)
    angles = pos * freq
    pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # interleave sin, cos
    return pe.to(dtype)


def offset_rotation(k: int, dim: int, base: float = 10000.0, *, device=None, dtype=torch.float32) -> Tensor:
    """The ``(dim, dim)`` matrix ``R_k`` with ``PE[pos + k] = PE[pos] @ R_k`` for every ``pos``.

    Rows are vectors, as in :func:`sinusoidal_encoding`. Pair ``i`` of an
    encoding is ``(sin(pos w_i), cos(pos w_i))`` with ``w_i = base^(-2i/dim)``;
    the angle-addition formulas move it ``k`` positions on with the 2x2 block

        [[ cos(k w_i), -sin(k w_i)],
         [ sin(k w_i),  cos(k w_i)]]

    on the diagonal at rows and columns ``2i, 2i+1``. ``R_k`` is orthogonal,
    does not depend on ``pos``, and ``R_a @ R_b = R_(a+b)``.
    """
    if dim % 2:
        raise ValueError(f"dim must be even for sinusoidal encodings, got {dim}")
    freq = base ** (-torch.arange(0, dim, 2, device=device, dtype=torch.float64) / dim)
    angle = k * freq
    cos, sin = angle.cos(), angle.sin()
    r = torch.zeros(dim, dim, device=device, dtype=torch.float64)
    even = torch.arange(0, dim, 2, device=device)
    r[even, even], r[even, even + 1] = cos, -sin
    r[even + 1, even], r[even + 1, even + 1] = sin, cos
    return r.to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds :func:`sinusoidal_encoding` to ``(batch, seq, dim)`` inputs (no parameters)."""

    def __init__(self, dim: int, max_len: int = 4096, base: float = 10000.0, dropout: float = 0.0):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_encoding(max_len, dim, base), persistent=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        n = x.shape[1]
        if offset + n > self.max_len:
            raise ValueError(f"sequence of length {n} at offset {offset} exceeds max_len={self.max_len}")
        return self.drop(x + self.pe[offset:offset + n].to(x.dtype))


class LearnedPositionalEmbedding(nn.Module):
    """Adds one learned vector per position: ``(batch, seq, dim)``, ``seq <= max_len``."""

    def __init__(self, max_len: int, dim: int, *, std: float = 0.02):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, dim) * std)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        n = x.shape[1]
        if offset + n > self.max_len:
            raise ValueError(f"sequence of length {n} at offset {offset} exceeds the {self.max_len} learned positions")
        return x + self.weight[offset:offset + n]


# ------------------------------------------------------------------ RoPE
def rope_cos_sin(positions: Tensor, head_dim: int, base: float = 10000.0, dtype=torch.float32) -> tuple[Tensor, Tensor]:
    """cos and sin tables for RoPE in the half-split layout.

    Args:
        positions: integer positions ``(..., seq)``.
    Returns:
        ``cos, sin`` of shape ``(..., seq, head_dim)``; the ``head_dim/2``
        frequencies ``base^(-2i/head_dim)`` appear twice, once per half.
    """
    if head_dim % 2:
        raise ValueError(f"head_dim must be even for RoPE, got {head_dim}")
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    angles = positions.float()[..., None] * inv_freq  # (..., seq, head_dim/2)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last axis split in two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate pairs ``(x_i, x_{i + d/2})`` of ``x`` by position-dependent angles.

    Args:
        x: ``(batch, heads, seq, head_dim)``.
        cos, sin: ``(seq, head_dim)`` or ``(batch, seq, head_dim)`` from :func:`rope_cos_sin`.
    Returns:
        the rotated ``x``. The dot product of a rotated query at ``m`` and key at
        ``n`` depends on ``m - n`` only: relative position from absolute rotations.
    """
    if cos.ndim == 3:  # per-batch positions: add the head axis
        cos, sin = cos[:, None], sin[:, None]
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """Precomputed RoPE tables; ``forward(positions)`` returns ``(cos, sin)`` for :func:`apply_rope`."""

    def __init__(self, head_dim: int, max_positions: int = 4096, base: float = 10000.0):
        super().__init__()
        self.head_dim, self.max_positions, self.base = head_dim, max_positions, base
        cos, sin = rope_cos_sin(torch.arange(max_positions), head_dim, base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``positions``: ``(seq,)`` or ``(batch, seq)`` integers below ``max_positions``."""
        return self.cos[positions], self.sin[positions]


def interleaved_to_half_split(weight: Tensor, n_heads: int) -> Tensor:
    """Permute a q or k projection's output rows from the interleaved RoPE layout to the half-split one.

    Interleaved RoPE (the original paper, GPT-J, Meta's Llama release) rotates
    adjacent pairs ``(x_0, x_1), (x_2, x_3), ...``; the half-split layout rotates
    ``(x_i, x_{i + d/2})``. Reordering each head's output features as
    ``[0, 2, 4, ..., 1, 3, 5, ...]`` turns one into the other.

    Args:
        weight: ``(n_heads * head_dim, in_features)`` (or a bias ``(n_heads * head_dim,)``).
    """
    out = weight.shape[0]
    if out % n_heads or (out // n_heads) % 2:
        raise ValueError(f"{out} output features do not split into {n_heads} heads of even width")
    head_dim = out // n_heads
    rest = weight.shape[1:]
    w = weight.reshape(n_heads, head_dim // 2, 2, *rest).transpose(1, 2)
    return w.reshape(out, *rest)


# ------------------------------------------------------------------ images
def sincos_2d(grid_h: int, grid_w: int, dim: int, temperature: float = 10000.0, dtype=torch.float32) -> Tensor:
    """Fixed 2-D sin-cos positions ``(grid_h * grid_w, dim)`` for a patch grid, row-major.

    A quarter of the channels each hold sin(y), cos(y), sin(x), cos(x) at
    ``dim/4`` frequencies, so that both axes get the 1-D encoding's properties.
    """
    if dim % 4:
        raise ValueError(f"dim must be divisible by 4 for 2-D sin-cos positions, got {dim}")
    y, x = torch.meshgrid(torch.arange(grid_h, dtype=torch.float64), torch.arange(grid_w, dtype=torch.float64),
                          indexing="ij")
    omega = temperature ** (-torch.arange(dim // 4, dtype=torch.float64) / (dim // 4))
    y, x = y.flatten()[:, None] * omega, x.flatten()[:, None] * omega
    return torch.cat([y.sin(), y.cos(), x.sin(), x.cos()], dim=1).to(dtype)


def relative_position_index(size: int | tuple[int, int], table_size: int | tuple[int, int] | None = None) -> Tensor:
    """``(N, N)`` long for the ``N = h * w`` tokens of a row-major grid: entry ``[i, j]`` numbers the 2-D
    offset ``pos_i - pos_j``, the row of a bias table that holds one entry per offset.

    ``size``: the grid ``(h, w)``, or the side of a square window (Swin). The table covers the offsets
    ``(dy, dx)`` in ``[-(th-1), th-1] x [-(tw-1), tw-1]``, ``(th, tw) = table_size`` (``size`` by
    default), numbered row-major: ``(dy + th-1) * (2tw-1) + (dx + tw-1)``, ``(2th-1)(2tw-1)`` of them.
    A table larger than the grid serves it too (Swin V1 runs a window smaller than the one it was built for).
    """
    h, w = (size, size) if isinstance(size, int) else size
    table = (h, w) if table_size is None else table_size
    th, tw = (table, table) if isinstance(table, int) else table
    if th < h or tw < w:
        raise ValueError(f"a table for windows of {table_size} cannot hold the offsets of a window of {size}")
    coords = torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")).flatten(1)  # (2, N)
    rel = coords[:, :, None] - coords[:, None, :]                                                     # (2, N, N)
    return (rel[0] + th - 1) * (2 * tw - 1) + (rel[1] + tw - 1)


def resample_pos_embed(pos_embed: Tensor, new_grid: tuple[int, int], *, old_grid: tuple[int, int] | None = None,
                       n_prefix: int = 1, mode: str = "bicubic", antialias: bool = False) -> Tensor:
    """Resize a ViT's learned positions to another patch grid.

    Args:
        pos_embed: ``(1, n_prefix + H*W, dim)``: prefix tokens (CLS,
            registers) first, then the grid in row-major order.
        new_grid: ``(H', W')``.  old_grid: ``(H, W)``; a square grid if None.
        mode: ``"bicubic"`` (ViT, DINOv2) or ``"bilinear"``.  antialias: smooth
            before shrinking (matters only when ``H' < H``).
    Returns:
        ``(1, n_prefix + H'*W', dim)`` in the input dtype; the
        interpolation runs in float32. Prefix tokens are kept as they are.
    """
    prefix, grid = pos_embed[:, :n_prefix], pos_embed[:, n_prefix:]
    n, dim = grid.shape[1], grid.shape[2]
    if old_grid is None:
        side = math.isqrt(n)
        if side * side != n:
            raise ValueError(f"{n} grid positions are not a square; pass old_grid=(H, W)")
        old_grid = (side, side)
    if old_grid[0] * old_grid[1] != n:
        raise ValueError(f"old_grid {old_grid} has {old_grid[0] * old_grid[1]} positions, pos_embed has {n}")
    if tuple(new_grid) == tuple(old_grid):
        return pos_embed
    img = grid.reshape(1, old_grid[0], old_grid[1], dim).permute(0, 3, 1, 2).float()
    img = F.interpolate(img, size=tuple(new_grid), mode=mode, align_corners=False, antialias=antialias)
    grid = img.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], dim).to(pos_embed.dtype)
    return torch.cat([prefix, grid], dim=1)
