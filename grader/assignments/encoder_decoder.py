"""Random cases and likely mistakes for the encoder-decoder exercises (chapter 06).

Exercises: ``shift_right``, ``decoder_self_attention_mask``, ``transformer_lr``,
``label_smoothed_loss`` and ``cross_attention``; the references are in
:mod:`course_lib.seq2seq`. Cases cover batch shapes, lengths 0 and ``n``,
float32 and float64, padding ids other than 0, smoothing 0 and 1, and
steps before, at and after the warmup.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from course_lib import seq2seq as _reference
from grader.cases import Case, LargeInputs, alternating_dtype, dtype_name, integer_dtype_repeats, randint, randn
from grader.checker import call_learner
from grader.diagnosis import Mistake
from grader.failures import ExerciseFailure
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

__all__ = [
    "shift_right_cases", "SHIFT_RIGHT_MISTAKES",
    "mask_cases", "MASK_MISTAKES",
    "lr_cases", "LR_MISTAKES", "check_float_results",
    "loss_cases", "LOSS_MISTAKES", "LOSS_FORBIDDEN",
    "cross_attention_cases", "CROSS_ATTENTION_MISTAKES", "CROSS_ATTENTION_FORBIDDEN",
]


# --------------------------------------------------------------------------
# shift_right
# --------------------------------------------------------------------------
def shift_right_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(tgt, bos_id)`` with ``tgt`` ``(batch, n_tgt)`` integer ids, ``n_tgt`` from 1 up."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b = randint(g, 1, 5)
        t = [1, 2, 3][i] if i < 3 else randint(g, 2, 12)
        tgt = torch.randint(3, 50, (b, t), generator=g)
        bos = [1, 7, 0, 99][i % 4]
        cases.append(Case((tgt, bos), label=f"tgt {tuple(tgt.shape)}, bos_id={bos}"))
    return cases + integer_dtype_repeats(cases, (torch.int32, torch.int16, torch.uint8,))


SHIFT_RIGHT_MISTAKES = [
    Mistake("you shifted left (dropped the first token and appended BOS at the end).",
            lambda t, bos: torch.cat([t[:, 1:], torch.full_like(t[:, :1], bos)], dim=1)),
    Mistake("you kept the whole target after BOS: the result must keep the length n_tgt (drop the last token).",
            lambda t, bos: torch.cat([torch.full_like(t[:, :1], bos), t], dim=1)),
    Mistake("you replaced the first token by BOS instead of shifting.",
            lambda t, bos: torch.cat([torch.full_like(t[:, :1], bos), t[:, 1:]], dim=1)),
    Mistake("torch.roll wraps the last token round to the front: put BOS there.",
            lambda t, bos: torch.roll(t, 1, dims=1)),
    Mistake("you shifted along the batch axis (dim 0) instead of the time axis.",
            lambda t, bos: torch.cat([torch.full_like(t[:1], bos), t[:-1]], dim=0)),
]


# --------------------------------------------------------------------------
# decoder_self_attention_mask
# --------------------------------------------------------------------------
def mask_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(tgt_lengths, n)``: lengths in ``[0, n]``, including 0 and ``n``; the first case is fixed."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        size = [1, 4, 6][i] if i < 3 else randint(g, 2, 10)
        b = randint(g, 1, 5)
        lengths = torch.randint(0, size + 1, (b,), generator=g)
        if i % 3 == 0:
            lengths[0] = size
        if i % 5 == 1 and b > 1:
            lengths[-1] = 0
        cases.append(Case((lengths, size), label=f"tgt_lengths={lengths.tolist()}, n={size}"))
    # First, a fixed case with n > 1, a full, a partly padded and an empty sequence: on the (1, 1) masks
    # of a first case with n = 1 an inverted mask looks like one whose causal part excludes the diagonal.
    lengths = torch.tensor([4, 2, 0])
    cases = [Case((lengths, 4), label=f"tgt_lengths={lengths.tolist()}, n=4")] + cases
    return cases + integer_dtype_repeats(cases, (torch.int32, torch.int16, torch.uint8))


def _pos(lengths, n):
    return torch.arange(n, device=lengths.device)


MASK_MISTAKES = [
    Mistake("the causal part is transposed: query i may see keys j <= i (a lower triangle), not j >= i.",
            lambda L, n: (_pos(L, n)[None, :] >= _pos(L, n)[:, None])[None] & (_pos(L, n) < L[:, None])[:, None, :]),
    Mistake("the causal part excludes the diagonal: a position may attend to itself (j <= i, not j < i).",
            lambda L, n: (_pos(L, n)[None, :] < _pos(L, n)[:, None])[None] & (_pos(L, n) < L[:, None])[:, None, :]),
    Mistake("the padding is masked along the queries (rows) instead of the keys (columns).",
            lambda L, n: (_pos(L, n)[None, :] <= _pos(L, n)[:, None])[None] & (_pos(L, n) < L[:, None])[:, :, None]),
    Mistake("the padding mask is missing: only the causal mask is returned.",
            lambda L, n: (_pos(L, n)[None, :] <= _pos(L, n)[:, None])[None].expand(L.shape[0], n, n)),
    Mistake("the causal mask is missing: only the padding mask is returned.",
            lambda L, n: (_pos(L, n) < L[:, None])[:, None, :].expand(L.shape[0], n, n)),
    Mistake("off by one in the padding: keys j <= length are kept, but position `length` is already padding.",
            lambda L, n: (_pos(L, n)[None, :] <= _pos(L, n)[:, None])[None] & (_pos(L, n) <= L[:, None])[:, None, :]),
    Mistake("the two masks are combined with `or` instead of `and`.",
            lambda L, n: (_pos(L, n)[None, :] <= _pos(L, n)[:, None])[None] | (_pos(L, n) < L[:, None])[:, None, :]),
    Mistake("the mask is inverted: True must mean *may attend*.",
            lambda L, n: ~((_pos(L, n)[None, :] <= _pos(L, n)[:, None])[None] & (_pos(L, n) < L[:, None])[:, None, :])),
]


# --------------------------------------------------------------------------
# transformer_lr
# --------------------------------------------------------------------------
def lr_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(step, dim, warmup)``: step 0, 1, before, at and after the warmup."""
    g = torch.Generator().manual_seed(seed)
    fixed = [(0, 512, 4000), (1, 512, 4000), (4000, 512, 4000), (100, 512, 4000), (100000, 512, 4000),
             (10, 64, 10), (11, 64, 10), (3, 1, 1), (7, 1024, 2)]
    cases = [Case(a, label=f"step={a[0]}, dim={a[1]}, warmup={a[2]}") for a in fixed]
    for _ in range(n - len(fixed)):
        warmup = randint(g, 1, 5000)
        dim = [16, 64, 256, 512, 768, 1024][randint(g, 0, 6)]
        step = randint(g, 1, 3 * warmup + 2)
        cases.append(Case((step, dim, warmup), label=f"step={step}, dim={dim}, warmup={warmup}"))
    return cases


