"""Random cases and likely mistakes for the Swin exercises (chapter 11).

Cases cover square and non-square feature maps, one window or many, window
sides from 1 to 6, odd sides before patch merging, float32 and float64, and
temperatures on both sides of Swin V2's ``log 100`` clamp. Each
:class:`~grader.assignments.Mistake` is a plausible wrong implementation
written as a variant of the reference; the grader names it when a learner's
result matches it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import swin as _reference
from grader.cases import Case, alternating_dtype, dtype_name, frozen, randint, randn
from grader.checker import call_learner
from grader.diagnosis import Mistake
from grader.failures import ExerciseFailure
from grader.guards import FUSED_ATTENTION
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

__all__ = [
    "partition_cases", "reverse_cases", "mask_cases", "index_cases", "merging_cases", "cosine_cases",
    "patch_merging_reference", "check_mask_is_finite", "PARTITION_MISTAKES", "REVERSE_MISTAKES", "MASK_MISTAKES",
    "INDEX_MISTAKES", "MERGING_MISTAKES", "COSINE_MISTAKES",
]




def _maps(g: torch.Generator, n: int) -> list[tuple[int, int, int, int]]:
    """``(batch, nh, nw, ws)``: windows per column and per row, and the window side; a few fixed edge cases first."""
    fixed = [(2, 2, 3, 2), (1, 3, 1, 3), (1, 1, 1, 4), (3, 1, 2, 5), (2, 2, 2, 1)]
    out = list(fixed)
    while len(out) < n:
        b, nh, nw = (int(x) for x in torch.randint(1, 4, (3,), generator=g))
        ws = randint(g, 1, 7)
        out.append((b, nh, nw, ws))
    return out[:n]


# --------------------------------------------------------------------------
# window_partition / window_reverse
# --------------------------------------------------------------------------
def partition_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(x, ws)`` with ``x`` ``(B, H, W, C)``, ``H`` and ``W`` multiples of ``ws``."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i, (b, nh, nw, ws) in enumerate(_maps(g, n)):
        c = randint(g, 1, 6)
        x = randn(g, (b, nh * ws, nw * ws, c), alternating_dtype(i))
        cases.append(Case((x, ws), label=f"x of shape {tuple(x.shape)}, ws={ws}, {dtype_name(x.dtype)}"))
    return cases


def reverse_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(windows, ws, h, w)`` with ``windows`` ``(B * nW, ws * ws, C)``."""
    cases = []
    for case in partition_cases(seed, n):
        x, ws = case.args
        b, h, w, c = x.shape
        windows = torch.randn(b * (h // ws) * (w // ws), ws * ws, c, dtype=x.dtype,
                              generator=torch.Generator().manual_seed(seed + h * 31 + w))
        cases.append(Case((windows, ws, h, w), label=f"windows {tuple(windows.shape)}, ws={ws}, h={h}, w={w}, "
                                                       f"{dtype_name(x.dtype)}"))
    return cases


def _grid(x: Tensor, ws: int) -> Tensor:
    b, h, w, c = x.shape
    return x.reshape(b, h // ws, ws, w // ws, ws, c)


PARTITION_MISTAKES = [
    Mistake("the result is 4-D: flatten the batch and the windows into one leading axis, (B * nW, ws*ws, C).",
            lambda x, ws: _reference.window_partition(x, ws).reshape(x.shape[0], -1, ws * ws, x.shape[-1])),
    Mistake("a window is not a ws x ws square: after view(B, H/ws, ws, W/ws, ws, C) swap the two middle axes "
            "(the window-column index and the row inside the window) before flattening.",
            lambda x, ws: _grid(x, ws).reshape(-1, ws * ws, x.shape[-1])),
    Mistake("the tokens inside each window are in column-major order; read each window row by row.",
            lambda x, ws: _grid(x, ws).permute(0, 1, 3, 4, 2, 5).reshape(-1, ws * ws, x.shape[-1])),
    Mistake("the windows are numbered column by column; number them row by row (left to right, then down).",
            lambda x, ws: _grid(x, ws).permute(0, 3, 1, 2, 4, 5).reshape(-1, ws * ws, x.shape[-1])),
    Mistake("the batch index is not the outermost: all windows of image 0 come first, then those of image 1.",
            lambda x, ws: _grid(x, ws).permute(1, 3, 0, 2, 4, 5).reshape(-1, ws * ws, x.shape[-1])),
]


def _ungrid(windows: Tensor, ws: int, h: int, w: int, order) -> Tensor:
    c = windows.shape[-1]
    return windows.reshape(-1, h // ws, w // ws, ws, ws, c).permute(*order).reshape(-1, h, w, c)


REVERSE_MISTAKES = [
    Mistake("the windows were put back without swapping the window-column axis and the row-inside-window axis: "
            "view(B, H/ws, W/ws, ws, ws, C), then transpose(2, 3) before reshaping to (B, H, W, C).",
            lambda win, ws, h, w: win.reshape(-1, h, w, win.shape[-1])),
    Mistake("the tokens of each window are read column by column; window_partition wrote them row by row.",
            lambda win, ws, h, w: _ungrid(win, ws, h, w, (0, 1, 4, 2, 3, 5))),
    Mistake("height and width are swapped in the view: the windows come as (H/ws) rows of (W/ws) windows.",
            lambda win, ws, h, w: win.reshape(-1, w // ws, h // ws, ws, ws, win.shape[-1]).transpose(2, 3)
            .reshape(-1, h, w, win.shape[-1])),
    Mistake("the axes are permuted as (0, 1, 3, 4, 2, 5); undo window_partition's swap with transpose(2, 3), "
            "giving (B, H/ws, ws, W/ws, ws, C).", lambda win, ws, h, w: _ungrid(win, ws, h, w, (0, 1, 3, 4, 2, 5))),
    Mistake("the windows are placed column by column; window_partition numbered them row by row.",
            lambda win, ws, h, w: win.reshape(-1, w // ws, h // ws, ws, ws, win.shape[-1])
            .permute(0, 2, 3, 1, 4, 5).reshape(-1, h, w, win.shape[-1])),
    Mistake("the result has the windows' layout (B, H/ws, W/ws, ws, ws, C): reshape to (B, H, W, C).",
            lambda win, ws, h, w: win.reshape(-1, h // ws, w // ws, ws, ws, win.shape[-1])),
]


# --------------------------------------------------------------------------
# The shifted-window mask
# --------------------------------------------------------------------------
def mask_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(h, w, ws, shift)``: the map divides into windows, ``0 < shift < ws``."""
    g = torch.Generator().manual_seed(seed)
    fixed = [(4, 4, 2, 1), (8, 8, 4, 2), (6, 9, 3, 1), (12, 8, 4, 2), (7, 7, 7, 3), (10, 5, 5, 4), (6, 4, 2, 1)]
    out = list(fixed)
    while len(out) < n:
        ws = randint(g, 2, 6)
        nh, nw = (int(x) for x in torch.randint(1, 4, (2,), generator=g))
        shift = ws // 2 if len(out) % 2 else randint(g, 1, ws)
        out.append((nh * ws, nw * ws, ws, shift))
    return [Case(a, label=f"h={a[0]}, w={a[1]}, ws={a[2]}, shift={a[3]}") for a in out[:n]]


def _mask_from_labels(label: Tensor, ws: int, value: float = _reference.MASK_VALUE, same: bool = False) -> Tensor:
    lab = _reference.window_partition(label[None, :, :, None].double(), ws).squeeze(-1)
    differ = lab[:, None, :] != lab[:, :, None]
    if same:
        differ = ~differ
    return torch.zeros(differ.shape).masked_fill(differ, value)


def _regions(n, ws, shift, cuts):
    i = torch.arange(n)
    return sum((i >= c).long() for c in cuts(n, ws, shift))


def _labels(h, w, ws, shift, cuts):
    return _regions(h, ws, shift, cuts)[:, None] * 3 + _regions(w, ws, shift, cuts)[None, :]


_RIGHT = lambda n, ws, s: (n - ws, n - s)

MASK_MISTAKES = [
    Mistake("the mask is inverted: 0 between tokens of the *same* region, -100 between different regions.",
            lambda h, w, ws, s: _mask_from_labels(_labels(h, w, ws, s, _RIGHT), ws, same=True)),
    Mistake("the regions are those of the map before the roll ([0, shift), [shift, ws), ...): label the map "
            "after roll(-shift), where the wrapped-around strip is the last `shift` rows and columns.",
            lambda h, w, ws, s: _mask_from_labels(_labels(h, w, ws, s, lambda n, ws, s: (s, ws)), ws)),
    Mistake("the cut between the first two regions is at n - 2*shift instead of n - ws.",
            lambda h, w, ws, s: _mask_from_labels(_labels(h, w, ws, s, lambda n, ws, s: (n - 2 * s, n - s)), ws)),
    Mistake("the labels of the two axes collide (row_region + col_region): use 3 * row_region + col_region.",
            lambda h, w, ws, s: _mask_from_labels(
                _regions(h, ws, s, _RIGHT)[:, None] + _regions(w, ws, s, _RIGHT)[None, :], ws)),
    Mistake("height and width are swapped.",
            lambda h, w, ws, s: _mask_from_labels(_labels(w, h, ws, s, _RIGHT), ws)),
]


# --------------------------------------------------------------------------
# The relative position index
# --------------------------------------------------------------------------
def index_cases(seed: int = 0) -> list[Case]:
    """Every window side from 1 to 8."""
    return [Case((ws,), label=f"ws={ws}") for ws in [2, 1, 3, 4, 5, 6, 7, 8]]


def check_mask_is_finite(learner, name: str, seed: int | None = None) -> None:
    """Fail with a clear message if a mask function puts -inf (or NaN) in its mask.

    The general comparison cannot name this mistake: a variant holding -inf
    matches almost anything within its relative tolerance.
    """
    mask = call_learner(learner, Case((8, 8, 4, 2), label="h=8, w=8, ws=4, shift=2"), name)
    if isinstance(mask, Tensor) and mask.is_floating_point() and not torch.isfinite(mask).all():
        raise ExerciseFailure("shifted_window_mask puts -inf (or NaN) in the mask (h=8, w=8, ws=4, shift=2). "
                              "Likely mistake: Swin (and Hugging Face) add -100, not -inf, between tokens of "
                              "different regions.")


def _rel(ws: int) -> Tensor:
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
    return coords[:, :, None] - coords[:, None, :]  # (2, N, N): pos_i - pos_j


INDEX_MISTAKES = [
    Mistake("the offsets are not shifted by ws - 1, so some indices are negative: add ws - 1 to dy and dx.",
            lambda ws: _rel(ws)[0] * (2 * ws - 1) + _rel(ws)[1]),
    Mistake("the row offset is multiplied by ws; each dy row of the table holds 2*ws - 1 values of dx.",
            lambda ws: (_rel(ws)[0] + ws - 1) * ws + _rel(ws)[1] + ws - 1),
    Mistake("the row offset is multiplied by 2*ws; each dy row of the table holds 2*ws - 1 values of dx.",
            lambda ws: (_rel(ws)[0] + ws - 1) * 2 * ws + _rel(ws)[1] + ws - 1),
    Mistake("the offsets are pos_j - pos_i; entry [i, j] uses pos_i - pos_j (the matrix is transposed).",
            lambda ws: _reference.relative_position_index(ws).T.contiguous()),
    Mistake("dy and dx are swapped: the row offset (dy, from the first coordinate) is the one multiplied by 2*ws - 1.",
            lambda ws: (_rel(ws)[1] + ws - 1) * (2 * ws - 1) + _rel(ws)[0] + ws - 1),
    Mistake("the offsets are shifted by ws; shift them by ws - 1, so that the smallest, -(ws - 1), becomes 0.",
            lambda ws: (_rel(ws)[0] + ws) * (2 * ws - 1) + _rel(ws)[1] + ws),
    Mistake("only one of the two offsets is shifted by ws - 1.",
            lambda ws: (_rel(ws)[0] + ws - 1) * (2 * ws - 1) + _rel(ws)[1]),
]


# --------------------------------------------------------------------------
# Patch merging
# --------------------------------------------------------------------------
def patch_merging_reference(x: Tensor, h: int, w: int, norm: nn.Module, reduction: nn.Module) -> Tensor:
    """Swin V1 patch merging: ``reduction(norm(merge_2x2(x)))``, ``(B, H*W, C) -> (B, ceil(H/2)*ceil(W/2), 2C)``."""
    return reduction(norm(_reference.merge_2x2(x, (h, w))[0]))


def merging_cases(seed: int = 0, n: int = 16) -> list[Case]:
    """``(x, h, w, norm, reduction)``: even and odd sides, non-square maps, random norm and projection weights."""
    g = torch.Generator().manual_seed(seed)
    fixed = [(2, 4, 6, 3), (1, 3, 5, 2), (1, 2, 2, 1), (2, 5, 5, 4), (1, 1, 1, 2), (1, 6, 3, 3)]
    sizes = list(fixed)
    while len(sizes) < n:
        b = randint(g, 1, 3)
        h, w = (int(x) for x in torch.randint(1, 9, (2,), generator=g))
        c = randint(g, 1, 7)
        sizes.append((b, h, w, c))
    cases = []
    for i, (b, h, w, c) in enumerate(sizes[:n]):
        dtype = alternating_dtype(i)
        x = randn(g, (b, h * w, c), dtype)
        norm, reduction = nn.LayerNorm(4 * c), nn.Linear(4 * c, 2 * c, bias=False)
        with torch.no_grad():
            norm.weight.copy_(1 + 0.5 * torch.randn(4 * c, generator=g))
            norm.bias.copy_(0.5 * torch.randn(4 * c, generator=g))
            reduction.weight.copy_(torch.randn(2 * c, 4 * c, generator=g) / math.sqrt(4 * c))
        cases.append(Case((x, h, w, frozen(norm.to(dtype)), frozen(reduction.to(dtype))),
                          label=f"x {tuple(x.shape)} with h={h}, w={w}, C={c}, {dtype_name(dtype)}"))
    return cases


def _merge(x, h, w, norm, reduction, order=((0, 0), (1, 0), (0, 1), (1, 1)), pad=True, swap=False, use_norm=True,
           pad_mode="bottom-right"):
    b, _, c = x.shape
    g = x.reshape(b, w, h, c).transpose(1, 2) if swap else x.reshape(b, h, w, c)
    if pad and pad_mode == "top-left":
        g = F.pad(g, (0, 0, w % 2, 0, h % 2, 0))
    elif pad and pad_mode == "replicate":
        g = torch.cat([g, g[:, -1:]], dim=1) if h % 2 else g
        g = torch.cat([g, g[:, :, -1:]], dim=2) if w % 2 else g
    elif pad:
        g = F.pad(g, (0, 0, 0, w % 2, 0, h % 2))
    else:
        g = g[:, : h // 2 * 2, : w // 2 * 2]
    cat = torch.cat([g[:, r::2, s::2] for r, s in order], dim=-1).reshape(b, -1, 4 * c)
    return reduction(norm(cat) if use_norm else cat)


MERGING_MISTAKES = [
    Mistake("the four neighbours are concatenated in row-major order (top-left, top-right, bottom-left, "
            "bottom-right); Swin's order is x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2].",
            lambda x, h, w, n, r: _merge(x, h, w, n, r, order=((0, 0), (0, 1), (1, 0), (1, 1)))),
    Mistake("an odd side is cropped instead of zero-padded to an even size (pad one row/column of zeros at the "
            "bottom/right).", lambda x, h, w, n, r: _merge(x, h, w, n, r, pad=False)),
    Mistake("the LayerNorm is skipped: normalize the 4C concatenation, then project it to 2C.",
            lambda x, h, w, n, r: _merge(x, h, w, n, r, use_norm=False)),
    Mistake("the tokens are read as a (W, H) grid: token t sits at row t // W, column t % W.",
            lambda x, h, w, n, r: _merge(x, h, w, n, r, swap=True)),
    Mistake("an odd side is padded at the top/left; pad the zero row (column) at the bottom (right).",
            lambda x, h, w, n, r: _merge(x, h, w, n, r, pad_mode="top-left")),
    Mistake("an odd side is padded by repeating the last row (column); pad with zeros.",
            lambda x, h, w, n, r: _merge(x, h, w, n, r, pad_mode="replicate")),
    Mistake("the same neighbour is taken four times: the four slices start at rows/columns (0, 0), (1, 0), (0, 1), "
            "(1, 1).",
            lambda x, h, w, n, r: _merge(x, h, w, n, r, order=((0, 0), (0, 0), (0, 0), (0, 0)))),
]


# --------------------------------------------------------------------------
# Scaled cosine attention
# --------------------------------------------------------------------------
def cosine_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(q, k, v, logit_scale, bias)``: batch of windows, several heads, temperatures below and above 100,
    bias None, a position bias, or a position bias plus a -100 shift mask."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        dtype = alternating_dtype(i)
        b = randint(g, 1, 4)
        heads = randint(g, 1, 4)
        tokens = [1, 4, 9, 6, 16][i % 5]
        # d >= 2: the cosine of 1-d vectors is their sign, and its gradient, zero in theory, is rounding noise
        # amplified by 1/|q| that no implementation controls.
        d = randint(g, 2, 9)
        spread = [1.0, 5.0, 0.2][i % 3]
        q, k = (randn(g, (b, heads, tokens, d), scale=spread) for _ in range(2))
        if i % 5 in (2, 3):  # nearly parallel vectors: cosines close to 1, where the temperature matters most
            direction = randn(g, (d,))
            q, k = direction + 0.1 * q / spread, direction + 0.1 * k / spread
        v = randn(g, (b, heads, tokens, d + 1))
        logit_scale = torch.empty(heads, 1, 1, dtype=torch.float64).uniform_(-1.0, 6.0, generator=g)
        if i % 4 == 1:
            logit_scale[0] = math.log(10.0)  # Hugging Face's initial value
        if i % 2 == 0:
            logit_scale[-1] = math.log(1000.0)  # far above the clamp
        kind = ["none", "position", "position+mask", "position"][i % 4]
        bias, blabel = None, "no bias"
        if kind != "none":
            bias = 16 * torch.sigmoid(randn(g, (1, heads, tokens, tokens)))
            blabel = "a position bias (1, heads, N, N)"
            if kind == "position+mask":
                mask = torch.where(torch.rand(b, 1, tokens, tokens, generator=g) < 0.3, -100.0, 0.0).double()
                bias, blabel = bias + mask, "a position bias plus a -100 shift mask (B, heads, N, N)"
        args = tuple(t.to(dtype) for t in (q, k, v, logit_scale)) + (None if bias is None else bias.to(dtype),)
        scales = [round(float(s), 2) for s in logit_scale.flatten()]
        label = (f"q, k {tuple(q.shape)}, v {tuple(v.shape)}, logit_scale {scales}, "
                 f"{blabel}, {dtype_name(dtype)}")
        cases.append(Case(args, label=label))
    return cases


def _cos(q, k, v, s, bias, *, tau=None, normalize=True, dim=-1, extra=1.0, use_bias=True, softmax_dim=-1,
         scaled_bias=False):
    tau = s.clamp(max=_reference.LOGIT_SCALE_MAX).exp() if tau is None else tau
    if normalize:
        q, k = F.normalize(q, dim=dim), F.normalize(k, dim=dim)
    scores = q @ k.transpose(-2, -1) * tau * extra
    if bias is not None and use_bias:
        scores = scores + (bias * tau if scaled_bias else bias)
    return torch.softmax(scores, dim=softmax_dim) @ v


COSINE_MISTAKES = [
    Mistake("the temperature is not clamped: tau = exp(min(logit_scale, log 100)), at most 100.",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, tau=s.exp())),
    Mistake("the clamp is applied to tau at log(100) (about 4.6); clamp the *log*-scale at log(100), then "
            "exponentiate.",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, tau=s.exp().clamp(max=_reference.LOGIT_SCALE_MAX))),
    Mistake("logit_scale is used as the temperature itself; it is a log: tau = exp(min(logit_scale, log 100)).",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, tau=s.clamp(max=_reference.LOGIT_SCALE_MAX))),
    Mistake("the cosine scores are also divided by sqrt(d); cosine attention replaces that scale by tau.",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, extra=1.0 / math.sqrt(q.shape[-1]))),
    Mistake("queries and keys are not L2-normalized: the score is the cosine, q.k / (|q| |k|), times tau.",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, normalize=False)),
    Mistake("the vectors are normalized over the tokens (dim=-2); normalize each vector over its features (dim=-1).",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, dim=-2)),
    Mistake("the bias is ignored: add it to the scores before the softmax.",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, use_bias=False)),
    Mistake("the bias is multiplied by tau as well; only the cosines are scaled, the bias is added afterwards.",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, scaled_bias=True)),
    Mistake("the softmax runs over the queries (dim=-2); each query's weights over the keys (dim=-1) sum to 1.",
            lambda q, k, v, s, b: _cos(q, k, v, s, b, softmax_dim=-2)),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 11-swin run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("11-swin", "swin.ipynb", (
    prediction("predicted_window_shape", 1, [6, 16, 7],
               form='the shape as three ints, like (1, 2, 3)', tolerance=0, wrong={
        "only one image's windows were counted; the batch's images each give theirs": [2, 16, 7],
        "that is the shape before the last reshape: each window's tokens become one axis of ws * ws": [6, 4, 4, 7],
        'a window has ws * ws tokens, not ws': [6, 4, 7],
    }),
    Exercise("window_partition", 2, (
        Comparison(_reference.window_partition, partition_cases, seed=111, mistakes=PARTITION_MISTAKES,
                   check_grad=True),
    )),
    Exercise("window_reverse", 2, (
        Comparison(_reference.window_reverse, reverse_cases, seed=112, mistakes=REVERSE_MISTAKES, check_grad=True),
    )),
    Exercise("shifted_window_mask", 3, (
        check_mask_is_finite,
        Comparison(_reference.shifted_window_mask, mask_cases, seed=113, mistakes=MASK_MISTAKES),
    )),
    Exercise("relative_position_index", 2, (
        Comparison(_reference.relative_position_index, index_cases, seed=114, mistakes=INDEX_MISTAKES),
    )),
    Exercise("patch_merging", 3, (
        Comparison(patch_merging_reference, merging_cases, seed=115, mistakes=MERGING_MISTAKES, check_grad=True),
    )),
    Exercise("cosine_attention", 3, (
        Comparison(_reference.cosine_attention, cosine_cases, seed=116, mistakes=COSINE_MISTAKES,
                   forbidden=FUSED_ATTENTION, check_grad=True),
    )),
))
