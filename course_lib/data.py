"""Small synthetic data sets, generated in code, for the training chapters.

Nothing here is downloaded: every set is a few vectorised torch operations, so
a notebook can make a fresh one in milliseconds and a test can make one per
case. Every generator takes an optional :class:`torch.Generator`; the same
generator state gives the same data, bit for bit.

Three kinds of data:

* **Sequence tasks** (:func:`sequence_task`): copy, reverse or sort a random
  string of tokens, the toy problems on which an encoder-decoder Transformer
  is first seen to work.
* **Shape images** (:func:`shapes_dataset`): squares, circles, triangles and
  crosses on noisy backgrounds, a four-class image problem small enough for a
  Vision Transformer to learn on a CPU.
* **Dates to translate** (:func:`date_pairs`): one calendar date written in
  one of many human formats ("Tuesday, 24 November 2026", "24.11.2026",
  "the 24th of November 2026") and its ISO form ("2026-11-24"), a small
  translation problem with reordering, for the encoder-decoder.
* **Character text** (:func:`char_corpus`, :func:`text_batches`): any string
  turned into next-token prediction batches for a decoder language model, and
  an English corpus that is on every machine (:func:`python_docs_text`: the
  465,126 characters of Python's own help topics, ``pydoc_data.topics``,
  shipped with the course as a fixed copy so that every Python version reads
  the same text).
"""

from __future__ import annotations

import datetime as _dt
import lzma
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch
from torch import Tensor

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "N_SPECIAL",
    "TASKS",
    "sequence_task",
    "SHAPES",
    "shapes_dataset",
    "CharCorpus",
    "char_corpus",
    "text_batches",
    "shapes_with_masks",
    "python_docs_text",
    "text_windows",
    "SCENE_CLASSES",
    "scenes",
    "DATE_FORMATS",
    "DATE_CHARS",
    "format_date",
    "date_pairs",
    "DATE_HOLDOUT",
    "encode_dates",
    "decode_dates",
]

# --------------------------------------------------------------------------
# Sequence tasks
# --------------------------------------------------------------------------
PAD, BOS, EOS = 0, 1, 2
"""Special tokens: padding, beginning and end of sequence."""
N_SPECIAL = 3
"""Content tokens are ``N_SPECIAL, ..., vocab - 1``; the ids below are special."""
TASKS = ("copy", "reverse", "sort")


