"""Efficient attention (chapter 08): what attention costs, the KV cache, and the
online softmax that computes exact attention without the ``n x n`` matrix.

What attention costs in time and memory (``sdpa_flops``, ``score_matrix_bytes``,
``kv_cache_bytes``) is counted in :mod:`course_lib.counting`.

* :func:`decode_step_with_cache`: one decoding step that appends the new keys
  and values to the cache and attends over all of them.
* :func:`tiled_attention`: attention over blocks of keys with a running maximum
  and a running sum (the online softmax of FlashAttention); equal to
  :func:`course_lib.attention.scaled_dot_product_attention`.
* :func:`sliding_window_mask`: the banded mask of windowed attention, ``O(n w d)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib.attention import causal_mask, combine_masks, scaled_dot_product_attention

__all__ = [
    "decode_step_with_cache",
    "tiled_attention",
    "sliding_window_mask",
]


def decode_step_with_cache(q_new: Tensor, k_new: Tensor, v_new: Tensor,
                           k_cache: Tensor, v_cache: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Attend from the new tokens to the cached and the new keys; grow the cache.

    Args:
        q_new, k_new: ``(batch, heads, n_new, head_dim)`` for the new positions.
        v_new: ``(batch, heads, n_new, d_v)``.
        k_cache: ``(batch, heads, n_past, head_dim)`` keys of earlier positions
            (``n_past`` may be 0).
        v_cache: ``(batch, heads, n_past, d_v)``.

    Returns:
        ``(out, k, v)``: ``out`` ``(batch, heads, n_new, d_v)``, and the caches
        with the new positions appended along the sequence axis. New token ``i``
        sits at position ``n_past + i`` and sees keys ``0 .. n_past + i``.
    """
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    mask = causal_mask(q_new.shape[-2], k.shape[-2], device=q_new.device)
    return scaled_dot_product_attention(q_new, k, v, mask), k, v


# --------------------------------------------------------------------------
# Online softmax
# --------------------------------------------------------------------------
def tiled_attention(q: Tensor, k: Tensor, v: Tensor, block_size: int, mask: Tensor | None = None,
                    is_causal: bool = False, scale: float | None = None) -> Tensor:
    """Exact attention computed over blocks of ``block_size`` keys, never forming ``(n_q, n_k)``.

    For each query the loop keeps the running maximum ``m`` of the scores seen
    so far, the running sum ``l = sum_j exp(s_j - m)`` and the running output
    ``o = sum_j exp(s_j - m) v_j``. A new block with scores ``s_b`` gives
    ``m' = max(m, max s_b)``; the old sums are rescaled by ``exp(m - m')``::

        l' = l exp(m - m') + sum_b exp(s_b - m')
        o' = o exp(m - m') + exp(s_b - m') V_b

    and the answer is ``o / l``. The largest score tensor held is ``(n_q, block_size)``.

    Args:
        q: ``(..., n_q, d_k)``; k: ``(..., n_k, d_k)``; v: ``(..., n_k, d_v)``.
        block_size: keys per block (>= 1).
        mask: boolean, broadcastable to ``(..., n_q, n_k)``, ``True`` = may attend.
        is_causal: add the causal mask of :func:`course_lib.attention.causal_mask`.
        scale: score multiplier, ``1/sqrt(d_k)`` by default.

    Returns:
        ``(..., n_q, d_v)``, equal to :func:`course_lib.attention.scaled_dot_product_attention`;
        a query with no allowed key gets zeros.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"keys and values must have the same length, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if is_causal:
        mask = combine_masks(mask, causal_mask(n_q, n_k, device=q.device))
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                   *([mask.shape[:-2]] if mask is not None and mask.ndim > 2 else []))
    m = torch.full(batch + (n_q, 1), float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros(batch + (n_q, 1), dtype=q.dtype, device=q.device)  # noqa: E741
    o = torch.zeros(batch + (n_q, d_v), dtype=q.dtype, device=q.device)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        s = (q @ k[..., start:stop, :].transpose(-2, -1)) * scale
        if mask is not None:
            block_mask = mask if mask.shape[-1] == 1 else mask[..., start:stop]
            s = torch.where(block_mask, s, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # all masked so far: no shift
        p = torch.exp(s - shift)
        correction = torch.exp(m - shift)  # exp(-inf) = 0 before the first allowed key
        l = l * correction + p.sum(dim=-1, keepdim=True)  # noqa: E741
        o = o * correction + p @ v[..., start:stop, :]
        m = m_new
    return o / torch.where(l > 0, l, torch.ones_like(l))


# --------------------------------------------------------------------------
# Windowed attention
# --------------------------------------------------------------------------
def sliding_window_mask(n: int, window: int, causal: bool = False, device=None) -> Tensor:
    """``(n, n)`` banded mask: query ``i`` sees keys ``j`` with ``|i - j| < window``
    (only ``0 <= i - j < window`` if ``causal``). Each row has at most
    ``2 window - 1`` allowed keys, so attention costs ``O(n w d)`` instead of ``O(n^2 d)``."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    diff = i - j
    if causal:
        return (diff >= 0) & (diff < window)
    return diff.abs() < window
