"""Scaled dot-product attention and multi-head attention (chapters 02 and 03).

Notation, used in every docstring of this module:

* ``n_q`` queries and ``n_k`` keys/values; ``d_k`` is the width of a query
  or key, ``d_v`` the width of a value.
* Leading dimensions ``...`` are batch-like (``batch``, ``heads``) and are
  broadcast.
* A **mask** is a boolean tensor broadcastable to ``(..., n_q, n_k)`` in which
  ``True`` means *query i may attend to key j* (the convention of
  :func:`torch.nn.functional.scaled_dot_product_attention`). ``None`` means
  every query sees every key.

The equation (Vaswani et al., 2017, eq. 1)::

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

is implemented twice, behind one switch: the explicit *math path*
(:func:`attention_scores`, :func:`masked_softmax`, weighted sum) that the book
walks through, and the *fused path* through
``torch.nn.functional.scaled_dot_product_attention`` (FlashAttention or
memory-efficient kernels on a GPU). The two agree to floating-point error.

A query whose every key is masked out has nothing to average. Rather than the
NaN that ``softmax`` of a row of ``-inf`` gives, this module defines its
attention weights as all zeros and therefore its output as the zero vector,
on both paths and in the gradient.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.positional import apply_rope

__all__ = [
    "attention_scores",
    "masked_softmax",
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "attention_weights",
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "repeat_kv",
    "multi_head_attention",
    "mha_output_as_head_sum",
    "mha_param_count",
    "KVCache",
    "MultiHeadAttention",
]


# --------------------------------------------------------------------------
# The math path, one step at a time
# --------------------------------------------------------------------------
def attention_scores(q: Tensor, k: Tensor, scale: float | None = None) -> Tensor:
    """Scaled similarity of every query with every key: ``q @ k^T * scale``.

    Args:
        q: queries, ``(..., n_q, d_k)``.
        k: keys, ``(..., n_k, d_k)``.
        scale: multiplier of the dot products; ``1 / sqrt(d_k)`` when ``None``.
            It keeps the scores' variance near 1 when the entries of ``q`` and
            ``k`` have unit variance (a dot product of ``d_k`` terms has
            variance ``d_k``).

    Returns:
        scores, ``(..., n_q, n_k)``: entry ``[i, j]`` is ``q_i . k_j * scale``.
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same width d_k, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}"
        )
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return (q @ k.transpose(-2, -1)) * scale


