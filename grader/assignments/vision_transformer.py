"""Random cases and likely mistakes for the Vision Transformer exercises (chapter 09).

Cases cover batch sizes 1-3, one and three channels, square and non-square
images, patches from 1 pixel to the whole image, float32 and float64. Each
:class:`~grader.assignments.Mistake` is a plausible wrong implementation written
as a variant of the reference; the grader names it when a learner's result
matches it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import deit as _deit
from course_lib import vit as _reference
from course_lib.positional import resample_pos_embed
from grader.cases import Case, LargeInputs, alternating_dtype, dtype_name, frozen, randint, randn
from grader.diagnosis import Mistake
from grader.predictions import prediction
from grader.registry import Assignment, Comparison, Exercise

#: routines that would cut or project the patches for the learner.
UNFOLD: tuple = (F.unfold, F.fold)
CONVOLUTION: tuple = (F.conv2d, torch.conv2d, torch.convolution, torch.conv_transpose2d, F.unfold, F.fold)




def _image_shape(g: torch.Generator, i: int) -> tuple[int, int, int, int, int]:
    """(B, C, H, W, P) with H and W multiples of P, non-square about half the time."""
    p = [1, 2, 3, 4, 8][i % 5]
    gh, gw = (int(x) for x in torch.randint(1, 5, (2,), generator=g))
    if i % 4 == 1:
        gw = gh + 1  # certainly non-square
    if i % 7 == 6:
        gh = gw = 1  # one patch covers the image
    b = [1, 2, 3][i % 3]
    c = [3, 1, 2][i % 3] if i % 2 else 3
    if i == 0 and gh * gw == c * p * p:  # the first case with as many patches as a patch has values would
        gw += 1  # take patches along the wrong axis, (B, C*P*P, N), for the right shape
    return b, c, gh * p, gw * p, p


# --------------------------------------------------------------------------
# Exercise 1: patchify
# --------------------------------------------------------------------------
def patchify_cases(seed: int = 0, n: int = 20) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b, c, h, w, p = _image_shape(g, i)
        dtype = alternating_dtype(i)
        images = randn(g, (b, c, h, w), dtype)
        cases.append(Case((images, p), label=f"images {(b, c, h, w)}, patch {p}, {dtype_name(dtype)}"))
    return cases


def _patchify_perm(images: Tensor, patch: int, perm: tuple, grid_major: str = "row") -> Tensor:
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).permute(*perm)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)


PATCHIFY_MISTAKES = [
    Mistake("each patch vector is ordered (row, column, channel); the course orders it (channel, row, column), "
            "the order of a flattened Conv2d weight: permute to (B, gh, gw, C, P, P).",
            lambda x, p: _patchify_perm(x, p, (0, 2, 4, 3, 5, 1))),
    Mistake("the patches come out in column-major order (all of column 0 first); the grid must be read row by "
            "row: (B, gh, gw, ...), not (B, gw, gh, ...).",
            lambda x, p: _patchify_perm(x, p, (0, 4, 2, 1, 3, 5))),
    Mistake("inside a patch, rows and columns are swapped: the vector must be ordered (channel, row, column).",
            lambda x, p: _patchify_perm(x, p, (0, 2, 4, 1, 5, 3))),
    Mistake("a plain reshape without a permute does not cut square patches: it takes runs of consecutive pixels. "
            "Reshape to (B, C, gh, P, gw, P), permute, then reshape.",
            lambda x, p: x.reshape(x.shape[0], (x.shape[2] // p) * (x.shape[3] // p), -1)),
    Mistake("the result is (B, C*P*P, N), patches along the last axis, as F.unfold returns it; "
            "transpose to (B, N, C*P*P).",
            lambda x, p: _patchify_perm(x, p, (0, 2, 4, 1, 3, 5)).transpose(1, 2)),
]


# --------------------------------------------------------------------------
# Exercise 2: patch embedding as a linear map
# --------------------------------------------------------------------------
def patch_embed_reference(images: Tensor, weight: Tensor, bias: Tensor, patch: int) -> Tensor:
    """The strided convolution of a ViT's patch embedding, ``(B, N, D)``."""
    return F.conv2d(images, weight, bias, stride=patch).flatten(2).transpose(1, 2)


