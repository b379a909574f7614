"""Random cases and likely mistakes for the modern-variants exercises (chapter 07).

* ``pre_ln_block(x, attn, mlp, norm1, norm2)``: a pre-LN block,
  ``h = x + attn(norm1(x))``, ``y = h + mlp(norm2(h))``. The four callables
  are torch modules with fixed random weights (float64 cases) or torch
  functions (float32 cases); never code from :mod:`course_lib`, which the
  learner may not call. The "attention" always mixes tokens and the two norms
  always differ, so swapping them shows.
* ``swiglu(x, w_gate, w_up, w_down)``: the gated MLP with weights in
  ``nn.Linear``'s layout; ``F.silu`` is forbidden.
* ``apply_rope(x, positions, base)``: rotary embedding in the half-split
  (``rotate_half``) layout; the reference computes the angles in the dtype of
  ``x``; positions include offsets and arbitrary orders.
* ``next_token_loss(logits, ids, ignore_index=None)``: the shifted mean
  cross-entropy; ``F.cross_entropy`` and ``F.nll_loss`` are forbidden.
* ``sample_next_token(logits, temperature, top_k, generator)``: temperature,
  top-k (ties at the k-th value kept), then one ``torch.multinomial`` draw
  with the given generator; compared token by token with the reference.
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.blocks import residual
from course_lib.decoder_lm import next_token_loss, sample_next_token, swiglu
from grader.cases import (
    Case,
    LargeInputs,
    alternating_dtype,
    dtype_name,
    integer_dtype_repeats,
    randint,
    randn,
    stand_in_block,
)
from grader.diagnosis import Mistake
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

_BATCH_SHAPES = [(), (2,), (3,), (2, 3)]

#: routines that would do an exercise for the learner.
SILU: tuple = (F.silu,)
CROSS_ENTROPY: tuple = (F.cross_entropy, F.nll_loss, torch.nn.functional.binary_cross_entropy)



# --------------------------------------------------------------------------
# Exercise: the pre-LN block
# --------------------------------------------------------------------------
def reference_pre_ln_block(x: Tensor, attn, mlp, norm1, norm2) -> Tensor:
    """``h = x + attn(norm1(x))``, then ``h + mlp(norm2(h))``."""
    return residual(residual(x, attn, norm1, "pre"), mlp, norm2, "pre")


def _block_functions(d: int, kind: int):
    """Dtype-agnostic torch functions for float32 cases (the attention stand-in mixes tokens)."""
    if kind == 0:
        attn = functools.partial(torch.cumsum, dim=-2)
        mlp = torch.sin
        what = "attn cumsum over tokens, mlp sin"
    else:
        attn = functools.partial(torch.roll, shifts=1, dims=-2)
        mlp = torch.tanh
        what = "attn roll over tokens, mlp tanh"
    norm1 = functools.partial(F.layer_norm, normalized_shape=(d,))
    norm2 = functools.partial(F.rms_norm, normalized_shape=(d,))
    return attn, mlp, norm1, norm2, what + ", norm1 layer_norm, norm2 rms_norm"


def pre_ln_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """Random ``(x, attn, mlp, norm1, norm2)`` cases."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        d = [2, 4, 8, 16][randint(g, 0, 4)]
        if i == 0:  # the first case over four features or more: a LayerNorm over two gives +-1 (then its affine
            d = max(d, 4)  # map) whatever its input, so that which input the MLP's norm reads would hardly show
        n_tok = randint(g, 2, 7)
        dtype = alternating_dtype(i, 2)
        x = (randn(g, batch + (n_tok, d), scale=2.0) + 0.5).to(dtype)
        if dtype == torch.float64:
            attn, mlp, norm1, norm2 = stand_in_block(g, n_tok, d, 3 * d)
            what = "attn tanh(Linear over all tokens), mlp Linear-GELU-Linear, two affine LayerNorms"
        else:
            attn, mlp, norm1, norm2, what = _block_functions(d, (i // 2) % 2)
        cases.append(Case((x, attn, mlp, norm1, norm2), label=f"x {tuple(x.shape)}, {dtype_name(dtype)}, {what}"))
    return cases


PRE_LN_MISTAKES = [
    Mistake("this is the post-LN block: pre-LN normalizes the input of each sublayer, "
            "x + attn(norm1(x)), and leaves the residual stream itself unnormalized.",
            lambda x, a, m, n1, n2: n2((lambda h: h + m(h))(n1(x + a(x))))),
    Mistake("the MLP reads x instead of h: the two sublayers run in sequence, the second on h = x + attn(norm1(x)).",
            lambda x, a, m, n1, n2: x + a(n1(x)) + m(n2(x))),
    Mistake("the skip around the attention is missing: h = x + attn(norm1(x)).",
            lambda x, a, m, n1, n2: (lambda h: h + m(n2(h)))(a(n1(x)))),
    Mistake("the skip around the MLP is missing: the output is h + mlp(norm2(h)).",
            lambda x, a, m, n1, n2: m(n2(x + a(n1(x))))),
    Mistake("the skip carries the normalized input: it must carry x itself, x + attn(norm1(x)).",
            lambda x, a, m, n1, n2: (lambda h: n2(h) + m(n2(h)))(n1(x) + a(n1(x)))),
    Mistake("norm1 and norm2 are swapped: norm1 goes before attn, norm2 before mlp.",
            lambda x, a, m, n1, n2: (lambda h: h + m(n1(h)))(x + a(n2(x)))),
    Mistake("the same norm is used before both sublayers: norm2 goes before the MLP.",
            lambda x, a, m, n1, n2: (lambda h: h + m(n1(h)))(x + a(n1(x)))),
    Mistake("the MLP runs before the attention: attention first, then the MLP.",
            lambda x, a, m, n1, n2: (lambda h: h + a(n1(h)))(x + m(n2(x)))),
    Mistake("the output is normalized at the end: a pre-LN block returns h + mlp(norm2(h)) unnormalized "
            "(the final norm belongs to the model, after the last block).",
            lambda x, a, m, n1, n2: n2((lambda h: h + m(n2(h)))(x + a(n1(x))))),
    Mistake("the norms are applied to the sublayer outputs (x + norm(f(x))): pre-LN normalizes their inputs.",
            lambda x, a, m, n1, n2: (lambda h: h + n2(m(h)))(x + n1(a(x)))),
    Mistake("the norms are never applied.", lambda x, a, m, n1, n2: (lambda h: h + m(h))(x + a(x))),
]


# --------------------------------------------------------------------------
# Exercise: SwiGLU
# --------------------------------------------------------------------------
def reference_swiglu(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor) -> Tensor:
    return swiglu(x, w_gate, w_up, w_down)


def swiglu_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """Random ``(x, w_gate, w_up, w_down)`` cases: batch shapes, a single token, hidden < = > dim."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        d = [1, 3, 4, 8, 12][randint(g, 0, 5)] if i > 0 else 6
        hidden = [d, 2 * d + 1, 5, (8 * d) // 3 + 1][i % 4]
        n_tok = randint(g, 1, 8)
        if i % 3 == 1:
            n_tok = d  # a square token matrix: mixing the wrong axis still has the right shape
        shape = batch + (n_tok, d)
        if i == 5:
            shape = (d,)
        dtype = alternating_dtype(i, 2)
        x = randn(g, shape, dtype, 1.5)
        wg, wu = randn(g, (hidden, d), dtype, 1.5 * d**-0.5), randn(g, (hidden, d), dtype, d**-0.5)
        wd = randn(g, (d, hidden), dtype, hidden**-0.5)
        cases.append(Case((x, wg, wu, wd), label=f"x {tuple(x.shape)}, dim={d}, hidden={hidden}, {dtype_name(dtype)}"))
    return cases


def _lin(x, w):
    return x @ w.transpose(-2, -1)


def _glu(x, wg, wu, wd, act=F.silu):
    return _lin(act(_lin(x, wg)) * _lin(x, wu), wd)


SWIGLU_MISTAKES = [
    Mistake("the gate and up projections are swapped: the SiLU goes on x W_gate^T, the plain branch is x W_up^T.",
            lambda x, wg, wu, wd: _glu(x, wu, wg, wd)),
    Mistake("the activation is a sigmoid: SiLU(z) = z * sigmoid(z).",
            lambda x, wg, wu, wd: _glu(x, wg, wu, wd, act=torch.sigmoid)),
    Mistake("the activation is ReLU: SwiGLU uses SiLU(z) = z * sigmoid(z).",
            lambda x, wg, wu, wd: _glu(x, wg, wu, wd, act=F.relu)),
    Mistake("the activation is GELU: SwiGLU uses SiLU(z) = z * sigmoid(z).",
            lambda x, wg, wu, wd: _glu(x, wg, wu, wd, act=F.gelu)),
    Mistake("the SiLU is missing: the gate is silu(x W_gate^T).",
            lambda x, wg, wu, wd: _glu(x, wg, wu, wd, act=lambda t: t)),
    Mistake("the two branches are added, not multiplied: the gate multiplies the up branch element-wise.",
            lambda x, wg, wu, wd: _lin(F.silu(_lin(x, wg)) + _lin(x, wu), wd)),
    Mistake("the SiLU is applied to the product of the two branches: only the gate branch goes through it.",
            lambda x, wg, wu, wd: _lin(F.silu(_lin(x, wg) * _lin(x, wu)), wd)),
    Mistake("the SiLU is applied to both branches: the up branch is linear.",
            lambda x, wg, wu, wd: _lin(F.silu(_lin(x, wg)) * F.silu(_lin(x, wu)), wd)),
    Mistake("a SiLU is applied after the down projection too: the output is linear in the gated hidden layer.",
            lambda x, wg, wu, wd: F.silu(_glu(x, wg, wu, wd))),
    Mistake("the down projection is missing or not transposed correctly.",
            lambda x, wg, wu, wd: F.silu(_lin(x, wg)) * _lin(x, wu)),
]


# --------------------------------------------------------------------------
# Exercise: RoPE
# --------------------------------------------------------------------------
def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def _angles(positions: Tensor, head_dim: int, base: float, dtype, interleave=False, scale=2.0) -> Tensor:
    inv_freq = base ** (-scale * torch.arange(head_dim // 2, dtype=dtype) / head_dim)
    angles = positions.to(dtype)[..., None] * inv_freq
    if interleave:
        return angles.repeat_interleave(2, dim=-1)
    return torch.cat([angles, angles], dim=-1)


def reference_apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """``x * cos + rotate_half(x) * sin`` with angles ``positions * base^(-2i/d)`` computed in ``x.dtype``.

    ``x``: ``(..., seq, head_dim)``; ``positions``: ``(seq,)`` integers.
    The same as :func:`course_lib.positional.apply_rope` with :func:`~course_lib.positional.rope_cos_sin`
    (which computes its tables in float32).
    """
    a = _angles(positions, x.shape[-1], base, x.dtype)
    return x * a.cos() + _rotate_half(x) * a.sin()


def rope_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """Random ``(x, positions, base)`` cases: heads/batch axes, offsets, shuffled positions, other bases."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    lead_shapes = [(), (2,), (2, 3), (1, 4)]
    for i in range(n):
        lead = lead_shapes[i % 4]
        head_dim = [2, 4, 8, 16, 6][randint(g, 0, 5)] if i > 0 else 8
        seq = randint(g, 1, 9)
        dtype = alternating_dtype(i, 2)
        x = randn(g, lead + (seq, head_dim), dtype)
        kind = i % 5
        if kind == 0:
            positions, what = torch.arange(seq), "positions 0..seq-1"
        elif kind == 1:
            off = randint(g, 1, 40)
            positions, what = torch.arange(off, off + seq), f"positions start at {off}"
        elif kind == 2:
            positions, what = torch.randperm(seq, generator=g) * 3, "positions shuffled and spaced by 3"
        elif kind == 3:
            positions, what = torch.randint(0, 60, (seq,), generator=g), "random positions"
        else:
            positions, what = torch.arange(seq) + 1, "positions 1..seq"
        base = [10000.0, 100.0, 10.0, 500000.0][(i // 5) % 4]
        cases.append(Case((x, positions, base),
                          label=f"x {tuple(x.shape)}, {what}, base={base:g}, {dtype_name(dtype)}"))
    return cases + integer_dtype_repeats(cases, (torch.int32,))  # the exercise's dtypes: int64 or int32


def _rope_variant(interleave=False, scale=2.0, rot="half", base_fixed=None, pos_shift=0):
    def variant(x, positions, base=10000.0):
        b = base_fixed if base_fixed is not None else base
        a = _angles(positions + pos_shift, x.shape[-1], b, x.dtype, interleave=interleave, scale=scale)
        if rot == "half":
            r = _rotate_half(x)
        elif rot == "swap":
            x1, x2 = x.chunk(2, dim=-1)
            r = torch.cat([x2, -x1], dim=-1)
        else:  # interleaved pairs (x0, x1) -> (-x1, x0)
            r = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
        return x * a.cos() + r * a.sin()
    return variant


ROPE_MISTAKES = [
    # a minus on the sine term, x * cos - rotate_half(x) * sin, is the same function: this message covers both
    Mistake("the rotation goes the wrong way (the sine term has the wrong sign): rotate_half(x) = [-x2, x1] "
            "(minus on the second half), then x * cos + rotate_half(x) * sin.", _rope_variant(rot="swap")),
    Mistake("the frequencies are repeated in pairs (interleaved layout); in the half-split layout "
            "the d/2 frequencies appear once in each half: cat([angles, angles]).",
            _rope_variant(interleave=True)),
    Mistake("this rotates adjacent pairs (x0, x1), (x2, x3), ... (the interleaved layout of the RoPE paper); "
            "here pair i is (x_i, x_{i + d/2}).", _rope_variant(interleave=True, rot="pairs")),
    Mistake("the frequency exponent is off: theta_i = base^(-2i/d) for i = 0 .. d/2 - 1.",
            _rope_variant(scale=1.0)),
    Mistake("`base` is ignored: use the base passed in, not 10000.", _rope_variant(base_fixed=10000.0)),
    Mistake("the positions are off by one: token at position p is rotated by p * theta_i.",
            _rope_variant(pos_shift=1)),
    Mistake("cos and sin are swapped: x * cos(phi) + rotate_half(x) * sin(phi).",
            lambda x, positions, base=10000.0: (lambda a: x * a.sin() + _rotate_half(x) * a.cos())(
                _angles(positions, x.shape[-1], base, x.dtype))),
    Mistake("the positions are ignored: each token must be rotated by its own position, not its index.",
            lambda x, positions, base=10000.0: _rope_variant()(x, torch.arange(x.shape[-2]), base)),
]


# --------------------------------------------------------------------------
# Exercise: the next-token loss
# --------------------------------------------------------------------------
#: how far (relative to the loss) the mean of per-sequence means must be from the right loss, on a case where the
#: sequences keep different numbers of targets: five times the 2e-4 or so within which a likely mistake counts as
#: agreeing with the reference (:func:`grader.diagnosis.match_mistake`)
PER_SEQUENCE_GAP = 1e-3


def _per_sequence_gap(logits: Tensor, ids: Tensor, pad: int) -> float:
    """How far the mean of per-sequence means is from the mean over every kept target, relative to the loss."""
    t = ids[:, 1:]
    keep = t != pad
    nll = -torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, torch.where(keep, t, 0)[..., None])[..., 0]
    nll = nll * keep
    right = nll.sum() / keep.sum()
    per_sequence = (nll.sum(1) / keep.sum(1).clamp(min=1)).mean()
    return float((per_sequence - right).abs()) / max(1.0, float(right.abs()))


def _telling_targets(logits: Tensor, ids: Tensor, pad: int, unequal: bool = False) -> Tensor:
    """``ids`` with ignored targets (``pad``), mended where the case would not tell the mistakes of the mean apart.

    The drawn mask decides which targets are ignored; then, without drawing anything (the cases that follow stay
    as they were): the whole batch is never ignored (the first target is kept then); where every sequence is either
    all kept or all ignored (the mean per sequence is then the mean over every target, ignored ones included),
    the last target of a full sequence is ignored too; and where the sequences keep different numbers of targets
    but the mean of per-sequence means happens to come within :data:`PER_SEQUENCE_GAP` of the right loss (the
    sequences' mean losses nearly alike), the first kept target of the sequence keeping fewest is replaced by
    the token that sets them furthest apart. With ``unequal`` (the first case with ignored targets, two sequences
    or more), sequences that keep as many targets each are made to keep different numbers: one target of the
    first is ignored, or kept where it keeps only one.
    """
    ids = ids.clone()
    n_targets, vocab = ids.shape[1] - 1, logits.shape[-1]
    kept = (ids[:, 1:] != pad).sum(1)
    if not kept.any():  # the mask keeps the first target, but its token may be ``pad`` itself
        ids[0, 1] = (pad + 1) % vocab
        kept = (ids[:, 1:] != pad).sum(1)
    if (kept == 0).any() and (kept == n_targets).any() and ((kept == 0) | (kept == n_targets)).all():
        ids[int((kept == n_targets).nonzero()[0]), -1] = pad
        kept = (ids[:, 1:] != pad).sum(1)
    if unequal and ids.shape[0] > 1 and int(kept.min()) == int(kept.max()):
        where = (ids[0, 1:] != pad).nonzero() if kept[0] > 1 else (ids[0, 1:] == pad).nonzero()
        ids[0, 1 + int(where[-1 if kept[0] > 1 else 0])] = pad if kept[0] > 1 else (pad + 1) % vocab
        kept = (ids[:, 1:] != pad).sum(1)
    if int(kept.min()) == int(kept.max()) or _per_sequence_gap(logits, ids, pad) >= PER_SEQUENCE_GAP:
        return ids
    row = min((r for r in range(ids.shape[0]) if kept[r] > 0), key=lambda r: int(kept[r]))
    pos = 1 + int((ids[row, 1:] != pad).nonzero()[0])
    best, best_gap = int(ids[row, pos]), -1.0
    for token in range(vocab):
        if token == pad:
            continue
        ids[row, pos] = token
        gap = _per_sequence_gap(logits, ids, pad)
        if gap > best_gap:
            best, best_gap = token, gap
    ids[row, pos] = best
    return ids


def loss_cases(seed: int = 0, n: int = 30) -> list[Case]:
    """Random ``(logits, ids[, ignore_index])`` cases; ignored targets never cover a whole batch, and where the
    sequences keep different numbers of targets, a mean per sequence is told from the right one
    (:func:`_telling_targets`)."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b, t = randint(g, 1, 4), randint(g, 2, 9)
        if i % 3 == 1:  # with ignored targets: two targets or more per sequence, so that a mean per sequence
            t = max(t, 3)  # differs from the mean over every kept target
        if i == 1:  # and the first such case with two sequences or more, which keep different numbers of targets
            b = max(b, 2)
        v = [3, 5, 11, 17][randint(g, 0, 4)]
        if i % 6 == 2:
            v = t  # vocabulary as long as the sequence: a transposed loss keeps the right shapes
        dtype = alternating_dtype(i, 2)
        logits = randn(g, (b, t, v), dtype, [1.0, 3.0, 0.3][i % 3])
        ids = torch.randint(0, v, (b, t), generator=g)
        if i % 3 == 1:
            pad = [0, -100, v - 1][(i // 3) % 3]
            mask = torch.rand(b, t, generator=g) < 0.35
            mask[0, 1] = False  # at least one target kept
            mask[:, 0] = True   # the first token (never a target) is ignored too, sometimes
            ids = _telling_targets(logits, torch.where(mask, torch.full_like(ids, pad), ids), pad, unequal=i == 1)
            if pad == -100 and i % 2:
                label = f"logits {tuple(logits.shape)}, ignore_index=-100 (keyword), {dtype_name(dtype)}"
                cases.append(Case((logits, ids), {"ignore_index": -100}, label=label))
            else:
                cases.append(Case((logits, ids, pad),
                                  label=f"logits {tuple(logits.shape)}, ignore_index={pad}, {dtype_name(dtype)}"))
        else:
            cases.append(Case((logits, ids),
                              label=f"logits {tuple(logits.shape)}, no ignore_index, {dtype_name(dtype)}"))
    return cases  # ids in int64, as the exercise says and torch's own losses take them


def _ce(logits, targets, ignore_index=None, reduce="mean", norm=-1):
    lp = logits if norm is None else logits - logits.logsumexp(norm, keepdim=True)
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    nll = -lp.gather(-1, torch.where(keep, targets, 0)[..., None]).squeeze(-1)
    nll = torch.where(keep, nll, torch.zeros_like(nll))
    if reduce == "sum":
        return nll.sum()
    if reduce == "per_row":
        return (nll.sum(-1) / keep.sum(-1).clamp(min=1)).mean()
    if reduce == "all":
        return nll.sum() / targets.numel()
    return nll.sum() / keep.sum()


LOSS_MISTAKES = [
    Mistake("the logits and targets are not shifted: row t of the logits predicts the token at t + 1, "
            "so pair logits[:, :-1] with ids[:, 1:].",
            lambda lg, ids, ignore_index=None: _ce(lg, ids, ignore_index)),
    Mistake("the shift goes the wrong way: pair logits[:, :-1] with ids[:, 1:], not logits[:, 1:] with ids[:, :-1].",
            lambda lg, ids, ignore_index=None: _ce(lg[:, 1:], ids[:, :-1], ignore_index)),
    Mistake("the ignored targets are counted in the mean: divide by the number of kept targets.",
            lambda lg, ids, ignore_index=None: _ce(lg[:, :-1], ids[:, 1:], ignore_index, reduce="all")),
    Mistake("ignore_index is not applied: targets equal to it contribute nothing.",
            lambda lg, ids, ignore_index=None: _ce(lg[:, :-1], ids[:, 1:].clamp(min=0))),
    Mistake("the loss averages each sequence, then the sequences: average over all kept targets at once "
            "(sequences with more kept targets weigh more).",
            lambda lg, ids, ignore_index=None: _ce(lg[:, :-1], ids[:, 1:], ignore_index, reduce="per_row")),
    Mistake("the loss is summed, not averaged over the predicted tokens.",
            lambda lg, ids, ignore_index=None: _ce(lg[:, :-1], ids[:, 1:], ignore_index, reduce="sum")),
    Mistake("the loss is missing its minus sign: cross-entropy is -log p(target).",
            lambda lg, ids, ignore_index=None: -_ce(lg[:, :-1], ids[:, 1:], ignore_index)),
    Mistake("the loss uses the raw logit of the target, without the log-softmax normalization.",
            lambda lg, ids, ignore_index=None: _ce(lg[:, :-1], ids[:, 1:], ignore_index, norm=None)),
    Mistake("the log-softmax is taken over the wrong axis: normalize over the vocabulary, the last axis.",
            lambda lg, ids, ignore_index=None: _ce(lg[:, :-1], ids[:, 1:], ignore_index, norm=-2)),
]


# --------------------------------------------------------------------------
# Exercise: sampling the next token
# --------------------------------------------------------------------------
def reference_sample_next_token(logits: Tensor, temperature: float, top_k: int | None,
                                generator: torch.Generator) -> Tensor:
    # a copy: check_function shares the case's generator between the float64 reference and the
    # mistake variants, so the reference must not advance it
    return sample_next_token(logits, temperature, top_k, False, copy.deepcopy(generator))


def sample_cases(seed: int = 0, n: int = 40) -> list[Case]:
    """Random ``(logits, temperature, top_k, generator)`` cases, after two fixed ones; each generator freshly seeded."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    temps = [1.0, 0.5, 2.0, 0.7, 1.5, 3.0]
    for i in range(n):
        b, v = randint(g, 2, 9), [4, 7, 10, 16][randint(g, 0, 4)]
        dtype = alternating_dtype(i, 2)
        logits = randn(g, (b, v), dtype, 2.0)
        temperature = temps[i % len(temps)]
        top_k = [None, 1, 3, None, v, v + 5, 2, 5][i % 8]
        what = ""
        if i % 10 == 9 and top_k is not None and top_k < v:
            # a tie at the k-th largest value in row 0: ties are kept
            row = logits[0].sort(descending=True).values
            logits[0][logits[0] == row[top_k]] = row[top_k - 1]
            what = ", a tie at the k-th value in row 0"
        gen = torch.Generator().manual_seed(randint(g, 0, 2**31 - 1))
        cases.append(Case((logits, temperature, top_k, gen),
                          label=f"logits {tuple(logits.shape)}, temperature={temperature}, top_k={top_k}{what}, "
                                f"{dtype_name(dtype)}"))
    # First, two fixed cases of 32 rows, on which the likely mistakes draw different tokens (on a few rows the
    # draws of two distributions from one generator often coincide, so that a learner who multiplies by the
    # temperature looked like one who ignores it): a low temperature without top-k, then top-k alone (k = 3,
    # so that keeping one token too few is not the argmax, on logits flat enough for every k to matter).
    first = []
    for scale, temperature, top_k, s in ((1.0, 0.25, None, 36), (0.3, 1.0, 3, 15)):
        logits = randn(torch.Generator().manual_seed(s), (32, 10), scale=scale)
        gen = torch.Generator().manual_seed(1000 + s)
        first.append(Case((logits, temperature, top_k, gen),
                          label=f"logits {tuple(logits.shape)}, temperature={temperature}, top_k={top_k}, float64"))
    # Then float32 logits whose largest, 3, times 40 (the hard repeat) over the temperature 0.5 is 240: past
    # float32's exp, whatever the seed, so an exp without the maximum subtracted always meets its overflow.
    logits = randn(torch.Generator().manual_seed(seed), (6, 10), torch.float32, 1.0).clamp(-2.5, 2.5)
    logits[0, 3] = 3.0
    first.append(Case((logits, 0.5, None, torch.Generator().manual_seed(seed + 1)),
                      label="logits (6, 10), temperature=0.5, top_k=None, largest logit 3, float32"))
    return first + cases


def _sample(logits, temperature, top_k, generator, mode=""):
    generator = copy.deepcopy(generator)
    logits = logits.double()
    if mode == "times_t":
        logits = logits * temperature
    elif mode != "no_t":
        logits = logits / temperature
    if top_k is not None and mode != "no_k":
        k = min(top_k + (1 if mode == "k_plus" else -1 if mode == "k_minus" else 0), logits.shape[-1])
        if k < 1:
            return torch.full((logits.shape[0], 1), -1, dtype=torch.long)
        if mode == "smallest":
            kth = (-logits).topk(k, dim=-1).values[:, -1:].neg()
            logits = logits.masked_fill(logits > kth, float("-inf"))
        else:
            kth = logits.topk(k, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
    if mode == "argmax":
        return logits.argmax(-1, keepdim=True)
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)


def _sampling_mistake(message: str, mode: str) -> Mistake:
    return Mistake(message, lambda lg, t, k, gen: _sample(lg, t, k, gen, mode))


SAMPLE_MISTAKES = [
    _sampling_mistake("the temperature is not applied: divide the logits by it before the softmax.", "no_t"),
    _sampling_mistake("the logits are multiplied by the temperature: divide by it (a low temperature sharpens).",
                      "times_t"),
    _sampling_mistake("top_k is ignored: keep only the k largest logits (set the others to -inf).", "no_k"),
    _sampling_mistake("top-k keeps one token too many: keep the k largest, no more.", "k_plus"),
    _sampling_mistake("top-k keeps one token too few: keep the k largest.", "k_minus"),
    _sampling_mistake("top-k keeps the k smallest logits: keep the largest.", "smallest"),
    _sampling_mistake("the token is the argmax: sample it with torch.multinomial(probs, 1, generator=generator).",
                      "argmax"),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 07-modern-variants run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("07-modern-variants", "modern_variants.ipynb", (
    Exercise("pre_ln_block", 2, (
        Comparison(reference_pre_ln_block, pre_ln_cases, seed=71, mistakes=PRE_LN_MISTAKES, check_grad=True),
    )),
    Exercise("swiglu", 2, (
        Comparison(reference_swiglu, swiglu_cases, seed=72, mistakes=SWIGLU_MISTAKES, forbidden=SILU,
                   check_grad=True),
    )),
    Exercise("apply_rope", 3, (
        Comparison(reference_apply_rope, rope_cases, seed=73, mistakes=ROPE_MISTAKES, check_grad=True),
    )),
    prediction("predicted_loss", 1, 1.0397207708399179,
               form='one number, the loss to two decimals, like 0.12', tolerance=0.006, wrong={
        'the targets are not shifted: each row was scored against its own token, not the next one': 0.4904146265,
        'the losses were summed, not averaged over the predictions': 2.0794415417,
        'the logarithm is base 2; cross-entropy in nats uses the natural logarithm': 1.5,
    }),
    Exercise("next_token_loss", 3, (
        Comparison(next_token_loss, loss_cases, seed=74, mistakes=LOSS_MISTAKES, forbidden=CROSS_ENTROPY,
                   check_grad=True, hard=(LargeInputs(100.0, (0,)),)),
    )),
    Exercise("sample_next_token", 3, (
        Comparison(reference_sample_next_token, sample_cases, seed=75, mistakes=SAMPLE_MISTAKES,
                   hard=(LargeInputs(40.0, (0,)),), layouts=False),
    )),
))
