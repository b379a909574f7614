"""Random cases and likely mistakes for the multi-head attention exercises (chapter 03).

Cases cover batch sizes, sequence lengths from 1, head counts from 1 to the
model width (head_dim 1), float32 and float64, contiguous and non-contiguous
inputs, and output widths that differ from ``n_heads * head_dim`` (so a
transposed weight shows up as a shape error). Each
:class:`~grader.assignments.Mistake` is a plausible wrong implementation
written as a variant of the reference; the grader names it when a learner's
result matches it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib import multi_head as _reference
from course_lib.counting import mha_param_count
from course_lib.multi_head import multi_head_attention
from grader.cases import Case, LargeInputs, alternating_dtype, dtype_name, randint, randn
from grader.diagnosis import Mistake
from grader.guards import FUSED_ATTENTION
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

# (n_heads, head_dim) pairs: one head, head_dim 1, and ordinary ones
_HEADS = [(2, 3), (4, 2), (3, 4), (1, 6), (6, 1), (2, 8), (8, 2), (4, 4), (5, 3)]


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------
def _split_sizes(g: torch.Generator, i: int) -> tuple[int, int, int, int, torch.dtype]:
    """``(n_heads, head_dim, batch, seq, dtype)`` of the ``i``-th case of splitting or merging heads."""
    h, d = _HEADS[i % len(_HEADS)]
    seq = 1 if i == 7 else randint(g, 2, 8)
    if seq == h:  # (batch, seq, n_heads, head_dim) would have the expected shape: a missing transpose looks like
        seq += 1  # a wrong reshape
    return h, d, 1 + i % 3, seq, alternating_dtype(i)


def split_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(x, n_heads)`` with ``x`` of shape ``(batch, seq, n_heads * head_dim)``."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        h, d, b, seq, dtype = _split_sizes(g, i)
        x = randn(g, (b, seq, h * d), dtype)
        cases.append(Case((x, h), label=f"x {tuple(x.shape)}, n_heads={h}, {dtype_name(dtype)}"))
    return cases


def merge_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(x,)`` with ``x`` of shape ``(batch, n_heads, seq, head_dim)``; some non-contiguous."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        h, d, b, seq, dtype = _split_sizes(g, i)
        if i % 4 == 3:  # as split_heads leaves it: a transposed view
            x = randn(g, (b, seq, h, d), dtype).transpose(1, 2)
            kind = "non-contiguous"
        else:
            x = randn(g, (b, h, seq, d), dtype)
            kind = "contiguous"
        cases.append(Case((x,), label=f"x {tuple(x.shape)} ({kind}), {dtype_name(dtype)}"))
    return cases


def mha_cases(seed: int = 0, n: int = 18) -> list[Case]:
    """``(x, w_q, w_k, w_v, w_o, n_heads)`` for self-attention without biases.

    Weights are ``(dim, dim)`` in the ``nn.Linear`` convention, scaled
    so that scores are of order 1 (and larger in some cases, where the softmax
    is peaked).
    """
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        h, d = _HEADS[i % len(_HEADS)]
        dim = h * d
        b = 1 + i % 2
        seq = 1 if i == 5 else randint(g, 2, 9)
        dtype = alternating_dtype(i)
        spread = 3.0 if i % 4 == 2 else 1.0
        x = randn(g, (b, seq, dim), dtype)
        w_q, w_k, w_v, w_o = (randn(g, (dim, dim), dtype, spread / math.sqrt(dim)) for _ in range(4))
        label = f"x {tuple(x.shape)}, n_heads={h}, head_dim={d}, {dtype_name(dtype)}"
        cases.append(Case((x, w_q, w_k, w_v, w_o, h), label=label))
    return cases


def head_sum_cases(seed: int = 0, n: int = 18) -> list[Case]:
    """``(heads, w_o)``: ``heads`` ``(..., n_heads, seq, head_dim)`` and ``w_o`` ``(dim, n_heads * head_dim)``.

    ``dim`` differs from ``n_heads * head_dim`` in half the cases.
    """
    g = torch.Generator().manual_seed(seed)
    batches = [(2,), (), (1,), (2, 3)]
    cases = []
    for i in range(n):
        h, d = _HEADS[i % len(_HEADS)]
        batch = batches[i % len(batches)]
        seq = 1 if i == 5 else randint(g, 2, 8)
        if i == 1:  # the first case without batch axes: more positions than heads, so that indexing the heads
            seq = max(seq, h + 1)  # on the wrong axis fails the same way whatever the seed
        dim = h * d if i % 2 == 0 else h * d + 1 + randint(g, 0, 4)
        if i == 1 and dim // h == d:  # the first case with dim != n_heads * head_dim: dim // n_heads is not head_dim
            dim += h  # either, so that a head width taken from dim is wrong on it whatever the seed
        dtype = alternating_dtype(i)
        heads = randn(g, batch + (h, seq, d), dtype)
        w_o = randn(g, (dim, h * d), dtype, 1.0 / math.sqrt(h * d))
        label = f"heads {tuple(heads.shape)}, w_o {tuple(w_o.shape)}, {dtype_name(dtype)}"
        cases.append(Case((heads, w_o), label=label))
    return cases


def param_count_cases(seed: int = 0) -> list[Case]:
    """``(dim, n_heads[, bias=...])``: small and published sizes, with and without biases."""
    sizes = [(512, 8, True), (512, 8, False), (768, 12, True), (64, 1, True), (6, 6, False), (1, 1, True),
             (1024, 16, False), (12, 3, True), (20, 4, False), (4096, 32, True)]
    g = torch.Generator().manual_seed(seed)
    for _ in range(4):
        h = randint(g, 1, 9)
        sizes.append((h * randint(g, 1, 20), h, bool(torch.randint(0, 2, (1,), generator=g))))
    cases = [Case((d, h), {"bias": b}, label=f"dim={d}, n_heads={h}, bias={b}") for d, h, b in sizes]
    cases.append(Case((256, 4), label="dim=256, n_heads=4, bias left at its default (True)"))
    return cases


# --------------------------------------------------------------------------
# References with the exercises' signatures
# --------------------------------------------------------------------------
def mha_reference(x: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, n_heads: int) -> Tensor:
    """:func:`course_lib.multi_head.multi_head_attention` without biases or mask."""
    return multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads)


def param_count_reference(dim: int, n_heads: int, bias: bool = True) -> int:
    """:func:`course_lib.counting.mha_param_count` for plain MHA (``n_kv_heads = n_heads``)."""
    return mha_param_count(dim, n_heads, bias=bias)


# --------------------------------------------------------------------------
# Likely mistakes, as variants of the reference
# --------------------------------------------------------------------------
def _split(x, h, how="right"):
    b, n, dm = x.shape
    d = dm // h
    if how == "right":
        return x.reshape(b, n, h, d).transpose(1, 2)
    if how == "no_transpose":  # (b, n, h*d) read as (b, h, n, d)
        return x.reshape(b, h, n, d)
    if how == "interleaved":  # head i gets features i, i + h, i + 2h, ...
        return x.reshape(b, n, d, h).permute(0, 3, 1, 2)
    raise ValueError(how)


def _merge(x, how="right"):
    b, h, n, d = x.shape
    if how == "right":
        return x.transpose(1, 2).reshape(b, n, h * d)
    if how == "no_transpose":
        return x.reshape(b, n, h * d)
    if how == "interleaved":
        return x.permute(0, 2, 3, 1).reshape(b, n, h * d)
    raise ValueError(how)


SPLIT_MISTAKES = [
    Mistake(
        "the shape is right but the content is not: reshaping (batch, seq, n_heads*head_dim) straight to "
        "(batch, n_heads, seq, head_dim) mixes positions across heads. Reshape to (batch, seq, n_heads, head_dim) "
        "first, then transpose the seq and head axes.",
        lambda x, h: _split(x, h, "no_transpose"),
    ),
    Mistake(
        "each head gets every n_heads-th feature (interleaved): head i owns the contiguous block of features "
        "[i*head_dim, (i+1)*head_dim). Reshape the last axis as (n_heads, head_dim), not (head_dim, n_heads).",
        lambda x, h: _split(x, h, "interleaved"),
    ),
    Mistake(
        "the result is (batch, seq, n_heads, head_dim): move the head axis in front of the sequence axis "
        "(transpose(1, 2)).",
        lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h),
    ),
    Mistake(
        "the last two axes are swapped: the result is (batch, n_heads, head_dim, seq); it should be "
        "(batch, n_heads, seq, head_dim).",
        lambda x, h: _split(x, h).transpose(-2, -1),
    ),
    Mistake(
        "head_dim and n_heads are swapped: the split axis has n_heads = the argument, and head_dim = dim // n_heads.",
        lambda x, h: _split(x, x.shape[-1] // h),
    ),
]

MERGE_MISTAKES = [
    Mistake(
        "the shape is right but the content is not: reshaping (batch, n_heads, seq, head_dim) straight to "
        "(batch, seq, n_heads*head_dim) mixes positions. Transpose to (batch, seq, n_heads, head_dim) first, "
        "then flatten the last two axes.",
        lambda x: _merge(x, "no_transpose"),
    ),
    Mistake(
        "the heads come out interleaved (feature j of head i at position j*n_heads + i): the concatenation "
        "puts head 0's head_dim features first, then head 1's, and so on.",
        lambda x: _merge(x, "interleaved"),
    ),
    Mistake(
        "the heads come out in reverse order: head 0's features go first in the concatenation.",
        lambda x: _merge(x.flip(1)),
    ),
    Mistake(
        "the result is still (batch, seq, n_heads, head_dim): flatten the last two axes into n_heads*head_dim.",
        lambda x: x.transpose(1, 2),
    ),
    Mistake(
        "the result is (batch, n_heads, seq*head_dim) or similar: the output is (batch, seq, n_heads*head_dim).",
        lambda x: x.reshape(x.shape[0], x.shape[1], -1),
    ),
]


def _mha(x, w_q, w_k, w_v, w_o, h, *, split="right", merge="right", scale=None, dim=-1, project=True,
         transpose_w=True, causal=False):
    lin = (lambda t, w: t @ w.T) if transpose_w else (lambda t, w: t @ w)
    q, k, v = (_split(lin(x, w), h, split) for w in (w_q, w_k, w_v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    out = _merge(torch.softmax(s, dim=dim) @ v, merge)
    return lin(out, w_o) if project else out


MHA_MISTAKES = [
    Mistake("the scores are not scaled: divide q @ k^T by sqrt(head_dim).", lambda *a: _mha(*a, scale=1.0)),
    Mistake(
        "the scores are scaled by 1/sqrt(dim): each head's queries and keys have width head_dim = "
        "dim / n_heads, and that is the d_k of the scale.",
        lambda *a: _mha(*a, scale=1.0 / math.sqrt(a[0].shape[-1])),
    ),
    Mistake(
        "this is single-head attention at full width: split the projected q, k, v into n_heads heads of "
        "width head_dim and attend in each head separately.",
        lambda *a: _mha(*a[:5], 1),
    ),
    Mistake(
        "the heads are split by reshaping (batch, seq, dim) straight to (batch, n_heads, seq, head_dim): "
        "reshape to (batch, seq, n_heads, head_dim) and transpose.",
        lambda *a: _mha(*a, split="no_transpose", merge="no_transpose"),
    ),
    Mistake(
        "the heads are split correctly but merged with a reshape alone: transpose (batch, n_heads, seq, head_dim) "
        "to (batch, seq, n_heads, head_dim) before flattening.",
        lambda *a: _mha(*a, merge="no_transpose"),
    ),
    Mistake(
        "the heads are split with a reshape alone (no transpose): reshape to (batch, seq, n_heads, head_dim), "
        "then transpose.",
        lambda *a: _mha(*a, split="no_transpose"),
    ),
    Mistake(
        "attention runs once over the full width (scores from all dim features): split q, k and v into "
        "n_heads heads first, so that each head has its own scores and its own softmax.",
        lambda x, wq, wk, wv, wo, h: (
            torch.softmax((x @ wq.T) @ (x @ wk.T).transpose(-2, -1) * math.sqrt(h / x.shape[-1]), -1)
            @ (x @ wv.T) @ wo.T),
    ),
    Mistake(
        "the output weight is used untransposed: with the nn.Linear convention (out, in), the projection is "
        "concat @ w_o.T.",
        lambda x, wq, wk, wv, wo, h: _mha(x, wq, wk, wv, wo.T, h),
    ),
    Mistake("the output projection W_O is missing: multiply the concatenated heads by w_o^T.",
            lambda *a: _mha(*a, project=False)),
    Mistake(
        "the weights are used untransposed: with the nn.Linear convention (out, in), a projection is x @ w.T.",
        lambda *a: _mha(*a, transpose_w=False),
    ),
    Mistake("the softmax runs over the queries (dim=-2); it must run over the keys (dim=-1).",
            lambda *a: _mha(*a, dim=-2)),
    Mistake("a causal mask is applied; this exercise has none (every token sees every token).",
            lambda *a: _mha(*a, causal=True)),
    Mistake(
        "the features are dealt to the heads interleaved: head i owns features [i*head_dim, (i+1)*head_dim).",
        lambda *a: _mha(*a, split="interleaved", merge="interleaved"),
    ),
]


def _head_sum(heads, w_o, order=None, cols="block", reduce="sum"):
    h, d = heads.shape[-3], heads.shape[-1]
    order = list(range(h)) if order is None else order
    parts = []
    for i, hh in enumerate(order):
        if cols == "block":
            w = w_o[:, hh * d:(hh + 1) * d]
        elif cols == "interleaved":
            w = w_o[:, hh::h]
        parts.append(heads[..., i, :, :] @ w.T)
    out = torch.stack(parts).sum(0)
    return out / h if reduce == "mean" else out


HEAD_SUM_MISTAKES = [
    Mistake("the per-head projections are averaged: the output is their sum, not their mean.",
            lambda H, W: _head_sum(H, W, reduce="mean")),
    Mistake(
        "head i is paired with the columns i, i + n_heads, ... of w_o: its block is the contiguous columns "
        "[i*head_dim, (i+1)*head_dim).",
        lambda H, W: _head_sum(H, W, cols="interleaved"),
    ),
    Mistake(
        "the heads are paired with the blocks of w_o in reverse order: head i goes with block i.",
        lambda H, W: _head_sum(H, W, order=list(range(H.shape[-3]))[::-1]),
    ),
    Mistake(
        "the heads are concatenated with a reshape alone: (..., n_heads, seq, head_dim) must be transposed to "
        "(..., seq, n_heads, head_dim) before flattening.",
        lambda H, W: H.reshape(*H.shape[:-3], H.shape[-2], -1) @ W.T,
    ),
    Mistake(
        "head i is paired with a block of *rows* of w_o: w_o is (dim, n_heads * head_dim), so head i's "
        "block is the columns w_o[:, i*head_dim:(i+1)*head_dim], used transposed.",
        lambda H, W: sum(H[..., i, :, :] @ W[i * H.shape[-1]:(i + 1) * H.shape[-1], :] for i in range(H.shape[-3])),
    ),
    Mistake(
        "only the first head is projected: add the projections of all n_heads heads.",
        lambda H, W: _head_sum(H[..., :1, :, :], W[:, :H.shape[-1]]),
    ),
    Mistake(
        "the per-head outputs are returned without summing them: the result is (..., seq, dim).",
        lambda H, W: torch.stack([H[..., i, :, :] @ W[:, i * H.shape[-1]:(i + 1) * H.shape[-1]].T
                                  for i in range(H.shape[-3])], -3),
    ),
]


def _count(d, h, bias=True, *, w=4, b=4):
    return w * d * d + (b * d if bias else 0)


PARAM_COUNT_MISTAKES = [
    Mistake("the output projection W_O is missing: there are four dim x dim matrices (Q, K, V, O).",
            lambda d, h, bias=True: _count(d, h, bias, w=3, b=3)),
    Mistake("the biases are missing: each of the four projections has dim biases when bias=True.",
            lambda d, h, bias=True: _count(d, h, False)),
    Mistake("biases are counted even when bias=False.", lambda d, h, bias=True: _count(d, h, True)),
    Mistake("only one projection's biases are counted: there are four bias vectors of dim entries.",
            lambda d, h, bias=True: _count(d, h, bias, b=1)),
    Mistake("the weights are counted once per head at full width: the heads share dim x dim matrices, so the count "
            "does not grow with n_heads.",
            lambda d, h, bias=True: 4 * h * d * d + (4 * d if bias else 0)),
    Mistake("each head is counted as head_dim x head_dim: a head's projection maps dim to head_dim, so it has dim * "
            "head_dim weights.",
            lambda d, h, bias=True: 4 * h * (d // h) ** 2 + (4 * d if bias else 0)),
    Mistake("the count is a float: use integer arithmetic (// rather than /) and return an int.",
            lambda d, h, bias=True: float(_count(d, h, bias))),
    Mistake("the biases are counted once per head: a projection has one bias per output feature, dim in all.",
            lambda d, h, bias=True: _count(d, h, bias, b=4 * h)),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 03-multi-head-attention run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("03-multi-head-attention", "multi_head_attention.ipynb", (
    Exercise("split_heads", 2, (
        Comparison(_reference.split_heads, split_cases, seed=31, mistakes=SPLIT_MISTAKES, check_grad=True),
    )),
    Exercise("merge_heads", 2, (
        Comparison(_reference.merge_heads, merge_cases, seed=32, mistakes=MERGE_MISTAKES, check_grad=True),
    )),
    Exercise("multi_head_attention", 4, (
        Comparison(mha_reference, mha_cases, seed=33, mistakes=MHA_MISTAKES, forbidden=FUSED_ATTENTION,
                   check_grad=True, hard=(LargeInputs(12.0, (0,)),)),
    )),
    Exercise("project_heads_separately", 2, (
        Comparison(_reference.mha_output_as_head_sum, head_sum_cases, seed=34, mistakes=HEAD_SUM_MISTAKES,
                   check_grad=True),
    )),
    prediction("predicted_mha_counts", 1, [144, 168],
               form='two ints, [without biases, with biases], like [10, 12]', tolerance=0, wrong={
        'the output projection is left out: a layer has four projections, W_Q, W_K, W_V and W_O': [108, 126],
        'one bias vector was counted, not one per projection': [144, 150],
        "each projection was counted as one head's slice (dim x head_dim), not the whole dim x dim map": [48, 56],
    }),
    Exercise("mha_param_count", 2, (
        Comparison(param_count_reference, param_count_cases, seed=35, mistakes=PARAM_COUNT_MISTAKES),
    )),
))