def patch_embed_cases(seed: int = 0, n: int = 20) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b, c, h, w, p = _image_shape(g, i)
        d = [4, 5, 8, 16][i % 4]
        dtype = alternating_dtype(i)
        images, weight, bias = randn(g, (b, c, h, w), dtype), randn(g, (d, c, p, p), dtype) / p, randn(g, (d,), dtype)
        cases.append(Case((images, weight, bias, p),
                          label=f"images {(b, c, h, w)}, patch {p}, dim {d}, {dtype_name(dtype)}"))
    return cases


def _embed(x, w, b, p, perm=(0, 2, 4, 1, 3, 5), wflat=None):
    patches = _patchify_perm(x, p, perm)
    wf = w.reshape(w.shape[0], -1) if wflat is None else wflat
    return patches @ wf.T + (b if b is not None else 0)


PATCH_EMBED_MISTAKES = [
    Mistake("the bias is missing: add it to every patch's projection.", lambda x, w, b, p: _embed(x, w, None, p)),
    Mistake("the weight was flattened as (D, P, P, C) but the patches as (C, P, P): both must use the same "
            "(channel, row, column) order, the order of weight.reshape(D, -1).",
            lambda x, w, b, p: _embed(x, w, b, p, wflat=w.permute(0, 2, 3, 1).reshape(w.shape[0], -1))),
    Mistake("the patches are flattened (row, column, channel) while the weight is (channel, row, column).",
            lambda x, w, b, p: _embed(x, w, b, p, perm=(0, 2, 4, 3, 5, 1))),
    Mistake("the patches come out in column-major grid order; read the grid row by row.",
            lambda x, w, b, p: _embed(x, w, b, p, perm=(0, 4, 2, 1, 3, 5))),
    Mistake("each patch's rows and columns are swapped relative to the kernel's (weight[d, c, row, col]).",
            lambda x, w, b, p: _embed(x, w, b, p, perm=(0, 2, 4, 1, 5, 3))),
    Mistake("a reshape without a permute does not cut square patches.",
            lambda x, w, b, p: x.reshape(x.shape[0], -1, w[0].numel()) @ w.reshape(w.shape[0], -1).T + b),
    Mistake("the weight was reshaped to (C*P*P, D) instead of being flattened to (D, C*P*P) and transposed: "
            "a reshape is not a transpose.",
            lambda x, w, b, p: _embed(x, w, b, p, wflat=w.reshape(-1, w.shape[0]).T)),
    Mistake("the result is (B, D, N), the layout of the conv's output; the tokens are (B, N, D).",
            lambda x, w, b, p: _embed(x, w, b, p).transpose(1, 2)),
]


# --------------------------------------------------------------------------
# Exercise 3: CLS token and positions
# --------------------------------------------------------------------------
def _prefixed_cases(seed: int, n: int, n_prefix: int, width_step: int) -> list[Case]:
    """``(patches (B, N, D), one (1, 1, D) token per prefix token, pos_embed (1, n_prefix + N, D))``;
    the width changes every ``width_step`` cases."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b = [1, 2, 3, 5][i % 4]
        n_patches = [1, 4, 6, 9, 16][i % 5]
        d = [2, 4, 8, 12][(i // width_step) % 4]
        dtype = alternating_dtype(i)
        patches = randn(g, (b, n_patches, d), dtype)
        prefix = [randn(g, (1, 1, d), dtype) for _ in range(n_prefix)]
        pos_embed = randn(g, (1, n_prefix + n_patches, d), dtype)
        cases.append(Case((patches, *prefix, pos_embed), label=f"patches {(b, n_patches, d)}, {dtype_name(dtype)}"))
    return cases


def cls_pos_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(patches, cls_token, pos_embed)``."""
    return _prefixed_cases(seed, n, n_prefix=1, width_step=1)


