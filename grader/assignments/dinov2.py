"""Random cases and likely mistakes for the DINOv2 exercises (chapter 10).

* ``add_registers(patches, cls_token, registers, pos_embed)``: the DINOv2
  token layout, positions on CLS and patches only, registers after CLS.
* ``layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2)``: a pre-LN
  block whose two residual branches are scaled channel by channel.
* ``multi_crop(images, global_boxes, local_boxes, global_size, local_size)``:
  crops cut from given boxes and resized bilinearly; a list of tensors,
  compared crop by crop.
* ``dino_loss(student_out, teacher_out, center, student_temp, teacher_temp)``:
  the cross-entropy over pairs of different views; the teacher side sends no
  gradient (checked with ``check_grad``).
* ``update_center(center, teacher_out, momentum)``: the EMA of the teacher's
  mean output.
* ``ema_update(teacher, student, momentum)``: in place, returns None. It is
  graded through a wrapper the hidden test defines (it copies both modules,
  calls the learner's function and returns ``(returned None?, teacher
  parameters after, student parameters after)``); :func:`reference_ema_result`
  is the reference side of that wrapper.
"""

from __future__ import annotations

import copy
import functools
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.dino import dino_loss, ema_update, multi_crop, update_center
from course_lib.dinov2 import add_registers
from grader.cases import (
    Case,
    LargeInputs,
    alternating_dtype,
    dtype_name,
    global_rng_from,
    integer_dtype_repeats,
    randint,
    randn,
    stand_in_block,
)
from grader.diagnosis import Mistake
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

__all__ = [
    "reference_add_registers", "register_cases", "REGISTER_MISTAKES",
    "reference_layerscale_block", "layerscale_cases", "LAYERSCALE_MISTAKES",
    "reference_multi_crop", "multi_crop_cases", "MULTI_CROP_MISTAKES",
    "reference_dino_loss", "dino_loss_cases", "DINO_LOSS_MISTAKES",
    "reference_update_center", "center_cases", "CENTER_MISTAKES",
    "reference_ema_result", "ema_cases", "EMA_MISTAKES",
]


# --------------------------------------------------------------------------
# Exercise: registers
# --------------------------------------------------------------------------
def reference_add_registers(patches: Tensor, cls_token: Tensor, registers: Tensor, pos_embed: Tensor) -> Tensor:
    return add_registers(patches, cls_token, registers, pos_embed)


def register_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """Random ``(patches (B, N, D), cls (1, 1, D), registers (1, R, D), pos (1, 1 + N, D))``, R >= 1.

    (R = 0 is left to the visible test: the gradient check cannot take an empty input.)"""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b, n_p, d = randint(g, 1, 4), randint(g, 1, 10), [2, 3, 4, 8, 16][randint(g, 0, 5)]
        r = [1, 2, 4, 3][i % 4]
        if i % 7 == 3:
            r = n_p  # as many registers as patches: layout mistakes keep the shape
        dtype = alternating_dtype(i, 2)
        args = (randn(g, (b, n_p, d), dtype), randn(g, (1, 1, d), dtype) + 2.0,
                randn(g, (1, r, d), dtype) - 1.0, randn(g, (1, 1 + n_p, d), dtype, 0.5))
        cases.append(Case(args, label=f"B={b}, N={n_p}, D={d}, R={r}, {dtype_name(dtype)}"))
    return cases


def _cls_patches(p, c, pos):
    return torch.cat([c.expand(p.shape[0], -1, -1), p], dim=1) + pos


def _ins(x, regs, at=1):
    return torch.cat([x[:, :at], regs.expand(x.shape[0], -1, -1), x[:, at:]], dim=1)


