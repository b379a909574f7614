"""Specification of course_lib.masked_image (chapter 10): masking, MAE, masked patch prediction, BEiT's pieces."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.counting import mae_flops
from course_lib.masked_image import (
    MAE,
    MAEConfig,
    PatchKMeansTokenizer,
    blockwise_mask,
    corrupt_patches,
    masked_patch_loss,
    masked_token_loss,
    mean_colour_classes,
    patch_targets,
    random_masking,
    unshuffle,
)
from course_lib.vit import patchify

TINY = dict(image_size=16, patch_size=4, dim=32, n_layers=2, n_heads=4, decoder_dim=16, decoder_layers=1,
            decoder_heads=2)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- random masking
@pytest.mark.parametrize("n, ratio, keep", [(16, 0.75, 4), (196, 0.75, 49), (10, 0.5, 5), (7, 0.4, 4)])
def test_random_masking_keeps_exactly_floor_of_n_times_one_minus_ratio_per_sample(n, ratio, keep):
    tokens = torch.randn(5, n, 3, generator=_gen())
    kept, mask, ids_restore = random_masking(tokens, ratio, _gen(1))
    assert kept.shape == (5, keep, 3)
    assert mask.dtype == torch.bool and mask.shape == (5, n)
    assert (mask.sum(1) == n - keep).all()
    assert ids_restore.shape == (5, n)


def test_ids_restore_is_a_permutation_that_inverts_the_shuffle():
    tokens = torch.arange(4 * 12, dtype=torch.float32).reshape(4, 12, 1)
    _, _, ids_restore = random_masking(tokens, 0.5, _gen(2))
    ids_shuffle = ids_restore.argsort(1)
    shuffled = tokens.gather(1, ids_shuffle[..., None])
    assert torch.equal(unshuffle(shuffled, ids_restore), tokens)
    assert torch.equal(ids_restore.sort(1).values, torch.arange(12).expand(4, -1))


def test_kept_tokens_are_exactly_the_unmasked_ones_in_shuffle_order():
    tokens = torch.randn(3, 20, 6, generator=_gen(3))
    kept, mask, ids_restore = random_masking(tokens, 0.75, _gen(4))
    ids_keep = ids_restore.argsort(1)[:, :kept.shape[1]]
    assert torch.equal(kept, tokens.gather(1, ids_keep[..., None].expand(-1, -1, 6)))
    # the mask is False exactly at the kept indices
    visible = torch.zeros_like(mask).scatter(1, ids_keep, True)
    assert torch.equal(~mask, visible)


def test_masking_differs_between_samples_and_follows_the_generator():
    tokens = torch.randn(8, 16, 2)
    _, m1, _ = random_masking(tokens, 0.75, _gen(5))
    _, m2, _ = random_masking(tokens, 0.75, _gen(5))
    assert torch.equal(m1, m2)
    assert len({tuple(row.tolist()) for row in m1}) > 1


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.1, 1.5])
def test_mask_ratio_outside_open_unit_interval_is_an_error(ratio):
    with pytest.raises(ValueError, match=r"mask_ratio=.*strictly between 0 and 1"):
        random_masking(torch.randn(1, 8, 2), ratio)


def test_a_ratio_that_leaves_no_visible_token_is_an_error():
    with pytest.raises(ValueError, match="N=4"):
        random_masking(torch.randn(1, 4, 2), 0.9)


# ---------------------------------------------------------------- targets and loss
def test_normalised_targets_have_zero_mean_and_unit_variance_per_patch():
    images = torch.rand(2, 3, 16, 16, generator=_gen(6))
    t = patch_targets(images, 4)
    assert t.shape == (2, 16, 48)
    assert torch.allclose(t.mean(-1), torch.zeros(2, 16), atol=1e-5)
    assert torch.allclose(t.var(-1, unbiased=False), torch.ones(2, 16), atol=1e-3)
    assert torch.equal(patch_targets(images, 4, normalize=False), patchify(images, 4))


def test_image_size_not_a_multiple_of_the_patch_is_an_error():
    with pytest.raises(ValueError, match="patch_size=4"):
        patch_targets(torch.rand(1, 3, 18, 16), 4)
    with pytest.raises(ValueError, match="not divisible by patch_size"):
        MAEConfig(image_size=18, patch_size=4)


def test_loss_ignores_the_predictions_of_visible_patches():
    pred, target = torch.randn(2, 8, 5, generator=_gen(7)), torch.randn(2, 8, 5, generator=_gen(8))
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[0, :3] = mask[1, 5:] = True
    before = masked_patch_loss(pred, target, mask)
    changed = pred.clone()
    changed[~mask] += 100.0
    assert masked_patch_loss(changed, target, mask) == before
    explicit = ((pred - target) ** 2).mean(-1)[mask].mean()
    assert torch.allclose(before, explicit)
    changed[0, 0] += 1.0  # a hidden patch does count
    assert masked_patch_loss(changed, target, mask) != before


def test_loss_gradient_reaches_hidden_patches_only():
    pred = torch.randn(1, 6, 4, requires_grad=True)
    mask = torch.tensor([[True, False, True, False, False, False]])
    masked_patch_loss(pred, torch.zeros(1, 6, 4), mask).backward()
    assert (pred.grad[~mask] == 0).all() and (pred.grad[mask] != 0).any()


def test_loss_rejects_a_mask_of_the_wrong_kind():
    with pytest.raises(ValueError, match="boolean of shape"):
        masked_patch_loss(torch.zeros(1, 4, 2), torch.zeros(1, 4, 2), torch.ones(1, 4))
    with pytest.raises(ValueError, match="hides no patch"):
        masked_patch_loss(torch.zeros(1, 4, 2), torch.zeros(1, 4, 2), torch.zeros(1, 4, dtype=torch.bool))


# ---------------------------------------------------------------- the MAE model
def test_mae_shapes_and_mask_count():
    torch.manual_seed(0)
    model = MAE(MAEConfig(**TINY))
    loss, pred, mask = model(torch.rand(3, 3, 16, 16), generator=_gen(9))
    assert pred.shape == (3, 16, 48) and mask.shape == (3, 16)
    assert (mask.sum(1) == 12).all() and loss.ndim == 0
    assert model.forward_features(torch.rand(2, 3, 16, 16)).shape == (2, 17, 32)


def test_the_encoder_never_sees_hidden_patches():
    torch.manual_seed(1)
    model = MAE(MAEConfig(**TINY)).eval()
    images = torch.rand(2, 3, 16, 16, generator=_gen(10))
    seen = []
    hook = model.encoder.blocks[0].register_forward_pre_hook(lambda mod, args: seen.append(args[0].shape[1]))
    latent, mask, _ = model.forward_encoder(images, generator=_gen(11))
    hook.remove()
    assert seen == [1 + 4] and latent.shape == (2, 5, 32)
    # scribble over every hidden patch: the encoder's output does not change (same masking: same generator)
    pix_mask = mask.reshape(2, 4, 4).repeat_interleave(4, 1).repeat_interleave(4, 2)[:, None]
    scribbled = torch.where(pix_mask, torch.rand(2, 3, 16, 16, generator=_gen(12)) * 50, images)
    latent2, mask2, _ = model.forward_encoder(scribbled, generator=_gen(11))
    assert torch.equal(mask, mask2)
    assert torch.allclose(latent, latent2, atol=1e-6)


def test_decoder_puts_each_prediction_at_its_patch():
    """The decoder unshuffles: a hidden patch's prediction depends on its own position, not on the shuffle."""
    torch.manual_seed(2)
    model = MAE(MAEConfig(**dict(TINY, decoder_layers=0))).eval()  # no mixing: each token's prediction is its own
    with torch.no_grad():
        latent, mask, ids_restore = model.forward_encoder(torch.rand(1, 3, 16, 16), generator=_gen(13))
        pred = model.forward_decoder(latent, ids_restore)
        hidden = model.decoder_pred(model.decoder_norm(model.mask_token[0, 0] + model.decoder_pos[0, 1:]))
    assert torch.allclose(pred[0][mask[0]], hidden[mask[0]], atol=1e-6)


