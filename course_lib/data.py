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
* **Character text** (:func:`char_corpus`, :func:`text_batches`): any string
  turned into next-token prediction batches for a decoder language model.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    ys, xs = torch.meshgrid(torch.arange(size, dtype=torch.float32), torch.arange(size, dtype=torch.float32), indexing="ij")
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
