"""Random cases and likely mistakes for the attention exercises (chapter 02).

Cases cover batch shapes, ``n_q != n_k``, ``d_k != d_v``, float32 and float64,
small and large score spreads, and masks of every kind, including a query
whose keys are all masked. Each :class:`~grader.assignments.Mistake` is a
plausible wrong implementation written as a variant of the reference; the
grader names it when a learner's result matches it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from course_lib import attention as _reference
from grader.cases import Case, LargeInputs, alternating_dtype, dtype_name, randint, randn
from grader.diagnosis import Mistake
from grader.guards import FUSED_ATTENTION, SOFTMAX
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

_BATCH_SHAPES = [(), (2,), (3,), (2, 3)]


def _random_mask(g: torch.Generator, batch: tuple, n_q: int, n_k: int, kind: str) -> tuple[Tensor | None, str]:
    if kind == "none":
        return None, "no mask"
    if kind == "causal":
        return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), "causal mask"
    if kind == "padding":
        b = batch[0] if batch else 1
        lengths = torch.randint(1, n_k + 1, (b,), generator=g)
        m = torch.arange(n_k)[None, :] < lengths[:, None]
        m = m.view((b,) + (1,) * (len(batch) - 1) + (1, n_k)) if batch else m.view(1, n_k)
        return m, f"padding mask, lengths {lengths.tolist()}"
    if kind == "random":
        m = torch.rand(batch + (n_q, n_k), generator=g) < 0.6
        if n_q > 1:
            m[..., 0, :] = False  # a query that sees nothing
        return m, "random mask with a fully masked query row"
    raise ValueError(kind)


def mask_sizes(seed: int = 0, n: int = 12) -> list[Case]:
    """Cases ``(n,)`` and ``(n_q, n_k)`` sizes for a causal-mask function."""
    g = torch.Generator().manual_seed(seed)
    sizes = [4, 1, 2, 3] + torch.randint(4, 40, (n,), generator=g).tolist()
    return [Case((s,), label=f"n={s}") for s in sizes]


def _qkv(g, batch, n_q, n_k, d_k, d_v, dtype, spread):
    q = randn(g, batch + (n_q, d_k), dtype, spread)
    k = randn(g, batch + (n_k, d_k), dtype, spread)
    v = randn(g, batch + (n_k, d_v), dtype)
    return q, k, v


#: the largest score (in absolute value) of an ordinary case: exp of it neither overflows nor leaves float32's
#: normal range, so a softmax that skips subtracting the maximum is named on the hard repeats (the scores times
#: 40, :class:`~grader.cases.LargeInputs`), whose label says what it cannot take, not on an ordinary case
MAX_ORDINARY_SCORE = 80.0


def _within_exp_range(q: Tensor, k: Tensor) -> Tensor:
    """``q``, scaled down where a score ``q k^T / sqrt(d_k)`` would exceed :data:`MAX_ORDINARY_SCORE` (a large
    spread with a small d_k draws such scores now and then); unchanged otherwise."""
    if q.numel() == 0 or k.numel() == 0:
        return q
    top = float((q.double() @ k.double().transpose(-2, -1)).abs().max()) / math.sqrt(q.shape[-1])
    if top <= MAX_ORDINARY_SCORE:
        return q
    return (q.double() * (0.9 * MAX_ORDINARY_SCORE / top)).to(q.dtype)


def attention_cases(seed: int = 0, n: int = 24, *, masks: bool = True, values: bool = True) -> list[Case]:
    """Random ``(q, k, v[, mask])`` cases covering batch shapes, ``n_q != n_k``,
    ``d_k != d_v``, float32/float64, small and large score spreads, and the
    mask kinds none/causal/padding/random (with a fully masked row)."""
    g = torch.Generator().manual_seed(seed)
    kinds = ["none", "causal", "padding", "random"] if masks else ["none"]
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        n_q, n_k = (int(x) for x in torch.randint(1, 9, (2,), generator=g))
        if i % 5 == 0:
            n_k = n_q
        if i == 0:  # the first case square with two tokens or more, so that transposed weights (right shape only
            n_q = n_k = max(n_q, 2)  # when n_q == n_k, and equal to the right ones when n_q == n_k == 1) show on it
        d_k = [1, 3, 8, 16, 64][randint(g, 0, 5)]
        d_v = [2, 5, 8][randint(g, 0, 3)]
        if i == 0 and d_k == n_k:  # with d_k other than the number of tokens (a scale by the sequence length would
            d_k = 16  # be right on it), and values narrower or wider than the keys are many: the weights,
        if i == 0 and d_v == n_k:  # (n_q, n_k), are then of another shape than the result, (n_q, d_v)
            d_v = 5 if n_k != 5 else 2
        dtype = alternating_dtype(i)
        spread = 4.0 if i % 4 == 3 else 1.0
        q, k, v = _qkv(g, batch, n_q, n_k, d_k, d_v, dtype, spread)
        q = _within_exp_range(q, k)
        kind = kinds[i % len(kinds)]
        mask, mask_label = _random_mask(g, batch, n_q, n_k, kind)
        args = (q, k, v) if values else (q, k)
        label = f"batch {batch}, n_q={n_q}, n_k={n_k}, d_k={d_k}" + (f", d_v={d_v}" if values else "")
        label += f", {dtype_name(dtype)}"
        if masks:
            args = args + (mask,)
            label += f", {mask_label}"
        cases.append(Case(args, label=label))
    return cases


def score_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(q, k)`` cases for a scores function."""
    return attention_cases(seed, n, masks=False, values=False)