REGISTER_MISTAKES = [
    Mistake("the registers come before CLS: the order is CLS, registers, patches.",
            lambda p, c, r, pos: _ins(_cls_patches(p, c, pos), r, at=0)),
    Mistake("the registers come after the patches: the order is CLS, registers, patches.",
            lambda p, c, r, pos: _ins(_cls_patches(p, c, pos), r, at=1 + p.shape[1])),
    Mistake("CLS got no position: pos_embed[:, 0] belongs to CLS, pos_embed[:, 1:] to the patches.",
            lambda p, c, r, pos: _ins(torch.cat([c.expand(p.shape[0], -1, -1), p + pos[:, 1:]], 1), r)),
    Mistake("the patches got the positions shifted by one (pos_embed[:, :N]): pos_embed[:, 0] is CLS's.",
            lambda p, c, r, pos: _ins(torch.cat([c.expand(p.shape[0], -1, -1) + pos[:, :1], p + pos[:, :-1]], 1), r)),
    Mistake("the registers are missing from the sequence.", lambda p, c, r, pos: _cls_patches(p, c, pos)),
    Mistake("the registers got CLS's position: registers carry no position at all.",
            lambda p, c, r, pos: _ins(_cls_patches(p, c, pos), r + pos[:, :1])),
    Mistake("no positions were added.",
            lambda p, c, r, pos: _ins(torch.cat([c.expand(p.shape[0], -1, -1), p], 1), r)),
    Mistake("CLS is missing from the sequence.",
            lambda p, c, r, pos: torch.cat([r.expand(p.shape[0], -1, -1), p + pos[:, 1:]], 1)),
]


# --------------------------------------------------------------------------
# Exercise: the LayerScale block
# --------------------------------------------------------------------------
def reference_layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2) -> Tensor:
    """``h = x + gamma1 * attn(norm1(x))``; ``h + gamma2 * mlp(norm2(h))``."""
    h = x + gamma1 * attn(norm1(x))
    return h + gamma2 * mlp(norm2(h))


