"""Scaled dot-product attention: scores, masks, softmax and the weighted sum (chapter 02).

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
walks through (``attn_impl="eager"``), and the *fused path* (``attn_impl="sdpa"``) through
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
from torch import Tensor

#: the two paths of attention: the explicit math path and PyTorch's fused kernel
ATTN_IMPLS = ("eager", "sdpa")

__all__ = [
    "ATTN_IMPLS",
    "attention_scores",
    "masked_softmax",
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "attention_weights",
    "scaled_dot_product_attention",
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
    attn_impl: str = "eager",
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
        attn_impl: ``"eager"`` runs the explicit math path; ``"sdpa"`` calls
            ``torch.nn.functional.scaled_dot_product_attention`` (the fused kernels).

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
    if attn_impl not in ATTN_IMPLS:
        raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {attn_impl!r}")
    fused = attn_impl == "sdpa"
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
