"""Random cases and likely mistakes for the normalization exercises (chapter 04).

Cases cover 0 to 3 leading axes, widths from 1 up, float32 and float64, inputs
of very small and very large spread, inputs with a large mean (which breaks the
one-pass variance ``E[x^2] - E[x]^2`` in float32, forward and backward: a
learner whose code is right on them in float64 is told so), epsilons large enough to
matter, and, for BatchNorm, padded sequence batches whose padding slots hold
junk. Each :class:`~grader.assignments.Mistake` is a plausible wrong
implementation written as a variant of the reference; the grader names it when
a learner's result matches it.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from course_lib import norms as _reference
from grader.cases import Case, NaiveFormula, alternating_dtype, dtype_name, randint, randn
from grader.diagnosis import Mistake
from grader.guards import LAYER_NORM
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

# --------------------------------------------------------------------------
# Forbidden routines
# --------------------------------------------------------------------------
_EXTRA = [getattr(torch, n, None) for n in ("native_batch_norm", "group_norm", "native_group_norm", "instance_norm")]
#: every normalization routine of torch (LayerNorm, RMSNorm, BatchNorm, GroupNorm, InstanceNorm).
NORMS: tuple = tuple(LAYER_NORM) + tuple(f for f in _EXTRA if f is not None)
#: for the backward exercise: the norms and autograd itself.
AUTOGRAD: tuple = NORMS + (torch.autograd.grad, torch.autograd.backward, Tensor.backward, Tensor.requires_grad_)

_LEADING = [(5,), (2, 3), (2, 3, 4), (1,), (3,), (2, 1, 3)]
_WIDTHS = [1, 2, 3, 5, 8, 16, 64]  # width 1 only in the edge cases at the end



def _draw(g, shape, dtype, scale=1.0, offset=0.0):
    """:func:`~grader.cases.randn` moved by ``offset`` before the conversion to ``dtype``."""
    return (randn(g, shape, scale=scale) + offset).to(dtype)


def _pick(g, options):
    return options[randint(g, 0, len(options))]


def _feature_cases(seed: int, n: int, *, shift: bool, large_mean: bool, leading=_LEADING) -> list[Case]:
    """``(x, gamma[, beta], eps)`` over the last axis: well-conditioned cases first (where every likely
    mistake shows clearly), then random ones, then the edge and numerically hard ones."""
    g = torch.Generator().manual_seed(seed)
    # (leading, width, dtype, spread, eps)
    plan = [((2, 3), 8, torch.float64, 0.5, 0.1), ((4,), 16, torch.float32, 1.0, 0.5),
            (leading[2], 5, torch.float32, 2.0, 1e-5)]
    for i in range(n):
        lead = leading[i % len(leading)]
        d = _pick(g, _WIDTHS[1:])
        dtype = alternating_dtype(i)
        plan.append((lead, d, dtype, [1.0, 3.0, 0.01, 50.0][i % 4], [1e-5, 1e-6, 0.5, 1e-3, 1e-2][i % 5]))
    plan += [((3,), 1, torch.float64, 1.0, 1e-5), ((2, 2), 1, torch.float32, 5.0, 1e-3)]  # width 1: variance 0
    cases = []
    for lead, d, dtype, scale, eps in plan:
        offset = float(torch.randn(1, generator=g)) * 0.5 * scale  # a mean below the spread
        x = _draw(g, lead + (d,), dtype, scale, offset)
        gamma = _draw(g, (d,), dtype, 1.0, 1.0)
        beta = _draw(g, (d,), dtype)
        args = (x, gamma, beta, eps) if shift else (x, gamma, eps)
        label = f"x {tuple(x.shape)}, {dtype_name(dtype)}, spread {scale:g}, eps={eps:g}"
        cases.append(Case(args, label=label + (", width 1 (the variance is 0)" if d == 1 else "")))
    if large_mean:  # last, so that ordinary mistakes are named on ordinary inputs first
        cases += large_mean_cases(g, shift=shift)
    return cases


def _centered(position: int, per_feature: bool = False):
    """``easy(case)`` for :class:`~grader.cases.NaiveFormula`: the case in float64 with the tensor at ``position``
    moved to mean 0, per token (over the last axis) or, ``per_feature``, per feature over the real tokens (BatchNorm's
    statistics, the mask included). Every normalization here is unchanged by that move; the one-pass variance
    is then exact enough."""
    def easy(case: Case) -> Case:
        case = case.in_float64()
        x = case.args[position]
        if per_feature:
            tokens = x.reshape(-1, x.shape[-1])
            mask = case.kwargs.get("mask")
            if mask is not None:
                tokens = tokens[mask.reshape(-1)]
            mean = tokens.mean(dim=0)
        else:
            mean = x.mean(dim=-1, keepdim=True)
        args = case.args[:position] + (x - mean,) + case.args[position + 1:]
        return case.with_args(args, dict(case.kwargs), f"{case.label}, moved to mean 0 in float64")
    return easy


_NAIVE_VARIANCE = (
    "the variance is computed as E[x^2] - E[x]^2 (the mean of the squares minus the square of the mean), which "
    "loses precision when the mean is large against the spread: your code is right on the same inputs moved to "
    "mean 0. Use the mean of the squared deviations, ((x - mean)^2).mean(): subtract the mean first."
)
#: the one-pass variance, for LayerNorm (x first), its backward pass (x second) and BatchNorm
NAIVE_VARIANCE = NaiveFormula(_NAIVE_VARIANCE, _centered(0))
NAIVE_VARIANCE_BACKWARD = NaiveFormula(_NAIVE_VARIANCE, _centered(1))
NAIVE_VARIANCE_BATCH = NaiveFormula(_NAIVE_VARIANCE, _centered(0, per_feature=True))


def _naive(cases: list[Case], formula: NaiveFormula) -> list[Case]:
    """The cases, each with the naive formula's likely mistake attached."""
    return [dataclasses.replace(c, naive=formula) for c in cases]


