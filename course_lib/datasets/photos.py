"""Three real photographs that ship inside the course's pinned packages, for patching and attention pictures.

========================  ===========  ====================================================================
name                      pixels       source and licence
========================  ===========  ====================================================================
``"grace_hopper"``        600 x 512    Rear Admiral Grace Hopper, U.S. Navy official portrait (1984):
                                       public domain, a work of the U.S. government. Ships with matplotlib,
                                       ``matplotlib/mpl-data/sample_data/grace_hopper.jpg``.
``"china"``               427 x 640    a temple in China, by danielbuechele on Flickr: CC BY 2.0. Ships with
                                       scikit-learn, ``sklearn/datasets/images/china.jpg``.
``"flower"``              427 x 640    a flower, by vultilion on Flickr: CC BY 2.0. Ships with scikit-learn,
                                       ``sklearn/datasets/images/flower.jpg``.
========================  ===========  ====================================================================

Pixels (height x width) as stored; :func:`load` returns ``float32`` ``(3, H, W)``
in ``[0, 1]``, optionally resized (bilinear, antialiased) and centre-cropped
to a square.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib.datasets._files import package_file

__all__ = ["PHOTOS", "load"]

#: name -> (package, path inside it, credit and licence)
PHOTOS = {
    "grace_hopper": ("matplotlib", ("mpl-data", "sample_data", "grace_hopper.jpg"),
                     "Grace Hopper, U.S. Navy photograph, public domain (via matplotlib)"),
    "china": ("sklearn", ("datasets", "images", "china.jpg"),
              "danielbuechele on Flickr, CC BY 2.0 (via scikit-learn)"),
    "flower": ("sklearn", ("datasets", "images", "flower.jpg"), "vultilion on Flickr, CC BY 2.0 (via scikit-learn)"),
}


def load(name: str, size: int | None = None) -> Tensor:
    """Photograph ``name`` (a key of :data:`PHOTOS`) as float32 ``(3, H, W)`` in ``[0, 1]``.

    ``size``: centre-crop to a square and resize to ``size x size`` pixels.
    """
    from PIL import Image

    if name not in PHOTOS:
        raise ValueError(f"no photograph {name!r}; known: {sorted(PHOTOS)}")
    package, parts, _ = PHOTOS[name]
    with Image.open(package_file(package, *parts)) as im:
        pixels = np.asarray(im.convert("RGB"), dtype=np.float32) / 255
    image = torch.from_numpy(pixels.copy()).permute(2, 0, 1)
    if size is None:
        return image
    h, w = image.shape[1:]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    square = image[:, top:top + side, left:left + side]
    resized = F.interpolate(square[None], size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return resized[0].clamp(0, 1)  # the filter overshoots by a hair
