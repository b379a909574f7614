"""Label-keeping augmentation for small training sets (chapter 09): random-resized crops and flips.

A model trained on a few thousand images sees each one many times; augmentation
shows it a different view every time. The standard pair for image classifiers
(the ViT and DeiT recipes, and every ResNet recipe before them) is

* **random-resized crop**: a box covering a random share ``s`` of the image's
  area (``s`` uniform in ``scale``), with a random aspect ratio (log-uniform in
  ``ratio``) at a random place, resized back to the full image;
* **horizontal flip** with probability 1/2.

Both are one affine map of the image coordinates per image, so a whole batch
is one :func:`torch.nn.functional.affine_grid` and one bilinear
:func:`~torch.nn.functional.grid_sample`, without a Python loop over images.
In the normalised coordinates of ``affine_grid`` (``[-1, 1]`` across the
image) a box of relative width ``w`` and height ``h`` centred at ``(cx, cy)``
is the map ``x' = w * flip * x + cx``, ``y' = h * y + cy``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["random_resized_crop"]


def random_resized_crop(images: Tensor, generator: torch.Generator | None = None, *,
                        scale: tuple[float, float] = (0.4, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3),
                        flip: bool = True) -> Tensor:
    """A random-resized crop (and a random horizontal flip) of every image: ``(B, C, H, W) -> (B, C, H, W)``.

    ``scale``: the range of the crop's share of the image's area; ``ratio``: of its aspect ratio
    (width / height, drawn log-uniformly); a side longer than the image is cut to the image. The draws
    come from ``generator``, in a fixed order (scale, ratio, centre, flip), so a seeded generator makes
    the same crops on any machine.
    """
    if images.ndim != 4:
        raise ValueError(f"expected images of shape (batch, channels, height, width), got {tuple(images.shape)}")
    if not 0 < scale[0] <= scale[1] <= 1:
        raise ValueError(f"scale {scale} must satisfy 0 < low <= high <= 1 (shares of the image's area)")
    if not 0 < ratio[0] <= ratio[1]:
        raise ValueError(f"ratio {ratio} must satisfy 0 < low <= high (width / height)")
    b, _, height, width = images.shape
    area = torch.empty(b).uniform_(scale[0], scale[1], generator=generator)
    aspect = torch.empty(b).uniform_(math.log(ratio[0]), math.log(ratio[1]), generator=generator).exp()
    aspect = aspect * (height / width)                          # in pixels -> in shares of the image's sides
    w = (area * aspect).sqrt().clamp(max=1.0)                  # relative sides of the box
    h = (area / aspect).sqrt().clamp(max=1.0)
    cx = (torch.rand(b, generator=generator) * 2 - 1) * (1 - w)  # centres that keep the box inside the image
    cy = (torch.rand(b, generator=generator) * 2 - 1) * (1 - h)
    sign = torch.ones(b)
    if flip:
        sign = torch.where(torch.rand(b, generator=generator) < 0.5, -1.0, 1.0)
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2] = w * sign, cx
    theta[:, 1, 1], theta[:, 1, 2] = h, cy
    theta = theta.to(images.device, images.dtype)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)
