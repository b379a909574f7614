"""The UCI handwritten digits: 1,797 images of 8 x 8 pixels, as shipped inside scikit-learn.

**Source.** "Optical Recognition of Handwritten Digits" (E. Alpaydin and C.
Kaynak, 1998, UCI Machine Learning Repository): digits written by 43 people on
preprinted forms, scanned as 32 x 32 bitmaps and reduced to 8 x 8 by counting
the inked pixels of each 4 x 4 block (0..16). scikit-learn ships the 1,797
images of the UCI test set in its wheel, ``sklearn/datasets/data/digits.csv.gz``
(``sklearn.datasets.load_digits`` reads the same file; pinned in
``requirements.txt``): nothing is downloaded.

**Licence.** Creative Commons Attribution 4.0 International (CC BY 4.0), the
UCI repository's licence for the data set; scikit-learn's copy is part of its
BSD-3-Clause distribution.

**Splits** (fixed): of each digit's images in file order, the first 70 % are
``"train"`` and the rest ``"test"``.

**Pixels.** ``float32`` ``(n, 1, 8, 8)`` mapped from ``0..16`` to ``[-1, 1]``.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import Tensor

from course_lib.datasets._files import package_file

__all__ = ["SIZE", "N_IMAGES", "SPLITS", "load"]

SIZE = 8
N_IMAGES = 1797
SPLITS = ("train", "test", "all")


@functools.cache
def _table() -> np.ndarray:
    return np.loadtxt(package_file("sklearn", "datasets", "data", "digits.csv.gz"), delimiter=",", dtype=np.float32)


def load(split: str = "all") -> tuple[Tensor, Tensor]:
    """``(images, labels)``: float32 ``(n, 1, 8, 8)`` in ``[-1, 1]`` and long ``(n,)`` (1,797 images in ``"all"``)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    table = _table()
    labels = table[:, -1].astype(np.int64)
    rows = []
    for d in range(10):
        idx = np.flatnonzero(labels == d)
        cut = int(round(0.7 * len(idx)))
        rows.append(idx if split == "all" else idx[:cut] if split == "train" else idx[cut:])
    rows = np.sort(np.concatenate(rows))
    images = torch.from_numpy(table[rows, :-1]).reshape(-1, 1, SIZE, SIZE) * (2 / 16) - 1
    return images, torch.from_numpy(labels[rows])