def _cat(cls, patches):
    return torch.cat([cls.expand(patches.shape[0], -1, -1), patches], dim=1)


CLS_POS_MISTAKES = [
    Mistake("the CLS token is appended at the end; it goes first, at index 0.",
            lambda x, c, pe: torch.cat([x, c.expand(x.shape[0], -1, -1)], dim=1) + pe),
    Mistake("the positions are missing.", lambda x, c, pe: _cat(c, x)),
    Mistake("the CLS token gets no position: entry 0 of pos_embed belongs to it.",
            lambda x, c, pe: _cat(c, x) + torch.cat([torch.zeros_like(pe[:, :1]), pe[:, 1:]], dim=1)),
    Mistake("positions are off by one: the patches got pos_embed[:, :N] instead of pos_embed[:, 1:].",
            lambda x, c, pe: _cat(c + pe[:, -1:], x + pe[:, :-1])),
    Mistake("the CLS token replaced the first patch instead of being prepended.",
            lambda x, c, pe: torch.cat([c.expand(x.shape[0], -1, -1), x[:, 1:]], dim=1) + pe[:, :x.shape[1]]),
    Mistake("concatenated along the feature axis instead of the token axis.",
            lambda x, c, pe: torch.cat([c.expand(x.shape[0], x.shape[1], -1), x], dim=2)),
    Mistake("the positions are added twice.", lambda x, c, pe: _cat(c, x) + 2 * pe),
    Mistake("only the first image got the CLS token: expand it over the whole batch.",
            lambda x, c, pe: torch.cat([_cat(c, x)[:1], torch.cat([torch.zeros_like(x[1:, :1]), x[1:]], dim=1)]) + pe),
]


# --------------------------------------------------------------------------
# Exercise 4: the whole forward pass from given blocks
# --------------------------------------------------------------------------
def vit_parts(g: torch.Generator, c: int, p: int, grid: tuple[int, int], dim: int, depth: int, heads: int,
              classes: int, dtype: torch.dtype):
    """Random frozen parts of a small ViT: ``(patch_proj, cls_token, pos_embed, blocks, norm, head)``."""
    torch.manual_seed(randint(g, 0, 2**31 - 1))
    proj = nn.Conv2d(c, dim, kernel_size=p, stride=p)
    # pre-norm encoder blocks made of torch's own modules: the kernel that runs the learner's code has no course_lib
    blocks = nn.ModuleList(nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0,
                                                      activation="gelu", layer_norm_eps=1e-6, batch_first=True,
                                                      norm_first=True) for _ in range(depth))
    norm, head = nn.LayerNorm(dim, eps=1e-6), nn.Linear(dim, classes)
    with torch.no_grad():
        for m in (proj, blocks, norm, head):
            for prm in m.parameters():
                prm.add_(torch.randn(prm.shape, generator=g) * 0.3)
    mods = [frozen(m.to(dtype)) for m in (proj, blocks, norm, head)]
    n = grid[0] * grid[1]
    cls, pos = randn(g, (1, 1, dim), dtype), randn(g, (1, 1 + n, dim), dtype)
    return mods[0], cls, pos, mods[1], mods[2], mods[3]


def vit_forward_cases(seed: int = 0, n: int = 8) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        p = [2, 4, 8][i % 3]
        grid = [(2, 2), (2, 3), (4, 4), (3, 1), (1, 1)][i % 5]
        b, c = [1, 2, 3][i % 3], [3, 1][i % 2]
        dim, heads = [(8, 2), (16, 4), (12, 3)][i % 3]
        depth, classes = [1, 2][i % 2], [3, 5, 10][i % 3]
        dtype = alternating_dtype(i)
        parts = vit_parts(g, c, p, grid, dim, depth, heads, classes, dtype)
        images = randn(g, (b, c, grid[0] * p, grid[1] * p), dtype)
        cases.append(Case((images,) + parts, label=f"images {tuple(images.shape)}, patch {p}, dim {dim}, "
                                                   f"{depth} block(s), {dtype_name(dtype)}"))
    return cases


