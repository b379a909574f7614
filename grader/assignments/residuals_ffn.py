"""Random cases and likely mistakes for the residual and feed-forward exercises (chapter 05).

* ``position_wise_ffn(x, w1, b1, w2, b2)``: the 2017 ReLU FFN with weights in
  ``nn.Linear``'s layout. Cases cover batch shapes, a single token, float32
  and float64, ``mlp_hidden`` equal to and different from ``dim``, sequences as
  long as ``dim`` (so that mixing the wrong axis gives a result of the
  right shape; the first case is square, tokens = dim = mlp_hidden, so that
  untransposed weights are named rather than reported as a shape error),
  and missing biases (``None``).
* ``residual(x, sublayer, norm, position)``: the three norm positions. The
  sublayers and norms are torch modules or torch functions (never code from
  :mod:`course_lib`, which the learner may not call); float32 cases use
  dtype-agnostic functions so that the float64 reference can run them too.
* ``ffn_param_count(dim, mlp_hidden, bias=True)`` and
  ``layer_flops(n_tokens, dim, mlp_hidden)``: integers, compared by value.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.blocks import residual
from course_lib.counting import layer_flops, mlp_param_count
from grader.cases import Case, alternating_dtype, dtype_name, frozen, global_rng_from, randint, randn
from grader.diagnosis import Mistake
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

_BATCH_SHAPES = [(), (2,), (3,), (2, 3)]
POSITIONS = ("pre", "post", "res_post")



# --------------------------------------------------------------------------
# Exercise: the position-wise FFN
# --------------------------------------------------------------------------
def reference_position_wise_ffn(x: Tensor, w1: Tensor, b1: Tensor | None, w2: Tensor, b2: Tensor | None) -> Tensor:
    """``relu(x W1^T + b1) W2^T + b2`` over the last axis; ``x``: ``(..., dim)``,
    ``w1``: ``(mlp_hidden, dim)``, ``w2``: ``(dim, mlp_hidden)`` (``nn.Linear``'s layout)."""
    return F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)