def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the keys (the last axis), ignoring masked-out keys.

    Written out rather than calling ``torch.softmax`` so that every step is
    visible::

        s_ij <- -inf where mask_ij is False
        w_ij  = exp(s_ij - max_j s_ij) / sum_j exp(s_ij - max_j s_ij)

    Subtracting the row maximum changes nothing mathematically (it cancels
    between numerator and denominator) but keeps ``exp`` from overflowing.
    Statistics are taken in float32 for half-precision inputs, and the result
    is cast back.

    A row with no allowed key has an all-zero denominator; its weights are
    defined as zeros (no NaN, in the forward pass or the gradient).

    Args:
        scores: ``(..., n_q, n_k)``.
        mask: boolean, broadcastable to ``scores``; ``True`` = may attend.

    Returns:
        weights, same shape as ``scores``; each row sums to 1 (or is all 0 if
        fully masked).
    """
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
    work = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    if mask is not None:
        work = work.masked_fill(~mask, float("-inf"))
    row_max = work.amax(dim=-1, keepdim=True)
    # A fully masked row has max -inf; shift it by 0 instead so exp() gives 0, not NaN.
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(work - row_max.detach())
    denom = e.sum(dim=-1, keepdim=True)
    # An allowed row has denom >= 1 (its maximum contributes exp(0) = 1), a fully
    # masked row has denom == 0: clamping at 1 only ever touches the latter.
    weights = e / denom.clamp_min(1.0)
    return weights.to(scores.dtype)


def causal_mask(n_q: int, n_k: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """Boolean causal mask: query ``i`` may attend to keys ``j <= i + (n_k - n_q)``.

    With ``n_k == n_q`` (the default) this is the lower triangle, diagonal
    included: a token sees itself and its past. With ``n_k > n_q`` the queries
    are taken to be the *last* ``n_q`` positions of the key sequence (as when
    new tokens attend to a cache of earlier ones).

    Returns:
        ``(n_q, n_k)`` boolean, ``True`` = may attend.
    """
    n_k = n_q if n_k is None else n_k
    if n_q < 0 or n_k < 0:
        raise ValueError(f"sequence lengths must be non-negative, got n_q={n_q}, n_k={n_k}")
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=n_k - n_q)


def padding_mask(lengths: Tensor, n_k: int) -> Tensor:
    """Key-padding mask from the true length of each sequence in a batch.

    Args:
        lengths: ``(batch,)`` integers, the number of real (unpadded) tokens,
            each in ``[0, n_k]``.
        n_k: padded length of the key sequence.

    Returns:
        ``(batch, 1, n_k)`` boolean, ``True`` for real tokens; the singleton
        axis broadcasts over queries, so it can be passed as an attention mask
        of shape ``(batch, n_q, n_k)`` directly.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D (batch,), got shape {tuple(lengths.shape)}")
    if ((lengths < 0) | (lengths > n_k)).any():
        raise ValueError(f"every length must be in [0, n_k={n_k}], got {lengths.tolist()}")
    positions = torch.arange(n_k, device=lengths.device)
    return (positions[None, :] < lengths[:, None])[:, None, :]


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the given masks (``None`` entries are skipped)."""
    out = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else (out & m)
    return out


def attention_weights(
    q: Tensor,
    k: Tensor,
    mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    bias: Tensor | None = None,
) -> Tensor:
    """The attention matrix ``softmax(q k^T / sqrt(d_k) + bias)`` with masking.

    Args:
        q: ``(..., n_q, d_k)``;  k: ``(..., n_k, d_k)``.
        mask: boolean, broadcastable to ``(..., n_q, n_k)``.
        is_causal: also apply :func:`causal_mask`.
        bias: additive, broadcastable to ``(..., n_q, n_k)`` (the hook for
            relative position biases and Swin's shifted-window mask).

    Returns:
        ``(..., n_q, n_k)``; row ``i`` is the distribution of query ``i`` over keys.
    """
    if is_causal:
        mask = combine_masks(mask, causal_mask(q.shape[-2], k.shape[-2], device=q.device))
    scores = attention_scores(q, k, scale)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    return masked_softmax(scores, mask)


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
    bias: Tensor | None = None,
    fused: bool = False,
) -> Tensor:
    """``softmax(q k^T / sqrt(d_k) + bias) v``: each query's weighted average of the values.

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        mask: boolean, broadcastable to ``(..., n_q, n_k)``; ``True`` = may attend.
        is_causal: add the causal mask (query ``i`` sees keys ``j <= i``).
        dropout_p: dropout on the attention weights (pass 0 in evaluation).
        scale: score multiplier, ``1/sqrt(d_k)`` by default.
        bias: additive score bias, broadcastable to ``(..., n_q, n_k)``.
        fused: ``False`` runs the explicit math path; ``True`` calls
            ``torch.nn.functional.scaled_dot_product_attention``.

    Returns:
        ``(..., n_q, d_v)``. A query with no allowed key gets the zero vector.
    """
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must have the same length n_k, got k {tuple(k.shape)} "
            f"and v {tuple(v.shape)}"
        )
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
    n_q, n_k = q.shape[-2], k.shape[-2]
    if fused and is_causal and mask is None and bias is None and n_q == n_k:
        # the kernels' own causal flag (top-left aligned, which is ours when n_q == n_k)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale)
    if is_causal:
        mask = combine_masks(mask, causal_mask(n_q, n_k, device=q.device))

    if not fused:
        w = attention_weights(q, k, mask, scale=scale, bias=bias)
        if dropout_p > 0.0:
            w = F.dropout(w, p=dropout_p)
        return w @ v

    if mask is None:
        attn_mask = None if bias is None else bias.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    # Fused kernels disagree on fully masked rows (some give NaN). Let such rows
    # see every key (a finite, throw-away result), then zero them.
    has_key = mask.any(dim=-1, keepdim=True)
    safe_mask = mask | ~has_key
    if bias is not None:
        safe_mask = bias.to(q.dtype).masked_fill(~safe_mask, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe_mask, dropout_p=dropout_p, scale=scale)
    return out * has_key.to(out.dtype)


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
        x: ``(batch, seq, d_model)``.
        w_q: ``(n_heads * head_dim, d_model)``.
        w_k, w_v: ``(n_kv_heads * head_dim, d_model)``.
        w_o: ``(d_model, n_heads * head_dim)``.
        n_heads: query heads ``h``; ``head_dim = w_q.shape[0] // n_heads``.
        b_q, b_k, b_v, b_o: optional biases, the width of each projection's output.
        mask: boolean, broadcastable to ``(batch, seq, seq)`` (every head) or
            ``(batch, n_heads, seq, seq)``; ``True`` = may attend.
        is_causal: add the causal mask.

    Returns:
        ``(batch, seq, d_model)``.
    """
    if w_q.shape[0] % n_heads:
        raise ValueError(f"w_q has {w_q.shape[0]} output features, not divisible by n_heads={n_heads}")
    head_dim = w_q.shape[0] // n_heads
    if w_k.shape[0] % head_dim or n_heads % (w_k.shape[0] // head_dim):
        raise ValueError(f"w_k has {w_k.shape[0]} output features: not a number of heads of width {head_dim} dividing n_heads={n_heads}")
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
    projecting each head with its own ``(d_model, head_dim)`` block of columns
    of ``W_O`` and adding the results (Turner's ``Y = sum_h V_h X A_h``). This
    function computes the second form, one head at a time.

    Args:
        heads: per-head attention outputs, ``(..., n_heads, seq, head_dim)``.
        w_o: ``(d_model, n_heads * head_dim)`` (``nn.Linear`` convention).
        b_o: ``(d_model,)`` or ``None``; added once, not once per head.

    Returns:
        ``(..., seq, d_model)``, equal to ``merge_heads(heads) @ w_o.T + b_o``.
    """
    n_heads, head_dim = heads.shape[-3], heads.shape[-1]
    if w_o.shape[-1] != n_heads * head_dim:
        raise ValueError(f"w_o has {w_o.shape[-1]} input features, expected n_heads * head_dim = {n_heads * head_dim}")
    out = sum(heads[..., h, :, :] @ w_o[:, h * head_dim:(h + 1) * head_dim].T for h in range(n_heads))
    return out if b_o is None else out + b_o


def mha_param_count(d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True) -> int:
    """Number of parameters of :class:`MultiHeadAttention` with ``head_dim = d_model / n_heads``.

    Queries and output: ``d_model^2`` weights each; keys and values:
    ``d_model * n_kv_heads * head_dim`` each; plus one bias per output feature.
    With ``n_kv_heads == n_heads`` (MHA) this is ``4 d_model^2 + 4 d_model``,
    whatever the number of heads.
    """
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if d_model % n_heads or n_heads % n_kv_heads:
        raise ValueError(f"need n_heads | d_model and n_kv_heads | n_heads, got d_model={d_model}, "
                         f"n_heads={n_heads}, n_kv_heads={n_kv_heads}")
    kv_width = n_kv_heads * (d_model // n_heads)
    weights = 2 * d_model * d_model + 2 * d_model * kv_width
    biases = 2 * d_model + 2 * kv_width if bias else 0
    return weights + biases


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
        self.register_buffer("k", torch.zeros(batch, n_kv_heads, max_len, head_dim, dtype=dtype, device=device), persistent=False)
        self.register_buffer("v", torch.zeros(batch, n_kv_heads, max_len, head_dim, dtype=dtype, device=device), persistent=False)

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


ATTN_IMPLS = ("eager", "sdpa")


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al., 2017, section 3.2.2), with grouped-query attention.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O`` with
    ``head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)``. Self-attention when
    ``x_kv`` is omitted, cross-attention otherwise. With ``n_kv_heads < n_heads``
    the keys and values have fewer heads, each shared by a block of
    ``n_heads / n_kv_heads`` query heads: grouped-query attention (GQA); one
    KV head is multi-query attention (MQA); ``n_kv_heads == n_heads`` is MHA.

    Args:
        d_model: model width (of the queries' input).
        n_heads: query heads.  n_kv_heads: key/value heads (``n_heads`` if None).
        head_dim: width per head (``d_model // n_heads`` if None).
        bias: default for both ``qkv_bias`` and ``out_bias``.
        qkv_bias, out_bias: biases of the q/k/v projections and of ``out_proj``.
        k_bias: bias of the key projection alone (SwinV2 has none); ``qkv_bias`` if None.
        kv_dim: width of the keys' and values' input (cross-attention from another width).
        dropout: on the attention weights, training only.
        attn_impl: ``"eager"`` (the explicit math path) or ``"sdpa"`` (PyTorch's fused kernel).
    """

    def __init__(self, d_model: int, n_heads: int, *, n_kv_heads: int | None = None, head_dim: int | None = None,
                 bias: bool = True, qkv_bias: bool | None = None, out_bias: bool | None = None,
                 k_bias: bool | None = None, kv_dim: int | None = None, dropout: float = 0.0, attn_impl: str = "sdpa"):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if head_dim is None:
            if d_model % n_heads:
                raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
            head_dim = d_model // n_heads
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
        if attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {attn_impl!r}")
        qkv_bias = bias if qkv_bias is None else qkv_bias
        out_bias = bias if out_bias is None else out_bias
        k_bias = qkv_bias if k_bias is None else k_bias
        kv_dim = d_model if kv_dim is None else kv_dim
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = d_model, n_heads, n_kv_heads, head_dim
        self.dropout, self.attn_impl = dropout, attn_impl
        self.q_proj = nn.Linear(d_model, n_heads * head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(kv_dim, n_kv_heads * head_dim, bias=k_bias)
        self.v_proj = nn.Linear(kv_dim, n_kv_heads * head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(n_heads * head_dim, d_model, bias=out_bias)

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
            x: ``(batch, n_q, d_model)``, the sequence that asks (queries).
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
            ``(batch, n_q, d_model)``, and with ``return_weights`` the weights
            ``(batch, n_heads, n_q, n_k)``.
        """
        x_kv = x if x_kv is None else x_kv
        b, n_q, _ = x.shape
        q = self.q_proj(x).view(b, n_q, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x_kv).view(b, x_kv.shape[1], self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x_kv).view(b, x_kv.shape[1], self.n_kv_heads, self.head_dim).transpose(1, 2)
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
                                           fused=self.attn_impl == "sdpa")
        return self.out_proj(merge_heads(out))