def _tokens(x, proj, c, pe, blocks, pos=True, flatten="row", pre_norm=None, extra_residual=False):
    f = proj(x)
    if flatten == "row":
        t = f.flatten(2).transpose(1, 2)
    elif flatten == "column":
        t = f.transpose(2, 3).flatten(2).transpose(1, 2)
    else:  # a reshape that mixes features and patches
        t = f.reshape(f.shape[0], -1, f.shape[1])
    t = _cat(c, t)
    t = t + pe if pos else t
    if pre_norm is not None:
        t = pre_norm(t)
    for blk in blocks:
        t = t + blk(t) if extra_residual else blk(t)
    return t


VIT_FORWARD_MISTAKES = [
    Mistake("the final LayerNorm is missing: normalize the tokens before the head (eq. 4).",
            lambda x, pr, c, pe, bl, nm, hd: hd(_tokens(x, pr, c, pe, bl)[:, 0])),
    Mistake("the head reads the last token; the CLS token is token 0.",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, bl))[:, -1])),
    Mistake("the head reads the mean of the tokens; this ViT classifies from the CLS token alone.",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, bl)).mean(1))),
    Mistake("the position embeddings are not added.",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, bl, pos=False))[:, 0])),
    Mistake("the blocks run in reverse order.",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, list(bl)[::-1]))[:, 0])),
    Mistake("only the first block is applied.",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, list(bl)[:1]))[:, 0])),
    Mistake("the head is applied to every token, or the CLS token was not selected: return (B, num_classes).",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, bl)))),
    Mistake("only the last block is applied (each block must read the previous block's output).",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, list(bl)[-1:]))[:, 0])),
    Mistake("the patch grid was flattened column by column; (B, D, gh, gw).flatten(2) reads it row by row.",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, bl, flatten="column"))[:, 0])),
    Mistake("the conv output (B, D, gh, gw) was reshaped straight to (B, N, D), which mixes features and patches: "
            "flatten(2) then transpose(1, 2).",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, bl, flatten="reshape"))[:, 0])),
    Mistake("the LayerNorm is applied before the blocks; it belongs after the last block, before the head.",
            lambda x, pr, c, pe, bl, nm, hd: hd(_tokens(x, pr, c, pe, bl, pre_norm=nm)[:, 0])),
    Mistake("a second residual connection was added around each block; the blocks already contain theirs.",
            lambda x, pr, c, pe, bl, nm, hd: hd(nm(_tokens(x, pr, c, pe, bl, extra_residual=True))[:, 0])),
]


# --------------------------------------------------------------------------
# Exercise 5: position-embedding interpolation
# --------------------------------------------------------------------------
def interpolate_reference(pos_embed: Tensor, old_grid: tuple[int, int], new_grid: tuple[int, int]) -> Tensor:
    """:func:`course_lib.positional.resample_pos_embed` with one prefix (CLS) entry, bicubic."""
    return resample_pos_embed(pos_embed, tuple(new_grid), old_grid=tuple(old_grid), n_prefix=1, mode="bicubic")


def interpolate_cases(seed: int = 0, n: int = 16) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    pairs = [((2, 2), (4, 4)), ((3, 3), (5, 5)), ((2, 3), (4, 6)), ((4, 4), (2, 2)), ((3, 2), (3, 5)),
             ((4, 3), (6, 4)), ((2, 2), (2, 2)), ((1, 3), (2, 5))]
    cases = []
    for i in range(n):
        old, new = pairs[i % len(pairs)]
        d = [3, 4, 8, 6][i % 4]
        pe = torch.randn(1, 1 + old[0] * old[1], d, generator=g)
        cases.append(Case((pe, old, new), label=f"pos_embed {tuple(pe.shape)}, grid {old} -> {new}, float32"))
    return cases