def sequence_task(
    kind: str,
    n: int,
    length: int,
    vocab: int,
    generator: torch.Generator | None = None,
    *,
    min_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """``n`` examples of a sequence-to-sequence task on random tokens.

    Each example draws a length ``L`` uniformly from ``[min_length, length]``
    (always ``length`` when ``min_length`` is ``None``) and ``L`` content tokens
    uniformly from ``[N_SPECIAL, vocab)``. The output is the input itself
    (``"copy"``), the input backwards (``"reverse"``) or the input in
    ascending order (``"sort"``).

    Token conventions (:data:`PAD` = 0, :data:`BOS` = 1, :data:`EOS` = 2)::

        source:  x_1 ... x_L  EOS  PAD ... PAD              (n, length + 1)
        target:  BOS  y_1 ... y_L  EOS  PAD ... PAD          (n, length + 2)

    The source ends with ``EOS``, as an encoder's input; the target starts
    with ``BOS`` so that it can be split for teacher forcing: the decoder reads
    ``target[:, :-1]`` and learns to predict ``target[:, 1:]``, ignoring
    positions where the label is ``PAD``. The real length of example ``i`` is
    ``(source[i] != PAD).sum() - 1``.

    Args:
        kind: one of :data:`TASKS`.
        n: number of examples.
        length: the longest content length.
        vocab: vocabulary size, special tokens included; at least ``N_SPECIAL + 1``.
        generator: source of randomness (the global one when ``None``).
        min_length: the shortest content length, in ``[1, length]``.

    Returns:
        ``(source, target)``, LongTensors ``(n, length + 1)`` and ``(n, length + 2)``.
    """
    if kind not in TASKS:
        raise ValueError(f"kind must be one of {TASKS}, got {kind!r}")
    if n < 0 or length < 1:
        raise ValueError(f"need n >= 0 and length >= 1, got n={n}, length={length}")
    if vocab <= N_SPECIAL:
        raise ValueError(f"vocab={vocab} leaves no content tokens: it must exceed the {N_SPECIAL} special ones")
    min_length = length if min_length is None else min_length
    if not 1 <= min_length <= length:
        raise ValueError(f"min_length must be in [1, length={length}], got {min_length}")

    tokens = torch.randint(N_SPECIAL, vocab, (n, length), generator=generator)
    lengths = torch.randint(min_length, length + 1, (n,), generator=generator)
    pos = torch.arange(length)
    real = pos < lengths[:, None]  # (n, length): True on content, False on padding
    tokens = tokens.masked_fill(~real, PAD)

    if kind == "copy":
        out = tokens
    elif kind == "reverse":
        # Position i of the output reads position L - 1 - i of the input.
        out = tokens.gather(1, (lengths[:, None] - 1 - pos).clamp_min(0)).masked_fill(~real, PAD)
    else:
        # Padding becomes `vocab`, larger than any token, so it sorts to the end.
        out = tokens.masked_fill(~real, vocab).sort(dim=1).values.masked_fill(~real, PAD)

    rows = torch.arange(n)
    source = torch.cat([tokens, torch.full((n, 1), PAD)], dim=1)
    source[rows, lengths] = EOS
    target = torch.cat([torch.full((n, 1), BOS), out, torch.full((n, 1), PAD)], dim=1)
    target[rows, lengths + 1] = EOS
    return source, target


# --------------------------------------------------------------------------
# Dates: a translation task with reordering
# --------------------------------------------------------------------------
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: the source formats of :func:`date_pairs`, as :func:`format_date` writes 24 November 2026
DATE_FORMATS = ("day_month_year", "month_day_year", "weekday_day_month_year", "short_weekday_day_month_year",
                "day_short_month_year", "short_month_day_year", "dotted", "slashed_iso", "ordinal")
_FIRST_DAY, _LAST_DAY = _dt.date(1900, 1, 1).toordinal(), _dt.date(2099, 12, 31).toordinal()


def _ordinal_suffix(day: int) -> str:
    if day in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def format_date(date: _dt.date, fmt: str) -> str:
    """``date`` written in source format ``fmt`` (one of :data:`DATE_FORMATS`)."""
    d, m, y = date.day, _MONTHS[date.month - 1], date.year
    w = _WEEKDAYS[date.weekday()]
    forms = {
        "day_month_year": f"{d} {m} {y}",                      # 24 November 2026
        "month_day_year": f"{m} {d}, {y}",                     # November 24, 2026
        "weekday_day_month_year": f"{w}, {d} {m} {y}",         # Tuesday, 24 November 2026
        "short_weekday_day_month_year": f"{w[:3]} {d} {m[:3]} {y}",  # Tue 24 Nov 2026
        "day_short_month_year": f"{d} {m[:3]} {y}",            # 24 Nov 2026
        "short_month_day_year": f"{m[:3]} {d} {y}",            # Nov 24 2026
        "dotted": f"{d:02d}.{date.month:02d}.{y}",            # 24.11.2026
        "slashed_iso": f"{y}/{date.month:02d}/{d:02d}",        # 2026/11/24
        "ordinal": f"the {d}{_ordinal_suffix(d)} of {m} {y}",  # the 24th of November 2026
    }
    if fmt not in forms:
        raise ValueError(f"fmt must be one of {DATE_FORMATS}, got {fmt!r}")
    return forms[fmt]


#: the characters of every source and target: token ``N_SPECIAL + i`` is ``DATE_CHARS[i]``
DATE_CHARS = "".join(sorted(set("".join(_MONTHS + _WEEKDAYS) + "0123456789 ,./-" + "the of st nd rd th")))


def encode_dates(texts: list[str], bos: bool = False) -> Tensor:
    """Strings -> ``(n, longest + 1 [+ 1])`` long: ``[BOS] c_1 ... c_L EOS PAD ...`` (the conventions of
    :func:`sequence_task`), with character ``c`` as token ``N_SPECIAL + DATE_CHARS.index(c)``."""
    index = {c: N_SPECIAL + i for i, c in enumerate(DATE_CHARS)}
    unknown = sorted(set("".join(texts)) - index.keys())
    if unknown:
        raise ValueError(f"characters {unknown} are not in DATE_CHARS")
    width = max((len(t) for t in texts), default=0) + 1 + int(bos)
    out = torch.full((len(texts), width), PAD, dtype=torch.long)
    for i, t in enumerate(texts):
        ids = ([BOS] if bos else []) + [index[c] for c in t] + [EOS]
        out[i, :len(ids)] = torch.tensor(ids)
    return out


def decode_dates(ids: Tensor) -> list[str]:
    """``(n, L)`` token ids -> strings: the characters up to the first ``EOS`` (``BOS`` and ``PAD`` skipped)."""
    texts = []
    for row in ids.tolist():
        chars = []
        for t in row:
            if t == EOS:
                break
            if t >= N_SPECIAL:
                chars.append(DATE_CHARS[t - N_SPECIAL] if t - N_SPECIAL < len(DATE_CHARS) else "?")
        texts.append("".join(chars))
    return texts


#: one day in ``DATE_HOLDOUT`` (every 11th from 1900-01-01) is kept for testing: split "test" draws only those,
#: split "train" never does
DATE_HOLDOUT = 11
DATE_SPLITS = ("train", "test", "all")


def date_pairs(n: int, generator: torch.Generator | None = None, formats: tuple[str, ...] = DATE_FORMATS,
               split: str = "all") -> tuple[Tensor, Tensor, list[str], list[str]]:
    """``n`` dates, uniform over 1900-01-01 to 2099-12-31 (or over the ``split``'s days), each written in a
    format drawn uniformly from ``formats``, with its ISO form as the translation.

    ``split="test"`` draws from every :data:`DATE_HOLDOUT`-th day only and ``"train"`` from all the others,
    so a model trained on the one is tested on dates it never saw in any format.

    Returns:
        ``(source, target, source_texts, target_texts)``: ``source`` ``(n, longest + 1)`` ends in ``EOS``;
        ``target`` ``(n, 12)`` is ``BOS yyyy-mm-dd EOS`` (see :func:`encode_dates`).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    bad = [f for f in formats if f not in DATE_FORMATS]
    if bad or not formats:
        raise ValueError(f"formats must be a non-empty selection of {DATE_FORMATS}, got {formats!r}")
    if split not in DATE_SPLITS:
        raise ValueError(f"split must be one of {DATE_SPLITS}, got {split!r}")
    n_days = _LAST_DAY - _FIRST_DAY + 1
    if split == "all":
        offsets = torch.randint(0, n_days, (n,), generator=generator)
    elif split == "test":
        offsets = DATE_HOLDOUT * torch.randint(0, (n_days - 1) // DATE_HOLDOUT + 1, (n,), generator=generator)
    else:  # the k-th training day skips every holdout day before it
        n_train = n_days - ((n_days - 1) // DATE_HOLDOUT + 1)
        k = torch.randint(0, n_train, (n,), generator=generator)
        offsets = k // (DATE_HOLDOUT - 1) * DATE_HOLDOUT + k % (DATE_HOLDOUT - 1) + 1
    days = (_FIRST_DAY + offsets).tolist()
    which = torch.randint(0, len(formats), (n,), generator=generator).tolist()
    dates = [_dt.date.fromordinal(d) for d in days]
    sources = [format_date(d, formats[k]) for d, k in zip(dates, which)]
    targets = [d.isoformat() for d in dates]
    return encode_dates(sources), encode_dates(targets, bos=True), sources, targets


# --------------------------------------------------------------------------
# Shape images
# --------------------------------------------------------------------------
SHAPES = ("square", "circle", "triangle", "cross")
"""Class names of :func:`shapes_dataset`; label ``k`` is ``SHAPES[k]``."""


def shapes_with_masks(
    n: int, size: int = 32, generator: torch.Generator | None = None, *, noise: float = 0.05
) -> tuple[Tensor, Tensor, Tensor]:
    """``n`` images of one coloured shape each, on a noisy coloured background, with the shapes' masks.

    Each image draws a class from :data:`SHAPES`, a half-width ``r`` between
    ``size / 8`` and ``size / 3`` pixels, a centre that keeps the shape inside
    the frame, a background colour in ``[0, 0.4]^3`` and a shape colour in
    ``[0.6, 1]^3`` (so the shape always stands out, but colour says nothing
    about the class), then adds Gaussian pixel noise of standard deviation
    ``noise``. In coordinates relative to the centre, ``(u, v) = (x - c_x,
    y - c_y) / r`` with ``y`` pointing down, the shapes are::

        square    max(|u|, |v|) <= 1
        circle    u^2 + v^2 <= 1
        triangle  v <= 1  and  2|u| <= v + 1        (apex up)
        cross     min(|u|, |v|) <= 0.3  and  max(|u|, |v|) <= 1

    Pixels are clipped to ``[0, 1]`` and then normalised to ``[-1, 1]`` by
    ``2 x - 1``, a fixed map, so that any two sets share it.

    Args:
        n: number of images.
        size: height and width in pixels, at least 8.
        generator: source of randomness (the global one when ``None``).
        noise: standard deviation of the pixel noise, before normalisation.

    Returns:
        ``(images, labels, masks)``: float ``(n, 3, size, size)`` in ``[-1, 1]``,
        long ``(n,)`` in ``[0, len(SHAPES))``, and bool ``(n, size, size)``,
        True on the shape's pixels (for dense prediction, chapter 09).
    """
    if n < 0 or size < 8:
        raise ValueError(f"need n >= 0 and size >= 8, got n={n}, size={size}")
    if noise < 0:
        raise ValueError(f"noise is a standard deviation and must be >= 0, got {noise}")

    def uniform(*shape: int, low: float = 0.0, high: float = 1.0) -> Tensor:
        return low + (high - low) * torch.rand(*shape, generator=generator)

    labels = torch.randint(len(SHAPES), (n,), generator=generator)
    r = uniform(n, 1, 1, low=size / 8, high=size / 3)
    cx = r + uniform(n, 1, 1) * (size - 1 - 2 * r)
    cy = r + uniform(n, 1, 1) * (size - 1 - 2 * r)
    ys, xs = torch.meshgrid(torch.arange(size, dtype=torch.float32), torch.arange(size, dtype=torch.float32),
                            indexing="ij")
    u, v = (xs - cx) / r, (ys - cy) / r  # (n, size, size)
    au, av = u.abs(), v.abs()
    inside = torch.stack([
        torch.maximum(au, av) <= 1,
        u**2 + v**2 <= 1,
        (v <= 1) & (2 * au <= v + 1),
        (torch.minimum(au, av) <= 0.3) & (torch.maximum(au, av) <= 1),
    ])  # (classes, n, size, size)
    masks = inside[labels, torch.arange(n)]  # (n, size, size)

    background = uniform(n, 3, 1, 1, low=0.0, high=0.4)
    foreground = uniform(n, 3, 1, 1, low=0.6, high=1.0)
    images = torch.where(masks[:, None], foreground, background)
    images = images + noise * torch.randn(n, 3, size, size, generator=generator)
    return images.clamp(0, 1) * 2 - 1, labels, masks


def shapes_dataset(
    n: int, size: int = 32, generator: torch.Generator | None = None, *, noise: float = 0.05
) -> tuple[Tensor, Tensor]:
    """``(images, labels)`` of :func:`shapes_with_masks` (the same draws, so the same images)."""
    images, labels, _ = shapes_with_masks(n, size, generator, noise=noise)
    return images, labels




# --------------------------------------------------------------------------
# Scenes: several textured objects on textured backgrounds
# --------------------------------------------------------------------------
SCENE_CLASSES = ("square", "circle", "triangle", "cross", "ring", "diamond")
"""Class names of :func:`scenes`; label ``k`` is ``SCENE_CLASSES[k]``."""


def _shape_masks(u: Tensor, v: Tensor) -> Tensor:
    """``(len(SCENE_CLASSES), ...)`` bool: each class's shape at relative coordinates ``(u, v)``
    (see :func:`scenes`)."""
    au, av = u.abs(), v.abs()
    d2 = u**2 + v**2
    return torch.stack([
        torch.maximum(au, av) <= 1,
        d2 <= 1,
        (v <= 1) & (2 * au <= v + 1),
        (torch.minimum(au, av) <= 0.3) & (torch.maximum(au, av) <= 1),
        (d2 <= 1) & (d2 >= 0.45),
        au + av <= 1,
    ])


def _texture_draw(n: int, uniform) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The random part of :func:`_texture` for ``n`` images: angle, period, phase, and stripes-or-checkerboard."""
    angle = uniform(n, 1, 1, high=math.pi)
    period = uniform(n, 1, 1, low=3.0, high=8.0)
    phase = uniform(n, 1, 1, high=2 * math.pi)
    return angle, period, phase, uniform(n, 1, 1) < 0.5


def _texture(drawn: tuple[Tensor, Tensor, Tensor, Tensor], ys: Tensor, xs: Tensor) -> Tensor:
    """``(n, size, size)`` in ``[-1, 1]``: per image, stripes at a random angle and period, or a checkerboard
    (``drawn``: :func:`_texture_draw`'s values for those ``n`` images)."""
    angle, period, phase, striped = drawn
    stripes = torch.sin(2 * math.pi * (xs * torch.cos(angle) + ys * torch.sin(angle)) / period + phase)
    checker = torch.sin(2 * math.pi * xs / period + phase) * torch.sin(2 * math.pi * ys / period + phase)
    return torch.where(striped, stripes, checker)


#: rows of :func:`scenes` drawn at once: the pixel work of a few hundred images fits in a core's cache, so the
#: time grows linearly with ``n`` (whole-batch tensors made 16,000 scenes take 15 times as long as 2,000)
SCENE_CHUNK = 256


def scenes(
    n: int, size: int = 32, generator: torch.Generator | None = None, *, max_distractors: int = 3, noise: float = 0.04
) -> tuple[Tensor, Tensor, Tensor]:
    """``n`` images of a large object among smaller ones, on textured backgrounds, with the large object's mask.

    The label is the class (:data:`SCENE_CLASSES`) of the **target**, the one
    large object: half-width between ``size / 5`` and ``size / 3`` pixels. Up to
    ``max_distractors`` smaller objects (half-width ``size / 14`` to ``size / 7``,
    of any class, the target's included) are placed anywhere and drawn in a
    random order with the target, so they may hide part of it (occlusion).
    Every object has a random colour and a random texture (plain, or stripes or
    a checkerboard at a random angle and period); the background is a random
    two-colour gradient with a texture of its own. Colour, texture and position
    carry no information about the label: only the target's shape does. Pixel
    noise of standard deviation ``noise`` is added, pixels clipped to ``[0, 1]``
    and mapped to ``[-1, 1]`` by ``2 x - 1``. The shapes, in coordinates
    relative to an object's centre and half-width (``y`` pointing down)::

        square    max(|u|, |v|) <= 1          ring     0.45 <= u^2 + v^2 <= 1
        circle    u^2 + v^2 <= 1              diamond  |u| + |v| <= 1
        triangle  v <= 1 and 2|u| <= v + 1    cross    min(|u|, |v|) <= 0.3 and max(|u|, |v|) <= 1

    Returns:
        ``(images, labels, masks)``: float ``(n, 3, size, size)`` in ``[-1, 1]``,
        long ``(n,)``, and bool ``(n, size, size)``: the target's visible pixels.
    """
    if n < 0 or size < 16:
        raise ValueError(f"need n >= 0 and size >= 16, got n={n}, size={size}")
    if max_distractors < 0 or noise < 0:
        raise ValueError(f"max_distractors and noise must be >= 0, got {max_distractors} and {noise}")

    def uniform(*shape: int, low: float = 0.0, high: float = 1.0) -> Tensor:
        return low + (high - low) * torch.rand(*shape, generator=generator)

    # Every random number is drawn first, in one fixed order, for all n images; the pixels are then drawn a
    # chunk of rows at a time from those numbers (the same images, bit for bit, as drawing all rows at once).
    k = len(SCENE_CLASSES)
    c0, c1 = uniform(n, 3, 1, 1), uniform(n, 3, 1, 1)  # background: a gradient between two colours
    angle = uniform(n, 1, 1, high=2 * math.pi)           # ... along a random direction
    background_texture = _texture_draw(n, uniform)
    labels = torch.randint(k, (n,), generator=generator)
    n_objects = 1 + max_distractors
    present = torch.arange(n_objects)[None, :] <= torch.randint(max_distractors + 1, (n, 1), generator=generator)
    classes = torch.cat([labels[:, None], torch.randint(k, (n, max_distractors), generator=generator)], dim=1)
    order = torch.rand(n, n_objects, generator=generator).argsort(dim=1)  # drawing order, per image
    rows = torch.arange(n)
    objects = []  # per drawing slot: (is the target, its class, present, half-width, position, colour, texture)
    for slot in range(n_objects):
        obj = order[:, slot]  # (n,) which object is drawn at this slot
        is_target = obj == 0
        r = torch.where(is_target, uniform(n, low=size / 5, high=size / 3), uniform(n, low=size / 14, high=size / 7))
        r = r[:, None, None]
        at_x, at_y = uniform(n, 1, 1), uniform(n, 1, 1)
        colour = uniform(n, 3, 1, 1)
        textured = uniform(n, 1, 1, 1) < 0.5
        objects.append((is_target, classes[rows, obj], present[rows, obj], r, at_x, at_y, colour, textured,
                        _texture_draw(n, uniform)))
    grain = torch.randn(n, 3, size, size, generator=generator)

    ys, xs = torch.meshgrid(torch.arange(size, dtype=torch.float32), torch.arange(size, dtype=torch.float32),
                            indexing="ij")
    out = torch.empty(n, 3, size, size)
    target_mask = torch.zeros(n, size, size, dtype=torch.bool)
    for a in range(0, n, SCENE_CHUNK):
        b = min(n, a + SCENE_CHUNK)
        part = [t[a:b] for t in background_texture]
        ramp = ((xs * torch.cos(angle[a:b]) + ys * torch.sin(angle[a:b])) / size + 1) / 2  # (m, size, size)
        images = c0[a:b] + (c1[a:b] - c0[a:b]) * ramp[:, None]
        images = images * (1 + 0.15 * _texture(part, ys, xs)[:, None])
        mask = target_mask[a:b]
        for is_target, cls, shown, r, at_x, at_y, colour, textured, texture in objects:
            r = r[a:b]
            cx = r + at_x[a:b] * (size - 1 - 2 * r)
            cy = r + at_y[a:b] * (size - 1 - 2 * r)
            shape = _shape_masks((xs - cx) / r, (ys - cy) / r)[cls[a:b], torch.arange(b - a)]  # (m, size, size)
            shape &= shown[a:b][:, None, None]
            fill = colour[a:b] * (1 + torch.where(textured[a:b], 0.35 * _texture([t[a:b] for t in texture], ys,
                                                                                  xs)[:, None], 0.0))
            images = torch.where(shape[:, None], fill, images)
            mask = torch.where(is_target[a:b][:, None, None], shape, mask & ~shape)
        target_mask[a:b] = mask
        out[a:b] = (images + noise * grain[a:b]).clamp(0, 1) * 2 - 1
    return out, labels, target_mask


# --------------------------------------------------------------------------
# Character-level text
# --------------------------------------------------------------------------
@dataclass
class CharCorpus:
    """A text as token ids, one token per distinct character.

    Attributes:
        ids: ``(len(text),)`` long, the text encoded.
        chars: the vocabulary in sorted order; token ``i`` is ``chars[i]``.
    """

    ids: Tensor
    chars: list[str]

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """``str -> (len(text),)`` long; every character must be in the vocabulary."""
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(text) - index.keys())
        if unknown:
            raise ValueError(f"characters {unknown} are not in the corpus vocabulary")
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids: Tensor) -> str:
        """``(seq,)`` ids ``-> str``; the inverse of :meth:`encode`."""
        return "".join(self.chars[i] for i in ids.tolist())