def layerscale_cases(seed: int = 0, n: int = 12) -> list[Case]:
    """Random ``(x, attn, mlp, norm1, norm2, gamma1, gamma2)``; gammas of different sizes and signs."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        batch = [(), (2,), (3,)][i % 3]
        d, n_tok = [2, 4, 8][randint(g, 0, 3)], randint(g, 2, 6)
        if i == 0:  # the first case over four features or more: a LayerNorm over two gives +-1 (then its affine
            d = max(d, 4)  # map) whatever its input, so that which input the MLP's norm reads would hardly show
        dtype = alternating_dtype(i, 2)
        x = randn(g, (*batch, n_tok, d), dtype, 2.0)
        g1 = randn(g, (d,), dtype, 0.7) + 0.3
        g2 = randn(g, (d,), dtype, 0.7) - 0.4
        if dtype == torch.float64:
            attn, mlp, n1, n2 = stand_in_block(g, n_tok, d, 2 * d)
            what = "attn tanh(Linear over tokens), mlp Linear-GELU-Linear, affine LayerNorms"
        else:
            # torch callables only: a Python function defined in course_lib would count as calling the reference
            attn = functools.partial(torch.cumsum, dim=-2)
            mlp = torch.sin
            n1 = functools.partial(F.layer_norm, normalized_shape=(d,))
            n2 = functools.partial(F.rms_norm, normalized_shape=(d,))
            what = "attn cumsum over tokens, mlp sin, norm1 layer_norm, norm2 rms"
        cases.append(Case((x, attn, mlp, n1, n2, g1, g2), label=f"x {tuple(x.shape)}, {dtype_name(dtype)}, {what}"))
    return cases


LAYERSCALE_MISTAKES = [
    Mistake("gamma1 and gamma2 are swapped: gamma1 scales the attention branch, gamma2 the MLP branch.",
            lambda x, a, m, n1, n2, g1, g2: reference_layerscale_block(x, a, m, n1, n2, g2, g1)),
    Mistake("the gamma scales the skip as well (gamma * (x + branch)): it multiplies the branch only.",
            lambda x, a, m, n1, n2, g1, g2: (lambda h: g2 * (h + m(n2(h))))(g1 * (x + a(n1(x))))),
    Mistake("the gamma scales the branch's input (attn(norm1(x) * gamma1)): it multiplies the branch's output.",
            lambda x, a, m, n1, n2, g1, g2: (lambda h: h + m(n2(h) * g2))(x + a(n1(x) * g1))),
    Mistake("only the attention branch is scaled: the MLP branch gets gamma2.",
            lambda x, a, m, n1, n2, g1, g2: (lambda h: h + m(n2(h)))(x + g1 * a(n1(x)))),
    Mistake("only the MLP branch is scaled: the attention branch gets gamma1.",
            lambda x, a, m, n1, n2, g1, g2: (lambda h: h + g2 * m(n2(h)))(x + a(n1(x)))),
    Mistake("the gammas are not used at all.",
            lambda x, a, m, n1, n2, g1, g2: (lambda h: h + m(n2(h)))(x + a(n1(x)))),
    Mistake("the MLP reads x instead of h: the sublayers run in sequence.",
            lambda x, a, m, n1, n2, g1, g2: x + g1 * a(n1(x)) + g2 * m(n2(x))),
    Mistake("the norms are swapped: norm1 goes before attn, norm2 before mlp.",
            lambda x, a, m, n1, n2, g1, g2: reference_layerscale_block(x, a, m, n2, n1, g1, g2)),
    Mistake("the skip is missing: the block adds each scaled branch to its input.",
            lambda x, a, m, n1, n2, g1, g2: g2 * m(n2(g1 * a(n1(x))))),
]


# --------------------------------------------------------------------------
# Exercise: multi-crop
# --------------------------------------------------------------------------
def reference_multi_crop(images, global_boxes, local_boxes, global_size, local_size) -> list[Tensor]:
    return multi_crop(images, global_boxes, local_boxes, global_size, local_size)


def _boxes(g, n_crops, b, h, w, lo, hi) -> Tensor:
    """Non-square boxes with lo <= side fraction <= hi, every corner inside the image."""
    bh = (torch.rand(n_crops, b, generator=g) * (hi - lo) * h + lo * h).long().clamp(1, h)
    bw = (torch.rand(n_crops, b, generator=g) * (hi - lo) * w + lo * w).long().clamp(1, w)
    bw = torch.where(bw == bh, (bw % w) + 1, bw).clamp(1, w)  # make height and width differ where possible
    top = (torch.rand(n_crops, b, generator=g) * (h - bh + 1)).long().clamp(max=h - bh)
    left = (torch.rand(n_crops, b, generator=g) * (w - bw + 1)).long().clamp(max=w - bw)
    return torch.stack([top, left, bh, bw], dim=-1)


def multi_crop_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """Random images (non-square, 1 or 3 channels), 1-2 global and 0-4 local boxes, up- and down-sizing."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b, c = randint(g, 1, 4), [1, 3][i % 2]
        h, w = randint(g, 8, 20), randint(g, 8, 20)
        if i == 0:
            h, w = 12, 16
        n_g, n_l = [2, 1, 2, 2][i % 4], [4, 2, 0, 3, 1][i % 5]
        gs, ls = randint(g, 6, 17), randint(g, 3, 8)
        dtype = alternating_dtype(i)
        images = torch.rand(b, c, h, w, generator=g, dtype=torch.float64).to(dtype)
        gb = _boxes(g, n_g, b, h, w, 0.5, 1.0)
        lb = _boxes(g, n_l, b, h, w, 0.2, 0.6)
        if i == 0:  # the first case's boxes start left of column h (12, of 16), still inside the image: a box read
            for boxes in (gb, lb):  # as (left, top, ...) then cuts a crop that is wrong but not empty, so that
                boxes[..., 1].clamp_(max=h - 1)  # the mistake is named, not reported as interpolate's error
        cases.append(Case((images, gb, lb, gs, ls),
                          label=f"images {tuple(images.shape)} {dtype_name(dtype)}, {n_g} global -> {gs}px, "
                                f"{n_l} local -> {ls}px"))
    return cases + integer_dtype_repeats(cases, (torch.int32, torch.int16,))


def _crop_variant(images, boxes, size, *, swap_tl=False, swap_hw=False, extra=0, mode="bilinear",
                  align=False, antialias=False, first_image=False):
    out = []
    for k, img in enumerate(images):
        top, left, bh, bw = boxes[0 if first_image else k].tolist()
        if swap_tl:
            top, left = left, top
        if swap_hw:
            bh, bw = bw, bh
        crop = img[:, top:top + bh + extra, left:left + bw + extra]
        kw = dict(align_corners=align, antialias=antialias) if mode == "bilinear" else {}
        out.append(F.interpolate(crop[None], size=(size, size), mode=mode, **kw)[0])
    return torch.stack(out)


def _mc(**kw):
    def variant(images, gbs, lbs, gs, ls):
        return ([_crop_variant(images, b, gs, **kw) for b in gbs] + [_crop_variant(images, b, ls, **kw) for b in lbs])
    return variant


