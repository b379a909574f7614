"""course_lib.vit_recipe: the ViT capstone's reference, a ViT as a function of its weights, its augmentation
and its recipe."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib import vit_recipe as R
from course_lib.training import param_groups
from course_lib.vit import ViT

CFG = dict(image_size=12, patch_size=4, in_chans=3, num_classes=5, dim=16, n_layers=2, n_heads=4, mlp_hidden=24,
           norm_eps=1e-6)


def _module(params, cfg=CFG):
    model = ViT(R.vit_config(cfg, attn_impl="eager"))
    model.load_state_dict({k: v.detach() for k, v in params.items()})
    return model


def _far_from_init(params):
    with torch.no_grad():
        for name, p in params.items():
            if p.ndim == 1:
                p.uniform_(0.5, 2.0) if name.endswith("norm.weight") else p.normal_(0, 0.5)
    return params


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_the_function_of_the_weights_is_chapter_nines_model_with_those_weights(heads):
    cfg = dict(CFG, n_heads=heads)
    params = _far_from_init(R.init_params(cfg, torch.Generator().manual_seed(heads), std=0.3))
    images = torch.randn(3, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(R.vit_logits(params, images, cfg), _module(params, cfg)(images), rtol=1e-5,
                                   atol=1e-5)


def test_the_names_shapes_and_count_are_the_modules():
    model = ViT(R.vit_config(CFG))
    assert R.param_shapes(CFG) == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert R.param_count(CFG) == sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for p in R.init_params(CFG, torch.Generator()).values())
    b16 = dict(image_size=224, patch_size=16, in_chans=3, num_classes=1000, dim=768, n_layers=12, n_heads=12,
               mlp_hidden=3072, norm_eps=1e-6)
    assert R.param_count(b16) == 86_567_656  # ViT-B/16 at 224 px, as the paper's table 1 rounds to 86 M


def test_the_decay_groups_are_chapter_sevens_rule():
    params = R.init_params(CFG, torch.Generator())
    model = _module(params)
    ours = R.decay_groups(params, 0.05)
    theirs = param_groups(model, 0.05)
    assert [g["weight_decay"] for g in ours] == [g["weight_decay"] for g in theirs]
    assert [sorted(p.shape for p in g["params"]) for g in ours] == [sorted(p.shape for p in g["params"])
                                                                    for g in theirs]


def test_a_shift_moves_the_ink_and_brings_in_background():
    dots = -torch.ones(16, 1, 9, 9)
    dots[:, 0, 4, 4] = 1.0
    moved = R.augment(dots, 3, torch.Generator().manual_seed(0))
    shifts = torch.randint(-3, 4, (16, 2), generator=torch.Generator().manual_seed(0))
    assert [divmod(int(m.flatten().argmax()), 9) for m in moved] == [(4 + a, 4 + b) for a, b in shifts.tolist()]
    assert torch.equal(R.augment(dots, 0, torch.Generator()), dots)
    edge = torch.ones(1, 2, 5, 5)
    out = R.augment(edge, 4, torch.Generator().manual_seed(1))
    assert set(out.unique().tolist()) <= {1.0, R.BACKGROUND} and out.shape == edge.shape


def test_the_loop_learns_two_kinds_of_picture_and_is_reproducible():
    cfg = dict(CFG, image_size=8, in_chans=1, num_classes=2, n_layers=1)
    pictures = -torch.ones(40, 1, 8, 8)
    pictures[:20, :, :4] = 1.0
    pictures[20:, :, :, :4] = 1.0
    kinds = torch.tensor([0] * 20 + [1] * 20)
    hp = dict(steps=60, batch_size=8, max_lr=0.01, min_lr=0.001, warmup_steps=5, weight_decay=0.05, max_norm=1.0,
              max_shift=1)
    runs = []
    for _ in range(2):
        params = R.init_params(cfg, torch.Generator().manual_seed(0), std=0.2)
        runs.append((R.train_loop(params, pictures, kinds, cfg, hp, torch.Generator().manual_seed(1)), params))
    (losses, params), (again, _) = runs
    assert losses == again and len(losses) == 60
    assert losses[-1] < 0.1 * losses[0] and R.evaluate(params, pictures, kinds, cfg) [1] == 1.0


def test_evaluation_counts_every_image_once_in_any_chunking():
    params = _far_from_init(R.init_params(CFG, torch.Generator().manual_seed(5), std=0.3))
    images = torch.randn(23, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    labels = torch.randint(5, (23,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits = R.vit_logits(params, images, CFG)
    whole = (F.cross_entropy(logits, labels).item(), (logits.argmax(-1) == labels).double().mean().item())
    for chunk in (1, 5, 23, 256):
        loss, acc = R.evaluate(params, images, labels, CFG, chunk)
        assert isinstance(loss, float) and isinstance(acc, float)
        assert abs(loss - whole[0]) < 1e-5 and abs(acc - whole[1]) < 1e-12


def test_the_recipe_trains_the_course_model_and_returns_detached_weights():
    images = torch.rand(30, 1, 28, 28) * 2 - 1
    cfg, params = R.train_vit(images, torch.arange(30) % 7, 7, 21, 0)
    assert cfg == dict(R.RECIPE_CONFIG, num_classes=7)
    assert set(params) == set(R.param_shapes(cfg)) and not any(p.requires_grad for p in params.values())