def char_corpus(text: str) -> CharCorpus:
    """Character-level tokenisation of ``text``: its sorted distinct characters are the vocabulary."""
    if not text:
        raise ValueError("text must be non-empty")
    corpus = CharCorpus(ids=torch.empty(0, dtype=torch.long), chars=sorted(set(text)))
    corpus.ids = corpus.encode(text)
    return corpus


def text_batches(
    ids: Tensor, batch_size: int, block_size: int, generator: torch.Generator | None = None
) -> Iterator[tuple[Tensor, Tensor]]:
    """Endless random next-token batches cut from one long token sequence.

    Each batch takes ``batch_size`` windows of ``block_size + 1`` consecutive
    tokens at random offsets; the input is a window without its last token,
    the target the same window without its first::

        x[b, t] = ids[s_b + t],    y[b, t] = ids[s_b + t + 1]

    so a causal model at position ``t`` is trained to predict ``y[b, t]`` from
    ``x[b, :t+1]``.

    Args:
        ids: ``(n_tokens,)`` long, e.g. ``char_corpus(text).ids``.
        batch_size: windows per batch.
        block_size: context length; ``n_tokens`` must exceed it.
        generator: source of the offsets (the global one when ``None``).

    Yields:
        ``(x, y)``, both long ``(batch_size, block_size)``.
    """
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D (n_tokens,), got shape {tuple(ids.shape)}")
    if batch_size < 1 or block_size < 1:
        raise ValueError(f"need batch_size >= 1 and block_size >= 1, got {batch_size}, {block_size}")
    if len(ids) <= block_size:
        raise ValueError(f"the text has {len(ids)} tokens; it must be longer than block_size={block_size}")
    window = torch.arange(block_size + 1)
    while True:
        starts = torch.randint(len(ids) - block_size, (batch_size, 1), generator=generator)
        chunk = ids[starts + window]  # (batch_size, block_size + 1)
        yield chunk[:, :-1], chunk[:, 1:]


def text_windows(ids: Tensor, n: int, length: int, generator: torch.Generator | None = None) -> Tensor:
    """``(n, length + 1)``: ``n`` windows of ``length + 1`` consecutive tokens at random offsets of ``ids``.

    A fixed evaluation set for a language model: inputs ``w[:, :-1]``,
    targets ``w[:, 1:]``.
    """
    if len(ids) < length + 2:
        raise ValueError(f"need at least length + 2 = {length + 2} tokens, got {len(ids)}")
    starts = torch.randint(0, len(ids) - length - 1, (n,), generator=generator)
    return torch.stack([ids[s:s + length + 1] for s in starts.tolist()])


_PYTHON_DOCS = Path(__file__).resolve().parent / "corpora" / "python_docs.txt.xz"


def python_docs_text() -> str:
    """Python 3.11's help topics (``pydoc_data.topics``), joined in sorted topic order: English prose with code.

    465,126 characters, 103 distinct. A copy ships with the course
    (``course_lib/corpora/python_docs.txt.xz``, 95 KB) because the module's text
    changes between Python releases; made by ``"\\n\\n".join(topics[k] for k in
    sorted(topics))``.
    """
    return lzma.decompress(_PYTHON_DOCS.read_bytes()).decode("utf-8")

