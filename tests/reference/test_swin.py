"""course_lib.swin and course_lib.interop.swin: Swin V1/V2 against Hugging Face, windows, masks, bad input."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import counting as C
from course_lib import interop
from course_lib import swin as S
from course_lib.interop.swin import from_hf
from course_lib.multi_head import split_heads

transformers = pytest.importorskip("transformers")

TOL = 1e-4


def randomize(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """HF zero-initializes the bias tables and sets logit_scale = log 10; random values test more."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "logit_scale" in name:  # some heads above the log(100) clamp
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 150 + 1))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.ndim > 1 else 0.5))
    return model


def hf_swin(version: int, **kw):
    cls = transformers.SwinModel if version == 1 else transformers.Swinv2Model
    config = (transformers.SwinConfig if version == 1 else transformers.Swinv2Config)(**kw)
    return randomize(cls(config)).eval()


def image(h, w, batch=2, channels=3, seed=1):
    return torch.randn(batch, channels, h, w, generator=torch.Generator().manual_seed(seed))


def hf_features(hf, x):
    # a fresh copy per input: HF Swin V1 stores a shrunk window / disabled shift on the layer
    with torch.no_grad():
        return copy.deepcopy(hf)(x).last_hidden_state


TINY = dict(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4)
DEEP = dict(image_size=40, patch_size=2, embed_dim=12, depths=[2, 2, 2], num_heads=[1, 2, 4], window_size=3,
            qkv_bias=False, layer_norm_eps=1e-6, hidden_act="gelu_new")

# (HF config, input sizes): divisible, padded (odd sizes at merging too), non-square, window = feature size
V1_CASES = {
    "tiny": (TINY, [(32, 32), (44, 36), (32, 64)]),
    "deep-ws3-noqkvbias": (DEEP, [(50, 38), (40, 40)]),
    "ws5-mlp2": (dict(image_size=40, patch_size=4, embed_dim=8, depths=[1, 3], num_heads=[2, 2], window_size=5,
                      mlp_ratio=2.0), [(40, 40), (52, 44)]),
}
V2_CASES = {
    "tiny": (TINY, [(32, 32), (44, 36), (24, 40), (8, 8)]),
    "deep-ws3-pretrained": (dict(DEEP, image_size=24, pretrained_window_sizes=[4, 0, 2], hidden_act="gelu"),
                            [(24, 24), (30, 18)]),
    "window-shrunk-to-config": (dict(TINY, image_size=[16, 48], window_size=8), [(16, 48), (32, 32)]),
}


# ---------------------------------------------------------------- parity
@pytest.mark.parametrize("version, case", [(1, c) for c in V1_CASES] + [(2, c) for c in V2_CASES])
def test_forward_features_match_hf_last_hidden_state(version, case):
    kw, sizes = (V1_CASES if version == 1 else V2_CASES)[case]
    hf = hf_swin(version, **kw)
    model = interop.from_hf(hf)  # through the registry
    assert not model.training
    for h, w in sizes:
        x = image(h, w)
        with torch.no_grad():
            out = model.forward_features(x)
        ref = hf_features(hf, x)
        assert out.shape == ref.shape
        assert (out - ref).abs().max().item() <= TOL, f"{case} at {h}x{w}"


@pytest.mark.parametrize("version", [1, 2])
def test_eager_attention_path_matches_hf_too(version):
    hf = hf_swin(version, **TINY)
    model = from_hf(hf, attn_impl="eager")
    x = image(44, 36)
    with torch.no_grad():
        assert (model.forward_features(x) - hf_features(hf, x)).abs().max().item() <= TOL


@pytest.mark.parametrize("version", [1, 2])
def test_forward_head_pools_like_hf_pooler(version):
    hf = hf_swin(version, **TINY)
    model = from_hf(hf)
    x = image(32, 32)
    with torch.no_grad():
        pooled = model.forward_head(model.forward_features(x), pre_logits=True)
        ref = copy.deepcopy(hf)(x).pooler_output
    assert (pooled - ref).abs().max().item() <= TOL