def _interp(pe, old, new, mode="bicubic", align=False, swap=False, cls=True, no_permute=False, cls_last=False):
    prefix, grid = pe[:, :1], pe[:, 1:]
    d = grid.shape[-1]
    if swap == "both":
        old, new, swap = (old[1], old[0]), (new[1], new[0]), False
    if no_permute:
        img = grid.reshape(1, d, old[0], old[1])
    else:
        img = grid.reshape(1, old[0], old[1], d).permute(0, 3, 1, 2)
    size = (new[1], new[0]) if swap else tuple(new)
    kw = dict(align_corners=align) if mode in ("bilinear", "bicubic") else {}
    img = F.interpolate(img.float(), size=size, mode=mode, **kw)
    out = img.reshape(1, d, -1).transpose(1, 2) if no_permute else img.permute(0, 2, 3, 1).reshape(1, -1, d)
    out = out.to(pe.dtype)
    if cls_last:
        return torch.cat([out, prefix], dim=1)
    return torch.cat([prefix, out], dim=1) if cls else out


INTERPOLATE_MISTAKES = [
    Mistake("bilinear interpolation; the course (like ViT and DINOv2) resamples bicubically.",
            lambda pe, o, n: _interp(pe, o, n, mode="bilinear")),
    Mistake("align_corners=True; the course uses align_corners=False (pixel centres, as timm).",
            lambda pe, o, n: _interp(pe, o, n, align=True)),
    Mistake("nearest-neighbour resizing; use mode='bicubic'.", lambda pe, o, n: _interp(pe, o, n, mode="nearest")),
    Mistake("height and width are swapped: the grid is (rows, columns) = (gh, gw).",
            lambda pe, o, n: _interp(pe, o, n, swap=True)),
    Mistake("the CLS entry is missing from the result: keep pos_embed[:, :1] and put it back in front.",
            lambda pe, o, n: _interp(pe, o, n, cls=False)),
    Mistake("the grid was reshaped straight to (1, D, gh, gw) without a permute, which mixes features and positions.",
            lambda pe, o, n: _interp(pe, o, n, no_permute=True)),
    Mistake("height and width are swapped: old_grid and new_grid are (rows, columns) = (gh, gw), and the grid "
            "reshapes to (1, gh, gw, D).", lambda pe, o, n: _interp(pe, o, n, swap="both")),
    Mistake("the CLS entry is put back at the end; it stays at index 0.",
            lambda pe, o, n: _interp(pe, o, n, cls_last=True)),
    Mistake("the positions were interpolated as a 1-D sequence; they form a 2-D grid: reshape to "
            "(1, D, gh, gw) and resize both sides.",
            lambda pe, o, n: torch.cat([pe[:, :1], F.interpolate(pe[:, 1:].transpose(1, 2).float(), size=n[0] * n[1],
                                                                 mode="linear", align_corners=False)
                                        .transpose(1, 2).to(pe.dtype)], dim=1)),
]


# --------------------------------------------------------------------------
# Exercise 6: DeiT's CLS and distillation tokens
# --------------------------------------------------------------------------
def deit_tokens_cases(seed: int = 0, n: int = 20) -> list[Case]:
    """``(patches, cls_token, dist_token, pos_embed)``."""
    return _prefixed_cases(seed, n, n_prefix=2, width_step=2)


def _prefix(cls, dist, patches, order=("cls", "dist")):
    tokens = {"cls": cls, "dist": dist}
    return torch.cat([tokens[k].expand(patches.shape[0], -1, -1) for k in order] + [patches], dim=1)


