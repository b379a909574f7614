"""Attention as convolution: multi-head self-attention that computes a K x K convolution (chapter 09).

Turner (2023) notes that attention whose weights depend only on the offset
between two positions is a convolution; Cordonnier, Loukas & Jaggi (2020,
theorem 1) make it exact for images: multi-head self-attention with ``K^2``
heads and a relative position score can express any ``K x K`` convolution.

The construction, on an ``H x W`` map whose pixels are tokens (row-major, so
``seq = H * W`` and ``dim = C_in``):

* the kernel's ``K^2`` offsets ``Delta_h = (i - K//2, j - K//2)`` are numbered
  row-major, ``h = i * K + j``: one head per offset;
* content scores are switched off (``W_Q = W_K = 0``), so a head's scores come
  from the offset ``delta = key - query`` alone. The **hard** version lets head
  ``h`` attend only where ``delta = Delta_h`` (a score of 0 there and ``-inf``
  everywhere else, passed as a mask), so its weights are one-hot; the **soft**
  version scores ``-alpha * ||delta - Delta_h||^2``, which tends to the same
  one-hot pattern as ``alpha`` grows;
* head ``h`` then returns the pixel at ``query + Delta_h``; its value projection
  times its block of the output projection is the kernel's ``(C_out, C_in)``
  matrix at that offset, ``W_O^h W_V^h = weight[:, :, i, j]``, and the output
  projection's sum over heads is the convolution.

Borders: ``"circular"`` takes offsets modulo the grid, which is
``nn.Conv2d(padding_mode="circular")``; ``"zeros"`` lets a head see only keys
inside the map, so a head whose target lies outside has no key at all, and the
course's attention returns zero weights and a zero output for such a query
(:mod:`course_lib.attention`): exactly what zero padding contributes. The soft
version needs ``"circular"``: with zero padding its weights would spread to the
nearest pixels inside the map instead of vanishing.

Shapes, in the book's notation: tokens ``(batch, seq, dim)`` with ``seq = H * W``;
images ``(batch, channels, height, width)``; attention weights
``(batch, heads, seq, seq)`` with ``heads = K^2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from course_lib.attention import ATTN_IMPLS
from course_lib.multi_head import MultiHeadAttention

__all__ = ["BORDERS", "kernel_offsets", "offset_sq_distances", "pixels_to_tokens", "tokens_to_pixels",
           "AttentionConvConfig", "AttentionConv", "attention_from_conv", "attention_from_conv2d"]

#: how a convolution treats pixels beyond the border, and how the attention layer matches it
BORDERS = ("circular", "zeros")


def kernel_offsets(kernel_size: int) -> Tensor:
    """The ``K^2`` offsets ``Delta_h = (dy, dx)`` of a ``K x K`` kernel, ``(K * K, 2)`` long, row-major.

    Head ``h = i * K + j`` reads kernel entry ``[i, j]``, the pixel at
    ``(dy, dx) = (i - K//2, j - K//2)`` from the query (cross-correlation, as
    ``nn.Conv2d`` computes it).
    """
    _check_kernel_size(kernel_size)
    r = torch.arange(kernel_size) - kernel_size // 2
    dy, dx = torch.meshgrid(r, r, indexing="ij")
    return torch.stack([dy.flatten(), dx.flatten()], dim=1)


def offset_sq_distances(grid: tuple[int, int], kernel_size: int, border: str = "circular") -> Tensor:
    """``||delta(q, k) - Delta_h||^2`` for every head, query and key: ``(K * K, seq, seq)`` long.

    ``delta(q, k)`` is the offset from query pixel ``q`` to key pixel ``k``
    (row-major numbering of the ``H x W`` grid). With ``border="circular"`` the
    grid is a torus and each axis takes the shorter way round, so the distance
    is 0 exactly where ``k = q + Delta_h`` modulo the grid; with ``"zeros"`` it
    is the plain difference, and a head whose target lies outside the map has
    no key at distance 0.
    """
    h, w = _check_grid(grid)
    if border not in BORDERS:
        raise ValueError(f"border must be one of {BORDERS}, got {border!r}")
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()
    deltas = kernel_offsets(kernel_size)
    dy = ys[None, None, :] - ys[None, :, None] - deltas[:, 0, None, None]  # (K^2, seq, seq): key - query - Delta
    dx = xs[None, None, :] - xs[None, :, None] - deltas[:, 1, None, None]
    if border == "circular":
        dy, dx = dy % h, dx % w
        dy, dx = torch.minimum(dy, h - dy), torch.minimum(dx, w - dx)
    return dy * dy + dx * dx


def pixels_to_tokens(images: Tensor) -> Tensor:
    """``(batch, channels, height, width) -> (batch, seq, dim)``: one token per pixel, row-major, ``dim = channels``."""
    if images.ndim != 4:
        raise ValueError(f"expected images of shape (batch, channels, height, width), got {tuple(images.shape)}")
    return images.flatten(2).transpose(1, 2)


def tokens_to_pixels(tokens: Tensor, grid: tuple[int, int]) -> Tensor:
    """``(batch, seq, dim) -> (batch, dim, height, width)``, the inverse of :func:`pixels_to_tokens`."""
    h, w = _check_grid(grid)
    if tokens.ndim != 3 or tokens.shape[1] != h * w:
        raise ValueError(f"expected tokens of shape (batch, {h * w}, dim) for a {h}x{w} grid, "
                         f"got {tuple(tokens.shape)}")
    return tokens.transpose(1, 2).reshape(tokens.shape[0], tokens.shape[2], h, w)


@dataclass
class AttentionConvConfig:
    """The attention layer that computes a ``K x K`` convolution.

    Attributes:
        in_channels, out_channels: ``C_in`` (the tokens' width ``dim``) and ``C_out``.
        kernel_size: ``K``, odd, so that the kernel has a centre.
        n_heads: must be ``K^2`` (one head per offset); ``None`` means ``K^2``.
        head_dim: width of a head's values; at least ``min(C_in, C_out)``, the
            rank a ``(C_out, C_in)`` matrix may need; ``None`` means that minimum.
        border: ``"circular"`` or ``"zeros"`` (see :data:`BORDERS`).
        alpha: ``None`` for the hard, one-hot version; a positive number for the
            soft one, scores ``-alpha * ||delta - Delta_h||^2`` (circular border only).
        attn_impl: ``"eager"`` (the math path) or ``"sdpa"``.
    """

    in_channels: int
    out_channels: int
    kernel_size: int
    n_heads: int | None = None
    head_dim: int | None = None
    border: str = "circular"
    alpha: float | None = None
    attn_impl: str = "eager"

    def __post_init__(self):
        _check_kernel_size(self.kernel_size)
        for name in ("in_channels", "out_channels"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        k2 = self.kernel_size ** 2
        if self.n_heads is None:
            self.n_heads = k2
        if self.n_heads != k2:
            raise ValueError(f"n_heads={self.n_heads}: a {self.kernel_size}x{self.kernel_size} convolution needs "
                             f"exactly kernel_size**2 = {k2} heads, one per kernel offset")
        rank = min(self.in_channels, self.out_channels)
        if self.head_dim is None:
            self.head_dim = rank
        if self.head_dim < rank:
            raise ValueError(f"head_dim={self.head_dim} is below min(in_channels, out_channels) = {rank}: a head "
                             f"must carry a ({self.out_channels}, {self.in_channels}) kernel matrix of that rank")
        if self.border not in BORDERS:
            raise ValueError(f"border must be one of {BORDERS}, got {self.border!r}")
        if self.alpha is not None:
            if not self.alpha > 0:
                raise ValueError(f"alpha={self.alpha!r} must be positive (or None for the hard, one-hot version)")
            if self.border != "circular":
                raise ValueError(f"the soft version (alpha={self.alpha}) needs border='circular': with "
                                 f"border={self.border!r} its weights spread inside the map instead of vanishing")
        if self.attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {self.attn_impl!r}")


class AttentionConv(nn.Module):
    """Multi-head self-attention with ``K^2`` heads and relative position scores:
    ``(batch, seq, C_in) -> (batch, seq, C_out)``.

    ``self.mha`` is the course's :class:`~course_lib.multi_head.MultiHeadAttention`
    (``dim = C_in``, ``K^2`` heads) with its output projection made ``C_out``
    wide; the position scores enter through its mask (hard version) or its
    additive ``bias`` hook (soft version), as Swin's relative position bias does.
    Its projections start at zero: :meth:`load_conv` writes a convolution into them.
    """

    def __init__(self, cfg: AttentionConvConfig):
        super().__init__()
        self.cfg = cfg
        width = cfg.n_heads * cfg.head_dim
        self.mha = MultiHeadAttention(cfg.in_channels, cfg.n_heads, head_dim=cfg.head_dim, qkv_bias=False,
                                      out_bias=True, attn_impl=cfg.attn_impl)
        self.mha.out_proj = nn.Linear(width, cfg.out_channels)  # C_out wide: the convolution's output channels
        for p in self.mha.parameters():
            nn.init.zeros_(p)  # W_Q = W_K = 0 switches content scores off; W_V, W_O wait for load_conv

    @torch.no_grad()
    def load_conv(self, weight: Tensor, bias: Tensor | None = None) -> "AttentionConv":
        """Write a convolution's weight ``(C_out, C_in, K, K)`` and bias ``(C_out,)`` into the heads; returns self.

        Head ``h = i * K + j`` gets ``W_O^h W_V^h = weight[:, :, i, j]``: when
        ``C_out <= C_in`` its value projection holds the kernel matrix and its
        output block the identity, otherwise the other way round. The bias goes
        to the output projection, added once.
        """
        cfg = self.cfg
        _check_weight(weight, bias)
        c_out, c_in, k, _ = weight.shape
        if (c_out, c_in, k) != (cfg.out_channels, cfg.in_channels, cfg.kernel_size):
            raise ValueError(f"weight of shape {tuple(weight.shape)} does not fit this layer's "
                             f"(out_channels, in_channels, kernel_size) = ({cfg.out_channels}, {cfg.in_channels}, "
                             f"{cfg.kernel_size})")
        m, d = self.mha, cfg.head_dim
        dtype = m.v_proj.weight.dtype
        w_v = torch.zeros(cfg.n_heads, d, c_in, dtype=dtype, device=weight.device)   # per head: (head_dim, C_in)
        w_o = torch.zeros(cfg.n_heads, c_out, d, dtype=dtype, device=weight.device)  # per head: (C_out, head_dim)
        kernel = weight.to(dtype).flatten(2).permute(2, 0, 1)                         # (K^2, C_out, C_in), row-major
        if c_out <= c_in:
            w_v[:, :c_out] = kernel
            w_o[:, :, :c_out] = torch.eye(c_out, dtype=dtype, device=weight.device)
        else:
            w_v[:, :c_in] = torch.eye(c_in, dtype=dtype, device=weight.device)
            w_o[:, :, :c_in] = kernel
        m.v_proj.weight.copy_(w_v.reshape(cfg.n_heads * d, c_in))
        m.out_proj.weight.copy_(w_o.permute(1, 0, 2).reshape(c_out, cfg.n_heads * d))
        m.out_proj.bias.copy_(torch.zeros(c_out) if bias is None else bias)
        return self

    def position_scores(self, grid: tuple[int, int], device=None) -> dict:
        """The relative position scores for an ``H x W`` grid, as MultiHeadAttention's arguments.

        Hard version: ``{"mask": (1, heads, seq, seq)}`` boolean, ``True`` only at
        ``delta = Delta_h`` (a score of 0 there and ``-inf`` elsewhere); soft:
        ``{"bias": (1, heads, seq, seq)}`` float, ``-alpha * ||delta - Delta_h||^2``.
        """
        h, w = _check_grid(grid)
        if self.cfg.border == "circular" and self.cfg.kernel_size > min(h, w):
            raise ValueError(f"kernel_size={self.cfg.kernel_size} is larger than the {h}x{w} map: with a circular "
                             f"border the {self.cfg.kernel_size ** 2} offsets would not land on different pixels")
        dist2 = offset_sq_distances((h, w), self.cfg.kernel_size, self.cfg.border).to(device)
        if self.cfg.alpha is None:
            return {"mask": (dist2 == 0)[None]}
        dtype = self.mha.v_proj.weight.dtype
        return {"bias": (-self.cfg.alpha * dist2.to(dtype))[None]}

    def forward(self, x: Tensor, grid: tuple[int, int], *,
                return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """``x``: ``(batch, seq, C_in)``, the pixels of an ``H x W`` map, row-major (:func:`pixels_to_tokens`).

        Returns ``(batch, seq, C_out)``, and with ``return_weights`` the attention
        weights ``(batch, heads, seq, seq)`` as well.
        """
        h, w = _check_grid(grid)
        if x.ndim != 3 or x.shape[1] != h * w:
            raise ValueError(f"expected x of shape (batch, seq={h * w}, dim) for a {h}x{w} grid, got {tuple(x.shape)}")
        if x.shape[2] != self.cfg.in_channels:
            raise ValueError(f"x has {x.shape[2]} channels (dim) but the layer was built for "
                             f"in_channels={self.cfg.in_channels}")
        return self.mha(x, return_weights=return_weights, **self.position_scores((h, w), x.device))


def attention_from_conv(weight: Tensor, bias: Tensor | None = None, *, border: str = "circular",
                        alpha: float | None = None, attn_impl: str = "eager") -> AttentionConv:
    """The :class:`AttentionConv` equal to the stride-1 convolution with ``weight`` ``(C_out, C_in, K, K)``,
    ``bias`` ``(C_out,)``.

    ``border="circular"`` matches ``nn.Conv2d(C_in, C_out, K, padding=K // 2,
    padding_mode="circular")``, ``"zeros"`` the default zero padding; the layer
    takes the weight's dtype and device.
    """
    _check_weight(weight, bias)
    c_out, c_in, k, _ = weight.shape
    cfg = AttentionConvConfig(in_channels=c_in, out_channels=c_out, kernel_size=k, border=border, alpha=alpha,
                              attn_impl=attn_impl)
    layer = AttentionConv(cfg).to(device=weight.device, dtype=weight.dtype)
    return layer.load_conv(weight, bias)


def attention_from_conv2d(conv: nn.Conv2d, *, alpha: float | None = None, attn_impl: str = "eager") -> AttentionConv:
    """:func:`attention_from_conv` for an ``nn.Conv2d`` that keeps the map's size (stride 1, ``padding = K // 2``)."""
    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"expected an nn.Conv2d, got {type(conv).__name__}")
    k = conv.kernel_size[0]
    if conv.stride != (1, 1) or conv.dilation != (1, 1) or conv.groups != 1:
        raise ValueError(f"only stride 1, dilation 1 and groups 1 are attention with one head per offset; got "
                         f"stride={conv.stride}, dilation={conv.dilation}, groups={conv.groups}")
    if conv.padding != (k // 2, k // 2):
        raise ValueError(f"padding={conv.padding}: the convolution must keep the map's size, padding = "
                         f"kernel_size // 2 = {k // 2}")
    if conv.padding_mode not in BORDERS:
        raise ValueError(f"padding_mode={conv.padding_mode!r} is not one of {BORDERS}")
    return attention_from_conv(conv.weight.detach(), None if conv.bias is None else conv.bias.detach(),
                               border=conv.padding_mode, alpha=alpha, attn_impl=attn_impl)


# --------------------------------------------------------------------------
# Checks of the arguments
# --------------------------------------------------------------------------
def _check_kernel_size(k) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1 or k % 2 == 0:
        raise ValueError(f"kernel_size={k!r} must be a positive odd integer: an even kernel has no centre pixel "
                         f"for the query to sit on")


def _check_grid(grid) -> tuple[int, int]:
    try:
        h, w = (int(s) for s in grid)
    except (TypeError, ValueError):
        raise ValueError(f"grid={grid!r} must be (height, width)") from None
    if h < 1 or w < 1:
        raise ValueError(f"grid={grid!r}: height and width must be positive")
    return h, w


def _check_weight(weight: Tensor, bias: Tensor | None) -> None:
    if weight.ndim != 4:
        raise ValueError(f"weight must be a Conv2d weight (C_out, C_in, K, K), got shape {tuple(weight.shape)}")
    c_out, _, kh, kw = weight.shape
    if kh != kw:
        raise ValueError(f"the kernel must be square (K x K), got {kh}x{kw}")
    _check_kernel_size(kh)
    if bias is not None and tuple(bias.shape) != (c_out,):
        raise ValueError(f"bias of shape {tuple(bias.shape)} does not match the weight's C_out={c_out}: "
                         f"expected ({c_out},)")
