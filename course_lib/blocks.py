"""Transformer blocks: attention and MLP sublayers joined by residual connections (chapters 05-07).

Where the normalization sits is the main design choice:

* ``"post"`` (2017 Transformer, post-LN): ``x = norm(x + sublayer(x))``;
* ``"pre"``  (GPT-2, ViT, Llama, pre-LN): ``x = x + sublayer(norm(x))``, which
  keeps an un-normalized identity path from the input to the output;
* ``"res_post"`` (Swin V2, res-post-norm): ``x = x + norm(sublayer(x))``.

Options used by the vision models: :class:`LayerScale` (a learned per-channel
gain on each residual branch, CaiT/DINOv2) and :class:`DropPath` (stochastic
depth: drop a whole residual branch per sample while training).

:func:`residual` is the same wiring as a plain function (the three norm
positions, nothing else), and :func:`attention_flops` / :func:`layer_flops`
count the arithmetic of one layer (chapter 05).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from course_lib.attention import KVCache, MultiHeadAttention
from course_lib.mlp import make_mlp, mlp_flops
from course_lib.norms import make_norm

__all__ = ["LayerScale", "DropPath", "BlockConfig", "EncoderBlock", "DecoderBlock", "NORM_POSITIONS", "residual",
           "attention_flops", "layer_flops"]

NORM_POSITIONS = ("pre", "post", "res_post")


def residual(x: Tensor, sublayer, norm=None, position: str = "pre") -> Tensor:
    """One residual sublayer around ``sublayer``, with the norm at ``position``.

    ``x``: ``(..., dim)``; ``sublayer`` and ``norm``: callables ``(..., dim) -> (..., dim)``
    (``norm=None`` means no normalization)::

        "pre":      x + sublayer(norm(x))       GPT-2, ViT, Llama
        "post":     norm(x + sublayer(x))       the 2017 Transformer
        "res_post": x + norm(sublayer(x))       Swin V2

    :class:`_Residual` (inside the blocks) is this wiring plus dropout,
    LayerScale and DropPath on the branch.
    """
    if position not in NORM_POSITIONS:
        raise ValueError(f"position must be one of {NORM_POSITIONS}, got {position!r}")
    norm = norm if norm is not None else (lambda h: h)
    if position == "pre":
        return x + sublayer(norm(x))
    if position == "post":
        return norm(x + sublayer(x))
    return x + norm(sublayer(x))


def attention_flops(n_tokens: int, d_model: int) -> dict[str, int]:
    """FLOPs of one multi-head self-attention over a sequence of ``n_tokens`` tokens.

    A multiply-add counts as 2 FLOPs; biases, the ``1/sqrt(d_k)`` scale, the
    softmax and masks are left out (each is ``O(N D)`` or ``O(N^2)``), and the
    full ``N x N`` score matrix is counted even under a causal mask. With
    ``N = n_tokens``, ``D = d_model`` (the heads together have width ``D``)::

        "projections": Q, K, V and the output projection, 4 maps D -> D:  4 * 2 N D^2 = 8 N D^2
        "attention":   Q K^T (N x N x D) and weights @ V (N x N x D):     2 * 2 N^2 D = 4 N^2 D

    The number of heads does not matter: ``h`` heads of width ``D / h`` do the
    same arithmetic as one of width ``D``.
    """
    return {"projections": 8 * n_tokens * d_model * d_model, "attention": 4 * n_tokens * n_tokens * d_model}


def layer_flops(n_tokens: int, d_model: int, d_ff: int | None = None) -> dict[str, int]:
    """FLOPs of one encoder layer (self-attention + MLP), by part.

    ``{"projections": 8 N D^2, "attention": 4 N^2 D, "ffn": 4 N D d_ff}`` with the
    conventions of :func:`attention_flops` and :func:`course_lib.mlp.mlp_flops`
    (``d_ff = 4 D`` if None). The projections and the MLP grow like ``N D^2``,
    the score and value products like ``N^2 D``: with ``d_ff = 4 D`` the MLP is
    the largest part while ``N < 4 D``, and more than half the layer while ``N < 2 D``.
    """
    d_ff = 4 * d_model if d_ff is None else d_ff
    return {**attention_flops(n_tokens, d_model), "ffn": mlp_flops(n_tokens, d_model, d_ff)}


class LayerScale(nn.Module):
    """Multiply each channel by a learned gain, initialised small: ``(..., dim) -> (..., dim)``."""

    def __init__(self, dim: int, init: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((dim,), float(init)))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma


class DropPath(nn.Module):
    """Stochastic depth: zero a residual branch for a random subset of samples.

    Each sample's branch is kept with probability ``1 - p`` and then divided
    by ``1 - p``, so its expected value is unchanged; identity in evaluation.
    """

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"drop-path probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = torch.empty((x.shape[0],) + (1,) * (x.ndim - 1), device=x.device, dtype=x.dtype).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


@dataclass
class BlockConfig:
    """Everything a block needs; models fill it from their own config.

    Attributes:
        dim, n_heads: model width and query heads.  n_kv_heads: GQA key/value heads.
        head_dim: width per head (``dim // n_heads`` if None).
        mlp_hidden: hidden width of the MLP.  mlp: ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` or ``"swiglu"``.
        norm: ``"layernorm"`` or ``"rmsnorm"``; norm_eps its epsilon; norm_position one of :data:`NORM_POSITIONS`.
        qkv_bias, out_bias, mlp_bias: biases of the projections.
        dropout: on sublayer outputs; attn_dropout: on attention weights.
        layerscale: initial LayerScale gain, or None for no LayerScale.
        drop_path: stochastic-depth probability of this block.
        attn_impl: ``"eager"`` or ``"sdpa"``.
    """

    dim: int
    n_heads: int
    mlp_hidden: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    mlp: str = "gelu"
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    norm_position: str = "pre"
    qkv_bias: bool = True
    out_bias: bool = True
    mlp_bias: bool = True
    dropout: float = 0.0
    attn_dropout: float = 0.0
    layerscale: float | None = None
    drop_path: float = 0.0
    attn_impl: str = "sdpa"

    def __post_init__(self):
        if self.norm_position not in NORM_POSITIONS:
            raise ValueError(f"norm_position must be one of {NORM_POSITIONS}, got {self.norm_position!r}")


class _Residual(nn.Module):
    """One residual sublayer: norm placement, dropout, LayerScale and DropPath around ``fn``."""

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.position = cfg.norm_position
        self.norm = make_norm(cfg.norm, cfg.dim, cfg.norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        self.scale = LayerScale(cfg.dim, cfg.layerscale) if cfg.layerscale is not None else nn.Identity()
        self.drop_path = DropPath(cfg.drop_path)

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.position == "pre":
            return x + self.drop_path(self.scale(self.drop(fn(self.norm(x)))))
        if self.position == "post":
            return self.norm(x + self.drop_path(self.scale(self.drop(fn(x)))))
        return x + self.drop_path(self.scale(self.norm(self.drop(fn(x)))))  # res_post


def _attention(cfg: BlockConfig, kv_dim: int | None = None) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.dim, cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, qkv_bias=cfg.qkv_bias,
                              out_bias=cfg.out_bias, dropout=cfg.attn_dropout, attn_impl=cfg.attn_impl, kv_dim=kv_dim)


class EncoderBlock(nn.Module):
    """Self-attention then MLP, each a residual sublayer: ``(batch, seq, dim) -> (batch, seq, dim)``.

    With ``is_causal=True`` (and ``rope``/``cache``) it is also the block of a
    decoder-only language model: a decoder without cross-attention.
    """

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.attn = _attention(cfg)
        self.mlp = make_mlp(cfg.mlp, cfg.dim, cfg.mlp_hidden, bias=cfg.mlp_bias, dropout=0.0)
        self.attn_res, self.mlp_res = _Residual(cfg), _Residual(cfg)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, is_causal: bool = False, bias: Tensor | None = None,
                rope: tuple[Tensor, Tensor] | None = None, cache: KVCache | None = None,
                return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """``x``: ``(batch, seq, dim)``. With ``return_weights``, also the attention weights ``(batch, heads, seq, seq)``."""
        weights = []

        def attend(h):
            out = self.attn(h, mask=mask, is_causal=is_causal, bias=bias, rope=rope, cache=cache,
                            return_weights=return_weights)
            if return_weights:
                out, w = out
                weights.append(w)
            return out

        x = self.mlp_res(self.attn_res(x, attend), self.mlp)
        return (x, weights[0]) if return_weights else x


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output, then MLP.

    ``x``: ``(batch, n_tgt, dim)``; ``memory``: ``(batch, n_src, dim)``.
    ``self_mask`` / ``memory_mask``: boolean masks broadcastable to
    ``(batch, n_tgt, n_tgt)`` / ``(batch, n_tgt, n_src)``; the causal mask is
    always added to self-attention.
    """

    def __init__(self, cfg: BlockConfig, memory_dim: int | None = None):
        super().__init__()
        self.self_attn = _attention(cfg)
        self.cross_attn = _attention(cfg, kv_dim=memory_dim)
        self.mlp = make_mlp(cfg.mlp, cfg.dim, cfg.mlp_hidden, bias=cfg.mlp_bias, dropout=0.0)
        self.self_res, self.cross_res, self.mlp_res = _Residual(cfg), _Residual(cfg), _Residual(cfg)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                *, cache: KVCache | None = None) -> Tensor:
        x = self.self_res(x, lambda h: self.self_attn(h, mask=self_mask, is_causal=True, cache=cache))
        x = self.cross_res(x, lambda h: self.cross_attn(h, memory, mask=memory_mask))
        return self.mlp_res(x, self.mlp)