def test_v1_window_larger_than_feature_map_reads_the_centre_of_its_table():
    # HF V1 raises here; course_lib shrinks the window and reads the offsets it needs from the big table
    big = S.Swin(S.SwinConfig(version=1, image_size=16, patch_size=4, dim=8, depths=(2,), n_heads=(2,),
                              window_size=7)).eval()
    small = S.Swin(S.SwinConfig(version=1, image_size=16, patch_size=4, dim=8, depths=(2,), n_heads=(2,),
                                window_size=4)).eval()
    sd = big.state_dict()
    for key, table in list(sd.items()):
        if key.endswith("relative_position_bias_table"):
            sd[key] = table.view(13, 13, -1)[3:10, 3:10].reshape(49, -1)
    small.load_state_dict(sd)
    x = image(16, 16)  # a 4x4 feature map, smaller than the window of 7
    with torch.no_grad():
        torch.testing.assert_close(big(x), small(x))


# ---------------------------------------------------------------- windows, indices, masks
@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 3), nh=st.integers(1, 3), nw=st.integers(1, 3), ws=st.integers(1, 4), c=st.integers(1, 5))
def test_window_partition_and_reverse_are_inverses(b, nh, nw, ws, c):
    x = torch.randn(b, nh * ws, nw * ws, c)
    windows = S.window_partition(x, ws)
    assert windows.shape == (b * nh * nw, ws * ws, c)
    assert torch.equal(S.window_reverse(windows, ws, nh * ws, nw * ws), x)
    # window k of image 0 is the ws x ws block at row k // nw, column k % nw
    k = nh * nw - 1
    row, col = k // nw, k % nw
    assert torch.equal(windows[k].view(ws, ws, c), x[0, row * ws:(row + 1) * ws, col * ws:(col + 1) * ws])


def test_window_partition_rejects_a_map_that_does_not_divide():
    with pytest.raises(ValueError, match="5x8.*4x4"):
        S.window_partition(torch.zeros(1, 5, 8, 2), 4)


@pytest.mark.parametrize("ws", [1, 2, 3, 7])
def test_relative_position_index_is_antisymmetric_about_the_zero_offset(ws):
    idx = S.relative_position_index(ws)
    centre = ((2 * ws - 1) ** 2) // 2  # the row of offset (0, 0)
    assert idx.shape == (ws * ws, ws * ws)
    assert (idx.diagonal() == centre).all()
    assert torch.equal(idx + idx.T, torch.full_like(idx, 2 * centre))  # offset(j, i) = -offset(i, j)
    assert idx.unique().numel() == (2 * ws - 1) ** 2  # every offset occurs
    pos = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
    d = pos[:, :, None] - pos[:, None, :]
    assert torch.equal(idx, (d[0] + ws - 1) * (2 * ws - 1) + d[1] + ws - 1)


def test_a_smaller_window_reads_the_same_offsets_from_a_bigger_table():
    small, big = S.relative_position_index(3), S.relative_position_index(3, table_size=5)
    table = torch.arange(81).view(9, 9)
    assert torch.equal(table[2:7, 2:7].reshape(-1)[small], table.reshape(-1)[big])


def brute_force_allowed(h, w, ws, shift):
    """Token pairs of each shifted window that were neighbours before the roll, without wrap-around."""
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    original = torch.stack([rows, cols], dim=-1).roll((-shift, -shift), dims=(0, 1))  # where each token came from
    windows = S.window_partition(original[None].float(), ws).long()  # (nW, N, 2)
    nw, n = windows.shape[:2]
    allowed = torch.zeros(nw, n, n, dtype=torch.bool)
    for k in range(nw):
        for i in range(n):
            for j in range(n):
                # a token wrapped around an axis iff it came from the first `shift` rows/columns
                wrapped_i, wrapped_j = windows[k, i] < shift, windows[k, j] < shift
                allowed[k, i, j] = bool((wrapped_i == wrapped_j).all())
    return allowed