def _lr(step, d, w, *, dpow=-0.5, wpow=-1.5, pick=min):
    if step == 0:
        return 0.0
    return d**dpow * pick(step**-0.5, step * w**wpow)


def check_float_results(learner, name: str, seed: int | None = None) -> None:
    """The learner's schedule returns a Python float on every case (step 0 included), not an int or a tensor."""
    for case in lr_cases(seed=63 if seed is None else seed):
        out = call_learner(learner, case, name)
        if not isinstance(out, float):
            raise ExerciseFailure(f"{name} should return a float, got {type(out).__name__} ({case.label}).")


LR_MISTAKES = [
    Mistake("the factor dim^-0.5 is missing.", lambda s, d, w: 0.0 if s == 0 else min(s**-0.5, s * w**-1.5)),
    Mistake("dim is raised to +0.5 instead of -0.5.", lambda s, d, w: _lr(s, d, w, dpow=0.5)),
    Mistake("the warmup is raised to -0.5 instead of -1.5 in the linear part.",
            lambda s, d, w: _lr(s, d, w, wpow=-0.5)),
    Mistake("max instead of min: the schedule must take the smaller of the two branches.",
            lambda s, d, w: _lr(s, d, w, pick=max)),
    Mistake("the warmup branch uses step^-0.5 * warmup^-1.5 (mixed up the two terms).",
            lambda s, d, w: 0.0 if s == 0 else d**-0.5 * min(s**-0.5, s**-0.5 * w**-1.5)),
    Mistake("the step is counted from 1 (step + 1): use the step as given, with lr(0) = 0.",
            lambda s, d, w: _lr(s + 1, d, w)),
    Mistake("the linear branch is step / warmup; it is step * warmup^-1.5.",
            lambda s, d, w: 0.0 if s == 0 else d**-0.5 * min(s**-0.5, s / w)),
]


