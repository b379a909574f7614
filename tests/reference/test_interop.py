"""course_lib.interop: every supported HF class converts, and loads from a local checkpoint folder."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as T

from course_lib import interop


def tiny_hf(name: str):
    torch.manual_seed(0)
    vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    swin = dict(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4)
    make = {
        "ViTModel": lambda: T.ViTModel(T.ViTConfig(image_size=32, patch_size=8, **vision), add_pooling_layer=False),
        "ViTForImageClassification": lambda: T.ViTForImageClassification(
            T.ViTConfig(image_size=32, patch_size=8, num_labels=5, **vision)),
        "Dinov2Model": lambda: T.Dinov2Model(T.Dinov2Config(image_size=28, patch_size=14, **vision)),
        "Dinov2WithRegistersModel": lambda: T.Dinov2WithRegistersModel(
            T.Dinov2WithRegistersConfig(image_size=28, patch_size=14, num_register_tokens=2, **vision)),
        "SwinModel": lambda: T.SwinModel(T.SwinConfig(**swin)),
        "Swinv2Model": lambda: T.Swinv2Model(T.Swinv2Config(**swin)),
        "LlamaForCausalLM": lambda: T.LlamaForCausalLM(T.LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64)),
    }[name]
    return make().eval()


def outputs(name, hf, ours):
    if name == "LlamaForCausalLM":
        ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(1))
        return hf(input_ids=ids).logits, ours(ids)
    x = torch.randn(2, 3, 28 if "Dinov2" in name else 32, 32, generator=torch.Generator().manual_seed(1))
    if name == "ViTForImageClassification":
        return hf(pixel_values=x).logits, ours(x)
    kw = {"interpolate_pos_encoding": True} if name == "ViTModel" else {}
    return hf(pixel_values=x, **kw).last_hidden_state, ours.forward_features(x)


def test_every_supported_class_is_covered_here():
    assert set(interop.SUPPORTED) == {"ViTModel", "ViTForImageClassification", "Dinov2Model",
                                      "Dinov2WithRegistersModel", "SwinModel", "Swinv2Model", "LlamaForCausalLM"}


@pytest.mark.parametrize("name", sorted(interop.SUPPORTED))
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_from_hf_gives_the_same_outputs_in_eval_mode(name, attn_impl):
    hf = tiny_hf(name)
    ours = interop.from_hf(hf, attn_impl=attn_impl)
    assert not ours.training
    with torch.no_grad():
        a, b = outputs(name, hf, ours)
    assert (a - b).abs().max() <= 1e-4


@pytest.mark.parametrize("name", sorted(interop.SUPPORTED))
def test_load_hf_checkpoint_reads_a_local_folder(name, tmp_path):
    hf = tiny_hf(name)
    hf.save_pretrained(tmp_path)
    assert any(p.suffix == ".safetensors" for p in tmp_path.iterdir())
    ours = interop.load_hf_checkpoint(tmp_path)
    with torch.no_grad():
        a, b = outputs(name, hf, ours)
    assert (a - b).abs().max() <= 1e-4


def test_unsupported_models_are_named():
    with pytest.raises(ValueError, match="cannot convert Linear"):
        interop.from_hf(torch.nn.Linear(2, 2))


def test_a_folder_without_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match="config.json does not exist"):
        interop.load_hf_checkpoint(tmp_path)


def test_an_unsupported_architecture_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    with pytest.raises(ValueError, match="BertModel"):
        interop.load_hf_checkpoint(tmp_path)


@pytest.mark.parametrize("family", ["vit", "dinov2", "swin", "llama"])
def test_a_state_dict_that_does_not_fit_is_a_value_error_naming_the_key(family):
    from course_lib.interop.common import load_checked

    name = {"vit": "ViTModel", "dinov2": "Dinov2Model", "swin": "SwinModel", "llama": "LlamaForCausalLM"}[family]
    ours = interop.from_hf(tiny_hf(name))
    state = ours.state_dict()
    key = next(k for k, v in state.items() if v.ndim == 2)
    with pytest.raises(ValueError, match=f"{key!r} has shape \\(3, 3\\)"):
        load_checked(ours, {**state, key: torch.zeros(3, 3)})
    with pytest.raises(ValueError, match="lacks 1 weight"):
        load_checked(ours, {k: v for k, v in state.items() if k != key})
    with pytest.raises(ValueError, match="'extra.weight'"):
        load_checked(ours, {**state, "extra.weight": torch.zeros(1)})