def large_mean_cases(g: torch.Generator, *, shift: bool) -> list[Case]:
    """``(x, gamma[, beta], eps)`` in float32 with means from 1e3 to 1e4 (either sign) and spread 1: the one-pass
    variance ``E[x^2] - E[x]^2`` cancels to noise (or below zero), while subtracting the mean first is exact
    enough (:data:`NAIVE_VARIANCE` names the mistake)."""
    cases = []
    for lead, d, mean in [((4, 8), 32, 1e3), ((3,), 16, 1e4), ((2, 5), 64, -3e3), ((6,), 8, 1e4)]:
        x = _draw(g, lead + (d,), torch.float32, 1.0, mean)
        gamma, beta = _draw(g, (d,), torch.float32, 1.0, 1.0), _draw(g, (d,), torch.float32)
        args = (x, gamma, beta, 1e-5) if shift else (x, gamma, 1e-5)
        cases.append(Case(args, label=f"x {tuple(x.shape)}, float32, a large mean ({mean:g}) and spread 1, eps=1e-05"))
    return cases


# --------------------------------------------------------------------------
# layer_norm(x, gamma, beta, eps)
# --------------------------------------------------------------------------
def layer_norm_cases(seed: int = 0, n: int = 28) -> list[Case]:
    """``(x, gamma, beta, eps)``: 1 to 3 leading axes, widths 1 to 64, both dtypes, large eps, large means."""
    return _naive(_feature_cases(seed, n, shift=True, large_mean=True), NAIVE_VARIANCE)


def layer_norm_grad_cases(seed: int = 0, n: int = 10) -> list[Case]:
    """Cases for the gradient check: moderate inputs (no large mean), widths of at least 2."""
    cases = [c for c in _feature_cases(seed, n + 3, shift=True, large_mean=False) if c.args[0].shape[-1] > 1][:n]
    return _naive(cases, NAIVE_VARIANCE)