MULTI_CROP_MISTAKES = [
    Mistake("the box was read as (left, top, width, height): it is (top, left, height, width), rows first.",
            _mc(swap_tl=True, swap_hw=True)),
    Mistake("a box is (top, left, height, width): top is the row (first spatial axis), left the column.",
            _mc(swap_tl=True)),
    Mistake("height and width are swapped: rows top:top + height, columns left:left + width.",
            _mc(swap_hw=True)),
    Mistake("the crop is one pixel too large: Python slices exclude the end, top:top + height.", _mc(extra=1)),
    Mistake("the local crops come first: return the global crops, then the local ones.",
            lambda images, gbs, lbs, gs, ls: _mc()(images, lbs[:0], lbs, gs, ls) + _mc()(images, gbs, lbs[:0], gs, ls)),
    Mistake("every crop is resized to the global size: local crops go to local_size.",
            lambda images, gbs, lbs, gs, ls: _mc()(images, gbs, lbs, gs, gs)),
    Mistake("the resize uses align_corners=True: use bilinear with align_corners=False.", _mc(align=True)),
    Mistake("the resize uses nearest-neighbour interpolation: use bilinear.", _mc(mode="nearest")),
    Mistake("the resize is antialiased: use plain bilinear (antialias=False).", _mc(antialias=True)),
    Mistake("every image was cut with the first image's box: box [k, b] is for image b.", _mc(first_image=True)),
]


# --------------------------------------------------------------------------
# Exercise: the DINO loss
# --------------------------------------------------------------------------
def reference_dino_loss(student_out, teacher_out, center, student_temp, teacher_temp) -> Tensor:
    return dino_loss(student_out, teacher_out, center, student_temp, teacher_temp)


def dino_loss_through_logsumexp(student_out, teacher_out, center, student_temp, teacher_temp) -> Tensor:
    """The DINO loss with both softmaxes written as ``z - logsumexp(z)``: correct, but it rounds a quantity the
    size of the logits over the temperature (huge in the numerically hard repeats) before the exp, which the
    tolerance must allow."""
    t = (teacher_out - center) / teacher_temp
    p_t = torch.exp(t - torch.logsumexp(t, dim=-1, keepdim=True))
    s = student_out / student_temp
    log_p_s = s - torch.logsumexp(s, dim=-1, keepdim=True)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(ce.shape[0], ce.shape[1], dtype=torch.bool)].mean()


def dino_loss_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """Random ``(student (n_s, B, K), teacher (n_t, B, K), center, ts, tt)``; center (K,) or (1, K)."""
    g = torch.Generator().manual_seed(seed)
    crops = [(2, 2), (2, 6), (1, 3), (2, 4), (3, 5), (2, 3)]
    cases = []
    for i in range(n):
        n_t, n_s = crops[i % len(crops)]
        b, k = randint(g, 1, 6), randint(g, 3, 20)
        if i == 0:
            b = 3  # the first case has a real batch: batch mistakes show in the values
        if i % 5 == 2:
            k = b  # a square (batch, K): a softmax over the wrong axis keeps the shape
        dtype = alternating_dtype(i, 2)
        student = randn(g, (n_s, b, k), dtype)
        teacher = randn(g, (n_t, b, k), dtype)
        center = randn(g, (k,) if i % 3 else (1, k), dtype, 0.8)
        ts = [0.1, 0.2, 0.5, 1.0][randint(g, 0, 4)]
        tt = [0.04, 0.07, 0.3][randint(g, 0, 3)]
        cases.append(Case((student, teacher, center, ts, tt),
                          label=f"n_s={n_s}, n_t={n_t}, B={b}, K={k}, student_temp={ts}, teacher_temp={tt}, "
                                f"center {tuple(center.shape)}, {dtype_name(dtype)}"))
    # First of all: more student crops than teacher crops and a student temperature other than 1, so that
    # every mistake shows in the values of the first case (with n_s == n_t the crops matched from the end
    # are the right ones, and with student_temp == 1 a missing student temperature changes nothing; the
    # gradient check would then fail first, on the teacher's side, and name no mistake).
    f = torch.Generator().manual_seed(seed + 1)
    n_t, n_s, b, k = 2, 5, 3, 7
    args = (randn(f, (n_s, b, k)), randn(f, (n_t, b, k)), randn(f, (k,), scale=0.8), 0.2, 0.07)
    cases.insert(0, Case(args, label=f"n_s={n_s}, n_t={n_t}, B={b}, K={k}, student_temp=0.2, teacher_temp=0.07, "
                                     f"center ({k},), float64"))
    return cases


