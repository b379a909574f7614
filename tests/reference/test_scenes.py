"""course_lib.data.scenes, text_windows and python_docs_text; course_lib.cnn: the zoo's data and baseline."""

from __future__ import annotations

import pytest
import torch

from course_lib import data
from course_lib.cnn import ConvNet, ConvNetConfig
from course_lib.data import SCENE_CLASSES, _shape_masks, python_docs_text, scenes, text_windows


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_scenes_have_the_promised_shapes_dtypes_and_range():
    x, y, m = scenes(50, 32, gen())
    assert x.shape == (50, 3, 32, 32) and x.dtype == torch.float32
    assert y.shape == (50,) and y.dtype == torch.long and 0 <= y.min() and y.max() < len(SCENE_CLASSES)
    assert m.shape == (50, 32, 32) and m.dtype == torch.bool
    assert -1 <= x.min() and x.max() <= 1


def test_scenes_are_a_function_of_the_generator():
    a, b = scenes(20, 32, gen(3)), scenes(20, 32, gen(3))
    for s, t in zip(a, b):
        assert torch.equal(s, t)
    assert not torch.equal(scenes(20, 32, gen(4))[0], a[0])


@pytest.mark.parametrize("chunk", [1, 7, 300, 10_000])
def test_scenes_do_not_depend_on_how_many_rows_are_drawn_at_once(monkeypatch, chunk):
    """The pixels are drawn SCENE_CHUNK rows at a time; any chunk gives the same images bit for bit, and leaves
    the generator in the same state (the zoo's data and checkpoints depend on both)."""
    g = gen(6)
    expected = scenes(300, 24, g, max_distractors=2)
    after = torch.rand(4, generator=g)
    monkeypatch.setattr(data, "SCENE_CHUNK", chunk)
    g = gen(6)
    for s, t in zip(scenes(300, 24, g, max_distractors=2), expected):
        assert torch.equal(s, t)
    assert torch.equal(torch.rand(4, generator=g), after)


def test_every_class_appears_and_the_target_is_visible_and_large():
    _, y, m = scenes(600, 32, gen(1))
    assert set(y.tolist()) == set(range(len(SCENE_CLASSES)))
    area = m.flatten(1).float().sum(1)
    assert (area > 0).float().mean() > 0.97, "the target is (almost) never hidden completely"
    assert area.median() > 0.05 * 32 * 32, "the target is the large object"


def test_distractors_can_occlude_the_target():
    _, _, full = scenes(300, 32, gen(2), max_distractors=0)
    _, _, occluded = scenes(300, 32, gen(2), max_distractors=3)
    assert occluded.flatten(1).sum(1).float().mean() < full.flatten(1).sum(1).float().mean()


def test_without_distractors_the_mask_is_the_whole_target_shape():
    x, y, m = scenes(40, 32, gen(5), max_distractors=0, noise=0.0)
    # a whole shape of its class: compare areas with the class's shape at the same scale, within a factor
    for label in range(len(SCENE_CLASSES)):
        if (y == label).any():
            assert m[y == label].flatten(1).sum(1).min() > 0


@pytest.mark.parametrize("u, v, inside", [
    (0.0, 0.0, [True, True, True, True, False, True]),      # the centre: all but the ring
    (-0.9, -0.9, [True, False, False, False, False, False]),  # the top-left corner: only the square
    (0.0, 0.8, [True, True, True, True, True, True]),       # on the vertical axis, low: every shape
])
def test_shape_masks_follow_the_docstring(u, v, inside):
    got = _shape_masks(torch.tensor(u), torch.tensor(v)).tolist()
    assert got == inside


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=-1), r"need n >= 0 and size >= 16, got n=-1"),
    (dict(n=2, size=8), r"size >= 16, got n=2, size=8"),
    (dict(n=2, max_distractors=-1), r"max_distractors and noise must be >= 0, got -1"),
])
def test_scenes_reject_bad_arguments_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scenes(**kwargs)


def test_text_windows_are_consecutive_tokens_of_the_sequence():
    ids = torch.arange(1000)
    w = text_windows(ids, 8, 16, gen())
    assert w.shape == (8, 17)
    assert torch.equal(w[:, 1:] - w[:, :-1], torch.ones(8, 16, dtype=torch.long))
    with pytest.raises(ValueError, match=r"need at least length \+ 2 = 18 tokens, got 10"):
        text_windows(torch.arange(10), 1, 16)


def test_python_docs_text_is_the_fixed_copy():
    text = python_docs_text()
    assert len(text) == 465_126 and len(set(text)) == 103
    assert "The \"for\" statement" in text


def test_convnet_maps_images_to_logits_and_halves_resolution_per_stage():
    cfg = ConvNetConfig(widths=(8, 16, 32), blocks=(1, 2, 1), num_classes=5)
    net = ConvNet(cfg).eval()
    x = torch.randn(2, 3, 32, 32)
    assert net(x).shape == (2, 5) and net.forward_features(x).shape == (2, 32)
    assert net.stages(net.stem(x)).shape == (2, 32, 8, 8)
    with pytest.raises(ValueError, match=r"must be non-empty and of equal length"):
        ConvNetConfig(widths=(8, 16), blocks=(1,))
