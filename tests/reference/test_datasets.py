"""The real data sets of course_lib.datasets: they load offline, with the sizes, splits and ranges their docstrings
state, the same on every call."""

from __future__ import annotations

import pytest
import torch

from course_lib.datasets import digits, mnist, photos, python_stdlib


def test_mnist_has_500_images_of_each_digit_split_350_50_100():
    for split, per_digit in (("train", 350), ("val", 50), ("test", 100), ("all", 500)):
        images, labels = mnist.load(split)
        assert images.shape == (10 * per_digit, 1, 28, 28) and images.dtype == torch.float32
        assert torch.equal(torch.bincount(labels, minlength=10), torch.full((10,), per_digit))
        assert images.min() == -1 and images.max() == 1


def test_mnist_splits_are_disjoint_and_make_up_the_whole_set():
    parts = torch.cat([mnist.load(s)[0] for s in ("train", "val", "test")]).flatten(1)
    whole = mnist.load_all()[0].flatten(1)
    assert len(parts) == len(whole) == 5000
    assert len(torch.unique(parts, dim=0)) == len(torch.unique(whole, dim=0))  # no image in two splits
    torch.testing.assert_close(parts.double().sum(0), whole.double().sum(0))


def test_mnist_digits_are_dark_backgrounds_with_ink_in_the_middle():
    images, _ = mnist.load("test")
    ink = (images > 0).float().mean(0)[0]  # (28, 28): how often a pixel is inked
    assert ink[:2].mean() < 0.01 and ink[10:18, 10:18].mean() > 0.2


def test_digits_are_the_1797_uci_images_of_8_by_8():
    images, labels = digits.load()
    assert images.shape == (1797, 1, 8, 8) and labels.shape == (1797,)
    assert images.min() == -1 and images.max() == 1 and set(labels.tolist()) == set(range(10))
    train, test = digits.load("train")[1], digits.load("test")[1]
    assert len(train) + len(test) == 1797 and abs(len(train) / 1797 - 0.7) < 0.01


@pytest.mark.parametrize("name", sorted(photos.PHOTOS))
def test_photos_load_as_rgb_in_the_unit_range_and_resize_to_a_square(name):
    image = photos.load(name)
    assert image.ndim == 3 and image.shape[0] == 3 and min(image.shape[1:]) >= 400
    assert 0 <= image.min() and image.max() <= 1 and image.std() > 0.1
    assert photos.load(name, 64).shape == (3, 64, 64)


def test_an_unknown_photo_or_split_is_named():
    with pytest.raises(ValueError, match="known"):
        photos.load("mona_lisa")
    with pytest.raises(ValueError, match="split must be one of"):
        mnist.load("validation")


def test_the_stdlib_snapshot_is_over_10_million_characters_of_python_with_its_licence():
    files = python_stdlib.files()
    assert len(files) == 605 and sum(len(t) for t in files.values()) > 10_000_000
    assert "argparse.py" in files and "json/decoder.py" in files
    assert not any(p.startswith(("test/", "encodings/")) or "/tests/" in p for p in files)
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in python_stdlib.licence_text()


def test_the_stdlib_splits_are_blocks_of_whole_lines_one_in_ten_held_out():
    train, held = python_stdlib.documents("train"), python_stdlib.documents("held_out")
    whole = sum(len(t) for t in python_stdlib.files().values())
    assert sum(map(len, train)) + sum(map(len, held)) == whole
    assert 0.08 < sum(map(len, held)) / whole < 0.12 and len(held) == 296
    assert all(d.endswith("\n") for d in held[:-1])  # blocks end at line breaks
    assert python_stdlib.text("held_out").count(python_stdlib.EOT) == len(held)


def test_the_stdlib_bpe_round_trips_and_compresses_the_held_out_files():
    tok = python_stdlib.tokenizer()
    assert len(tok) == python_stdlib.VOCAB_SIZE + 1 and tok.special_tokens == {"<|endoftext|>": 4096}
    held = python_stdlib.text("held_out")
    ids = python_stdlib.token_ids("held_out")
    assert ids.dtype == torch.int32 and int(ids.max()) == 4096
    assert tok.decode(ids.tolist()) == held
    assert len(held) / len(ids) > 3  # characters per token on text it was not trained on


def test_smaller_mnist_training_sets_are_balanced_and_nested():
    small, small_y = mnist.load("train", n=300)
    large, _ = mnist.load("train", n=1000)
    assert small.shape == (300, 1, 28, 28) and torch.equal(torch.bincount(small_y), torch.full((10,), 30))
    members = {tuple(r.tolist()) for r in large.flatten(1)}
    assert all(tuple(r.tolist()) in members for r in small.flatten(1))
    with pytest.raises(ValueError, match="multiple of 10"):
        mnist.load("train", n=305)