def _ln(x, gamma, beta, eps, *, var=None, eps_out=False, no_sqrt=False, dims=(-1,)):
    mean = x.mean(dim=dims, keepdim=True)
    v = (x - mean).pow(2).mean(dim=dims, keepdim=True) if var is None else var(x)
    if no_sqrt:
        y = (x - mean) / (v + eps)
    elif eps_out:
        y = (x - mean) / (v.sqrt() + eps)
    else:
        y = (x - mean) / torch.sqrt(v + eps)
    return y * gamma + beta


def _leading_dims(x):
    return tuple(range(x.ndim - 1)) or (0,)


LAYER_NORM_MISTAKES = [
    Mistake(
        "the variance is unbiased (divided by d - 1): torch.var and Tensor.var default to that. "
        "LayerNorm uses the biased variance, the plain mean of squared deviations (unbiased=False or correction=0).",
        lambda x, g, b, eps: _ln(x, g, b, eps, var=lambda t: t.var(dim=-1, keepdim=True)),
    ),
    Mistake("eps is added outside the square root: use sqrt(var + eps), not sqrt(var) + eps.",
            lambda x, g, b, eps: _ln(x, g, b, eps, eps_out=True)),
    Mistake("eps is missing: divide by sqrt(var + eps).", lambda x, g, b, eps: _ln(x, g, b, 0.0)),
    Mistake("the centered input is divided by the variance; divide by the standard deviation sqrt(var + eps).",
            lambda x, g, b, eps: _ln(x, g, b, eps, no_sqrt=True)),
    Mistake(
        "the statistics are taken over the leading (batch) axes, one per feature: that is BatchNorm. "
        "LayerNorm takes the mean and variance of each token's own features, over the last axis.",
        lambda x, g, b, eps: _ln(x, g, b, eps, dims=_leading_dims(x)),
    ),
    Mistake("the statistics are taken over the whole tensor; take them over the last axis only, one mean and "
            "variance per token.",
            lambda x, g, b, eps: _ln(x, g, b, eps, dims=tuple(range(x.ndim)))),
    Mistake("the statistics are taken over the first axis (dim=0); take them over the last axis (dim=-1), each "
            "token's features.",
            lambda x, g, b, eps: _ln(x, g, b, eps, dims=(0,)) if x.ndim > 1 else None),
    Mistake("the gain gamma is not applied: multiply the normalized input by gamma.",
            lambda x, g, b, eps: _ln(x, torch.ones_like(g), b, eps)),
    Mistake("the shift beta is not added.", lambda x, g, b, eps: _ln(x, g, torch.zeros_like(b), eps)),
    Mistake("gamma and beta are swapped: y = xhat * gamma + beta.", lambda x, g, b, eps: _ln(x, b, g, eps)),
    Mistake("the mean is not subtracted from the numerator: y = (x - mean) / sqrt(var + eps).",
            lambda x, g, b, eps: x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * g + b),
]


# --------------------------------------------------------------------------
# rms_norm(x, gamma, eps)
# --------------------------------------------------------------------------
def rms_norm_cases(seed: int = 0, n: int = 28) -> list[Case]:
    """``(x, gamma, eps)``: 0 to 3 leading axes, widths 1 to 64, both dtypes, tiny and large spreads, large eps."""
    return _feature_cases(seed, n, shift=False, large_mean=False, leading=[(5,), (2, 3), (), (2, 3, 4), (1,), (3,)])


def _rms(x, gamma, eps, *, center=False, total=False, eps_out=False, no_sqrt=False, multiply=False, dims=(-1,)):
    if center:
        x = x - x.mean(dim=-1, keepdim=True)
    ms = x.pow(2).sum(dim=dims, keepdim=True) if total else x.pow(2).mean(dim=dims, keepdim=True)
    if no_sqrt:
        r = ms + eps
    elif eps_out:
        r = ms.sqrt() + eps
    else:
        r = torch.sqrt(ms + eps)
    return (x * r if multiply else x / r) * gamma


