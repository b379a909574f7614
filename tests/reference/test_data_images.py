"""Specification of course_lib.data.shapes_with_masks (chapter 09)."""

from __future__ import annotations

import pytest
import torch

from course_lib.data import SHAPES, shapes_dataset, shapes_with_masks


@pytest.mark.parametrize("size", [8, 16, 32])
def test_images_and_labels_equal_shapes_dataset_for_the_same_generator(size):
    images, labels, _ = shapes_with_masks(20, size, torch.Generator().manual_seed(3))
    ref_images, ref_labels = shapes_dataset(20, size, torch.Generator().manual_seed(3))
    assert torch.equal(images, ref_images) and torch.equal(labels, ref_labels)


def test_masks_are_boolean_images_of_the_right_shape():
    _, _, masks = shapes_with_masks(7, 16, torch.Generator().manual_seed(0))
    assert masks.dtype == torch.bool and masks.shape == (7, 16, 16)


def test_every_mask_is_non_empty_and_leaves_background():
    _, _, masks = shapes_with_masks(50, 32, torch.Generator().manual_seed(1))
    area = masks.flatten(1).sum(1)
    assert (area > 0).all() and (area < 32 * 32).all()


def test_pixels_inside_the_mask_are_brighter_than_outside_without_noise():
    images, _, masks = shapes_with_masks(30, 16, torch.Generator().manual_seed(2), noise=0.0)
    gray = images.mean(1)
    for g, m in zip(gray, masks):
        assert g[m].min() > g[~m].max()


def test_every_class_appears_and_labels_are_in_range():
    _, labels, _ = shapes_with_masks(200, 16, torch.Generator().manual_seed(4))
    assert set(labels.tolist()) == set(range(len(SHAPES)))


@pytest.mark.parametrize("kwargs", [dict(n=-1), dict(size=4), dict(noise=-0.1)])
def test_bad_arguments_raise_value_error(kwargs):
    args = dict(n=2, size=16) | kwargs
    with pytest.raises(ValueError):
        shapes_with_masks(args.pop("n"), args.pop("size"), **args)
