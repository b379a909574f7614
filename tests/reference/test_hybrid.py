"""Specification of course_lib.hybrid (chapter 09): a CNN stem's feature map, cut into 1x1 patches, feeds a ViT."""

from __future__ import annotations

import pytest
import torch

from course_lib.cnn import ResidualConvBlock
from course_lib.hybrid import HybridConfig, HybridViT
from course_lib.vit import ViT


def small(**overrides):
    cfg = dict(image_size=16, stem_widths=(4, 6, 8), stem_blocks=(0, 1, 1), dim=32, n_layers=2, n_heads=4,
               mlp_ratio=2, num_classes=4)
    return HybridConfig(**(cfg | overrides))


@pytest.mark.parametrize("widths, blocks, image_size, grid", [
    ((8,), (1,), 8, (8, 8)),                      # stride 1: one token per pixel
    ((4, 8), (0, 1), 16, (8, 8)),                 # stride 2
    ((4, 6, 8), (0, 1, 1), 16, (4, 4)),           # stride 4
    ((4, 6, 8, 8), (1, 1, 2, 1), (32, 16), (4, 2)),  # stride 8, a non-square image
])
def test_the_stems_downsampling_gives_the_token_count(widths, blocks, image_size, grid):
    cfg = small(stem_widths=widths, stem_blocks=blocks, image_size=image_size)
    assert cfg.grid == grid
    model = HybridViT(cfg).eval()
    h, w = cfg.image_hw
    images = torch.randn(3, 3, h, w)
    fmap = model.feature_map(images)
    assert fmap.shape == (3, widths[-1], *grid)
    tokens = model.forward_features(images)
    assert tokens.shape == (3, 1 + grid[0] * grid[1], 32)  # CLS + one token per cell of the feature map
    assert model(images).shape == (3, 4)


def test_the_vit_is_the_course_vit_with_one_pixel_patches():
    model = HybridViT(small())
    assert type(model.vit) is ViT
    assert model.vit.cfg.patch_size == 1 and model.vit.cfg.in_chans == 8 and model.vit.grid == (4, 4)
    assert model.vit.patch_embed.proj.kernel_size == (1, 1)
    assert sum(isinstance(m, ResidualConvBlock) for m in model.stem.modules()) == 2


def test_forward_is_the_vit_applied_to_the_feature_map():
    torch.manual_seed(0)
    model = HybridViT(small()).eval()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(model(images), model.vit(model.stem(images)))


def test_mean_pooling_without_cls_token():
    model = HybridViT(small(pool="mean")).eval()
    assert model.vit.cls_token is None
    assert model.forward_features(torch.randn(2, 3, 16, 16)).shape == (2, 16, 32)


def test_gradients_reach_the_stem():
    torch.manual_seed(0)
    model = HybridViT(small())
    loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 3, 16, 16)), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    for name, p in model.stem.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert model.vit.patch_embed.proj.weight.grad.abs().sum() > 0


def test_attention_maps_cover_the_feature_map_tokens():
    maps = HybridViT(small()).get_attention_maps(torch.randn(2, 3, 16, 16))
    assert len(maps) == 2 and maps[0].shape == (2, 4, 17, 17)


def test_other_image_sizes_resample_the_positions():
    model = HybridViT(small()).eval()
    assert model.forward_features(torch.randn(1, 3, 24, 32)).shape == (1, 1 + 6 * 8, 32)


def test_errors():
    with pytest.raises(ValueError, match="not divisible by the stem's stride 4"):
        small(image_size=18)
    with pytest.raises(ValueError, match="equal length"):
        small(stem_widths=(4, 8), stem_blocks=(0, 1, 1))
    with pytest.raises(ValueError, match="every stage after the first needs at least one block"):
        small(stem_blocks=(0, 0, 1))
    with pytest.raises(ValueError, match="dim=30 must be divisible by n_heads=4"):
        small(dim=30)
    model = HybridViT(small())
    with pytest.raises(ValueError, match="images have 1 channels but the model expects in_chans=3"):
        model(torch.randn(1, 1, 16, 16))
    with pytest.raises(ValueError, match="image size 16x18 is not divisible by the stem's stride 4"):
        model(torch.randn(1, 3, 16, 18))
    with pytest.raises(ValueError, match="expected images of shape"):
        model(torch.randn(3, 16, 16))
