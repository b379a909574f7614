"""Specification of the ViT paper's variants, their cost per image and the zero-initialised fine-tuning head
(course_lib.vit: ``variant``, ``zero_head``; course_lib.counting: ``vit_flops``; chapter 09, *ViT at scale*)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from course_lib.counting import vit_flops
from course_lib.vit import SIZES, ViT, ViTConfig, variant, zero_head


def _meta_params(cfg: ViTConfig) -> int:
    with torch.device("meta"):
        return ViT(cfg).num_params()


@pytest.mark.parametrize("name,preset", [("ViT-B/16", "vit-b/16"), ("vit-l/16", "vit-l/16"), ("H/14", "vit-h/14"),
                                         ("ViT-B/32", "vit-b/32"), ("ViT-Ti/16", "vit-ti/16"), ("s/16", "vit-s/16")])
def test_variant_equals_the_preset_of_the_same_name(name, preset):
    assert variant(name) == ViTConfig.preset(preset)


@pytest.mark.parametrize("name,published", [("ViT-B/16", 86e6), ("ViT-L/16", 307e6), ("ViT-H/14", 632e6)])
def test_variant_parameter_counts_match_the_paper_within_1_5_percent(name, published):
    assert abs(_meta_params(variant(name)) / published - 1) < 0.015


def test_variant_sizes_have_a_4d_mlp_and_whole_heads():
    for size in SIZES:
        cfg = variant(f"{size}/16")
        assert cfg.mlp_hidden_dim() == 4 * cfg.dim and cfg.dim % cfg.n_heads == 0


def test_variant_overrides_other_fields():
    cfg = variant("ViT-B/16", image_size=384, num_classes=10)
    assert (cfg.image_hw, cfg.num_classes, cfg.grid) == ((384, 384), 10, (24, 24))


@pytest.mark.parametrize("bad", ["ViT-X/16", "ViT-B", "ViT-B/0", "ViT-B/x", "B16", ""])
def test_variant_rejects_a_malformed_name_naming_it(bad):
    with pytest.raises(ValueError, match=r"must read '\[ViT-\]<size>/<patch>'") as info:
        variant(bad)
    assert repr(bad) in str(info.value)


def test_variant_rejects_a_patch_that_does_not_divide_the_image():
    with pytest.raises(ValueError, match="patch_size=15"):
        variant("ViT-B/15")


def test_variant_rejects_a_non_string():
    with pytest.raises(ValueError, match="must be a string"):
        variant(16)


@pytest.mark.parametrize("cfg,size", [
    (ViTConfig(image_size=32, patch_size=8, dim=32, n_layers=2, n_heads=4, num_classes=10, attn_impl="eager"), None),
    (ViTConfig(image_size=32, patch_size=4, dim=48, n_layers=3, n_heads=4, mlp_ratio=2, num_classes=6,
               attn_impl="eager"),
     (48, 32)),
    (ViTConfig(image_size=24, patch_size=4, dim=16, n_layers=1, n_heads=2, num_classes=3, pool="mean",
               class_token=False, attn_impl="eager"), None),
])
def test_vit_flops_equals_the_products_the_model_runs(cfg, size):
    # eager attention: torch's flop counter does not see inside the fused CPU attention kernel
    model = ViT(cfg).eval()
    h, w = cfg.image_hw if size is None else size
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randn(1, 3, h, w))
    assert vit_flops(cfg, size)["total"] == counter.get_total_flops()


def test_vit_flops_parts_add_up_and_follow_the_formulas():
    cfg = variant("ViT-B/16")
    parts = vit_flops(cfg)
    t, d = 197, 768
    assert parts["attention"] == 12 * 4 * t * t * d
    assert parts["projections"] == 12 * 8 * t * d * d
    assert parts["ffn"] == 12 * 4 * t * d * 3072
    assert parts["patch_embed"] == 2 * 196 * 768 * 768
    assert parts["head"] == 2 * 768 * 1000
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")


def test_halving_the_patch_side_grows_the_cost_faster_than_the_sequence():
    small, large = vit_flops(variant("ViT-B/32")), vit_flops(variant("ViT-B/16"))  # T = 50 and 197 tokens
    assert large["patch_embed"] == small["patch_embed"]  # every pixel is projected once either way
    assert large["attention"] * 50**2 == small["attention"] * 197**2
    assert large["total"] / small["total"] > 197 / 50


@pytest.mark.parametrize("size", [30, (32, 20), 0])
def test_vit_flops_rejects_an_image_the_patches_do_not_tile(size):
    with pytest.raises(ValueError, match="multiple of patch_size=8"):
        vit_flops(ViTConfig(image_size=32, patch_size=8, dim=32, n_layers=1, n_heads=4), size)


def test_vit_flops_rejects_swiglu():
    with pytest.raises(ValueError, match="swiglu"):
        vit_flops(ViTConfig(image_size=32, patch_size=8, dim=32, n_layers=1, n_heads=4, mlp="swiglu"))


def _trained_looking_vit(seed: int = 0) -> ViT:
    torch.manual_seed(seed)
    model = ViT(ViTConfig.preset("vit-tiny-test"))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def test_zero_head_gives_zero_logits_and_a_first_loss_of_ln_k():
    model = _trained_looking_vit()
    head = zero_head(model, 7)
    logits = model(torch.randn(5, 3, 32, 32))
    assert head is model.head and logits.shape == (5, 7) and model.cfg.num_classes == 7
    assert torch.equal(logits, torch.zeros_like(logits))
    loss = F.cross_entropy(logits, torch.tensor([0, 1, 2, 3, 6]))
    assert abs(loss.item() - math.log(7)) < 1e-6


def test_zero_head_first_gradient_reaches_only_the_head():
    model = _trained_looking_vit(1)
    zero_head(model, 3)
    F.cross_entropy(model(torch.randn(4, 3, 32, 32)), torch.tensor([0, 1, 2, 0])).backward()
    for name, p in model.named_parameters():
        if name.startswith("head."):
            assert p.grad.abs().sum() > 0, name
        else:
            assert p.grad is None or torch.equal(p.grad, torch.zeros_like(p.grad)), name


def test_zero_head_after_one_step_the_backbone_learns():
    model = _trained_looking_vit(2)
    zero_head(model, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 0])
    for _ in range(2):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    assert model.blocks[0].mlp.fc1.weight.grad.abs().sum() > 0  # the second step's gradient reaches the blocks


def test_zero_head_follows_the_model_dtype_and_keeps_the_backbone():
    model = _trained_looking_vit().to(torch.float64)
    before = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith("head.")}
    head = zero_head(model, 2)
    assert head.weight.dtype == torch.float64 and head.weight.shape == (2, 32)
    after = model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items())


@pytest.mark.parametrize("bad", [0, -3, 2.0, True, "4"])
def test_zero_head_rejects_a_bad_class_count_naming_it(bad):
    with pytest.raises(ValueError, match=r"num_classes=.* must be a whole number >= 1"):
        zero_head(_trained_looking_vit(), bad)


def test_zero_head_rejects_a_model_that_is_not_a_vit():
    with pytest.raises(ValueError, match="expects a course_lib ViT, got Linear"):
        zero_head(torch.nn.Linear(3, 3), 2)