# --------------------------------------------------------------------------
# label_smoothed_loss
# --------------------------------------------------------------------------
#: Routines that compute the smoothed cross-entropy for the learner.
LOSS_FORBIDDEN = (F.cross_entropy, F.nll_loss, torch.nn.functional.kl_div)


def loss_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(logits, target, smoothing, ignore_index)``: logits ``(..., V)``, some targets equal to ``ignore_index``."""
    g = torch.Generator().manual_seed(seed)
    batch_shapes = [(5,), (2, 4), (3, 2, 3), (1,)]
    cases = []
    for i in range(n):
        shape = batch_shapes[i % 4]
        V = [2, 5, 11, 32][randint(g, 0, 4)]
        dtype = alternating_dtype(i)
        spread = [1.0, 4.0, 30.0][i % 3]
        logits = randn(g, shape + (V,), dtype, spread)
        if i == 2:  # the first large spread (float32): moved up so that exp overflows whatever the seed; the
            logits = logits + max(0.0, 95.0 - float(logits.max()))  # loss does not change with a shift
        ignore = [0, -100, 1][i % 3]
        target = torch.randint(0, V, shape, generator=g)
        if ignore >= 0:
            target = torch.where(target == ignore, (target + 1) % V, target)  # real ids avoid the pad id
        drop = torch.rand(shape, generator=g) < 0.3
        drop.view(-1)[0] = False  # at least one real position
        if i % 4 == 2:
            drop.view(-1)[-1] = shape != (1,)
        target = target.masked_fill(drop, ignore)
        eps = [0.1, 0.0, 0.25, 1.0, 0.6][i % 5]
        label = (f"logits {tuple(logits.shape)}, {dtype_name(dtype)}, spread {spread:g}, "
                 f"smoothing={eps}, ignore_index={ignore}, {int(drop.sum())} ignored positions")
        cases.append(Case((logits, target, eps, ignore), label=label))
    return cases  # targets in int64, as the exercise says and torch's own losses take them


def _ls(logits, target, eps, ignore, *, uniform="mean", denom="kept", keep_pad=False, dim=-1, off_true=False,
        coef=True, sign=1.0):
    logp = torch.log_softmax(logits, dim=dim)
    keep = torch.ones_like(target, dtype=torch.bool) if keep_pad else target != ignore
    safe = torch.where(target != ignore, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    V = logits.shape[-1]
    if uniform == "mean":
        smooth = -logp.mean(-1)
    elif uniform == "sum":
        smooth = -logp.sum(-1)
    if off_true:  # spread eps over the V - 1 wrong classes only
        smooth = (-logp.sum(-1) - nll) / (V - 1)
    loss = ((1 - eps) * nll if coef else nll) + sign * eps * smooth
    loss = loss * keep
    return loss.sum() / (keep.sum() if denom == "kept" else keep.numel())


LOSS_MISTAKES = [
    Mistake("padding positions are counted: average over the positions whose target is not ignore_index.",
            lambda l, t, e, i: _ls(l, t, e, i, denom="all")),
    Mistake("ignore_index is not ignored: those positions must contribute nothing.",
            lambda l, t, e, i: _ls(l, t, e, i, keep_pad=True)),
    Mistake("eps is spread over the V - 1 wrong classes only; here it goes to all V classes, the true one "
            "included (eps / V each), as in the paper's tensor2tensor and in torch.",
            lambda l, t, e, i: _ls(l, t, e, i, off_true=True)),
    Mistake("the uniform part sums -log p over the vocabulary instead of averaging it (eps / V per class).",
            lambda l, t, e, i: _ls(l, t, e, i, uniform="sum")),
    Mistake("the true class keeps weight 1: its weight is 1 - eps.", lambda l, t, e, i: _ls(l, t, e, i, coef=False)),
    Mistake("the uniform part has the wrong sign.", lambda l, t, e, i: _ls(l, t, e, i, sign=-1.0)),
    Mistake("the sum over positions is returned, not the mean over the kept ones.",
            lambda l, t, e, i: _ls(l, t, e, i) * (t != i).sum()),
]


# --------------------------------------------------------------------------
# cross_attention
# --------------------------------------------------------------------------
#: Routines that would do the attention for the learner.
CROSS_ATTENTION_FORBIDDEN = (F.scaled_dot_product_attention, F.multi_head_attention_forward)


def cross_attention_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask)`` with ``n_tgt != n_src``, masks ``None``,
    ``(batch, n_src)``-style key padding ``(batch, 1, n_src)`` and full ``(batch, n_tgt, n_src)``."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b = randint(g, 1, 4)
        n_heads = [1, 2, 4][i % 3]
        d = n_heads * [2, 4, 8][randint(g, 0, 3)]
        n_t = randint(g, 1, 7)
        n_s = randint(g, 1, 9)
        if i % 4 == 1:
            n_s = n_t + 2
        dtype = alternating_dtype(i)
        x, mem = randn(g, (b, n_t, d), dtype), randn(g, (b, n_s, d), dtype)
        w = [randn(g, (d, d), dtype) / math.sqrt(d) for _ in range(4)]
        kind = i % 3
        if kind == 0:
            mask, mlabel = None, "no mask"
        elif kind == 1:
            lengths = torch.randint(1, n_s + 1, (b,), generator=g)
            mask = (torch.arange(n_s)[None, :] < lengths[:, None])[:, None, :]
            mlabel = f"source lengths {lengths.tolist()}"
        else:
            mask = torch.rand(b, n_t, n_s, generator=g) < 0.7
            mask[..., 0] = True
            mlabel = "a (batch, n_tgt, n_src) mask"
        label = f"batch {b}, n_tgt={n_t}, n_src={n_s}, dim={d}, n_heads={n_heads}, {dtype_name(dtype)}, {mlabel}"
        cases.append(Case((x, mem, *w, n_heads, mask), label=label))
    return cases


def _xattn(x, mem, wq, wk, wv, wo, h, mask=None, *, swap=False, no_mask=False, bad_merge=False, causal=False,
           untransposed=False, scale="head", no_split=False, no_out=False, dim=-1, keep_nan=False):
    if swap:
        x, mem = mem, x
    b, n_t, d = x.shape
    hd = d // h
    split = lambda t: t.view(t.shape[0], t.shape[1], h, hd).transpose(1, 2)
    if untransposed:
        wq, wk, wv, wo = wq.T, wk.T, wv.T, wo.T
    if no_mask:
        mask = None
    if causal:
        c = torch.ones(x.shape[1], mem.shape[1], dtype=torch.bool).tril()
        mask = c if mask is None else (mask & c)
    q, k, v = x @ wq.T, mem @ wk.T, mem @ wv.T
    if not no_split:
        q, k, v = split(q), split(k), split(v)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd if scale == "head" else d)
    if mask is not None:
        m = mask if no_split or mask.ndim == 2 else mask[:, None]
        if swap:
            m = m.transpose(-2, -1)
        s = s.masked_fill(~m, float("-inf"))
    p = torch.softmax(s, dim=dim)
    o = (p if keep_nan else torch.nan_to_num(p)) @ v
    if not no_split:
        o = o.reshape(b, -1, d) if bad_merge else o.transpose(1, 2).reshape(b, -1, d)
    return o if no_out else o @ wo.T


CROSS_ATTENTION_MISTAKES = [
    Mistake("queries and keys/values are swapped: queries come from the decoder states x, keys and values from "
            "the encoder's memory.", lambda *a: _xattn(*a, swap=True)),
    Mistake("the scores are scaled by sqrt(dim); each head scales by sqrt(head_dim).",
            lambda *a: _xattn(*a, scale="model")),
    Mistake("the heads are never split: that is one head of width dim.", lambda *a: _xattn(*a, no_split=True)),
    Mistake("the output projection w_o is missing.", lambda *a: _xattn(*a, no_out=True)),
    Mistake("the softmax runs over the queries (dim=-2), not over the memory positions.",
            lambda *a: _xattn(*a, dim=-2)),
    # the same, as written plainly: a masked memory position is -inf for every query, so its column is all NaN
    Mistake("the softmax runs over the queries (dim=-2), not over the memory positions.",
            lambda *a: _xattn(*a, dim=-2, keep_nan=True)),
    Mistake("memory_mask is ignored: masked source positions must get zero weight.",
            lambda *a: _xattn(*a, no_mask=True)),
    Mistake("the heads are merged without moving the head axis back (transpose(1, 2) before reshape).",
            lambda *a: _xattn(*a, bad_merge=True)),
    Mistake("a causal mask was added: cross-attention may read every real source position.",
            lambda *a: _xattn(*a, causal=True)),
    Mistake("the weights are not transposed: nn.Linear weights are (out, in), so a projection is x @ w.T.",
            lambda *a: _xattn(*a, untransposed=True)),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 06-encoder-decoder run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("06-encoder-decoder", "encoder_decoder.ipynb", (
    Exercise("shift_right", 2, (
        Comparison(_reference.shift_right, shift_right_cases, seed=61, mistakes=SHIFT_RIGHT_MISTAKES),
    )),
    Exercise("decoder_self_attention_mask", 2, (
        Comparison(_reference.decoder_self_attention_mask, mask_cases, seed=62, mistakes=MASK_MISTAKES),
    )),
    prediction("predicted_rates", 1, [0.25, 0.3333333333333333],
               form='two numbers, fractions of the peak rate to two decimals, like [0.1, 0.2]', tolerance=0.005, wrong={
        'the rate decays as 1/step after the warm-up; it decays as 1/sqrt(step)': [0.25, 0.1111111111111111],
        'the warm-up grows as sqrt(step); it grows linearly': [0.5, 0.3333333333333333],
        'the rate decays as 1/step and the warm-up grows as sqrt(step): the two exponents are swapped':
            [0.5, 0.1111111111111111],
    }),
    Exercise("transformer_lr", 2, (
        Comparison(_reference.transformer_lr, lr_cases, seed=63, mistakes=LR_MISTAKES),
        check_float_results,
    )),
    Exercise("label_smoothed_loss", 4, (
        Comparison(_reference.label_smoothed_loss, loss_cases, seed=64, mistakes=LOSS_MISTAKES,
                   forbidden=LOSS_FORBIDDEN, check_grad=True),
    )),
    Exercise("cross_attention", 3, (
        Comparison(_reference.cross_attention, cross_attention_cases, seed=65, mistakes=CROSS_ATTENTION_MISTAKES,
                   forbidden=CROSS_ATTENTION_FORBIDDEN, check_grad=True, hard=(LargeInputs(12.0, (0, 1)),)),
    )),
))