def ffn_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """Random ``(x, w1, b1, w2, b2)`` cases."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        dim = [1, 3, 4, 8, 16][randint(g, 0, 5)] if i > 0 else 8
        mlp_hidden = [4 * dim, dim, 5, 2 * dim + 1][i % 4]
        n_tok = randint(g, 1, 9)
        if i % 3 == 1:
            n_tok = dim  # a (dim, dim) token matrix: transposing the wrong axis still "works"
        shape = batch + (n_tok, dim)
        if i == 7:
            shape = (dim,)  # a single token with no sequence axis
        dtype = alternating_dtype(i)
        x = randn(g, shape, dtype)
        w1, b1 = randn(g, (mlp_hidden, dim), dtype, dim**-0.5), randn(g, (mlp_hidden,), dtype, 0.5)
        w2, b2 = randn(g, (dim, mlp_hidden), dtype, mlp_hidden**-0.5), randn(g, (dim,), dtype, 0.5)
        bias_label = "with biases"
        if i % 5 == 4:
            b1, b2, bias_label = None, None, "no biases (b1 = b2 = None)"
        elif i % 10 == 9:
            b2, bias_label = None, "b2 = None"
        label = f"x {tuple(x.shape)}, mlp_hidden={mlp_hidden}, {bias_label}, {dtype_name(dtype)}"
        cases.append(Case((x, w1, b1, w2, b2), label=label))
    # First, a square case (tokens = dim = mlp_hidden), drawn last so that the others stay as they were:
    # there, untransposed weights and the tokens-as-columns formula run without a shape error, so the
    # grader can name those mistakes instead of reporting the RuntimeError of a non-square case.
    d = 6
    x, w1, b1 = randn(g, (d, d)), randn(g, (d, d), scale=d**-0.5), randn(g, (d,), scale=0.5)
    w2, b2 = randn(g, (d, d), scale=d**-0.5), randn(g, (d,), scale=0.5)
    label = f"x {tuple(x.shape)}, mlp_hidden={d}, with biases, float64 (tokens = dim = mlp_hidden)"
    return [Case((x, w1, b1, w2, b2), label=label)] + cases


def _lin(x, w, b):
    out = x @ w.transpose(-2, -1)
    return out if b is None else out + b


def _ffn(x, w1, b1, w2, b2, act=F.relu, out_act=None, use_b1=True, use_b2=True):
    h = act(_lin(x, w1, b1 if use_b1 else None))
    y = _lin(h, w2, b2 if use_b2 else None)
    return out_act(y) if out_act else y


def _columns(x, w1, b1, w2, b2):
    """The tokens-as-columns formula applied to a tokens-as-rows x: it mixes the sequence axis."""
    h = w1 @ x
    if b1 is not None:
        h = h + b1[:, None]
    y = w2 @ F.relu(h)
    return y if b2 is None else y + b2[:, None]


FFN_MISTAKES = [
    Mistake("the first bias b1 is missing: the hidden layer is relu(x W1^T + b1).",
            lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, use_b1=False)),
    Mistake("the second bias b2 is missing: the output is h W2^T + b2.",
            lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, use_b2=False)),
    Mistake("a ReLU is applied after the second layer too: the output of the FFN is not rectified.",
            lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, out_act=F.relu)),
    Mistake("the activation is GELU; this FFN uses ReLU, max(0, .).",
            lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, act=F.gelu)),
    Mistake("the activation is the tanh approximation of GELU; this FFN uses ReLU, max(0, .).",
            lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, act=lambda t: F.gelu(t, approximate="tanh"))),
    Mistake("the ReLU is missing: without it the two layers collapse into one linear map.",
            lambda x, w1, b1, w2, b2: _ffn(x, w1, b1, w2, b2, act=lambda t: t)),
    Mistake("the ReLU comes before the first layer instead of between the layers.",
            lambda x, w1, b1, w2, b2: _lin(_lin(F.relu(x), w1, b1), w2, b2)),
    Mistake("the weights are not transposed: nn.Linear stores W as (out_features, in_features), so compute x @ W.T.",
            lambda x, w1, b1, w2, b2: _ffn(x, w1.transpose(-2, -1), b1, w2.transpose(-2, -1), b2)),
    Mistake("the FFN mixes the sequence axis (the tokens-as-columns formula W x applied to rows): "
            "it must act on the features of each token, the last axis.", _columns),
    Mistake("the FFN mixes the sequence axis and transposes back: it must act on the last axis of x.",
            lambda x, w1, b1, w2, b2: _columns(x, w1, b1, w2, b2).transpose(-2, -1)),
]


# --------------------------------------------------------------------------
# Exercise: residual with the three norm positions
# --------------------------------------------------------------------------
def _modules(g: torch.Generator, d: int, kind: int):
    """A float64 sublayer and norm: torch modules with fixed random weights."""
    with global_rng_from(g):
        if kind == 0:
            sub = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            label = "sublayer Linear-GELU-Linear"
        else:
            sub = nn.Sequential(nn.Linear(d, d), nn.Tanh())
            label = "sublayer tanh(Linear)"
        norm = nn.LayerNorm(d)
        with torch.no_grad():
            for lin in sub:
                if isinstance(lin, nn.Linear):
                    lin.weight.mul_(2.0)
                    lin.bias.normal_(0.0, 0.5)
            norm.weight.uniform_(0.5, 2.0)
            norm.bias.normal_(0.0, 0.5)
    return frozen(sub.double()), frozen(norm.double()), label + ", norm LayerNorm (affine)"


def _functions(d: int, kind: int):
    """A dtype-agnostic sublayer and norm made of torch functions, for float32 cases."""
    if kind == 0:
        sub = functools.partial(torch.roll, shifts=1, dims=-1)
        sub_label = "sublayer roll(x, 1)"
    else:
        sub = torch.sin
        sub_label = "sublayer sin"
    if d > 1 and kind == 0:
        return sub, functools.partial(F.layer_norm, normalized_shape=(d,)), sub_label + ", norm layer_norm"
    return sub, functools.partial(F.rms_norm, normalized_shape=(d,)), sub_label + ", norm rms_norm"


def residual_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """Random ``(x, sublayer, norm, position)`` cases, every position in turn."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        position = POSITIONS[i % 3]
        batch = _BATCH_SHAPES[(i // 3) % len(_BATCH_SHAPES)]
        d = [2, 4, 8, 16][randint(g, 0, 4)]
        if position == "post" and d == 2:  # a LayerNorm over two features gives +-1 (then its affine map) whatever
            d = 4  # its input: a 'post' case, the norm outermost, would show little beyond the sign of x1 - x2
        n_tok = randint(g, 1, 7)
        dtype = alternating_dtype(i // 3, 2)
        x = (randn(g, batch + (n_tok, d), scale=1.5) + 0.5).to(dtype)
        kind = (i // 6) % 2
        if dtype == torch.float64:
            sub, norm, what = _modules(g, d, kind)
        else:
            sub, norm, what = _functions(d, kind)
        label = f"position={position!r}, x {tuple(x.shape)}, {dtype_name(dtype)}, {what}"
        cases.append(Case((x, sub, norm, position), label=label))
    return cases


def _by_position(pre, post, res_post):
    table = {"pre": pre, "post": post, "res_post": res_post}
    return lambda x, f, norm, position: table[position](x, f, norm)


RESIDUAL_MISTAKES = [
    Mistake("'res_post' normalizes the sum; it normalizes only the branch: x + norm(sublayer(x)).",
            _by_position(lambda x, f, n: x + f(n(x)), lambda x, f, n: n(x + f(x)), lambda x, f, n: n(x + f(x)))),
    Mistake("'res_post' normalizes the sublayer's input; it normalizes its output: x + norm(sublayer(x)).",
            _by_position(lambda x, f, n: x + f(n(x)), lambda x, f, n: n(x + f(x)), lambda x, f, n: x + f(n(x)))),
    # The order matters. Cases cycle 'pre', 'post', 'res_post', and the checker stops at the first wrong one.
    # An 'always pre' learner is first wrong on a 'post' case, where the swap below gives the same result,
    # so `position is ignored` comes before the swap; it comes after 'res_post normalizes the input', whose
    # learner is first wrong on a 'res_post' case with that same x + f(norm(x)). A learner who swaps 'pre'
    # and 'post' is wrong on the first 'pre' case, where the three variants above agree with the reference.
    Mistake("`position` is ignored: every case is computed as 'pre'.", lambda x, f, n, p: x + f(n(x))),
    Mistake("the norm positions 'pre' and 'post' are swapped: 'pre' is x + sublayer(norm(x)), "
            "'post' is norm(x + sublayer(x)).",
            _by_position(lambda x, f, n: n(x + f(x)), lambda x, f, n: x + f(n(x)), lambda x, f, n: x + n(f(x)))),
    Mistake("'post' normalizes the branch only; it normalizes the sum: norm(x + sublayer(x)).",
            _by_position(lambda x, f, n: x + f(n(x)), lambda x, f, n: x + n(f(x)), lambda x, f, n: x + n(f(x)))),
    Mistake("the skip connection is missing: the input x must be added back to the branch.",
            _by_position(lambda x, f, n: f(n(x)), lambda x, f, n: n(f(x)), lambda x, f, n: n(f(x)))),
    Mistake("the result is only the sublayer's output f(x): add the skip x and apply the norm where `position` says.",
            lambda x, f, n, p: f(x)),
    Mistake("x is added twice: the skip adds x once to the branch's output.",
            _by_position(lambda x, f, n: 2 * x + f(n(x)), lambda x, f, n: n(2 * x + f(x)),
                         lambda x, f, n: 2 * x + n(f(x)))),
    Mistake("in 'pre' the skip carries x itself, not norm(x): x + sublayer(norm(x)).",
            _by_position(lambda x, f, n: n(x) + f(n(x)), lambda x, f, n: n(x + f(x)), lambda x, f, n: x + n(f(x)))),
    Mistake("'post' also normalizes the sublayer's input: it is norm(x + sublayer(x)), with the raw x inside.",
            _by_position(lambda x, f, n: x + f(n(x)), lambda x, f, n: n(x + f(n(x))), lambda x, f, n: x + n(f(x)))),
    Mistake("the norm is never applied.", lambda x, f, n, p: x + f(x)),
]


# --------------------------------------------------------------------------
# Exercises: counting parameters and FLOPs
# --------------------------------------------------------------------------
def param_count_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """``(dim, mlp_hidden[, bias])`` cases: small, equal, large (GPT-3-sized) widths, with and without biases."""
    g = torch.Generator().manual_seed(seed)
    fixed = [(4, 16, True), (4, 16, False), (512, 2048, True), (768, 3072, False), (12288, 49152, True),
             (6, 6, True), (10, 3, False), (1, 1, True)]
    cases = [Case((d, f, b), label=f"dim={d}, mlp_hidden={f}, bias={b}") for d, f, b in fixed]
    for i in range(n - len(fixed)):
        d = randint(g, 1, 2000)
        f = [4 * d, randint(g, 1, 5000), d][i % 3]
        if i % 4 == 3:
            cases.append(Case((d, f), label=f"dim={d}, mlp_hidden={f}, bias left at its default"))
        else:
            b = bool(i % 2)
            cases.append(Case((d, f, b), label=f"dim={d}, mlp_hidden={f}, bias={b}"))
    return cases


def _params(d, f, bias=True, w=2, b1=True, b2=True, ignore_flag=False):
    return w * d * f + ((f if b1 else 0) + (d if b2 else 0) if (bias or ignore_flag) else 0)


PARAM_COUNT_MISTAKES = [
    Mistake("the biases are missing: with bias=True add mlp_hidden (first layer) + dim (second layer).",
            lambda d, f, bias=True: _params(d, f, False)),
    Mistake("biases are counted even when bias=False.", lambda d, f, bias=True: _params(d, f, bias, ignore_flag=True)),
    Mistake("only the first layer's bias (mlp_hidden) is counted; the second layer has dim biases too.",
            lambda d, f, bias=True: _params(d, f, bias, b2=False)),
    Mistake("only the second layer's bias (dim) is counted; the first layer has mlp_hidden biases too.",
            lambda d, f, bias=True: _params(d, f, bias, b1=False)),
    Mistake("both biases are counted as mlp_hidden: the second layer's bias has dim entries.",
            lambda d, f, bias=True: 2 * d * f + (2 * f if bias else 0)),
    Mistake("both biases are counted as dim: the first layer's bias has mlp_hidden entries.",
            lambda d, f, bias=True: 2 * d * f + (2 * d if bias else 0)),
    Mistake("only one weight matrix is counted: there are two, dim x mlp_hidden and mlp_hidden x dim.",
            lambda d, f, bias=True: _params(d, f, bias, w=1)),
    Mistake("mlp_hidden is taken as 4 * dim; use the mlp_hidden you are given.",
            lambda d, f, bias=True: _params(d, 4 * d, bias)),
    Mistake("the count is a float: use integer arithmetic (no `/`, no float()).",
            lambda d, f, bias=True: float(_params(d, f, bias))),
]


def flops_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """``(n_tokens, dim, mlp_hidden)`` cases: one token, N < D, N = D, N >> D, mlp_hidden != 4 D, large models."""
    g = torch.Generator().manual_seed(seed)
    fixed = [(10, 4, 16), (3, 5, 7), (1, 8, 32), (1, 1, 1), (196, 768, 3072), (2048, 12288, 49152), (8192, 64, 256),
             (6, 6, 6)]
    cases = [Case(c, label=f"n_tokens={c[0]}, dim={c[1]}, mlp_hidden={c[2]}") for c in fixed]
    for i in range(n - len(fixed)):
        d = randint(g, 1, 1500)
        n_tok = randint(g, 1, 5000)
        f = [4 * d, randint(g, 1, 6000), 2 * d + 3][i % 3]
        cases.append(Case((n_tok, d, f), label=f"n_tokens={n_tok}, dim={d}, mlp_hidden={f}"))
    return cases


def _flops(n, d, f, factor=2, proj=4, mix=2, ffn_mats=2):
    return {"projections": factor * proj * n * d * d, "attention": factor * mix * n * n * d,
            "ffn": factor * ffn_mats * n * d * f}


FLOPS_MISTAKES = [
    Mistake("multiply-adds are counted as 1 FLOP; count each as 2 (a multiplication and an addition).",
            lambda n, d, f: _flops(n, d, f, factor=1)),
    Mistake("only three projections are counted: Q, K, V *and* the output projection make four.",
            lambda n, d, f: _flops(n, d, f, proj=3)),
    Mistake("\"attention\" counts only Q K^T: the weighted sum of the values (weights @ V) costs as much again.",
            lambda n, d, f: _flops(n, d, f, mix=1)),
    Mistake("\"ffn\" counts one matrix product; the FFN has two (dim -> mlp_hidden -> dim).",
            lambda n, d, f: _flops(n, d, f, ffn_mats=1)),
    Mistake("mlp_hidden is taken as 4 * dim; use the mlp_hidden you are given.", lambda n, d, f: _flops(n, d, 4 * d)),
    Mistake("\"attention\" grows like N D^2; the score and value products are N x N x D each, 4 N^2 D in all.",
            lambda n, d, f: {**_flops(n, d, f), "attention": 4 * n * d * d}),
    Mistake("\"projections\" grow like N^2 D; each of the four maps costs N x D x D multiply-adds, 8 N D^2 in all.",
            lambda n, d, f: {**_flops(n, d, f), "projections": 8 * n * n * d}),
    Mistake("the counts are floats: use integer arithmetic (no `/`, no float()).",
            lambda n, d, f: {k: float(v) for k, v in _flops(n, d, f).items()}),
]

__all__ = [
    "reference_position_wise_ffn", "ffn_cases", "FFN_MISTAKES", "residual", "residual_cases", "RESIDUAL_MISTAKES",
    "mlp_param_count", "param_count_cases", "PARAM_COUNT_MISTAKES", "layer_flops", "flops_cases", "FLOPS_MISTAKES",
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 05-residuals-ffn run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("05-residuals-ffn", "residuals_ffn.ipynb", (
    Exercise("position_wise_ffn", 3, (
        Comparison(reference_position_wise_ffn, ffn_cases, seed=51, mistakes=FFN_MISTAKES, check_grad=True),
    )),
    Exercise("residual", 3, (
        Comparison(residual, residual_cases, seed=52, mistakes=RESIDUAL_MISTAKES, check_grad=True),
    )),
    Exercise("ffn_param_count", 2, (
        Comparison(mlp_param_count, param_count_cases, seed=53, mistakes=PARAM_COUNT_MISTAKES),
    )),
    prediction("predicted_flops", 1, [160, 200, 320],
               form='three ints, [projections, attention, ffn], like [1, 2, 3]', tolerance=0, wrong={
        'multiply-adds were counted, not FLOPs: each multiply-add is 2 FLOPs': [80, 100, 160],
        'attention was counted as one product (Q K^T); weighting the values (A V) is a second': [160, 100, 320],
        'the FFN was counted as one map; it has two, dim -> mlp_hidden and back': [160, 200, 160],
    }),
    Exercise("layer_flops", 3, (
        Comparison(layer_flops, flops_cases, seed=54, mistakes=FLOPS_MISTAKES),
    )),
))