RMS_NORM_MISTAKES = [
    Mistake("the mean is subtracted: RMSNorm does not center, it only divides by the root mean square.",
            lambda x, g, eps: _rms(x, g, eps, center=True)),
    Mistake("the square root of the *sum* of squares is used (the L2 norm); RMS is the square root of the *mean* of "
            "squares.",
            lambda x, g, eps: _rms(x, g, eps, total=True)),
    Mistake("eps is added outside the square root: use sqrt(mean(x^2) + eps).",
            lambda x, g, eps: _rms(x, g, eps, eps_out=True)),
    Mistake("eps is missing: divide by sqrt(mean(x^2) + eps).", lambda x, g, eps: _rms(x, g, 0.0)),
    Mistake("x is divided by the mean square; divide by its square root.",
            lambda x, g, eps: _rms(x, g, eps, no_sqrt=True)),
    Mistake("the gain gamma is not applied.", lambda x, g, eps: _rms(x, torch.ones_like(g), eps)),
    Mistake("x is multiplied by the RMS; divide by it.", lambda x, g, eps: _rms(x, g, eps, multiply=True)),
    Mistake("the mean square is taken over the leading axes; take it over the last axis, one per token.",
            lambda x, g, eps: _rms(x, g, eps, dims=_leading_dims(x))),
    Mistake("the mean square is taken over the whole tensor; take it over the last axis, one per token.",
            lambda x, g, eps: _rms(x, g, eps, dims=tuple(range(x.ndim)))),
    Mistake("the mean square is taken over the first axis (dim=0); take it over the last axis (dim=-1).",
            lambda x, g, eps: _rms(x, g, eps, dims=(0,)) if x.ndim > 1 else None),
    Mistake(
        "x is divided by its standard deviation: that measures the spread around the mean. RMSNorm divides by "
        "sqrt(mean(x^2) + eps), the mean of the squares of x itself.",
        lambda x, g, eps: x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * g,
    ),
]


# --------------------------------------------------------------------------
# batch_norm(x, gamma, beta, eps, mask=None)
# --------------------------------------------------------------------------
def _lengths_mask(g, batch, seq, kind):
    if kind == "right":  # right padding, lengths 0..seq with at least one full sequence
        lengths = torch.randint(0, seq + 1, (batch,), generator=g)
        lengths[randint(g, 0, batch)] = seq
        return torch.arange(seq)[None, :] < lengths[:, None], f"padding mask, lengths {lengths.tolist()}"
    if kind == "left":
        lengths = torch.randint(1, seq + 1, (batch,), generator=g)
        return torch.arange(seq)[None, :] >= (seq - lengths)[:, None], f"left-padding mask, lengths {lengths.tolist()}"
    if kind == "random":
        m = torch.rand(batch, seq, generator=g) < 0.5
        m[0, 0] = True
        return m, "random mask"
    if kind == "full":
        return torch.ones(batch, seq, dtype=torch.bool), "mask with every token real"
    raise ValueError(kind)


