"""Multi-head attention: heads, grouped-query attention and the KV cache (chapter 03; the cache, chapter 08).

Notation: ``x`` is ``(batch, seq, dim)``; inside attention the heads are an
axis of their own, ``(batch, n_heads, seq, head_dim)``. :func:`split_heads`
and :func:`merge_heads` move between the two; :func:`multi_head_attention` is
the whole layer written as one function from given weights (the exercise of
chapter 03), and :class:`MultiHeadAttention` is the layer every model uses,
running the same :func:`split_heads`, :func:`repeat_kv`, :func:`merge_heads` and
the scaled dot-product attention of :mod:`course_lib.attention`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.attention import ATTN_IMPLS, attention_weights, scaled_dot_product_attention
from course_lib.positional import apply_rope

__all__ = ["split_heads", "merge_heads", "repeat_kv", "multi_head_attention", "mha_output_as_head_sum", "KVCache",
           "MultiHeadAttention"]


# --------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------
def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """``(batch, seq, n_heads * head_dim) -> (batch, n_heads, seq, head_dim)``.

    A reshape alone would give the right shape but wrong content: the feature
    axis must be split *then* the head axis moved in front of the sequence.
    """
    b, n, d = x.shape
    if d % n_heads:
        raise ValueError(f"model width {d} is not divisible by n_heads={n_heads}")
    return x.view(b, n, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """``(batch, n_heads, seq, head_dim) -> (batch, seq, n_heads * head_dim)``; inverse of :func:`split_heads`."""
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """``(batch, n_kv_heads, seq, head_dim) -> (batch, n_kv_heads * n_rep, seq, head_dim)``.

    Grouped-query attention shares each key/value head among ``n_rep`` query
    heads: query heads ``[g * n_rep, (g + 1) * n_rep)`` use KV head ``g`` (a
    contiguous block, as in Llama's ``repeat_kv``).
    """
    if n_rep == 1:
        return x
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, n, d).reshape(b, h * n_rep, n, d)


def multi_head_attention(
    x: Tensor,
    w_q: Tensor,
    w_k: Tensor,
    w_v: Tensor,
    w_o: Tensor,
    n_heads: int,
    b_q: Tensor | None = None,
    b_k: Tensor | None = None,
    b_v: Tensor | None = None,
    b_o: Tensor | None = None,
    mask: Tensor | None = None,
    *,
    is_causal: bool = False,
) -> Tensor:
    """Multi-head self-attention from given weights, written as one function (chapter 03).

    ``MultiHead(X) = Concat(head_1, ..., head_h) W_O^T`` with
    ``head_i = Attention(X W_Q^i^T, X W_K^i^T, X W_V^i^T)``, where ``W^i`` is
    the ``i``-th block of ``head_dim`` rows of a projection's weight. Weights
    follow the ``nn.Linear`` convention, ``(out_features, in_features)``, so
    the result equals :class:`MultiHeadAttention` loaded with the same weights.
    A key/value weight with fewer rows than ``w_q`` means grouped-query
    attention: ``n_kv_heads = w_k.shape[0] // head_dim``.

    Args:
        x: ``(batch, seq, dim)``.
        w_q: ``(n_heads * head_dim, dim)``.
        w_k, w_v: ``(n_kv_heads * head_dim, dim)``.
        w_o: ``(dim, n_heads * head_dim)``.
        n_heads: query heads ``h``; ``head_dim = w_q.shape[0] // n_heads``.
        b_q, b_k, b_v, b_o: optional biases, the width of each projection's output.
        mask: boolean, broadcastable to ``(batch, seq, seq)`` (every head) or
            ``(batch, n_heads, seq, seq)``; ``True`` = may attend.
        is_causal: add the causal mask.

    Returns:
        ``(batch, seq, dim)``.
    """
    if w_q.shape[0] % n_heads:
        raise ValueError(f"w_q has {w_q.shape[0]} output features, not divisible by n_heads={n_heads}")
    head_dim = w_q.shape[0] // n_heads
    if w_k.shape[0] % head_dim or n_heads % (w_k.shape[0] // head_dim):
        raise ValueError(f"w_k has {w_k.shape[0]} output features: not a number of heads of width {head_dim} "
                         f"dividing n_heads={n_heads}")
    n_kv_heads = w_k.shape[0] // head_dim
    q = split_heads(F.linear(x, w_q, b_q), n_heads)           # (batch, n_heads, seq, head_dim)
    k = split_heads(F.linear(x, w_k, b_k), n_kv_heads)        # (batch, n_kv_heads, seq, head_dim)
    v = split_heads(F.linear(x, w_v, b_v), n_kv_heads)
    k, v = repeat_kv(k, n_heads // n_kv_heads), repeat_kv(v, n_heads // n_kv_heads)
    if mask is not None and mask.ndim == 3:
        mask = mask.unsqueeze(1)  # same mask for every head
    heads = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    return F.linear(merge_heads(heads), w_o, b_o)


def mha_output_as_head_sum(heads: Tensor, w_o: Tensor, b_o: Tensor | None = None) -> Tensor:
    """The output projection as a sum over heads: ``sum_h head_h W_O[:, block_h]^T (+ b_O)``.

    Concatenating the heads and multiplying by ``W_O^T`` is the same as
    projecting each head with its own ``(dim, head_dim)`` block of columns
    of ``W_O`` and adding the results (Turner's ``Y = sum_h V_h X A_h``). This
    function computes the second form, one head at a time.

    Args:
        heads: per-head attention outputs, ``(..., n_heads, seq, head_dim)``.
        w_o: ``(dim, n_heads * head_dim)`` (``nn.Linear`` convention).
        b_o: ``(dim,)`` or ``None``; added once, not once per head.

    Returns:
        ``(..., seq, dim)``, equal to ``merge_heads(heads) @ w_o.T + b_o``.
    """
    n_heads, head_dim = heads.shape[-3], heads.shape[-1]
    if w_o.shape[-1] != n_heads * head_dim:
        raise ValueError(f"w_o has {w_o.shape[-1]} input features, expected n_heads * head_dim = {n_heads * head_dim}")
    out = sum(heads[..., h, :, :] @ w_o[:, h * head_dim:(h + 1) * head_dim].T for h in range(n_heads))
    return out if b_o is None else out + b_o


class KVCache(nn.Module):
    """A static, preallocated key/value cache for one attention layer.

    Decoding appends one token (or a prompt of several) at a time; the keys and
    values of earlier positions never change, so they are stored rather than
    recomputed. The buffers are allocated once for ``max_len`` positions.

    Buffers ``k, v``: ``(batch, n_kv_heads, max_len, head_dim)``. ``length``
    (a Python int, so no host sync) counts the positions filled.
    """

    def __init__(self, batch: int, n_kv_heads: int, max_len: int, head_dim: int, *, dtype=torch.float32, device=None):
        super().__init__()
        self.max_len, self.length = max_len, 0
        self.register_buffer("k", torch.zeros(batch, n_kv_heads, max_len, head_dim, dtype=dtype, device=device),
                             persistent=False)
        self.register_buffer("v", torch.zeros(batch, n_kv_heads, max_len, head_dim, dtype=dtype, device=device),
                             persistent=False)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``(batch, n_kv_heads, n_new, head_dim)`` keys/values; return all filled so far."""
        n_new = k.shape[-2]
        if self.length + n_new > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} + {n_new} positions exceed max_len={self.max_len}")
        self.k[:, :, self.length:self.length + n_new] = k
        self.v[:, :, self.length:self.length + n_new] = v
        self.length += n_new
        return self.k[:, :, :self.length], self.v[:, :, :self.length]

    def reorder(self, rows: Tensor) -> None:
        """Keep batch rows ``rows`` (``(batch,)`` indices, repeats allowed), as beam search does."""
        self.k.copy_(self.k.index_select(0, rows))
        self.v.copy_(self.v.index_select(0, rows))

    def reset(self) -> None:
        self.length = 0


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al., 2017, section 3.2.2), with grouped-query attention.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O`` with
    ``head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)``. Self-attention when
    ``x_kv`` is omitted, cross-attention otherwise. With ``n_kv_heads < n_heads``
    the keys and values have fewer heads, each shared by a block of
    ``n_heads / n_kv_heads`` query heads: grouped-query attention (GQA); one
    KV head is multi-query attention (MQA); ``n_kv_heads == n_heads`` is MHA.

    Args:
        dim: model width (of the queries' input).
        n_heads: query heads.  n_kv_heads: key/value heads (``n_heads`` if None).
        head_dim: width per head (``dim // n_heads`` if None).
        bias: default for both ``qkv_bias`` and ``out_bias``.
        qkv_bias, out_bias: biases of the q/k/v projections and of ``out_proj``.
        k_bias: bias of the key projection alone (SwinV2 has none); ``qkv_bias`` if None.
        kv_dim: width of the keys' and values' input (cross-attention from another width).
        dropout: on the attention weights, training only.
        attn_impl: ``"eager"`` (the explicit math path) or ``"sdpa"`` (PyTorch's fused kernel).
    """

    def __init__(self, dim: int, n_heads: int, *, n_kv_heads: int | None = None, head_dim: int | None = None,
                 bias: bool = True, qkv_bias: bool | None = None, out_bias: bool | None = None,
                 k_bias: bool | None = None, kv_dim: int | None = None, dropout: float = 0.0, attn_impl: str = "sdpa"):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if head_dim is None:
            if dim % n_heads:
                raise ValueError(f"dim={dim} must be divisible by n_heads={n_heads}")
            head_dim = dim // n_heads
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
        if attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {attn_impl!r}")
        qkv_bias = bias if qkv_bias is None else qkv_bias
        out_bias = bias if out_bias is None else out_bias
        k_bias = qkv_bias if k_bias is None else k_bias
        kv_dim = dim if kv_dim is None else kv_dim
        self.dim, self.n_heads, self.n_kv_heads, self.head_dim = dim, n_heads, n_kv_heads, head_dim
        self.dropout, self.attn_impl = dropout, attn_impl
        self.q_proj = nn.Linear(dim, n_heads * head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(kv_dim, n_kv_heads * head_dim, bias=k_bias)
        self.v_proj = nn.Linear(kv_dim, n_kv_heads * head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(n_heads * head_dim, dim, bias=out_bias)

    def forward(
        self,
        x: Tensor,
        x_kv: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        bias: Tensor | None = None,
        rope: tuple[Tensor, Tensor] | None = None,
        cache: KVCache | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from ``x`` to ``x_kv`` (or to ``x`` itself).

        Args:
            x: ``(batch, n_q, dim)``, the sequence that asks (queries).
            x_kv: ``(batch, n_k, kv_dim)``, the sequence that answers (keys and
                values); ``x`` when ``None``.
            mask: boolean, broadcastable to ``(batch, n_q, n_k)`` (the same for
                every head) or to ``(batch, n_heads, n_q, n_k)``.
            is_causal: add the causal mask (queries aligned to the end of the keys).
            bias: additive score bias broadcastable to ``(batch, n_heads, n_q, n_k)``.
            rope: ``(cos, sin)`` for the new positions (see
                :mod:`course_lib.positional`), applied to queries and keys.
            cache: a :class:`KVCache`; the new keys/values are appended and
                attention runs over everything cached.
            return_weights: also return the attention weights; forces the eager path.

        Returns:
            ``(batch, n_q, dim)``, and with ``return_weights`` the weights
            ``(batch, n_heads, n_q, n_k)``.
        """
        x_kv = x if x_kv is None else x_kv
        b, n_q, _ = x.shape
        q = split_heads(self.q_proj(x), self.n_heads)            # (batch, n_heads, n_q, head_dim)
        k = split_heads(self.k_proj(x_kv), self.n_kv_heads)      # (batch, n_kv_heads, n_k, head_dim)
        v = split_heads(self.v_proj(x_kv), self.n_kv_heads)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if cache is not None:
            k, v = cache.update(k, v)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        if mask is not None and mask.ndim == 3:
            mask = mask.unsqueeze(1)  # same mask for every head
        p = self.dropout if self.training else 0.0
        if return_weights:
            w = attention_weights(q, k, mask, is_causal=is_causal, bias=bias)
            out = F.dropout(w, p=p, training=self.training) @ v
            return self.out_proj(merge_heads(out)), w
        out = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, bias=bias, dropout_p=p,
                                           attn_impl=self.attn_impl)
        return self.out_proj(merge_heads(out))