@pytest.mark.parametrize("h, w, ws, shift", [(8, 8, 4, 2), (6, 9, 3, 1), (14, 7, 7, 3), (4, 4, 4, 2), (12, 8, 4, 3)])
def test_shifted_window_mask_equals_brute_force(h, w, ws, shift):
    mask = S.shifted_window_mask(h, w, ws, shift)
    assert mask.shape == ((h // ws) * (w // ws), ws * ws, ws * ws)
    assert set(mask.unique().tolist()) <= {0.0, S.MASK_VALUE}
    assert torch.equal(mask == 0, brute_force_allowed(h, w, ws, shift))


def test_masked_tokens_get_no_attention():
    attn = S.WindowAttention(8, 2, 4, version=1, attn_impl="eager").eval()
    mask = S.shifted_window_mask(8, 8, 4, 2)
    x = torch.randn(4, 16, 8)
    bias = attn.position_bias(4)[None] + mask[:, None]
    q, k = (split_heads(p(x), 2) for p in (attn.mha.q_proj, attn.mha.k_proj))
    w = torch.softmax(q @ k.transpose(-1, -2) / 2 + bias, dim=-1)
    assert (w[(mask[:, None] != 0).expand_as(w)] < 1e-30).all()


# ---------------------------------------------------------------- Swin V2 specifics
def test_cosine_attention_logit_scale_is_clamped_at_log_100():
    attn = S.WindowAttention(8, 2, 4, version=2).eval()
    x = torch.randn(3, 16, 8)
    with torch.no_grad():
        attn.logit_scale.copy_(torch.tensor([math.log(1000.0), math.log(50.0)]).view(2, 1, 1))
        torch.testing.assert_close(attn.cosine_scale().flatten(), torch.tensor([100.0, 50.0]))
        high = attn.attend_windows(x, 4)
        attn.logit_scale[0] = math.log(100.0)
        torch.testing.assert_close(attn.attend_windows(x, 4), high)


def test_swinv2_key_projection_has_no_bias():
    model = from_hf(hf_swin(2, **TINY))
    for stage in model.stages:
        for block in stage.blocks:
            assert block.attn.mha.k_proj.bias is None
            assert block.attn.mha.q_proj.bias is not None and block.attn.mha.v_proj.bias is not None
    v1 = S.Swin(S.SwinConfig.preset("swin-tiny-test"))
    assert v1.stages[0].blocks[0].attn.mha.k_proj.bias is not None


def test_patch_merging_normalizes_before_reduction_in_v1_and_after_in_v2():
    assert S.PatchMerging(8).norm.dim == 32
    assert S.PatchMerging(8, norm_after=True).norm.dim == 16
    x, hw = S.PatchMerging(8)(torch.randn(2, 5 * 3, 8), (5, 3))  # odd sides are padded
    assert hw == (3, 2) and x.shape == (2, 6, 16)


# ---------------------------------------------------------------- precision, compilation
@pytest.mark.parametrize("preset", ["swin-tiny-test", "swinv2-tiny-test"])
def test_bf16_autocast_runs_and_stays_close(preset):
    model = S.Swin(S.SwinConfig.preset(preset)).eval()
    x = image(44, 36)
    with torch.no_grad():
        ref = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
    assert out.shape == ref.shape and torch.isfinite(out).all()
    assert (out.float() - ref).abs().max() < 0.1 * ref.abs().max() + 0.05


def test_torch_compile_matches_eager():
    model = from_hf(hf_swin(2, **TINY))
    compiled = torch.compile(model, backend="aot_eager")
    x = image(44, 36)
    with torch.no_grad():
        torch.testing.assert_close(compiled.forward_features(x), model.forward_features(x), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- configs and presets
# parameter counts with a 1000-class head, equal to HF Swin(v2)ForImageClassification's (papers: 29M, 50M, 88M)
PARAMS = {"swin-t": 28_288_354, "swin-s": 49_606_258, "swin-b": 87_768_224,
          "swinv2-t": 28_347_154, "swinv2-s": 49_728_418, "swinv2-b": 87_918_816}


@pytest.mark.parametrize("name", PARAMS)
def test_published_presets_have_the_published_sizes(name):
    with torch.device("meta"):
        model = S.Swin(S.SwinConfig.preset(name))
    assert sum(p.numel() for p in model.parameters()) == PARAMS[name]


def test_presets_use_the_published_windows_and_resolutions():
    for name in ("swin-t", "swin-s", "swin-b"):
        cfg = S.SwinConfig.preset(name)
        assert (cfg.version, cfg.window_size, cfg.image_size) == (1, 7, (224, 224))
    for name in ("swinv2-t", "swinv2-s", "swinv2-b"):
        cfg = S.SwinConfig.preset(name)
        assert (cfg.version, cfg.window_size, cfg.image_size) == (2, 8, (256, 256))
    assert S.SwinConfig.preset("swin-s").depths == (2, 2, 18, 2)
    assert S.SwinConfig.preset("swinv2-b").dim == 128 and S.SwinConfig.preset("swinv2-b").n_heads == (4, 8, 16, 32)


# ---------------------------------------------------------------- bad input
def test_wrong_channel_count_is_rejected():
    model = S.Swin(S.SwinConfig.preset("swin-tiny-test"))
    with pytest.raises(ValueError, match=r"1, 32, 32\).*in_chans=3"):
        model(torch.zeros(1, 1, 32, 32))


def test_image_smaller_than_a_patch_is_rejected():
    model = S.Swin(S.SwinConfig.preset("swinv2-tiny-test"))
    with pytest.raises(ValueError, match=r"3x8 is smaller than one patch \(4x4\)"):
        model(torch.zeros(1, 3, 3, 8))


def test_width_not_divisible_by_heads_is_rejected():
    with pytest.raises(ValueError, match=r"stage 1: width 32 .* not divisible by n_heads=3"):
        S.SwinConfig(dim=16, depths=(2, 2), n_heads=(2, 3))


def test_unknown_preset_is_rejected():
    with pytest.raises(ValueError, match="unknown Swin preset 'swin-xl'"):
        S.SwinConfig.preset("swin-xl")


def test_absolute_position_embeddings_are_rejected():
    hf = transformers.SwinModel(transformers.SwinConfig(**TINY, use_absolute_embeddings=True))
    with pytest.raises(ValueError, match="use_absolute_embeddings=True"):
        from_hf(hf)


def test_weights_of_the_wrong_shape_are_rejected_by_name():
    hf = hf_swin(1, **TINY)
    hf.layernorm.weight = torch.nn.Parameter(torch.ones(5))
    with pytest.raises(ValueError, match=r"'norm.weight'.*\(5,\).*\(32,\)"):
        from_hf(hf)


def test_unknown_weights_are_rejected_by_name():
    hf = hf_swin(2, **TINY)
    hf.register_parameter("extra", torch.nn.Parameter(torch.ones(1)))
    with pytest.raises(ValueError, match="'extra'"):
        from_hf(hf)


# ---------------------------------------------------------------- chapter helpers
def test_shift_regions_has_nine_labels_and_no_shift_has_three_by_three_blocks_only_at_edges():
    lab = S.shift_regions(8, 8, 4, 2)
    assert lab.shape == (8, 8) and sorted(lab.unique().tolist()) == list(range(9))
    assert (lab[:4, :4] == 0).all() and lab[7, 7] == 8 and lab[4, 6] == 3 * 1 + 2


def test_shifted_window_mask_is_zero_exactly_within_a_region():
    lab = S.window_partition(S.shift_regions(12, 8, 4, 2)[None, :, :, None].float(), 4).squeeze(-1)
    mask = S.shifted_window_mask(12, 8, 4, 2)
    assert torch.equal(mask == 0, lab[:, :, None] == lab[:, None, :])


def test_merge_2x2_order_and_odd_padding():
    x = torch.arange(2 * 3 * 5 * 1, dtype=torch.float32).view(2, 15, 1)
    out, hw = S.merge_2x2(x, (3, 5))
    assert hw == (2, 3) and out.shape == (2, 6, 4)
    grid = x.view(2, 3, 5)
    assert out[0, 0].tolist() == [grid[0, 0, 0], grid[0, 1, 0], grid[0, 0, 1], grid[0, 1, 1]]
    assert out[0, -1].tolist() == [grid[0, 2, 4], 0.0, 0.0, 0.0]  # padded row and column


@given(st.integers(1, 4), st.integers(1, 6), st.floats(-3.0, 8.0))
@settings(max_examples=20, deadline=None)
def test_cosine_attention_matches_explicit_formula_and_clamps(heads, n, log_tau):
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(2, heads, n, 5, generator=g, dtype=torch.float64) for _ in range(3))
    scale = torch.full((heads, 1, 1), log_tau, dtype=torch.float64)
    out = S.cosine_attention(q, k, v, scale)
    cos = (q / q.norm(dim=-1, keepdim=True)) @ (k / k.norm(dim=-1, keepdim=True)).transpose(-2, -1)
    expected = torch.softmax(cos * math.exp(min(log_tau, math.log(100))), -1) @ v
    torch.testing.assert_close(out, expected)


def test_stage_shapes_of_swin_t_follow_the_paper():
    rows = S.stage_shapes(S.SwinConfig.preset("swin-t"))
    assert [(r["height"], r["width"], r["dim"]) for r in rows] == [(56, 56, 96), (28, 28, 192), (14, 14, 384),
                                                                    (7, 7, 768)]
    assert [r["window"] for r in rows] == [7, 7, 7, 7]


def test_attention_matrix_entries_global_is_quadratic_window_is_linear():
    assert C.attention_matrix_entries(8, 8) == 64 * 64
    assert C.attention_matrix_entries(8, 8, 4) == 64 * 16
    assert C.attention_matrix_entries(16, 16, 4) == 4 * C.attention_matrix_entries(8, 8, 4)