def batch_norm_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """``(x, gamma, beta, eps[, mask])``: (batch, features), (batch, seq, features) and one more axis;
    padding masks of every kind, with large junk in the padding slots."""
    g = torch.Generator().manual_seed(seed)
    kinds = ["right", None, "left", "random", "right", "full"]
    cases = []
    # first, a well-conditioned padded batch on which every likely mistake shows clearly
    x, mask = _draw(g, (3, 5, 4), torch.float64, 1.0, 0.5), torch.arange(5)[None, :] < torch.tensor([[5], [2], [3]])
    x = torch.where(mask[..., None], x, _draw(g, (3, 5, 4), torch.float64, 20.0, 30.0))
    first = (x, _draw(g, (4,), torch.float64, 1.0, 1.0), _draw(g, (4,), torch.float64), 0.5)
    cases.append(Case(first, {"mask": mask},
                      label="x (3, 5, 4), float64, eps=0.5, padding mask, lengths [5, 2, 3] (junk in the padding)"))
    for i in range(n):
        dtype = alternating_dtype(i)
        c = _pick(g, [1, 2, 3, 4, 8, 16])
        eps = [1e-5, 0.5, 1e-3, 1e-6][i % 4]
        scale = [1.0, 4.0, 0.05][i % 3]
        offset = float(torch.randn(1, generator=g)) * 0.5 * scale
        layout = i % 4  # 0, 1: (b, t, c) with masks; 2: (b, c); 3: (b, t, u, c) or (b, c) with a mask
        kind = kinds[(i // 2) % len(kinds)] if layout < 2 else None
        if layout < 2:
            b, t = randint(g, 1, 5), randint(g, 2, 8)
            shape = (b, t, c)
        elif layout == 2:
            shape = (randint(g, 2, 17), c)
        else:
            shape = (2, 3, 2, c) if i % 8 == 3 else (randint(g, 3, 10), c)
            kind = None if len(shape) == 4 else "vector"
        x = _draw(g, shape, dtype, scale, offset)
        gamma, beta = _draw(g, (c,), dtype, 1.0, 1.0), _draw(g, (c,), dtype)
        label = f"x {tuple(shape)}, {dtype_name(dtype)}, eps={eps:g}"
        if kind is None:
            cases.append(Case((x, gamma, beta, eps), label=label + ", no mask"))
            continue
        if kind == "vector":
            mask = torch.rand(shape[0], generator=g) < 0.6
            mask[0] = True
            mask_label = "mask over the rows"
        else:
            mask, mask_label = _lengths_mask(g, shape[0], shape[1], kind)
        junk = _draw(g, shape, dtype, 20.0, 30.0)  # what sits in the padding slots
        x = torch.where(mask[..., None], x, junk)
        cases.append(Case((x, gamma, beta, eps), {"mask": mask}, label=label + f", {mask_label} (junk in the padding)"))
    # a large mean in float32, where E[x^2] - E[x]^2 loses the variance
    x = _draw(g, (4, 6, 8), torch.float32, 1.0, 2e3)
    mask = torch.arange(6)[None, :] < torch.tensor([[6], [3], [5], [1]])
    x = torch.where(mask[..., None], x, torch.zeros_like(x))
    gamma, beta = _draw(g, (8,), torch.float32, 1.0, 1.0), _draw(g, (8,), torch.float32)
    cases.append(Case((x, gamma, beta, 1e-5), {"mask": mask}, label=(
        "x (4, 6, 8), float32, a large mean (2000) and spread 1, eps=1e-05, padding mask, lengths [6, 3, 5, 1] "
        "(zeros in the padding)")))
    # a single real token: its variance is 0 and the output is beta
    x = randn(g, (1, 1, 4))
    cases.append(Case((x, torch.ones(4, dtype=torch.float64), torch.arange(4.0, dtype=torch.float64), 1e-5),
                      label="x (1, 1, 4): a single token, variance 0"))
    return _naive(cases, NAIVE_VARIANCE_BATCH)


def batch_norm_grad_cases(seed: int = 0, n: int = 8) -> list[Case]:
    """Cases for the gradient check: well-conditioned, at least two real tokens per case."""
    out = []
    for c in batch_norm_cases(seed, 3 * n):
        x, mask = c.args[0], c.kwargs.get("mask")
        real = x[..., 0].numel() if mask is None else int(mask.sum())
        if real >= 3 and c.args[3] >= 1e-5:
            out.append(c)
    return out[:n]


def _bn(x, gamma, beta, eps, mask=None, *, ignore_mask=False, dims=None, unbiased=False, var_all=False,
        count_all=False, zero_pad=False, eps_out=False):
    dims = tuple(range(x.ndim - 1)) if dims is None else dims
    if mask is None or ignore_mask:
        m = torch.ones(x.shape[:-1] + (1,), dtype=x.dtype)
    else:
        m = mask.unsqueeze(-1).to(x.dtype)
    n_real = m.sum(dim=dims, keepdim=True) if dims != (-1,) else torch.full_like(m, x.shape[-1])
    every = float(x[..., :1].numel() if dims != (-1,) else x.shape[-1])
    count = torch.full_like(n_real, every) if count_all else n_real
    xm = torch.where(m.bool(), x, torch.zeros_like(x))
    mean = xm.sum(dim=dims, keepdim=True) / count
    dev2 = (x - mean).pow(2)
    wv = torch.ones_like(m) if var_all else m
    denominator = (wv.sum(dim=dims, keepdim=True) if var_all else count) - (1 if unbiased else 0)
    var = (dev2 * wv).sum(dim=dims, keepdim=True) / denominator
    y = (x - mean) / ((var.sqrt() + eps) if eps_out else torch.sqrt(var + eps)) * gamma + beta
    if zero_pad and mask is not None:
        y = y * mask.unsqueeze(-1).to(y.dtype)
    return y


def _bn_mistake(message: str, **options) -> Mistake:
    """A likely mistake that is :func:`_bn` with ``options``."""
    return Mistake(message, lambda x, g, b, eps, mask=None: _bn(x, g, b, eps, mask, **options))


BATCH_NORM_MISTAKES = [
    Mistake(
        "the statistics are taken over each token's features (the last axis): that is LayerNorm. BatchNorm takes "
        "one mean and one variance per feature, over every other axis (batch and sequence).",
        lambda x, g, b, eps, mask=None: _ln(x, g, b, eps),
    ),
    _bn_mistake(
        "the padding slots enter the statistics: with a mask, average over the real tokens only "
        "(and divide by their number).",
        ignore_mask=True,
    ),
    _bn_mistake(
        "the variance is unbiased (divided by n - 1). BatchNorm normalizes with the biased variance "
        "(unbiased=False or correction=0).",
        unbiased=True,
    ),
    Mistake(
        "the statistics are taken over the batch axis only (dim=0). For (batch, seq, features) BatchNorm "
        "averages over batch and sequence together, every axis but the last.",
        lambda x, g, b, eps, mask=None: _bn(x, g, b, eps, mask, dims=(0,)) if x.ndim > 2 else None,
    ),
    _bn_mistake(
        "the masked sums are divided by the number of all positions; divide by the number of real tokens.",
        count_all=True,
    ),
    _bn_mistake(
        "the mean uses the real tokens only but the variance includes the padding: mask both.",
        var_all=True,
    ),
    _bn_mistake(
        "the padded outputs are set to zero: normalize every position, padding included, with the statistics "
        "of the real tokens (the padded outputs are ignored later, but this exercise asks for them).",
        zero_pad=True,
    ),
    _bn_mistake("eps is added outside the square root: use sqrt(var + eps).", eps_out=True),
    Mistake("the gain gamma is not applied.", lambda x, g, b, eps, mask=None: _bn(x, torch.ones_like(g), b, eps, mask)),
    Mistake("the shift beta is not added.", lambda x, g, b, eps, mask=None: _bn(x, g, torch.zeros_like(b), eps, mask)),
]


# --------------------------------------------------------------------------
# layer_norm_backward(grad_out, x, gamma, eps)
# --------------------------------------------------------------------------
def layer_norm_backward_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(grad_out, x, gamma, eps)``: the layer_norm cases with a random upstream gradient, inputs with a large
    mean last (the gradient goes through the variance: the one-pass variance loses it there too)."""
    g = torch.Generator().manual_seed(seed + 1)
    cases = []
    for c in _feature_cases(seed, n, shift=False, large_mean=True):
        x, gamma, eps = c.args
        up = _draw(g, x.shape, x.dtype)
        cases.append(c.with_args((up, x, gamma, eps), {}, label=c.label + ", random grad_out"))
    return _naive(cases, NAIVE_VARIANCE_BACKWARD)


def _ln_bwd(up, x, gamma, eps, *, mean_path=True, var_path=True, use_gamma=True, unbiased=False, var_sign=1.0,
            reduce="mean"):
    d = x.shape[-1]
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).sum(-1, keepdim=True) / (d - 1 if unbiased else d)
    rstd = 1 / torch.sqrt(var + eps)
    xhat = (x - mean) * rstd
    gg = up * gamma if use_gamma else up
    dx = gg
    if mean_path:
        dx = dx - getattr(gg, reduce)(-1, keepdim=True)
    if var_path:
        dx = dx - var_sign * xhat * getattr(gg * xhat, reduce)(-1, keepdim=True)
    return dx * rstd


LAYER_NORM_BACKWARD_MISTAKES = [
    Mistake(
        "the mean and the variance are treated as constants (grad_x = g / sqrt(var + eps)). Both depend on x: "
        "subtract mean(g) and xhat * mean(g * xhat).",
        lambda up, x, g, eps: _ln_bwd(up, x, g, eps, mean_path=False, var_path=False),
    ),
    Mistake("the path through the mean is missing: subtract mean(g) over the features.",
            lambda up, x, g, eps: _ln_bwd(up, x, g, eps, mean_path=False)),
    Mistake("the path through the variance is missing: subtract xhat * mean(g * xhat).",
            lambda up, x, g, eps: _ln_bwd(up, x, g, eps, var_path=False)),
    Mistake("the gain is left out: the gradient reaching xhat is g = grad_out * gamma.",
            lambda up, x, g, eps: _ln_bwd(up, x, g, eps, use_gamma=False)),
    Mistake("the variance is unbiased (divided by d - 1); the forward pass uses the biased variance.",
            lambda up, x, g, eps: _ln_bwd(up, x, g, eps, unbiased=True)),
    Mistake("the correction terms use sums over the features; they are means (divide the sums by d).",
            lambda up, x, g, eps: _ln_bwd(up, x, g, eps, reduce="sum")),
    Mistake("the variance term has the wrong sign: it is subtracted.",
            lambda up, x, g, eps: _ln_bwd(up, x, g, eps, var_sign=-1.0)),
    Mistake(
        "the result is multiplied by sqrt(var + eps); divide by it (multiply by 1 / sqrt(var + eps)).",
        lambda up, x, g, eps: _ln_bwd(up, x, g, eps) * (x.var(-1, unbiased=False, keepdim=True) + eps),
    ),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 04-normalization run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("04-normalization", "normalization.ipynb", (
    Exercise("layer_norm", 3, (
        Comparison(_reference.layer_norm, layer_norm_cases, seed=41, mistakes=LAYER_NORM_MISTAKES, forbidden=NORMS),
        Comparison(_reference.layer_norm, layer_norm_grad_cases, seed=42, mistakes=LAYER_NORM_MISTAKES,
                   forbidden=NORMS, check_grad=True),
    )),
    Exercise("rms_norm", 2, (
        Comparison(_reference.rms_norm, rms_norm_cases, seed=43, mistakes=RMS_NORM_MISTAKES, forbidden=NORMS,
                   check_grad=True),
    )),
    Exercise("batch_norm", 4, (
        Comparison(_reference.batch_norm, batch_norm_cases, seed=44, mistakes=BATCH_NORM_MISTAKES, forbidden=NORMS),
        Comparison(_reference.batch_norm, batch_norm_grad_cases, seed=45, mistakes=BATCH_NORM_MISTAKES,
                   forbidden=NORMS, check_grad=True),
    )),
    prediction("predicted_ln_gradient", 1, [0.5, -0.5, 0.0, 0.0],
               form='the four entries of the gradient, like [0.1, 0.2, 0.3, 0.4]', tolerance=0.005, wrong={
        'only the direct path g / sigma: the paths through the mean and through sigma are missing':
            [1.0, 0.0, 0.0, 0.0],
        'the path through sigma is missing (the term xhat * mean(g * xhat))': [0.75, -0.25, -0.25, -0.25],
        'the path through sigma has the wrong sign: it is subtracted, xhat * mean(g * xhat)': [1.0, 0.0, -0.5, -0.5],
    }),
    Exercise("layer_norm_backward", 3, (
        Comparison(_reference.layer_norm_backward, layer_norm_backward_cases, seed=46,
                   mistakes=LAYER_NORM_BACKWARD_MISTAKES, forbidden=AUTOGRAD),
    )),
))