def _loss(s, t, c, ts, tt, *, same=False, center=True, c_sign=-1.0, t_temp=True, s_temp=True, t_axis=-1,
          batch_sum=False, all_pairs_mean=False, swap=False, last=False):
    if center:
        t = t + c_sign * c
    p_t = F.softmax(t / (tt if t_temp else 1.0), dim=t_axis)
    log_p_s = F.log_softmax(s / (ts if s_temp else 1.0), dim=-1)
    if swap:
        p_t, log_p_s = F.softmax(s / ts, dim=-1), F.log_softmax(t / tt, dim=-1)
        ce = -torch.einsum("sbk,tbk->ts", p_t, log_p_s)
    else:
        ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s)
    ce = ce if batch_sum else ce / s.shape[1]
    n_t, n_s = ce.shape
    offset = n_s - n_t if last else 0
    differ = torch.ones(n_t, n_s, dtype=torch.bool)
    if not same:
        for i in range(n_t):
            differ[i, i + offset] = False
    if all_pairs_mean:
        return (ce * differ).sum() / (n_t * n_s)
    return ce[differ].mean()


def _loss_mistake(message: str, **options) -> Mistake:
    """A likely mistake that is :func:`_loss` with ``options``."""
    return Mistake(message, lambda s, t, c, ts, tt: _loss(s, t, c, ts, tt, **options))


DINO_LOSS_MISTAKES = [
    _loss_mistake("pairs of the same view are included: skip the pairs where teacher crop i and student crop i are "
                  "the same view.", same=True),
    _loss_mistake("the center is not subtracted from the teacher's output before its softmax.", center=False),
    _loss_mistake("the center is added to the teacher's output: subtract it.", c_sign=1.0),
    Mistake("the temperatures are swapped: the teacher divides by teacher_temp, the student by student_temp.",
            lambda s, t, c, ts, tt: _loss(s, t, c, tt, ts)),
    _loss_mistake("the teacher's temperature is missing: softmax((t - center) / teacher_temp).", t_temp=False),
    _loss_mistake("the student's temperature is missing: log_softmax(s / student_temp).", s_temp=False),
    _loss_mistake("the teacher's softmax runs over the batch axis: it runs over the K prototypes (last axis).",
                  t_axis=-2),
    _loss_mistake("the cross-entropy is summed over the batch: average it over the batch.", batch_sum=True),
    _loss_mistake("the average divides by all n_t * n_s pairs: average over the pairs of different views only.",
                  all_pairs_mean=True),
    _loss_mistake("teacher and student are swapped (softmax of the student, log-softmax of the teacher).",
                  center=False, swap=True),
    Mistake("the center is subtracted from the student's output too: only the teacher is centered.",
            lambda s, t, c, ts, tt: _loss(s - c, t, c, ts, tt)),
    _loss_mistake("teacher and student are swapped (softmax of the student, log-softmax of the centered teacher).",
                  swap=True),
    _loss_mistake("the teacher's crops were matched with the last student crops: they are the first n_t.", last=True),
    Mistake("the sign is flipped: the cross-entropy is -sum p_t log p_s, a positive number.",
            lambda s, t, c, ts, tt: -_loss(s, t, c, ts, tt)),
]


# --------------------------------------------------------------------------
# Exercise: the center update
# --------------------------------------------------------------------------
def reference_update_center(center, teacher_out, momentum) -> Tensor:
    return update_center(center, teacher_out, momentum)


