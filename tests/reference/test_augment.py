"""course_lib.augment: random-resized crops and flips, as the data-regime recipes use them."""

from __future__ import annotations

import pytest
import torch

from course_lib.augment import random_resized_crop


def test_the_whole_image_comes_back_as_it_is_or_mirrored():
    """A crop of all of the image at its own aspect is the image itself, or its mirror image (a flip)."""
    x = torch.randn(64, 3, 8, 12)
    out = random_resized_crop(x, torch.Generator().manual_seed(0), scale=(1.0, 1.0), ratio=(1.5, 1.5))
    same = (out - x).abs().amax(dim=(1, 2, 3)) < 1e-5
    mirrored = (out - x.flip(-1)).abs().amax(dim=(1, 2, 3)) < 1e-5
    assert bool((same | mirrored).all()) and 10 < int(mirrored.sum()) < 54  # about half are flipped
    unflipped = random_resized_crop(x, torch.Generator().manual_seed(0), scale=(1.0, 1.0), ratio=(1.5, 1.5),
                                    flip=False)
    torch.testing.assert_close(unflipped, x, atol=1e-5, rtol=0)


def test_a_crop_shows_one_region_enlarged():
    """A quarter of the image's area is a half-size box: a crop of an image that is 0 left of three quarters of its
    width and 1 right of it holds at most that one edge, and only the crops that reach past the middle hold it."""
    x = torch.zeros(32, 1, 16, 16)
    x[..., 12:] = 1.0
    out = random_resized_crop(x, torch.Generator().manual_seed(1), scale=(0.25, 0.25), ratio=(1.0, 1.0), flip=False)
    assert out.shape == x.shape and float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    rows_alike = (out - out[:, :, :1]).abs().amax() < 1e-6  # the crop is axis-aligned: every row is the same
    assert rows_alike
    steps = (out[:, 0, 0, 1:] - out[:, 0, 0, :-1])
    assert bool((steps >= -1e-6).all())  # left to right it only rises: no flip, one edge at most
    assert 0 < int((out[:, 0, 0, -1] - out[:, 0, 0, 0] > 0.5).sum()) < 32  # some crops hold the edge, some do not


def test_the_same_generator_gives_the_same_crops_and_bad_ranges_are_named():
    x = torch.randn(4, 3, 8, 8)
    a = random_resized_crop(x, torch.Generator().manual_seed(5))
    b = random_resized_crop(x, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match=r"scale \(0.0, 1.0\) must satisfy 0 < low <= high <= 1"):
        random_resized_crop(x, scale=(0.0, 1.0))
    with pytest.raises(ValueError, match=r"ratio \(2.0, 1.0\) must satisfy 0 < low <= high"):
        random_resized_crop(x, ratio=(2.0, 1.0))
    with pytest.raises(ValueError, match=r"expected images of shape \(batch, channels, height, width\), got \(8, 8\)"):
        random_resized_crop(torch.zeros(8, 8))