def softmax_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(scores, mask)`` cases: ordinary and huge scores (overflow), every mask kind."""
    g = torch.Generator().manual_seed(seed)
    kinds = ["none", "causal", "padding", "random"]
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        n_q, n_k = (int(x) for x in torch.randint(1, 9, (2,), generator=g))
        if i == 1:  # the first causal mask: two keys or more and queries that see none, before any huge score, so
            n_k = max(n_k, 2)  # that the mask mistakes (and a NaN gradient in empty rows) show on it whatever the seed
            n_q = max(n_q, n_k + 1)
        dtype = alternating_dtype(i)
        spread = [1.0, 3.0, 1000.0][i % 3]
        scores = randn(g, batch + (n_q, n_k), dtype, spread)
        mask, mask_label = _random_mask(g, batch, n_q, n_k, kinds[i % 4])
        label = f"scores {tuple(scores.shape)} of spread {spread:g}, {dtype_name(dtype)}, {mask_label}"
        cases.append(Case((scores, mask), label=label))
    return cases


# --------------------------------------------------------------------------
# Likely mistakes, as variants of the reference
# --------------------------------------------------------------------------
def _scores(q, k, scale):
    return (q @ k.transpose(-2, -1)) * scale


def _softmax(s, mask=None, dim=-1):
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=dim)
    return torch.nan_to_num(w, nan=0.0)


SCORE_MISTAKES = [
    Mistake("the scores are not scaled: divide q @ k^T by sqrt(d_k).", lambda q, k: _scores(q, k, 1.0)),
    Mistake("the scores are divided by d_k; divide by its square root, sqrt(d_k).",
            lambda q, k: _scores(q, k, 1.0 / q.shape[-1])),
    Mistake("the scores are multiplied by sqrt(d_k); divide by it instead.",
            lambda q, k: _scores(q, k, math.sqrt(q.shape[-1]))),
    Mistake(
        "the result is (n_k, n_q): queries index the rows, so compute q @ k^T, not k @ q^T.",
        lambda q, k: _scores(k, q, 1.0 / math.sqrt(q.shape[-1])),
    ),
    Mistake(
        "the scale uses the sequence length; the scale is 1/sqrt(d_k) where d_k = q.shape[-1].",
        lambda q, k: _scores(q, k, 1.0 / math.sqrt(k.shape[-2])),
    ),
]

SOFTMAX_MISTAKES = [
    Mistake(
        "the softmax normalizes over the queries (dim=-2); each query's weights over the keys (dim=-1) must sum to 1.",
        lambda s, m: _softmax(s, m, dim=-2),
    ),
    Mistake("the mask is inverted: True means *may attend*, so keep entries where the mask is True.",
            lambda s, m: _softmax(s, None if m is None else ~m)),
    Mistake("the mask is ignored: set masked scores to -inf before exponentiating.", lambda s, m: _softmax(s, None)),
    Mistake(
        "masked scores are set to 0 rather than -inf, so masked keys still get weight exp(0).",
        lambda s, m: _softmax(s if m is None else s.masked_fill(~m, 0.0)),
    ),
    Mistake(
        "a row with no allowed key comes out uniform: it must be all zeros (fill with -inf, not a large negative "
        "number, and handle the empty row).",
        lambda s, m: torch.softmax(s if m is None else s.masked_fill(~m, -1e9), -1),
    ),
    Mistake(
        "masked weights are zeroed after normalizing, so the rows no longer sum to 1: renormalize over the allowed "
        "keys.",
        lambda s, m: torch.softmax(s, -1) * (1.0 if m is None else m),
    ),
]

CAUSAL_MASK_MISTAKES = [
    Mistake("off by one: a token may attend to itself, so the diagonal is True.",
            lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)),
    Mistake("the mask lets tokens see the future: keep the lower triangle (key j <= query i), not the upper.",
            lambda n: torch.ones(n, n, dtype=torch.bool).triu()),
    Mistake("the mask is inverted: True must mean *may attend* (j <= i).",
            lambda n: ~torch.ones(n, n, dtype=torch.bool).tril()),
    Mistake("off by one: key i+1 is in the future of query i.", lambda n: torch.ones(n, n, dtype=torch.bool).tril(1)),
]


def _attention(q, k, v, mask=None, scale=None, dim=-1, invert=False):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if mask is not None and invert:
        mask = ~mask
    return _softmax(_scores(q, k, scale), mask, dim=dim) @ v


ATTENTION_MISTAKES = [
    Mistake("the scores are not scaled by 1/sqrt(d_k).", lambda q, k, v, m=None: _attention(q, k, v, m, scale=1.0)),
    Mistake("the scale uses d_v (the values' width); it is 1/sqrt(d_k), the width of queries and keys.",
            lambda q, k, v, m=None: _attention(q, k, v, m, scale=1.0 / math.sqrt(v.shape[-1]))),
    Mistake("the scores are divided by d_k instead of sqrt(d_k).",
            lambda q, k, v, m=None: _attention(q, k, v, m, scale=1.0 / q.shape[-1])),
    Mistake("the softmax runs over the queries (dim=-2); it must run over the keys (dim=-1).",
            lambda q, k, v, m=None: _attention(q, k, v, m, dim=-2)),
    Mistake("the mask is inverted: True means *may attend*.",
            lambda q, k, v, m=None: _attention(q, k, v, m, invert=True)),
    Mistake("the mask is ignored.", lambda q, k, v, m=None: _attention(q, k, v, None)),
    Mistake(
        "the weights are transposed: row i of the weights belongs to query i, so compute weights @ v.",
        lambda q, k, v, m=None: _softmax(_scores(q, k, 1.0 / math.sqrt(q.shape[-1])), m).transpose(-2, -1) @ v,
    ),
    Mistake("the scores are not normalized: apply the softmax before weighting the values.",
            lambda q, k, v, m=None: (_scores(q, k, 1.0 / math.sqrt(q.shape[-1])).masked_fill(~m, 0.0) if m is not None
                                     else _scores(q, k, 1.0 / math.sqrt(q.shape[-1]))) @ v),
]


def softmax_through_logsumexp(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """The masked softmax as ``exp(s - logsumexp(s))``: correct, but it rounds a quantity the size of the
    scores before the exp (a relative error of about eps * |s|), which the tolerance must allow."""
    s = scores if mask is None else scores.masked_fill(mask.logical_not(), float("-inf"))
    return torch.nan_to_num(torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)), nan=0.0)


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 02-attention run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("02-attention", "attention.ipynb", (
    prediction("predicted_scores_shape", 1, [2, 6, 9],
               form='the shape as three ints, like (1, 2, 3)', tolerance=0, wrong={
        'that is the shape of k @ q^T: each row of the scores is one query': [2, 9, 6],
        'that is the shape of q^T @ k, a product over the tokens; the scores contract the features': [2, 4, 4],
        'the batch axis was dropped; it stays in front': [6, 9],
    }),
    Exercise("attention_scores", 2, (
        Comparison(_reference.attention_scores, score_cases, seed=21, mistakes=SCORE_MISTAKES,
                   forbidden=FUSED_ATTENTION, check_grad=True),
    )),
    Exercise("masked_softmax", 3, (
        Comparison(_reference.masked_softmax, softmax_cases, seed=22, mistakes=SOFTMAX_MISTAKES,
                   forbidden=SOFTMAX + FUSED_ATTENTION, check_grad=True, formulations=(softmax_through_logsumexp,)),
    )),
    Exercise("causal_mask", 2, (
        Comparison(_reference.causal_mask, mask_sizes, seed=23, mistakes=CAUSAL_MASK_MISTAKES),
    )),
    Exercise("scaled_dot_product_attention", 3, (
        Comparison(_reference.scaled_dot_product_attention, attention_cases, seed=24, mistakes=ATTENTION_MISTAKES,
                   forbidden=FUSED_ATTENTION, check_grad=True, hard=(LargeInputs(40.0, (0, 1)),)),
    )),
))