DEIT_TOKENS_MISTAKES = [
    Mistake("the two tokens are swapped: CLS is token 0 and the distillation token is token 1.",
            lambda x, c, dt, pe: _prefix(c, dt, x, ("dist", "cls")) + pe),
    Mistake("the distillation token is appended after the patches; it goes right after CLS, at index 1.",
            lambda x, c, dt, pe: torch.cat([c.expand(x.shape[0], -1, -1), x, dt.expand(x.shape[0], -1, -1)],
                                           dim=1) + pe),
    Mistake("the positions are missing.", lambda x, c, dt, pe: _prefix(c, dt, x)),
    Mistake("the distillation token gets no position: entry 1 of pos_embed belongs to it.",
            lambda x, c, dt, pe: _prefix(c, dt, x)
            + torch.cat([pe[:, :1], torch.zeros_like(pe[:, 1:2]), pe[:, 2:]], 1)),
    Mistake("the two tokens get no position: entries 0 and 1 of pos_embed belong to them.",
            lambda x, c, dt, pe: _prefix(c, dt, x) + torch.cat([torch.zeros_like(pe[:, :2]), pe[:, 2:]], 1)),
    Mistake("the positions are shifted: the patches got pos_embed[:, 1:-1] instead of pos_embed[:, 2:].",
            lambda x, c, dt, pe: _prefix(c, dt, x) + torch.cat([pe[:, :1], pe[:, :-1]], dim=1)),
    Mistake("the CLS token was used twice: token 1 must be the distillation token.",
            lambda x, c, dt, pe: _prefix(c, c, x) + pe),
]


# --------------------------------------------------------------------------
# Exercise 7: DeiT's hard-label distillation loss
# --------------------------------------------------------------------------
#: routines that compute a cross-entropy (or a KL divergence) for the learner; torch.log_softmax is allowed.
DISTILLATION_FORBIDDEN: tuple = (F.cross_entropy, F.nll_loss, F.kl_div)


def _labels_apart(teacher: Tensor, labels: Tensor) -> Tensor:
    """``labels``, where they would be exactly the teacher's labels as a mistake reads them (its softmax over
    the batch axis, then the argmax over the classes: always class 0 for a batch of one; or ties broken to the
    last largest entry) while these differ from the right ones: there, using the true labels for both heads and
    that mistake give the same loss, and neither could be named. One label is then set to the teacher's right
    one, in a row where the mistake's differs, until no misreading matches (each fix sets one more label to
    the right one, and labels all right match none)."""
    t = teacher.double()
    right = t.argmax(dim=-1)
    misreads = [m for m in (torch.softmax(t, dim=0).argmax(dim=-1), _last_argmax(t)) if not torch.equal(m, right)]
    while (misread := next((m for m in misreads if torch.equal(labels, m)), None)) is not None:
        row = int((misread != right).nonzero()[0])
        labels = labels.clone()
        labels[row] = right[row]
    return labels


def _ties_apart_from_batch_softmax(teacher: Tensor) -> Tensor:
    """``teacher`` (ties for the largest logit in every row), with two of its columns swapped in every row but
    the first where the labels a softmax over the batch axis gives are exactly the last of each row's largest
    entries (and these are not the first): there, that softmax and ties broken to the last give the same loss,
    and neither mistake could be named. Under that softmax, row 0 holds ``1 / (1 + S_j)`` at each of its ties
    ``j``, ``S_j`` the sum of the other rows' ``exp`` in column ``j``: swapping the columns of its last tie and
    of its tie with the largest ``S_j`` leaves the last tie the smallest value of its ties, so that row's argmax
    (the first of equal values) is another column."""
    t = teacher.double()
    batch_labels, last = torch.softmax(t, dim=0).argmax(dim=-1), _last_argmax(t)
    if teacher.shape[0] < 2 or not torch.equal(batch_labels, last) or torch.equal(last, t.argmax(dim=-1)):
        return teacher
    ties = (t[0] == t[0].max()).nonzero().flatten()
    others = t[1:].exp().sum(0)
    a, b = int(last[0]), int(ties[others[ties].argmax()])
    teacher = teacher.clone()
    teacher[1:, [a, b]] = teacher[1:, [b, a]]
    return teacher


