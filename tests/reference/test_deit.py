"""Specification of course_lib.deit (chapter 09): the distillation token and DeiT's two losses."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.deit import (
    DEIT_PRESETS,
    DeiT,
    DeiTConfig,
    combine_heads,
    cutmix,
    hard_distillation_loss,
    prepend_cls_and_distillation_tokens,
    soft_distillation_loss,
)
from course_lib.vit import ViT


def _logits(b=4, k=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    cls, dist, teacher = (torch.randn(b, k, generator=g, dtype=dtype) * 2 for _ in range(3))
    labels = torch.randint(0, k, (b,), generator=g)
    return cls, dist, teacher, labels


def _tiny(**overrides) -> DeiT:
    torch.manual_seed(0)
    return DeiT(DeiTConfig.preset("deit-tiny-test", **overrides)).eval()


# --------------------------------------------------------------------------
# The losses: parity with an explicit computation
# --------------------------------------------------------------------------
def _explicit_ce(logits, targets):
    """-log softmax(logits)[target], averaged, written out with logsumexp."""
    rows = torch.arange(logits.shape[0])
    return (torch.logsumexp(logits, dim=-1) - logits[rows, targets]).mean()


def test_hard_loss_is_half_ce_on_labels_plus_half_ce_on_the_teachers_argmax():
    cls, dist, teacher, labels = _logits()
    y_t = torch.tensor([int(max(range(teacher.shape[1]), key=lambda c: teacher[i, c]))
                        for i in range(teacher.shape[0])])
    expected = 0.5 * _explicit_ce(cls, labels) + 0.5 * _explicit_ce(dist, y_t)
    torch.testing.assert_close(hard_distillation_loss(cls, dist, teacher, labels), expected)


def test_soft_loss_matches_an_explicit_kl_with_temperature():
    cls, dist, teacher, labels = _logits(b=3, k=7, seed=1)
    tau, lam = 2.5, 0.3
    p_t = torch.softmax(teacher / tau, dim=-1)
    kl = (p_t * (p_t.log() - torch.log_softmax(dist / tau, dim=-1))).sum(-1).mean()
    expected = (1 - lam) * _explicit_ce(cls, labels) + lam * tau**2 * kl
    torch.testing.assert_close(soft_distillation_loss(cls, dist, teacher, labels, tau=tau, lam=lam), expected)
    # and torch's own KL, with reduction "batchmean", agrees
    torch_kl = F.kl_div(torch.log_softmax(dist / tau, -1), torch.log_softmax(teacher / tau, -1), reduction="batchmean",
                        log_target=True)
    torch.testing.assert_close(kl, torch_kl)


# --------------------------------------------------------------------------
# The losses: properties
# --------------------------------------------------------------------------
def test_hard_loss_takes_label_probabilities_and_one_hot_ones_give_the_index_loss():
    cls, dist, teacher, labels = _logits(b=6, k=4, seed=3)
    one_hot = F.one_hot(labels, 4).double()
    torch.testing.assert_close(hard_distillation_loss(cls, dist, teacher, one_hot),
                               hard_distillation_loss(cls, dist, teacher, labels))
    mixed = 0.3 * one_hot + 0.7 * F.one_hot(labels.roll(1), 4).double()  # a CutMix label
    expected = 0.5 * (0.3 * _explicit_ce(cls, labels) + 0.7 * _explicit_ce(cls, labels.roll(1))) \
        + 0.5 * _explicit_ce(dist, teacher.argmax(-1))
    torch.testing.assert_close(hard_distillation_loss(cls, dist, teacher, mixed), expected)
    with pytest.raises(ValueError, match=r"probabilities must be \(batch, classes\) = \(6, 4\), got shape \(6, 3\)"):
        hard_distillation_loss(cls, dist, teacher, one_hot[:, :3])


# --------------------------------------------------------------------------
# CutMix
# --------------------------------------------------------------------------
def test_cutmix_pastes_one_box_of_the_partner_and_mixes_the_labels_by_its_area():
    b, k, h, w = 16, 5, 12, 10
    images = torch.arange(b, dtype=torch.float64)[:, None, None, None].expand(b, 3, h, w).clone()  # image i is all i
    labels = torch.arange(b) % k
    mixed, targets = cutmix(images, labels, k, torch.Generator().manual_seed(0))
    assert mixed.shape == images.shape and targets.shape == (b, k) and targets.dtype == torch.float32
    torch.testing.assert_close(targets.sum(-1), torch.ones(b))
    for i in range(b):
        pasted = mixed[i, 0] != i                                 # pixels that came from another image
        assert (mixed[i, 1:] == mixed[i, :1]).all()               # every channel alike
        if pasted.any():
            partner = int(mixed[i, 0][pasted][0])
            assert (mixed[i, 0][pasted] == partner).all()         # from a single partner
            rows, cols = pasted.any(1).nonzero().flatten(), pasted.any(0).nonzero().flatten()
            assert pasted.sum() == len(rows) * len(cols)           # ... as one rectangle
            share = pasted.double().mean().item()
            expected = (1 - share) * F.one_hot(labels[i], k) + share * F.one_hot(labels[partner], k)
            torch.testing.assert_close(targets[i], expected.float())


def test_cutmix_is_reproducible_and_covers_every_share():
    images, labels = torch.randn(256, 3, 32, 32), torch.randint(0, 6, (256,))
    a = cutmix(images, labels, 6, torch.Generator().manual_seed(1))
    b = cutmix(images, labels, 6, torch.Generator().manual_seed(1))
    torch.testing.assert_close(a, b)
    own = a[1][torch.arange(256), labels]  # the share of each image's own label (its partner may share it)
    assert own.min() < 0.3 and own.max() == 1.0 and 0.55 < own.mean() < 0.85


def test_cutmix_wants_a_batch_of_images_and_integer_labels():
    with pytest.raises(ValueError, match=r"images must be \(batch, channels, height, width\)"):
        cutmix(torch.randn(3, 8, 8), torch.zeros(3, dtype=torch.long), 2)
    with pytest.raises(ValueError, match=r"labels must be \(batch,\) = \(2,\) integer classes"):
        cutmix(torch.randn(2, 3, 8, 8), torch.zeros(2), 2)


def test_hard_loss_is_plain_ce_when_the_teacher_agrees_with_the_labels():
    cls, dist, _, labels = _logits(b=6, k=4, seed=2)
    teacher = F.one_hot(labels, 4).double() * 5.0 - 1.0        # the teacher's argmax is the label
    loss = hard_distillation_loss(cls, dist, teacher, labels)
    torch.testing.assert_close(loss, 0.5 * F.cross_entropy(cls, labels) + 0.5 * F.cross_entropy(dist, labels))
    torch.testing.assert_close(hard_distillation_loss(cls, cls, teacher, labels), F.cross_entropy(cls, labels))


def test_ties_in_the_teachers_logits_go_to_the_first_maximum_as_torch_argmax():
    cls, dist = torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64)
    teacher = torch.tensor([[0.0, 3.0, 3.0]], dtype=torch.float64)           # classes 1 and 2 tie
    loss = hard_distillation_loss(cls, dist, teacher, torch.tensor([0]))
    expected = 0.5 * math.log(3) + 0.5 * F.cross_entropy(dist, torch.tensor([1]))
    torch.testing.assert_close(loss, expected)


def test_only_the_teachers_argmax_matters_not_its_scale():
    cls, dist, teacher, labels = _logits(seed=3)
    a = hard_distillation_loss(cls, dist, teacher, labels)
    torch.testing.assert_close(hard_distillation_loss(cls, dist, teacher * 100 + 7, labels), a)


def test_the_distillation_head_gets_no_gradient_from_the_ce_on_labels():
    cls, dist, teacher, labels = (t.requires_grad_(True) if t.is_floating_point() else t for t in _logits(seed=4))
    # the labels' term alone: gradient reaches cls only
    g_cls, g_dist = torch.autograd.grad(0.5 * F.cross_entropy(cls, labels), (cls, dist), allow_unused=True)
    assert g_dist is None and g_cls is not None
    # the whole loss: dist's gradient is exactly that of the teacher's term, cls's that of the labels' term
    g_cls, g_dist, g_teacher = torch.autograd.grad(hard_distillation_loss(cls, dist, teacher, labels),
                                                   (cls, dist, teacher), allow_unused=True)
    y_t = teacher.detach().argmax(-1)
    want_dist = (torch.softmax(dist.detach(), -1) - F.one_hot(y_t, 5)) / (2 * dist.shape[0])
    want_cls = (torch.softmax(cls.detach(), -1) - F.one_hot(labels, 5)) / (2 * cls.shape[0])
    torch.testing.assert_close(g_dist, want_dist)
    torch.testing.assert_close(g_cls, want_cls)
    assert g_teacher is None or torch.equal(g_teacher, torch.zeros_like(g_teacher)), "the teacher is a fixed target"


def test_soft_loss_sends_no_gradient_to_the_teacher_and_lam_zero_is_plain_ce():
    cls, dist, teacher, labels = _logits(seed=5)
    teacher.requires_grad_(True)
    loss = soft_distillation_loss(cls, dist, teacher, labels)
    assert not loss.requires_grad or torch.autograd.grad(loss, teacher, allow_unused=True)[0] is None
    torch.testing.assert_close(soft_distillation_loss(cls, dist, teacher, labels, lam=0.0),
                               F.cross_entropy(cls, labels))
    # the KL term is zero when the distillation head already predicts the teacher's distribution
    torch.testing.assert_close(soft_distillation_loss(cls, teacher.detach(), teacher, labels, lam=1.0),
                               torch.zeros((), dtype=torch.float64))


def test_hard_loss_is_finite_for_huge_logits_in_float32():
    cls, dist, teacher, labels = (t.float() * 1e4 if t.is_floating_point() else t for t in _logits(seed=6))
    loss = hard_distillation_loss(cls, dist, teacher, labels)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    expected = hard_distillation_loss(cls.double(), dist.double(), teacher.double(), labels)
    torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=1e-2)


# --------------------------------------------------------------------------
# The token layout
# --------------------------------------------------------------------------
def test_cls_comes_first_then_the_distillation_token_then_the_patches():
    b, n, d = 2, 3, 4
    patches = torch.randn(b, n, d)
    cls, dist = torch.full((1, 1, d), 5.0), torch.full((1, 1, d), -5.0)
    pos = torch.randn(1, 2 + n, d)
    z = prepend_cls_and_distillation_tokens(patches, cls, dist, pos)
    assert z.shape == (b, 2 + n, d)
    torch.testing.assert_close(z[:, 0], (cls + pos[:, 0])[0].expand(b, -1))
    torch.testing.assert_close(z[:, 1], (dist + pos[:, 1])[0].expand(b, -1))
    torch.testing.assert_close(z[:, 2:], patches + pos[:, 2:])


def test_the_model_embeds_with_the_function_and_reads_tokens_0_and_1():
    model = _tiny()
    x = torch.randn(2, 3, 32, 32)
    patches = model.patch_embed(x)
    expected = prepend_cls_and_distillation_tokens(patches, model.cls_token, model.dist_token, model.pos_embed)
    torch.testing.assert_close(model.embed(x), expected)
    feats = model.forward_features(x)
    assert feats.shape == (2, 2 + 16, 32) and model.n_prefix == 2
    cls_logits, dist_logits = model.forward_heads(feats)
    torch.testing.assert_close(cls_logits, model.head(feats[:, 0]))
    torch.testing.assert_close(dist_logits, model.head_dist(feats[:, 1]))


def test_at_eval_the_output_is_the_average_of_the_two_heads():
    model = _tiny()
    x = torch.randn(3, 3, 32, 32)
    cls_logits, dist_logits = model.forward_heads(model.forward_features(x))
    torch.testing.assert_close(model(x), (cls_logits + dist_logits) / 2)
    probs = combine_heads(cls_logits, dist_logits, how="softmax")
    torch.testing.assert_close(probs.sum(-1), torch.ones(3))
    assert model.forward_head(model.forward_features(x), pre_logits=True).shape == (3, 32)


def test_the_deit_is_a_vit_with_one_token_and_one_head_more():
    model, vit = _tiny(), ViT(DeiTConfig.preset("deit-tiny-test"))
    extra = model.num_params() - vit.num_params()
    assert extra == 32 + 32 + (32 * 10 + 10)  # distillation token, its position, its head
    assert set(DEIT_PRESETS) >= {"deit-ti/16", "deit-s/16", "deit-b/16"}
    assert DeiTConfig.preset("deit-s/16").dim == 384


def test_positions_are_resampled_for_another_resolution_and_the_prefix_keeps_its_two():
    model = _tiny()
    out = model.forward_features(torch.randn(1, 3, 48, 48))
    assert out.shape == (1, 2 + 36, 32)


def test_distillation_loss_trains_both_heads_and_token_similarity_has_one_entry_per_layer():
    model = _tiny().train()
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    loss = model.distillation_loss(x, y, torch.randn(4, 10))
    loss.backward()
    assert model.head.weight.grad.abs().sum() > 0 and model.head_dist.weight.grad.abs().sum() > 0
    assert model.dist_token.grad.abs().sum() > 0
    sims = model.token_similarity(x)
    assert sims.shape == (model.cfg.n_layers + 1,) and bool((sims.abs() <= 1 + 1e-6).all())
    with pytest.raises(ValueError, match="kind must be 'hard' or 'soft'"):
        model.distillation_loss(x, y, torch.randn(4, 10), kind="medium")


def test_hugging_face_deit_with_teacher_gives_the_same_logits():
    transformers = pytest.importorskip("transformers")
    from course_lib.interop import vit as interop_vit

    cfg = transformers.DeiTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                  image_size=32, patch_size=8, num_labels=5)
    torch.manual_seed(0)
    hf = transformers.DeiTForImageClassificationWithTeacher(cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn(p.shape) * 0.1)
    ours = DeiT(DeiTConfig(**interop_vit.config_from_hf(cfg, num_classes=5, attn_impl="eager").to_dict())).eval()
    renames = {"deit.embeddings.distillation_token": "dist_token"}
    state = {}
    for key, value in hf.state_dict().items():
        if key in renames:
            state[renames[key]] = value
        elif key.startswith("cls_classifier."):
            state["head." + key.split(".")[-1]] = value
        elif key.startswith("distillation_classifier."):
            state["head_dist." + key.split(".")[-1]] = value
        else:
            state.update(interop_vit.convert_state_dict({key.removeprefix("deit."): value}))
    ours.load_state_dict(state, strict=True)
    x = torch.randn(2, 3, 32, 32)
    out = hf(pixel_values=x)
    cls_logits, dist_logits = ours.forward_heads(ours.forward_features(x))
    torch.testing.assert_close(cls_logits, out.cls_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(dist_logits, out.distillation_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours(x), out.logits, atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------------------
# Errors name the value and the rule
# --------------------------------------------------------------------------
def test_mismatched_batch_sizes_are_an_error():
    cls, dist, teacher, labels = _logits()
    with pytest.raises(ValueError, match=r"same shape .*\(4, 5\), \(3, 5\)"):
        hard_distillation_loss(cls, dist[:3], teacher, labels)
    with pytest.raises(ValueError, match=r"labels must be \(batch,\) = \(4,\), got shape \(3,\)"):
        hard_distillation_loss(cls, dist, teacher, labels[:3])


def test_wrong_ranks_are_an_error():
    cls, dist, teacher, labels = _logits()
    with pytest.raises(ValueError, match=r"cls_logits must be \(batch, classes\), got shape \(20,\)"):
        hard_distillation_loss(cls.flatten(), dist, teacher, labels)
    with pytest.raises(ValueError, match=r"labels must be \(batch,\)"):
        soft_distillation_loss(cls, dist, teacher, labels[:, None])
    with pytest.raises(ValueError, match=r"patches must be \(batch, N, dim\), got shape \(3, 4\)"):
        prepend_cls_and_distillation_tokens(torch.randn(3, 4), torch.zeros(1, 1, 4), torch.zeros(1, 1, 4),
                                            torch.zeros(1, 5, 4))
    with pytest.raises(ValueError, match=r"pos_embed must be \(1, 2 \+ N, dim\) = \(1, 5, 4\), got \(1, 4, 4\)"):
        prepend_cls_and_distillation_tokens(torch.randn(2, 3, 4), torch.zeros(1, 1, 4), torch.zeros(1, 1, 4),
                                            torch.zeros(1, 4, 4))
    with pytest.raises(ValueError, match=r"dist_token must be \(1, 1, dim\) = \(1, 1, 4\), got \(1, 1, 3\)"):
        prepend_cls_and_distillation_tokens(torch.randn(2, 3, 4), torch.zeros(1, 1, 4), torch.zeros(1, 1, 3),
                                            torch.zeros(1, 5, 4))


def test_labels_out_of_range_or_not_integers_are_an_error():
    cls, dist, teacher, labels = _logits(k=5)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 5\) for 5 classes, got values from 0 to 5"):
        hard_distillation_loss(cls, dist, teacher, torch.tensor([0, 1, 2, 5]))
    with pytest.raises(ValueError, match=r"got values from -1"):
        soft_distillation_loss(cls, dist, teacher, torch.tensor([-1, 1, 2, 3]))
    with pytest.raises(ValueError, match="labels must be integer class indices, got torch.float32"):
        hard_distillation_loss(cls, dist, teacher, labels.float())


def test_bad_temperature_weight_and_fusion_are_errors():
    cls, dist, teacher, labels = _logits()
    for tau in (0.0, -1.0):
        with pytest.raises(ValueError, match=rf"tau must be > 0, got tau={tau}"):
            soft_distillation_loss(cls, dist, teacher, labels, tau=tau)
    with pytest.raises(ValueError, match=r"lam must lie in \[0, 1\], got lam=1.5"):
        soft_distillation_loss(cls, dist, teacher, labels, lam=1.5)
    with pytest.raises(ValueError, match="how must be 'logits' or 'softmax', got 'max'"):
        combine_heads(cls, dist, how="max")


def test_configs_deit_cannot_run_are_errors():
    with pytest.raises(ValueError, match="positions='learned'"):
        DeiTConfig.preset("deit-tiny-test", positions="none")
    with pytest.raises(ValueError, match="num_classes >= 1"):
        DeiTConfig.preset("deit-tiny-test", num_classes=0)
    with pytest.raises(ValueError, match="pool='cls'"):
        DeiTConfig.preset("deit-tiny-test", pool="mean")
    with pytest.raises(ValueError, match="unknown DeiT preset 'deit-xl'"):
        DeiTConfig.preset("deit-xl")
