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
positions, nothing else); the blocks run it. :class:`Block` is the one block
of every model (ViT, DINOv2, the decoder-only LM, the seq2seq encoder and,
with its window attention plugged in, Swin); :class:`DecoderBlock` adds the
cross-attention of the 2017 decoder. A layer's arithmetic is counted in
:mod:`course_lib.counting` (``layer_flops``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from course_lib.mlp import make_mlp
from course_lib.multi_head import KVCache, MultiHeadAttention
from course_lib.norms import make_norm

__all__ = ["LayerScale", "DropPath", "BlockConfig", "Block", "DecoderBlock", "NORM_POSITIONS", "residual"]

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
    """One residual sublayer: :func:`residual` with dropout, LayerScale and DropPath on the branch.

    ``"pre"`` and ``"post"``: the branch is ``drop_path(scale(dropout(fn(.))))``;
    ``"res_post"``: the norm belongs to the branch, before LayerScale and DropPath
    (Swin V2: ``x + drop_path(norm(attn(x)))``).
    """

    def __init__(self, cfg: BlockConfig):
        super().__init__()
        self.position = cfg.norm_position
        self.norm = make_norm(cfg.norm, cfg.dim, cfg.norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        self.scale = LayerScale(cfg.dim, cfg.layerscale) if cfg.layerscale is not None else nn.Identity()
        self.drop_path = DropPath(cfg.drop_path)

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.position == "res_post":
            return residual(x, lambda h: self.drop_path(self.scale(self.norm(self.drop(fn(h))))), None, "pre")
        return residual(x, lambda h: self.drop_path(self.scale(self.drop(fn(h)))), self.norm, self.position)


def _attention(cfg: BlockConfig, kv_dim: int | None = None) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.dim, cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
                              qkv_bias=cfg.qkv_bias, out_bias=cfg.out_bias, dropout=cfg.attn_dropout,
                              attn_impl=cfg.attn_impl, kv_dim=kv_dim)


class Block(nn.Module):
    """The transformer block of every model in the course: attention, then MLP, each a residual sublayer.

    ``(batch, seq, dim) -> (batch, seq, dim)``. ``cfg`` sets the norm, its
    position (pre-LN, post-LN, res-post-norm), dropout, LayerScale and DropPath.
    The two sublayers are plugged in (timm's ``Block(attn_layer=, mlp_layer=)``):

    * ``attn``: by default a :class:`~course_lib.multi_head.MultiHeadAttention`
      (ViT, DINOv2, the seq2seq encoder; with ``is_causal=True``, ``rope`` and
      ``cache``, the decoder-only LM). Swin plugs in its window attention
      (:class:`course_lib.swin.WindowAttention`), which also takes the
      feature-map size.
    * ``mlp``: by default ``make_mlp(cfg.mlp, cfg.dim, cfg.mlp_hidden)``.

    ``mask`` and the keyword arguments go to the attention module unchanged
    (``mask``, ``is_causal``, ``bias``, ``rope``, ``cache`` for multi-head
    attention; ``hw`` for Swin's window attention).
    """

    def __init__(self, cfg: BlockConfig, attn: nn.Module | None = None, mlp: nn.Module | None = None):
        super().__init__()
        self.attn = attn if attn is not None else _attention(cfg)
        self.mlp = mlp if mlp is not None else make_mlp(cfg.mlp, cfg.dim, cfg.mlp_hidden, bias=cfg.mlp_bias)
        self.attn_res, self.mlp_res = _Residual(cfg), _Residual(cfg)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, return_weights: bool = False,
                **attn_kwargs) -> Tensor | tuple[Tensor, Tensor]:
        """``x``: ``(batch, seq, dim)``; ``mask``: boolean, broadcastable to ``(batch, seq, seq)``,
        ``True`` = may attend.

        With ``return_weights``, also the attention weights ``(batch, heads, seq, seq)``.
        """
        if mask is not None:
            attn_kwargs["mask"] = mask
        weights = []

        def attend(h):
            if not return_weights:
                return self.attn(h, **attn_kwargs)
            out, w = self.attn(h, return_weights=True, **attn_kwargs)
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