def hard_distillation_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(cls_logits, dist_logits, teacher_logits, labels)``: batch 1 to 8, 2 to 1000 classes, logits spread
    from 1 to 10; every third case has exact ties for the teacher's largest logit (at 0, so that a rounding of
    the inputs never breaks them), and about half of the labels disagree with the teacher."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        b = [1, 3, 5, 2, 8][i % 5]  # batch 1 first, and not 2 next: a sum over a batch of 2 would look like weights 1
        k = [2, 3, 10, 1000, 7, 100][i % 6]
        dtype = alternating_dtype(i)
        spread = [1.0, 4.0, 10.0, 2.0][i % 4]
        cls, dist, teacher = (randn(g, (b, k), dtype, spread) for _ in range(3))
        labels = torch.randint(0, k, (b,), generator=g)
        ties = ""
        if i % 3 == 1:  # the largest teacher logit appears twice or more in every row, at 0
            teacher = -teacher.abs() - 0.5
            for row in range(b):
                where = torch.randperm(k, generator=g)[:[2, 2, 3][row % 3]]
                teacher[row, where] = 0.0
            teacher = _ties_apart_from_batch_softmax(teacher)
            ties = ", ties in the teacher's logits"
        if i == 0:  # the CLS logits shifted (no softmax changes) so that each is 0.1 or more: in the hard repeat
            cls = cls - cls.min(-1, keepdim=True).values.clamp(max=0.1) + 0.1  # (x 1e4) exp overflows in every
            # entry of the row, so a softmax that skips the maximum gives NaN (inf / inf), told from
            # log(softmax(x)), which gives inf where a target's probability underflows
        labels = _labels_apart(teacher, labels)
        cases.append(Case((cls, dist, teacher, labels),
                          label=f"logits {(b, k)}, spread {spread:g}, {dtype_name(dtype)}{ties}"))
    return cases  # labels in int64, as the exercise says and torch's own losses take them


def _ce(logits, targets, reduce="mean"):
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, targets[:, None]).squeeze(-1)
    return nll.mean() if reduce == "mean" else nll.sum()


def _soft_ce(logits, probs):
    return -(probs * torch.log_softmax(logits, dim=-1)).sum(-1).mean()


def _hard(c, d, t, y, w=0.5, reduce="mean", teacher=None, heads=("cls", "dist")):
    y_t = t.argmax(dim=-1) if teacher is None else teacher
    logits = {"cls": c, "dist": d}
    return w * _ce(logits[heads[0]], y, reduce) + w * _ce(logits[heads[1]], y_t, reduce)


def _last_argmax(t):
    k = t.shape[-1]
    return k - 1 - t.flip(-1).argmax(dim=-1)


def _naive_ce(logits, targets, how):
    if how == "log_softmax":
        p = torch.softmax(logits, dim=-1)
    else:  # exp without subtracting the maximum
        e = torch.exp(logits)
        p = e / e.sum(dim=-1, keepdim=True)
    return -torch.log(p).gather(-1, targets[:, None]).squeeze(-1).mean()