def test_mae_trains_its_loss_down(one_thread):
    torch.manual_seed(3)
    model = MAE(MAEConfig(**TINY))
    images = torch.rand(4, 3, 16, 16, generator=_gen(14))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for step in range(20):
        loss, _, _ = model(images, generator=_gen(step))
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.8 * first


def test_fixed_positions_are_sincos_and_not_trained():
    model = MAE(MAEConfig(**TINY))
    assert not model.encoder.pos_embed.requires_grad
    assert all(p is not model.encoder.pos_embed for p in model.parameters() if p.requires_grad)


def test_mae_flops_encoder_share_is_the_visible_share_for_the_linear_parts():
    cfg = MAEConfig(image_size=224, patch_size=16, dim=1024, n_layers=24, n_heads=16, decoder_dim=512,
                    decoder_layers=8, decoder_heads=16)
    f = mae_flops(cfg)
    ratio = f["encoder_masked"] / f["encoder_full"]
    assert 0.2 < ratio < 50 / 197 + 1e-9  # attention's n^2 part shrinks faster than 1/4
    assert f["decoder"] < 0.2 * f["encoder_full"]


def test_mae_rejects_another_image_size():
    model = MAE(MAEConfig(**TINY))
    with pytest.raises(ValueError, match="16x16"):
        model(torch.rand(1, 3, 20, 20))


