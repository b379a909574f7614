"""Specification of course_lib.dinov2 (chapter 10) and its Hugging Face interop.

Parity tests load tiny random ``transformers`` DINOv2 models (built from
configs, never downloaded) and compare ``last_hidden_state`` in float32.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

from parity import perturbed  # noqa: E402

from course_lib.dino import DINOHead, dino_loss, ema_update, update_center  # noqa: E402
from course_lib.dinov2 import DINOV2_PRESETS, DINOv2, DINOv2Config  # noqa: E402
from course_lib.interop import dinov2 as interop_dinov2  # noqa: E402
from course_lib.interop import from_hf, load_hf_checkpoint  # noqa: E402

TOL = 1e-4


_BASE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=56, patch_size=14,
             attn_implementation="eager")  # eager: HF returns attentions only then
HF_MODELS = {
    # name: (HF class, config class, overrides)
    "plain": ("Dinov2Model", "Dinov2Config", dict(qkv_bias=False, layerscale_value=0.3)),
    "swiglu": ("Dinov2Model", "Dinov2Config", dict(use_swiglu_ffn=True)),  # hidden 88: the rounding rule
    "registers": ("Dinov2WithRegistersModel", "Dinov2WithRegistersConfig", dict(num_register_tokens=3)),
    "registers-swiglu": ("Dinov2WithRegistersModel", "Dinov2WithRegistersConfig",
                         dict(num_register_tokens=4, use_swiglu_ffn=True, layerscale_value=0.5, qkv_bias=False)),
}
# native 4x4 grid; non-square up- and down-sampled grids (antialiasing matters when shrinking)
SIZES = [(56, 56), (42, 70), (28, 42), (84, 28)]


@pytest.fixture(scope="module")
def hf_models():
    torch.manual_seed(0)
    out = {}
    for i, (name, (model_cls, config_cls, kw)) in enumerate(HF_MODELS.items()):
        config = getattr(transformers, config_cls)(**_BASE, **kw)
        out[name] = perturbed(getattr(transformers, model_cls)(config), seed=i)
    return out


# ---------------------------------------------------------------- parity
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
@pytest.mark.parametrize("hw", SIZES)
@pytest.mark.parametrize("name", list(HF_MODELS))
def test_forward_features_equal_hf_last_hidden_state(hf_models, name, hw, attn_impl):
    hf = hf_models[name]
    model = interop_dinov2.from_hf(hf, attn_impl=attn_impl)
    x = torch.randn(2, 3, *hw)
    with torch.no_grad():
        ref = hf(x).last_hidden_state
        out = model.forward_features(x)
    assert out.shape == ref.shape == (2, 1 + model.cfg.n_registers + (hw[0] // 14) * (hw[1] // 14), 32)
    assert (out - ref).abs().max() <= TOL


@pytest.mark.parametrize("name", ["plain", "registers-swiglu"])
def test_masked_patches_equal_hf_bool_masked_pos(hf_models, name):
    hf = hf_models[name]
    model = from_hf(hf)
    x = torch.randn(2, 3, 42, 70)
    masks = torch.rand(2, 15, generator=torch.Generator().manual_seed(1)) < 0.4
    with torch.no_grad():
        ref = hf(x, bool_masked_pos=masks).last_hidden_state
        out = model.forward_features(x, masks)
    assert (out - ref).abs().max() <= TOL
    assert (out - model.forward_features(x)).abs().max() > 1e-3  # the mask did something


@pytest.mark.parametrize("name", ["plain", "registers-swiglu"])
def test_attention_maps_equal_hf_output_attentions(hf_models, name):
    hf = hf_models[name]
    model = from_hf(hf)
    x = torch.randn(2, 3, 28, 42)
    with torch.no_grad():
        ref = hf(x, output_attentions=True).attentions
    maps = model.get_attention_maps(x)
    assert len(maps) == len(ref)
    for ours, theirs in zip(maps, ref):
        assert ours.shape == theirs.shape  # (B, heads, 1 + R + N, 1 + R + N)
        assert (ours - theirs).abs().max() <= TOL


def test_from_hf_reads_registers_swiglu_layerscale_and_antialias(hf_models):
    model = from_hf(hf_models["registers-swiglu"])
    cfg = model.cfg
    assert (cfg.n_registers, cfg.mlp, cfg.mlp_hidden_dim(), cfg.pos_antialias) == (4, "swiglu", 88, True)
    assert cfg.qkv_bias is False and cfg.norm_eps == 1e-6 and not model.training
    assert from_hf(hf_models["plain"]).cfg.pos_antialias is False  # plain DINOv2 resamples without


def test_fused_swiglu_checkpoint_weights_split_gate_first(hf_models):
    """Checkpoint files store gate and up rows fused as mlp.weights_in: gate first."""
    hf = hf_models["registers-swiglu"]
    sd = hf.state_dict()
    legacy = {}
    for k, v in sd.items():
        if ".mlp.gate_proj." in k:
            legacy[k.replace("gate_proj", "weights_in")] = torch.cat([v, sd[k.replace("gate_proj", "up_proj")]])
        elif ".mlp.up_proj." in k:
            continue
        else:
            k = k.replace("mlp.down_proj", "mlp.weights_out").replace("attention.o_proj", "attention.output.dense")
            for new, old in [("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value")]:
                k = k.replace(f"attention.{new}", f"attention.attention.{old}")
            legacy[k] = v
    assert any("weights_in" in k for k in legacy) and any("attention.attention.query" in k for k in legacy)
    model = interop_dinov2.load_hf_state_dict(DINOv2(from_hf(hf).cfg), legacy).eval()
    x = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        assert (model.forward_features(x) - hf(x).last_hidden_state).abs().max() <= TOL


def test_local_checkpoint_folder_loads_through_the_registry(hf_models, tmp_path):
    hf = hf_models["registers-swiglu"]
    hf.save_pretrained(tmp_path)
    model = load_hf_checkpoint(tmp_path)
    x = torch.randn(1, 3, 42, 56)
    with torch.no_grad():
        assert (model.forward_features(x) - hf(x).last_hidden_state).abs().max() <= TOL


def test_state_dict_that_does_not_fit_raises_value_error(hf_models):
    hf = hf_models["registers"]
    cfg = from_hf(hf).cfg
    for wrong in (dict(n_registers=2), dict(mlp="swiglu"), dict(n_layers=3)):
        with pytest.raises(ValueError, match="lacks|has .* weight|has shape"):
            interop_dinov2.load_hf_state_dict(DINOv2(DINOv2Config(**{**cfg.to_dict(), **wrong})), hf.state_dict())
    with pytest.raises(ValueError, match="expected one of"):
        interop_dinov2.from_hf(torch.nn.Linear(2, 2))


def test_unsupported_activation_raises_value_error_naming_it():
    config = transformers.Dinov2Config(**_BASE)
    config.hidden_act = "mish"
    with pytest.raises(ValueError, match="mish"):
        interop_dinov2.config_from_hf(config, registers_model=False)


# ---------------------------------------------------------------- backbone properties
def _tiny(name="dinov2-tiny-reg-test", **overrides) -> DINOv2:
    torch.manual_seed(0)
    model = DINOv2(DINOv2Config.preset(name, **overrides)).eval()
    return perturbed(model)


def test_registers_follow_cls_and_carry_no_position():
    model = _tiny()
    x = torch.randn(2, 3, 42, 28)
    tokens = model.embed(x)
    assert tokens.shape == (2, 1 + 4 + 6, 32)
    torch.testing.assert_close(tokens[:, 1:5], model.register_tokens.expand(2, -1, -1))
    torch.testing.assert_close(tokens[:, 0], (model.cls_token + model.pos_embed[:, :1])[:, 0].expand(2, -1))


def test_fresh_registers_differ_so_training_can_tell_them_apart():
    """Registers carry no position: if they started equal, attention and the gradients would treat them alike, and
    they would stay R copies of one register. The official code draws them from N(0, 1e-6)."""
    torch.manual_seed(0)
    model = DINOv2(DINOv2Config.preset("dinov2-tiny-reg-test")).eval()  # as built, not randomised
    regs = model.register_tokens.detach()[0]                       # (R, D)
    assert 0 < regs.std() < 1e-5
    assert all(not torch.equal(regs[i], regs[j]) for i in range(len(regs)) for j in range(i))
    out = model.forward_features(torch.randn(2, 3, 42, 28))[:, 1:5]  # and the outputs of the registers differ too
    assert all((out[:, i] - out[:, j]).abs().max() > 0 for i in range(4) for j in range(i))


def test_mean_pooling_excludes_cls_and_registers():
    model = _tiny(pool="mean")
    feats = torch.randn(2, 1 + 4 + 16, 32)
    torch.testing.assert_close(model.forward_head(feats), feats[:, 5:].mean(1))


def test_bad_masks_and_images_raise_value_error():
    model = _tiny()
    x = torch.randn(1, 3, 56, 56)
    with pytest.raises(ValueError, match=r"\(batch, patches\) = \(1, 16\)"):
        model.forward_features(x, torch.zeros(1, 15, dtype=torch.bool))
    with pytest.raises(ValueError, match="boolean"):
        model.forward_features(x, torch.zeros(1, 16))
    with pytest.raises(ValueError, match="no mask token"):
        _tiny(mask_token=False).forward_features(x, torch.zeros(1, 16, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"50x56.*patch_size=14"):
        model(torch.randn(1, 3, 50, 56))
    with pytest.raises(ValueError, match="in_chans=3"):
        model(torch.randn(1, 1, 56, 56))


def test_swiglu_hidden_width_rule():
    assert DINOv2Config.preset("dinov2-g/14").mlp_hidden_dim() == 4096  # 2/3 of 4 * 1536
    assert DINOv2Config(dim=32, n_heads=4, mlp="swiglu").mlp_hidden_dim() == 88  # int(128 * 2/3) = 85 -> 88
    assert DINOv2Config(dim=32, n_heads=4).mlp_hidden_dim() == 128


@pytest.mark.parametrize("name,size", [("dinov2-s/14", (384, 12, 6)), ("dinov2-b/14", (768, 12, 12)),
                                       ("dinov2-l/14", (1024, 24, 16)), ("dinov2-g/14", (1536, 40, 24))])
def test_presets_have_published_sizes(name, size):
    cfg = DINOv2Config.preset(name)
    assert (cfg.dim, cfg.n_layers, cfg.n_heads, cfg.patch_size) == (*size, 14)
    assert cfg.mlp == ("swiglu" if name.startswith("dinov2-g") else "gelu")
    assert DINOV2_PRESETS[name + "-reg"]["n_registers"] == 4


def test_bf16_autocast_is_close_to_fp32():
    model, x = _tiny(), torch.randn(2, 3, 42, 56)
    with torch.no_grad():
        ref = model.forward_features(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model.forward_features(x)
    assert torch.isfinite(out).all()
    assert (out.float() - ref).abs().max() < 0.05 * ref.abs().max()


def test_torch_compile_gives_the_same_output():
    model, x = _tiny(), torch.randn(2, 3, 56, 56)
    masks = torch.rand(2, 16) < 0.5
    compiled = torch.compile(model.forward_features, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, masks), model.forward_features(x, masks), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- DINO head and loss
def test_dino_head_shapes_and_unit_prototypes():
    head = DINOHead(32, out_dim=50, hidden_dim=24, bottleneck_dim=8)
    assert head(torch.randn(5, 32)).shape == (5, 50)
    torch.testing.assert_close(head.last_layer.weight.norm(dim=1), torch.ones(50))
    assert not head.last_layer.weight_g.requires_grad  # norm_last_layer: g frozen at 1
    assert sum(isinstance(m, torch.nn.Linear) for m in head.mlp) == 3
    assert sum(isinstance(m, torch.nn.GELU) for m in head.mlp) == 2


def test_dino_head_batchnorm_follows_each_hidden_linear_and_separates_alike_inputs():
    """``use_bn`` (DINO's option): a BatchNorm after each hidden Linear, none after the bottleneck; on features that
    share one large part (as an untrained ViT's CLS features of digits do), the bottleneck's outputs of different
    inputs point the same way without it and apart with it."""
    head = DINOHead(32, out_dim=50, hidden_dim=24, bottleneck_dim=8, use_bn=True)
    kinds = [type(m).__name__ for m in head.mlp]
    assert kinds == ["Linear", "BatchNorm1d", "GELU", "Linear", "BatchNorm1d", "GELU", "Linear"], kinds
    assert not any(isinstance(m, torch.nn.BatchNorm1d) for m in DINOHead(32, 50, 24, 8).mlp)
    g = torch.Generator().manual_seed(0)
    alike = torch.randn(1, 32, generator=g) * 10 + torch.randn(64, 32, generator=g)  # one shared part, small rest

    def mean_cosine(h):
        z = torch.nn.functional.normalize(h.mlp(alike), dim=-1)
        return ((z @ z.T).sum() - len(z)) / (len(z) * (len(z) - 1))

    torch.manual_seed(0)
    plain = DINOHead(32, out_dim=50, hidden_dim=24, bottleneck_dim=8)
    torch.manual_seed(0)
    with_bn = DINOHead(32, out_dim=50, hidden_dim=24, bottleneck_dim=8, use_bn=True).train()
    assert mean_cosine(plain) > 0.9 > 0.5 > mean_cosine(with_bn)


def test_dino_head_scores_are_cosines_bounded_by_one():
    head = DINOHead(16, out_dim=30, hidden_dim=16, bottleneck_dim=8)
    assert head(torch.randn(10, 16) * 100).abs().max() <= 1 + 1e-5


def _crops(n, b=4, k=10, seed=0):
    return torch.randn(n, b, k, generator=torch.Generator().manual_seed(seed))


def test_dino_loss_is_minimized_when_student_matches_centered_teacher():
    teacher, center = _crops(2, seed=1), torch.randn(10, generator=torch.Generator().manual_seed(2))
    ts, ss = 0.04, 0.1
    # the student matching each *other* view's centered, sharpened teacher distribution
    target = (teacher - center) / ts * ss
    student = target.flip(0)  # student crop j faces teacher crop i != j
    best = dino_loss(student, teacher, center, ss, ts)
    p_t = F.softmax((teacher - center) / ts, dim=-1)
    entropy = -(p_t * p_t.clamp_min(1e-30).log()).sum(-1).mean()
    torch.testing.assert_close(best, entropy, atol=1e-5, rtol=1e-5)  # cross-entropy = entropy: the minimum
    for seed in range(5):
        other = student + 0.5 * _crops(2, seed=10 + seed)
        assert dino_loss(other, teacher, center, ss, ts) > best
    student.requires_grad_(True)
    dino_loss(student, teacher, center, ss, ts).backward()
    assert student.grad.abs().max() < 1e-5  # a stationary point


def test_dino_loss_skips_same_view_pairs_and_accepts_lists():
    teacher, student, center = _crops(1), _crops(3, seed=5), torch.zeros(1, 10)
    loss = dino_loss(student, teacher, center)
    changed = student.clone()
    changed[0] = torch.randn(4, 10)  # the view the single teacher crop also saw
    torch.testing.assert_close(dino_loss(changed, teacher, center), loss)
    torch.testing.assert_close(dino_loss(list(student), list(teacher), center), loss)
    with pytest.raises(ValueError, match="two crops"):
        dino_loss(student[:1], teacher, center)


def test_dino_loss_sends_no_gradient_to_the_teacher():
    teacher = _crops(2, seed=3).requires_grad_(True)
    student = _crops(4, seed=4).requires_grad_(True)
    dino_loss(student, teacher, torch.zeros(10)).backward()
    assert teacher.grad is None and student.grad is not None


def test_update_center_is_an_ema_of_the_teacher_mean():
    center, teacher = torch.randn(1, 10), _crops(2, seed=7)
    new = update_center(center, teacher, momentum=0.9)
    torch.testing.assert_close(new, 0.9 * center + 0.1 * teacher.reshape(-1, 10).mean(0, keepdim=True))
    torch.testing.assert_close(update_center(center, list(teacher), 0.0), teacher.mean((0, 1)).reshape(1, 10))
    assert torch.equal(update_center(center, teacher, 1.0), center)


def test_ema_update_momentum_one_keeps_teacher_and_zero_copies_student():
    torch.manual_seed(0)
    teacher, student = DINOHead(8, 12, 16, 4), DINOHead(8, 12, 16, 4)
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    ema_update(teacher, student, 1.0)
    assert all(torch.equal(v, before[k]) for k, v in teacher.state_dict().items())
    ema_update(teacher, student, 0.0)
    assert all(torch.equal(v, student.state_dict()[k]) for k, v in teacher.state_dict().items())


def test_ema_update_interpolates_and_requires_the_same_structure():
    torch.manual_seed(0)
    teacher, student = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    expected = 0.75 * teacher.weight.detach() + 0.25 * student.weight.detach()
    ema_update(teacher, student, 0.75)
    torch.testing.assert_close(teacher.weight.detach(), expected)
    with pytest.raises(ValueError, match="structure"):
        ema_update(teacher, torch.nn.Sequential(torch.nn.Linear(3, 2)), 0.5)
    with pytest.raises(ValueError, match="'weight'"):
        ema_update(teacher, torch.nn.Linear(4, 2), 0.5)
    with pytest.raises(ValueError, match="momentum"):
        ema_update(teacher, student, 1.5)


def test_teacher_temperature_sharpens():
    t = _crops(1)[0]
    h = [-(p * p.log()).sum(-1).mean() for p in (F.softmax(t / 0.04, -1), F.softmax(t / 1.0, -1))]
    assert h[0] < h[1] <= math.log(10)


# ---------------------------------------------------------------- token layout, multi-crop, entropy
def test_add_registers_matches_the_model_embedding():
    from course_lib.dinov2 import add_registers
    model = _tiny()
    x = torch.randn(2, 3, 56, 56)
    patches = model.patch_embed(x)
    with torch.no_grad():
        out = add_registers(patches, model.cls_token, model.register_tokens, model.pos_embed)
        torch.testing.assert_close(out, model.embed(x))
    empty = torch.zeros(1, 0, 32)
    torch.testing.assert_close(add_registers(patches, model.cls_token, empty, model.pos_embed),
                               torch.cat([model.cls_token.expand(2, -1, -1), patches], 1) + model.pos_embed)


def test_crop_boxes_are_deterministic_inside_the_image_and_of_the_right_area():
    from course_lib.dino import sample_crop_boxes
    boxes = sample_crop_boxes(3, 50, (32, 40), (0.1, 0.4), torch.Generator().manual_seed(0))
    again = sample_crop_boxes(3, 50, (32, 40), (0.1, 0.4), torch.Generator().manual_seed(0))
    assert boxes.shape == (3, 50, 4) and boxes.dtype == torch.long and torch.equal(boxes, again)
    top, left, h, w = boxes.unbind(-1)
    assert (top >= 0).all() and (left >= 0).all() and (top + h <= 32).all() and (left + w <= 40).all()
    frac = (h * w).float() / (32 * 40)
    assert frac.min() > 0.05 and frac.max() < 0.5


def test_multi_crop_puts_global_crops_first_and_cuts_the_given_boxes():
    from course_lib.dino import multi_crop
    images = torch.arange(2 * 1 * 8 * 8, dtype=torch.float32).reshape(2, 1, 8, 8)
    gb = torch.tensor([[[0, 0, 8, 8], [2, 4, 4, 4]]])
    lb = torch.tensor([[[1, 2, 2, 2], [0, 0, 3, 5]], [[6, 6, 2, 2], [5, 3, 3, 3]]])
    crops = multi_crop(images, gb, lb, 8, 2)
    assert [tuple(c.shape) for c in crops] == [(2, 1, 8, 8), (2, 1, 2, 2), (2, 1, 2, 2)]
    torch.testing.assert_close(crops[0][0], images[0])  # the whole image, resized to its own size
    torch.testing.assert_close(crops[1][0], images[0, :, 1:3, 2:4])  # a 2x2 box resized to 2x2 is itself
    with pytest.raises(ValueError, match="local_boxes"):
        multi_crop(images, gb, lb[:, :1], 8, 2)


def test_random_multi_crop_is_reproducible_and_sized():
    from course_lib.dino import random_multi_crop
    images = torch.randn(3, 3, 28, 28)
    a = random_multi_crop(images, torch.Generator().manual_seed(1), n_local=3, local_size=14)
    b = random_multi_crop(images, torch.Generator().manual_seed(1), n_local=3, local_size=14)
    assert len(a) == 5 and all(torch.equal(x, y) for x, y in zip(a, b))
    assert a[0].shape == (3, 3, 28, 28) and a[-1].shape == (3, 3, 14, 14)


def test_softmax_entropy_spans_zero_to_log_k():
    from course_lib.dino import softmax_entropy
    torch.testing.assert_close(softmax_entropy(torch.zeros(4, 7)), torch.tensor(math.log(7)))
    assert softmax_entropy(torch.tensor([[100.0, 0.0, 0.0]])) < 1e-6
    t = torch.randn(5, 9)
    assert softmax_entropy(t, 0.04) < softmax_entropy(t, 1.0)


def test_dino_loss_and_center_keep_float64():
    s, t = _crops(3).double(), _crops(2, seed=1).double()
    assert dino_loss(s, t, torch.zeros(10, dtype=torch.float64)).dtype == torch.float64
    assert update_center(torch.zeros(1, 10, dtype=torch.float64), t).dtype == torch.float64
    assert dino_loss(s.half(), t.half(), torch.zeros(10)).dtype == torch.float32


def test_dino_train_step_updates_student_teacher_and_center():
    import copy

    from course_lib.dino import dino_train_step, random_multi_crop
    torch.manual_seed(0)
    cfg = DINOv2Config(image_size=28, patch_size=7, dim=16, n_layers=1, n_heads=2, layerscale=0.1)
    student = torch.nn.Sequential(DINOv2(cfg), DINOHead(16, out_dim=12, hidden_dim=16, bottleneck_dim=8))
    teacher = copy.deepcopy(student).requires_grad_(False)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-3)
    crops = random_multi_crop(torch.randn(4, 3, 28, 28), torch.Generator().manual_seed(0), n_local=2, local_size=14)
    t_before = [p.clone() for p in teacher.parameters()]
    loss, t_out, center = dino_train_step(student, teacher, crops, torch.zeros(1, 12), opt, ema_momentum=0.5)
    assert math.isfinite(loss) and t_out.shape == (2, 4, 12) and center.shape == (1, 12)
    torch.testing.assert_close(center, 0.1 * t_out.reshape(-1, 12).mean(0, keepdim=True))
    assert any(not torch.equal(a, b) for a, b in zip(t_before, teacher.parameters()))
    _, _, same = dino_train_step(student, teacher, crops, center, opt, centering=False)
    assert torch.equal(same, center)


def test_sinkhorn_knopp_gives_each_image_a_distribution_and_each_prototype_equal_mass():
    from course_lib.dino import sinkhorn_knopp

    g = torch.Generator().manual_seed(0)
    scores = torch.randn(64, 16, generator=g)
    scores[:, 0] += 3.0  # one prototype high for every image: what centering fights
    q = sinkhorn_knopp(scores, temperature=0.1, n_iterations=500)
    torch.testing.assert_close(q.sum(1), torch.ones(64))
    torch.testing.assert_close(q.mean(0), torch.full((16,), 1 / 16), atol=1e-4, rtol=0)
    assert (q >= 0).all()
    three = sinkhorn_knopp(scores, temperature=0.1)  # DINOv2's 3 passes: rows exact, columns nearly even
    torch.testing.assert_close(three.sum(1), torch.ones(64))
    assert (three.mean(0) - 1 / 16).abs().max() < (torch.softmax(scores / 0.1, -1).mean(0) - 1 / 16).abs().max()


def test_sinkhorn_knopp_ignores_a_constant_shift_and_rejects_a_stack_of_crops():
    from course_lib.dino import sinkhorn_knopp

    scores = torch.randn(8, 5, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(sinkhorn_knopp(scores, 0.5), sinkhorn_knopp(scores + 7.0, 0.5))
    with pytest.raises(ValueError, match=r"\(batch, K\)"):
        sinkhorn_knopp(scores[None], 0.5)