HARD_DISTILLATION_MISTAKES = [
    Mistake("the distillation head learns the teacher's soft targets (its softmax); hard-label distillation uses "
            "the teacher's decision, y_t = argmax of its logits, as a label.",
            lambda c, d, t, y: 0.5 * _ce(c, y) + 0.5 * _soft_ce(d, torch.softmax(t, dim=-1))),
    Mistake("the two terms are weighted 1 and 1; DeiT's hard-label loss weights each by 1/2.",
            lambda c, d, t, y: _hard(c, d, t, y, w=1.0)),
    Mistake("the heads are swapped: the CLS head learns the true label, the distillation head the teacher's.",
            lambda c, d, t, y: _hard(c, d, t, y, heads=("dist", "cls"))),
    Mistake("the true labels were used for both heads; the distillation head learns the teacher's label.",
            lambda c, d, t, y: _hard(c, d, t, y, teacher=y)),
    Mistake("the teacher's softmax was taken over the batch axis (dim=0) before the argmax; the teacher's "
            "decision for an image is the argmax over the classes of that image (dim=-1).",
            lambda c, d, t, y: _hard(c, d, t, y, teacher=torch.softmax(t, dim=0).argmax(dim=-1))),
    Mistake("the cross-entropies are summed over the batch; average them over the images.",
            lambda c, d, t, y: _hard(c, d, t, y, reduce="sum")),
    Mistake("ties in the teacher's logits go to the last largest entry; take the first, as torch.argmax does.",
            lambda c, d, t, y: _hard(c, d, t, y, teacher=_last_argmax(t))),
    Mistake("the log-probabilities are log(softmax(x)): for large logits the softmax underflows to 0 and the log "
            "gives inf. Use torch.log_softmax (or subtract each row's maximum and use logsumexp).",
            lambda c, d, t, y: 0.5 * _naive_ce(c, y, "log_softmax") + 0.5 * _naive_ce(d, t.argmax(-1), "log_softmax")),
    Mistake("the softmax exponentiates the raw logits: exp overflows for large logits (inf / inf is NaN). "
            "Subtract each row's maximum first, or use torch.log_softmax.",
            lambda c, d, t, y: 0.5 * _naive_ce(c, y, "exp") + 0.5 * _naive_ce(d, t.argmax(-1), "exp")),
    Mistake("the teacher's logits were used as the distillation head's logits: the second term is "
            "CE(teacher_logits, y_t); it trains the student's distillation head, CE(dist_logits, y_t).",
            lambda c, d, t, y: _hard(c, t, t, y)),
]


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 09-vision-transformer run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("09-vision-transformer", "vision_transformer.ipynb", (
    prediction("predicted_patch_shape", 1, [5, 15, 4],
               form='the shape as three ints, like (1, 2, 3)', tolerance=0, wrong={
        'the last two axes are swapped: each row is one patch, of C * P * P numbers': [5, 4, 15],
        'the grid of patches was kept as two axes; the patches are one sequence': [5, 3, 5, 4],
        'the patches were counted over the batch; each image is its own sequence': [1, 75, 4],
    }),
    Exercise("patchify", 2, (
        Comparison(_reference.patchify, patchify_cases, seed=91, mistakes=PATCHIFY_MISTAKES, forbidden=UNFOLD,
                   check_grad=True),
    )),
    Exercise("patch_embed", 2, (
        Comparison(patch_embed_reference, patch_embed_cases, seed=92, mistakes=PATCH_EMBED_MISTAKES,
                   forbidden=CONVOLUTION, check_grad=True),
    )),
    Exercise("prepend_cls_add_pos", 2, (
        Comparison(_reference.prepend_cls_add_pos, cls_pos_cases, seed=93, mistakes=CLS_POS_MISTAKES,
                   check_grad=True),
    )),
    Exercise("vit_forward", 3, (
        Comparison(_reference.vit_forward, vit_forward_cases, seed=94, mistakes=VIT_FORWARD_MISTAKES,
                   check_grad=True),
    )),
    Exercise("interpolate_pos_embed", 3, (
        Comparison(interpolate_reference, interpolate_cases, seed=95, mistakes=INTERPOLATE_MISTAKES,
                   check_grad=True),
    )),
    Exercise("prepend_cls_and_distillation_tokens", 2, (
        Comparison(_deit.prepend_cls_and_distillation_tokens, deit_tokens_cases, seed=96,
                   mistakes=DEIT_TOKENS_MISTAKES, check_grad=True),
    )),
    Exercise("hard_distillation_loss", 3, (
        Comparison(_deit.hard_distillation_loss, hard_distillation_cases, seed=97,
                   mistakes=HARD_DISTILLATION_MISTAKES, forbidden=DISTILLATION_FORBIDDEN, check_grad=True,
                   hard=(LargeInputs(1e4, (0, 1, 2)),)),
    )),
))
