"""Specification of course_lib.vit (chapter 09) and its Hugging Face interop.

Parity tests load tiny random ``transformers`` ViTs (built from configs, never
downloaded) into course_lib and compare outputs in float32 on the CPU.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

transformers = pytest.importorskip("transformers")

from parity import perturbed  # noqa: E402

from course_lib.interop import from_hf, load_hf_checkpoint  # noqa: E402
from course_lib.interop import vit as interop_vit  # noqa: E402
from course_lib.vit import PRESETS, PatchEmbed, ViT, ViTConfig, patchify  # noqa: E402

TOL = 1e-4


def _hf_config(**overrides):
    kw = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, image_size=32,
              patch_size=8, num_channels=3, attn_implementation="eager")  # eager: HF returns attentions only then
    kw.update(overrides)
    return transformers.ViTConfig(**kw)


# Non-default configurations: no q/k/v bias, patch 14, tanh GELU, 4 channels.
HF_CONFIGS = {
    "no-qkv-bias": dict(qkv_bias=False),
    "patch14-tanh": dict(patch_size=14, image_size=28, hidden_act="gelu_pytorch_tanh", num_channels=4),
}
# (height, width) per config: native, non-square and upsampled, downsampled.
SIZES = {
    "no-qkv-bias": [(32, 32), (48, 24), (16, 64), (16, 16)],
    "patch14-tanh": [(28, 28), (42, 70), (14, 28)],
}


@pytest.fixture(scope="module")
def hf_models():
    torch.manual_seed(0)
    return {name: perturbed(transformers.ViTModel(_hf_config(**kw))) for name, kw in HF_CONFIGS.items()}


def _cases():
    return [(name, hw) for name in HF_CONFIGS for hw in SIZES[name]]


# ---------------------------------------------------------------- parity
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
@pytest.mark.parametrize("name,hw", _cases())
def test_forward_features_equal_hf_last_hidden_state(hf_models, name, hw, attn_impl):
    hf = hf_models[name]
    model = interop_vit.from_hf(hf, attn_impl=attn_impl)
    x = torch.randn(2, hf.config.num_channels, *hw)
    with torch.no_grad():
        ref = hf(x, interpolate_pos_encoding=True).last_hidden_state
        out = model.forward_features(x)
    assert out.shape == ref.shape
    assert (out - ref).abs().max() <= TOL


@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_classifier_logits_equal_hf(attn_impl):
    torch.manual_seed(1)
    hf = perturbed(transformers.ViTForImageClassification(_hf_config(num_labels=7, qkv_bias=False)), seed=1)
    model = interop_vit.from_hf(hf, attn_impl=attn_impl)
    for hw in [(32, 32), (24, 40)]:
        x = torch.randn(3, 3, *hw)
        with torch.no_grad():
            ref = hf(x, interpolate_pos_encoding=True).logits
            out = model(x)
        assert out.shape == (3, 7)
        assert (out - ref).abs().max() <= TOL


@pytest.mark.parametrize("name,hw", [("no-qkv-bias", (32, 32)), ("patch14-tanh", (42, 70))])
def test_attention_maps_equal_hf_output_attentions(hf_models, name, hw):
    hf = hf_models[name]
    model = from_hf(hf)
    x = torch.randn(2, hf.config.num_channels, *hw)
    with torch.no_grad():
        ref = hf(x, interpolate_pos_encoding=True, output_attentions=True).attentions
    maps = model.get_attention_maps(x)
    assert len(maps) == len(ref) == hf.config.num_hidden_layers
    for ours, theirs in zip(maps, ref):
        assert ours.shape == theirs.shape  # (B, heads, T, T)
        assert (ours - theirs).abs().max() <= TOL


def test_from_hf_reads_hf_epsilon_and_returns_eval_model(hf_models):
    model = from_hf(hf_models["no-qkv-bias"])
    assert model.norm.eps == 1e-12  # HF ViT's default, not PyTorch's 1e-5
    assert not model.training
    assert model.blocks[0].attn.q_proj.bias is None


def test_vitmodel_pooler_is_skipped(hf_models):
    hf = hf_models["no-qkv-bias"]
    assert hf.pooler is not None  # present by default (add_pooling_layer=True) ...
    assert not any("pooler" in k for k in interop_vit.convert_state_dict(hf.state_dict()))  # ... and ignored


def test_checkpoint_file_key_names_load_too(hf_models):
    """Older checkpoint files name the layers encoder.layer.{i}.attention.attention.query etc."""
    hf = hf_models["no-qkv-bias"]
    legacy = {}
    for k, v in hf.state_dict().items():
        k = k.replace("layers.", "encoder.layer.")
        for new, old in [("q_proj", "attention.query"), ("k_proj", "attention.key"), ("v_proj", "attention.value"),
                         ("attention.o_proj", "attention.output.dense"), ("mlp.fc1", "intermediate.dense"),
                         ("mlp.fc2", "output.dense")]:
            k = k.replace(new, old)
        legacy[k] = v
    model = interop_vit.load_hf_state_dict(ViT(interop_vit.config_from_hf(hf.config)), legacy).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert (model.forward_features(x) - hf(x).last_hidden_state).abs().max() <= TOL


def test_local_checkpoint_folder_loads_through_the_registry(tmp_path):
    hf = perturbed(transformers.ViTForImageClassification(_hf_config(num_labels=3)), seed=2)
    hf.save_pretrained(tmp_path)
    model = load_hf_checkpoint(tmp_path)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert (model(x) - hf(x).logits).abs().max() <= TOL


def test_state_dict_that_does_not_fit_raises_value_error(hf_models):
    hf = hf_models["no-qkv-bias"]
    cfg = interop_vit.config_from_hf(hf.config)
    with pytest.raises(ValueError, match="lacks|has .* weight|has shape"):
        interop_vit.load_hf_state_dict(ViT(ViTConfig(**{**cfg.to_dict(), "n_layers": 1})), hf.state_dict())
    with pytest.raises(ValueError, match="lacks|has .* weight|has shape"):  # qkv biases expected but missing
        interop_vit.load_hf_state_dict(ViT(ViTConfig(**{**cfg.to_dict(), "qkv_bias": True})), hf.state_dict())
    with pytest.raises(ValueError, match="no course_lib ViT parameter"):
        interop_vit.convert_state_dict({"encoder.mystery.weight": torch.zeros(1)})


def test_unsupported_activation_raises_value_error_naming_it():
    cfg = _hf_config()
    cfg.hidden_act = "mish"
    with pytest.raises(ValueError, match="mish"):
        interop_vit.config_from_hf(cfg)


# ---------------------------------------------------------------- properties
@settings(max_examples=25, deadline=None)
@given(patch=st.sampled_from([1, 2, 4, 7]), chans=st.integers(1, 4), gh=st.integers(1, 3), gw=st.integers(1, 3))
def test_patch_embedding_conv_equals_unfold_and_patchify(patch, chans, gh, gw):
    torch.manual_seed(patch * 100 + chans)
    pe = PatchEmbed(patch, chans, dim=5)
    x = torch.randn(2, chans, gh * patch, gw * patch)
    conv = pe(x)
    assert conv.shape == (2, gh * gw, 5)
    torch.testing.assert_close(pe.forward_unfold(x), conv, atol=1e-5, rtol=1e-5)
    linear = patchify(x, patch) @ pe.proj.weight.reshape(5, -1).T + pe.proj.bias
    torch.testing.assert_close(linear, conv, atol=1e-5, rtol=1e-5)


def test_patchify_puts_each_patch_in_row_major_order():
    x = torch.arange(2 * 4 * 6, dtype=torch.float32).reshape(1, 2, 4, 6)
    p = patchify(x, 2)  # grid 2 x 3
    assert p.shape == (1, 6, 8)
    # patch (row 1, col 2) = index 5: channel 0 rows 2-3, cols 4-5, then channel 1
    assert p[0, 5].tolist() == x[0, :, 2:4, 4:6].flatten().tolist()


def _tiny(**overrides) -> ViT:
    torch.manual_seed(0)
    return ViT(ViTConfig.preset("vit-tiny-test", **overrides)).eval()


def test_cls_pooled_head_uses_only_token_0():
    model = _tiny()
    feats = torch.randn(2, 17, 32, requires_grad=True)
    logits = model.forward_head(feats)
    logits.sum().backward()
    assert feats.grad[:, 1:].abs().max() == 0 and feats.grad[:, 0].abs().max() > 0
    changed = feats.detach().clone()
    changed[:, 1:] = torch.randn(2, 16, 32)
    assert torch.equal(model.forward_head(changed), logits.detach())
    assert model.forward_head(feats, pre_logits=True).shape == (2, 32)


def test_mean_pool_without_cls_averages_patch_tokens():
    model = _tiny(pool="mean", class_token=False)
    x = torch.randn(2, 3, 32, 32)
    feats = model.forward_features(x)
    assert feats.shape == (2, 16, 32)  # no prefix token
    torch.testing.assert_close(model.forward_head(feats, pre_logits=True), feats.mean(1))


@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_permuting_patches_with_their_positions_permutes_the_outputs(attn_impl):
    """Attention is permutation-equivariant: only the position embeddings tell where a patch is."""
    model = _tiny(attn_impl=attn_impl)
    p, (gh, gw) = model.cfg.patch_size, model.grid
    x = torch.randn(2, 3, gh * p, gw * p)
    perm = torch.randperm(gh * gw, generator=torch.Generator().manual_seed(3))
    # shuffle the image's patches ...
    patches = x.reshape(2, 3, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5).reshape(2, gh * gw, 3, p, p)[:, perm]
    x_perm = patches.reshape(2, gh, gw, 3, p, p).permute(0, 3, 1, 4, 2, 5).reshape(x.shape)
    # ... and their learned positions the same way
    permuted = _tiny(attn_impl=attn_impl)
    with torch.no_grad():
        permuted.pos_embed[:, 1:] = model.pos_embed[:, 1:][:, perm]
        out, out_perm = model.forward_features(x), permuted.forward_features(x_perm)
    torch.testing.assert_close(out_perm[:, 0], out[:, 0], atol=1e-5, rtol=1e-5)  # CLS unchanged
    torch.testing.assert_close(out_perm[:, 1:], out[:, 1:][:, perm], atol=1e-5, rtol=1e-5)


def test_eager_and_sdpa_agree():
    x = torch.randn(2, 3, 40, 24)
    eager, sdpa = _tiny(attn_impl="eager"), _tiny(attn_impl="sdpa")
    with torch.no_grad():
        torch.testing.assert_close(eager(x), sdpa(x), atol=1e-5, rtol=1e-5)


def test_attention_maps_are_distributions_over_all_tokens():
    maps = _tiny().get_attention_maps(torch.randn(2, 3, 32, 48))
    assert len(maps) == 2 and maps[0].shape == (2, 4, 25, 25)
    torch.testing.assert_close(maps[1].sum(-1), torch.ones(2, 4, 25))


def test_attention_maps_of_chosen_layers_are_those_of_all_layers():
    model = _tiny(n_layers=3)
    x = torch.randn(2, 3, 32, 48)
    every = model.get_attention_maps(x)
    for layers, expect in (([-1], [2]), ([0, 2], [0, 2]), ([2, 0, -3], [2, 0, 0]), ([], [])):
        chosen = model.get_attention_maps(x, layers)
        assert len(chosen) == len(expect)
        for got, i in zip(chosen, expect):
            torch.testing.assert_close(got, every[i], atol=1e-6, rtol=1e-5)
    for bad in ([3], [-4]):
        with pytest.raises(ValueError, match=r"layers must be block indices in \[-3, 3\), got"):
            model.get_attention_maps(x, bad)


def test_position_embeddings_are_resampled_to_the_input_grid():
    model = _tiny()
    assert model.pos_embed_for((4, 4)) is model.pos_embed  # native grid: untouched
    assert model.pos_embed_for((3, 5)).shape == (1, 1 + 15, 32)


def test_drop_path_increases_linearly_with_depth():
    model = ViT(ViTConfig.preset("vit-tiny-test", n_layers=5, drop_path_rate=0.2))
    rates = [b.attn_res.drop_path.p for b in model.blocks]
    assert rates == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("shape,pattern", [
    ((1, 4, 32, 32), r"4 channels.*in_chans=3"),
    ((1, 3, 30, 32), r"30x32.*not divisible by patch_size=8.*multiples of 8"),
    ((1, 3, 32, 36), r"32x36.*not divisible by patch_size=8"),
    ((3, 32, 32), r"\(batch, channels, height, width\)"),
])
def test_bad_images_raise_value_error_naming_value_and_rule(shape, pattern):
    with pytest.raises(ValueError, match=pattern):
        _tiny()(torch.randn(*shape))


def test_bad_configs_raise_value_error():
    with pytest.raises(ValueError, match="class_token"):
        ViTConfig.preset("vit-tiny-test", class_token=False)  # pool="cls" needs it
    with pytest.raises(ValueError, match="n_heads"):
        ViTConfig.preset("vit-tiny-test", n_heads=5)
    with pytest.raises(ValueError, match="unknown ViT preset"):
        ViTConfig.preset("vit-xxl/3")


# ---------------------------------------------------------------- presets
@pytest.mark.parametrize("name,params", [
    ("vit-ti/16", 5_717_416), ("vit-s/16", 22_050_664), ("vit-b/16", 86_567_656),
    ("vit-l/16", 304_326_632), ("vit-h/14", 632_045_800),
])
def test_published_presets_have_published_parameter_counts(name, params):
    with torch.device("meta"):  # no memory, no compute
        model = ViT(ViTConfig.preset(name))
    assert model.num_params() == params
    assert name in PRESETS


def test_every_vit_family_reads_its_own_presets():
    from course_lib.deit import DEIT_PRESETS, DeiTConfig
    from course_lib.dinov2 import DINOV2_PRESETS, DINOv2Config

    for cls, table, family in [(ViTConfig, PRESETS, "ViT"), (DINOv2Config, DINOV2_PRESETS, "DINOv2"),
                               (DeiTConfig, DEIT_PRESETS, "DeiT")]:
        for name, fields in table.items():
            cfg = cls.preset(name)
            assert type(cfg) is cls and cfg == cls(**fields)
        with pytest.raises(ValueError, match=f"unknown {family} preset 'vit-xxl/3'"):
            cls.preset("vit-xxl/3")
    assert DINOv2Config.preset("dinov2-s/14", n_registers=2).n_registers == 2
    with pytest.raises(ValueError, match="unknown DINOv2 preset 'vit-b/16'"):
        DINOv2Config.preset("vit-b/16")


@pytest.mark.parametrize("family", ["vit", "dinov2", "deit"])
def test_a_forward_checks_the_patch_grid_once(family, monkeypatch):
    from course_lib.deit import DeiT, DeiTConfig
    from course_lib.dinov2 import DINOv2, DINOv2Config

    model = {"vit": lambda: _tiny(), "dinov2": lambda: DINOv2(DINOv2Config.preset("dinov2-tiny-test")).eval(),
             "deit": lambda: DeiT(DeiTConfig.preset("deit-tiny-test")).eval()}[family]()
    x = torch.randn(2, 3, *model.cfg.image_hw)
    checks = []
    grid_size = PatchEmbed.grid_size
    monkeypatch.setattr(PatchEmbed, "grid_size", lambda self, images: checks.append(1) or grid_size(self, images))
    with torch.no_grad():
        for run in (model, model.forward_features, model.embed, model.get_attention_maps):
            checks.clear()
            run(x)
            assert len(checks) == 1, f"{getattr(run, '__name__', 'forward')} checked the grid {len(checks)} times"


# ---------------------------------------------------------------- precision and compile
def test_bf16_autocast_is_close_to_fp32():
    model, x = _tiny(), torch.randn(2, 3, 32, 40)
    with torch.no_grad():
        ref = model.forward_features(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model.forward_features(x)
    assert torch.isfinite(out).all()
    assert (out.float() - ref).abs().max() < 0.05 * ref.abs().max()


def test_torch_compile_gives_the_same_output():
    model, x = _tiny(), torch.randn(2, 3, 32, 32)
    compiled = torch.compile(model, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ the functional walk-through (chapter 09)
def test_vit_forward_from_parts_equals_the_module():
    from course_lib.vit import vit_forward

    model = perturbed(ViT(ViTConfig.preset("vit-tiny-test")))
    x = torch.randn(3, 3, 32, 32)
    out = vit_forward(x, model.patch_embed.proj, model.cls_token, model.pos_embed, model.blocks, model.norm, model.head)
    torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)


def test_prepend_cls_add_pos_equals_the_model_embedding():
    from course_lib.vit import prepend_cls_add_pos

    model = perturbed(ViT(ViTConfig.preset("vit-tiny-test")))
    x = torch.randn(2, 3, 32, 32)
    tokens = prepend_cls_add_pos(model.patch_embed(x), model.cls_token, model.pos_embed)
    torch.testing.assert_close(tokens, model.embed(x))


def test_mean_attention_distance_of_uniform_and_self_attention():
    from course_lib.vit import mean_attention_distance, patch_distances

    grid, n = (3, 4), 12
    self_only = torch.eye(1 + n).expand(2, 3, -1, -1)
    assert torch.equal(mean_attention_distance(self_only, grid, patch=4), torch.zeros(3))
    uniform = torch.full((1, 2, 1 + n, 1 + n), 1.0 / (1 + n))
    expected = patch_distances(grid, patch=4).mean().float()
    torch.testing.assert_close(mean_attention_distance(uniform, grid, patch=4), expected.expand(2))


def test_patch_distances_are_in_pixels_between_centres():
    from course_lib.vit import patch_distances

    d = patch_distances((2, 2), patch=8)
    assert d[0, 1] == 8 and d[0, 2] == 8 and torch.isclose(d[0, 3], torch.tensor(8 * 2**0.5, dtype=d.dtype))