def center_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """Random ``(center (K,) or (1, K), teacher_out (n_t, B, K), momentum)``; momentum 0 and 1 included."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        n_t, b, k = randint(g, 1, 4), randint(g, 1, 6), randint(g, 2, 12)
        if i % 4 == 1:
            b = k
        dtype = alternating_dtype(i, 2)
        center = randn(g, (1, k) if i % 3 else (k,), dtype)
        teacher = randn(g, (n_t, b, k), dtype, 1.5) + 0.5
        m = [0.9, 0.5, 0.99, 0.0, 1.0, 0.7][i % 6]
        cases.append(Case((center, teacher, m), label=f"center {tuple(center.shape)}, teacher_out "
                                                       f"{tuple(teacher.shape)}, momentum={m}, {dtype_name(dtype)}"))
    return cases


def _mean_k(t):
    return t.reshape(-1, t.shape[-1]).mean(0)


CENTER_MISTAKES = [
    Mistake("momentum is on the wrong term: center * momentum + batch_mean * (1 - momentum).",
            lambda c, t, m: c * (1 - m) + _mean_k(t).reshape(c.shape) * m),
    Mistake("the mean runs over the prototypes (last axis): average over crops and batch, keep K.",
            lambda c, t, m: c * m + t.mean(-1).mean() * (1 - m)),
    Mistake("the teacher outputs are summed: the center is an average.",
            lambda c, t, m: c * m + t.reshape(-1, t.shape[-1]).sum(0).reshape(c.shape) * (1 - m)),
    Mistake("only the first crop was averaged: average over every crop and every image.",
            lambda c, t, m: c * m + t[0].mean(0).reshape(c.shape) * (1 - m)),
    Mistake("the center was replaced by the batch mean: it is a moving average.",
            lambda c, t, m: _mean_k(t).reshape(c.shape)),
    Mistake("the batch mean is subtracted: new = momentum * center + (1 - momentum) * mean.",
            lambda c, t, m: c * m - _mean_k(t).reshape(c.shape) * (1 - m)),
]


# --------------------------------------------------------------------------
# Exercise: the EMA teacher
# --------------------------------------------------------------------------
def ema_result(ema_update: Callable) -> Callable:
    """The learner's in-place update as a function of its result:
    ``(returned None, teacher's parameters after, student's parameters after, teacher's buffers after)``.

    It works on copies, so every case starts from the same modules. The guards
    let this adapter through (it is the grader's); the learner's code it calls
    is checked as always. The buffers are in the result because the exercise
    excludes them: BatchNorm's running statistics stay the teacher's own.
    """
    def result(teacher: nn.Module, student: nn.Module, momentum: float):
        teacher, student = copy.deepcopy(teacher), copy.deepcopy(student)
        returned = ema_update(teacher, student, momentum)
        # inline, not through _params: the guards let this adapter's own code through, not what it calls
        return (returned is None, [p.detach().clone() for p in teacher.parameters()],
                [p.detach().clone() for p in student.parameters()], [b.detach().clone() for b in teacher.buffers()])
    return result


def _params(module: nn.Module) -> list[Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _buffers(module: nn.Module) -> list[Tensor]:
    return [b.detach().clone() for b in module.buffers()]


def reference_ema_result(teacher: nn.Module, student: nn.Module, momentum: float):
    """``(True, teacher's parameters after, student's parameters, teacher's buffers)``: the reference side."""
    teacher, student = copy.deepcopy(teacher), copy.deepcopy(student)
    ema_update(teacher, student, momentum)
    return (True, _params(teacher), _params(student), _buffers(teacher))


def _make_pair(g: torch.Generator, kind: int, dtype, teacher_grad: bool):
    with global_rng_from(g):
        def build():
            if kind == 0:
                return nn.Linear(randint(g, 1, 5), randint(g, 1, 5))
            if kind == 1:
                return nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.LayerNorm(6), nn.Linear(6, 3, bias=False))
            return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(12, 2))
        teacher = build()
        student = copy.deepcopy(teacher)
        with torch.no_grad():
            for p in student.parameters():
                p.add_(torch.randn_like(p))
            for b in student.buffers():  # running statistics of its own: averaging them too would show
                if b.is_floating_point():
                    b.add_(torch.rand_like(b) + 0.5)
    teacher, student = teacher.to(dtype), student.to(dtype)
    for p in teacher.parameters():
        p.requires_grad_(teacher_grad)
    return teacher, student


def ema_cases(seed: int = 0, n: int = 12) -> list[Case]:
    """Random ``(teacher, student, momentum)`` module pairs of the same structure; momentum 0 and 1 included."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        kind = i % 3
        dtype = alternating_dtype(i, 2)
        teacher_grad = i % 4 >= 2
        teacher, student = _make_pair(g, kind, dtype, teacher_grad)
        m = [0.996, 0.5, 0.9, 0.0, 1.0, 0.75][i % 6]
        what = ["Linear", "Linear-GELU-LayerNorm-Linear", "Conv2d-BatchNorm2d-Linear"][kind]
        cases.append(Case((teacher, student, m), label=f"{what}, momentum={m}, {dtype_name(dtype)}, "
                                                       f"teacher requires_grad={teacher_grad}"))
    return cases


def _ema_variant(fn):
    def variant(teacher, student, m):
        teacher, student = copy.deepcopy(teacher), copy.deepcopy(student)
        with torch.no_grad():
            for pt, ps in zip(teacher.parameters(), student.parameters()):
                pt.copy_(fn(pt, ps, m))
        return (True, _params(teacher), _params(student), _buffers(teacher))
    return variant


def _ema_buffers_too(t: nn.Module, s: nn.Module, m: float):
    teacher = copy.deepcopy(t)
    with torch.no_grad():
        for pt, ps in zip(teacher.parameters(), s.parameters()):
            pt.copy_(m * pt + (1 - m) * ps)
        for bt, bs in zip(teacher.buffers(), s.buffers()):
            if bt.is_floating_point():
                bt.copy_(m * bt + (1 - m) * bs)
    return (True, _params(teacher), _params(s), _buffers(teacher))


EMA_MISTAKES = [
    Mistake("momentum is on the wrong term: theta_t <- m * theta_t + (1 - m) * theta_s.",
            _ema_variant(lambda t, s, m: (1 - m) * t + m * s)),
    Mistake("the teacher's parameters did not change: update them in place (p.mul_(m).add_(...), "
            "or p.copy_(...)); rebinding a name (p = ...) changes nothing.",
            _ema_variant(lambda t, s, m: t)),
    Mistake("the teacher became a copy of the student: the update mixes both with the momentum.",
            _ema_variant(lambda t, s, m: s)),
    Mistake("the student was moved towards the teacher: update the teacher, leave the student as it is.",
            lambda t, s, m: (True, _params(t), [m * ps + (1 - m) * pt for pt, ps in zip(_params(t), _params(s))],
                             _buffers(t))),
    Mistake("only the weights were updated: every parameter (biases, norm gains...) follows the student.",
            lambda t, s, m: (True, [m * pt + (1 - m) * ps if n.endswith("weight") else pt
                                    for (n, pt), ps in zip([(n, p.detach().clone()) for n, p in t.named_parameters()],
                                                           _params(s))], _params(s), _buffers(t))),
    Mistake("the teacher's buffers (BatchNorm's running statistics) were averaged too: the update covers the "
            "parameters only (teacher.parameters()), buffers excluded.", _ema_buffers_too),
    Mistake("the function returned something: it works in place and returns None.",
            lambda t, s, m: (False,) + reference_ema_result(t, s, m)[1:]),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 10-dinov2 run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("10-dinov2", "dinov2.ipynb", (
    Exercise("add_registers", 2, (
        Comparison(reference_add_registers, register_cases, seed=101, mistakes=REGISTER_MISTAKES, check_grad=True),
    )),
    Exercise("layerscale_block", 2, (
        Comparison(reference_layerscale_block, layerscale_cases, seed=102, mistakes=LAYERSCALE_MISTAKES,
                   check_grad=True),
    )),
    Exercise("multi_crop", 3, (
        Comparison(reference_multi_crop, multi_crop_cases, seed=103, mistakes=MULTI_CROP_MISTAKES),
    )),
    Exercise("dino_loss", 4, (
        Comparison(reference_dino_loss, dino_loss_cases, seed=104, mistakes=DINO_LOSS_MISTAKES, check_grad=True,
                   hard=(LargeInputs(30.0, (0, 1, 2)),), formulations=(dino_loss_through_logsumexp,)),
    )),
    prediction("predicted_center", 1, [3.25, 1.0],
               form='two numbers, the new center, like [1.0, 2.0]', tolerance=0.005, wrong={
        'the momentum weighs the new mean; it weighs the old center: m * center + (1 - m) * mean': [1.75, 3.0],
        "the crops' outputs were summed; the center moves toward their mean": [3.5, 2.0],
        'only the first crop was used; the mean runs over every crop and image': [3.0, 0.5],
    }),
    Exercise("update_center", 2, (
        Comparison(reference_update_center, center_cases, seed=105, mistakes=CENTER_MISTAKES),
    )),
    Exercise("ema_update", 2, (
        Comparison(reference_ema_result, ema_cases, seed=106, mistakes=EMA_MISTAKES),
    ), adapt=ema_result, function=ema_update),
))