def test_mae_config_checks_its_ratio():
    with pytest.raises(ValueError, match="mask_ratio=1.0"):
        MAEConfig(mask_ratio=1.0)


# ---------------------------------------------------------------- the ViT paper's masked patch prediction
def test_corruption_chooses_half_and_splits_them_80_10_10():
    emb = torch.randn(64, 64, 8, generator=_gen(15))
    mask_emb = torch.full((8,), 7.0)
    out, chosen, kind = corrupt_patches(emb, mask_emb, 0.5, _gen(16))
    assert (chosen.sum(1) == 32).all()
    assert (kind[~chosen] == 0).all() and (kind[chosen] > 0).all()
    n = chosen.sum().item()  # 2048 chosen patches: a proportion's standard error is at most 0.011
    shares = [(kind == k).sum().item() / n for k in (1, 2, 3)]
    for share, p in zip(shares, (0.8, 0.1, 0.1)):
        sd = math.sqrt(p * (1 - p) / n)
        assert abs(share - p) < 4 * sd, (shares, p)
    assert torch.equal(out[kind == 1], mask_emb.expand(int((kind == 1).sum()), -1))
    assert torch.equal(out[(kind == 0) | (kind == 3)], emb[(kind == 0) | (kind == 3)])
    # a random patch is another patch of the batch, never the patch itself
    flat, swapped = emb.reshape(-1, 8), out[kind == 2]
    assert (torch.cdist(swapped, flat, compute_mode="donot_use_mm_for_euclid_dist").min(1).values == 0).all()
    assert ((swapped - emb[kind == 2]).abs().amax(1) > 0).all()


def test_corruption_rejects_bad_ratio_and_probabilities():
    with pytest.raises(ValueError, match="ratio=0"):
        corrupt_patches(torch.randn(1, 4, 2), torch.zeros(2), 0)
    with pytest.raises(ValueError, match="summing to 1"):
        corrupt_patches(torch.randn(1, 4, 2), torch.zeros(2), 0.5, probs=(0.5, 0.1, 0.1))
    with pytest.raises(ValueError, match="dim=2"):
        corrupt_patches(torch.randn(1, 4, 2), torch.zeros(3), 0.5)


def test_mean_colour_classes_range_and_a_hand_example():
    images = torch.rand(4, 3, 8, 8, generator=_gen(17)) * 2 - 1
    c = mean_colour_classes(images, 4)
    assert c.shape == (4, 4) and c.dtype == torch.long
    assert c.min() >= 0 and c.max() < 512
    # one image: top-left patch (r, g, b) = (-1, 0.1, 1) -> levels (0, 4, 7) -> 0*64 + 4*8 + 7 = 39;
    # everything else black (-1) -> class 0; a patch of mean 0.5 in red -> level 6 -> 6 * 64 = 384
    img = torch.full((1, 3, 8, 8), -1.0)
    img[0, :, :4, :4] = torch.tensor([-1.0, 0.1, 1.0])[:, None, None]
    img[0, 0, 4:, 4:] = 0.5
    assert mean_colour_classes(img, 4).tolist() == [[39, 0, 0, 384]]
    assert mean_colour_classes(torch.ones(1, 3, 4, 4), 4).item() == 511
    assert mean_colour_classes(img, 4, bits=1).tolist() == [[3, 0, 0, 4]]


def test_mean_colour_classes_rejects_bad_input():
    with pytest.raises(ValueError, match="RGB"):
        mean_colour_classes(torch.zeros(1, 1, 8, 8), 4)
    with pytest.raises(ValueError, match="value_range"):
        mean_colour_classes(torch.full((1, 3, 8, 8), 2.0), 4)
    with pytest.raises(ValueError, match="multiple of patch_size=3"):
        mean_colour_classes(torch.zeros(1, 3, 8, 8), 3)


# ---------------------------------------------------------------- BEiT
def test_blockwise_mask_hides_the_target_count_in_blocks():
    grid = (14, 14)
    m = blockwise_mask(16, grid, 0.4, _gen(18))
    target = round(0.4 * 196)
    assert m.shape == (16, 196) and m.dtype == torch.bool
    assert (m.sum(1) <= target).all() and (m.sum(1) >= target - 16).all()
    assert m.float().mean() > 0.35  # close to the target on average (a block that does not fit stops it early)
    # blocks: a hidden patch has more hidden 4-neighbours than under a random mask of the same count
    g = m.reshape(16, 14, 14).float()
    neigh = sum(torch.roll(g, s, d) for s in (1, -1) for d in (1, 2))
    assert (neigh * g).sum() / g.sum() > 2.5


def test_blockwise_mask_rejects_a_bad_ratio():
    with pytest.raises(ValueError, match="mask_ratio"):
        blockwise_mask(1, (4, 4), 1.2)


def test_kmeans_tokenizer_codes_in_range_and_fits_its_own_centroids():
    images = torch.rand(16, 3, 8, 8, generator=_gen(19))
    tok = PatchKMeansTokenizer.fit(images, 4, n_codes=8, iters=5, generator=_gen(20))
    codes = tok.encode(images)
    assert codes.shape == (16, 4) and codes.min() >= 0 and codes.max() < 8
    # a centroid, drawn as an image, is tokenised as itself
    centroid_img = tok.codebook[3].reshape(3, 4, 4)[None].repeat(1, 1, 2, 2)
    assert (tok.encode(centroid_img) == 3).all()
    assert tok.decode(codes).shape == (16, 4, 48)
    with pytest.raises(ValueError, match="n_codes=100"):
        PatchKMeansTokenizer.fit(images[:1], 4, n_codes=100)


def test_masked_token_loss_counts_hidden_patches_only_and_is_log_k_when_uniform():
    tokens = torch.randint(0, 10, (2, 6), generator=_gen(21))
    mask = torch.tensor([[True, False] * 3, [False, True] * 3])
    assert torch.allclose(masked_token_loss(torch.zeros(2, 6, 10), tokens, mask), torch.tensor(math.log(10)))
    logits = torch.randn(2, 6, 10, generator=_gen(22))
    before = masked_token_loss(logits, tokens, mask)
    logits[~mask] = torch.randn(int((~mask).sum()), 10)
    assert masked_token_loss(logits, tokens, mask) == before
    with pytest.raises(ValueError, match="K=10"):
        masked_token_loss(logits, tokens + 10, mask)
