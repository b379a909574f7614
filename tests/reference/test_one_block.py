"""One block, one vocabulary: every model runs course_lib.blocks.Block, and each model runs the functions the
exercises teach, so that a model's parity with Hugging Face proves those functions too."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_lib import attention, blocks, multi_head, norms
from course_lib.decoder_lm import DecoderLM, DecoderLMConfig
from course_lib.dinov2 import DINOv2, DINOv2Config
from course_lib.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from course_lib.swin import Swin, SwinConfig, WindowAttention
from course_lib.vit import ViT, ViTConfig

MODELS = {
    "vit": lambda: ViT(ViTConfig(image_size=16, patch_size=4, dim=16, n_layers=2, n_heads=2, num_classes=3)),
    "dinov2": lambda: DINOv2(DINOv2Config(image_size=16, patch_size=4, dim=16, n_layers=2, n_heads=2, n_registers=2)),
    "decoder_lm": lambda: DecoderLM(DecoderLMConfig(vocab_size=11, dim=16, n_layers=2, n_heads=2, max_seq_len=8)),
    "seq2seq": lambda: Seq2SeqTransformer(Seq2SeqConfig(vocab_size=11, dim=16, n_heads=2, mlp_hidden=32,
                                                        n_enc_layers=2, n_dec_layers=1, max_len=8)),
    "swin-v1": lambda: Swin(SwinConfig.preset("swin-tiny-test")),
    "swin-v2": lambda: Swin(SwinConfig.preset("swinv2-tiny-test")),
}


def _sublayer_pairs(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Modules that hold both an attention and an MLP sublayer: the blocks, whatever their class."""
    return [(name, m) for name, m in model.named_modules()
            if any(n in dict(m.named_children()) for n in ("attn", "self_attn")) and "mlp" in dict(m.named_children())]


@pytest.mark.parametrize("name", MODELS)
def test_every_block_of_every_model_is_the_one_block(name):
    model = MODELS[name]()
    found = _sublayer_pairs(model)
    assert found, f"{name}: no block found"
    # the seq2seq decoder's blocks add cross-attention (a third sublayer): DecoderBlock, by design
    allowed = (blocks.Block, blocks.DecoderBlock) if name == "seq2seq" else (blocks.Block,)
    wrong = [(n, type(m).__name__) for n, m in found if not isinstance(m, allowed)]
    assert not wrong, f"{name}: blocks of another class: {wrong}"
    assert any(type(m) is blocks.Block for _, m in found)


def test_swin_plugs_its_window_attention_into_the_block():
    model = Swin(SwinConfig.preset("swinv2-tiny-test"))
    block = model.stages[0].blocks[1]
    assert type(block) is blocks.Block and isinstance(block.attn, WindowAttention)
    assert block.attn.shift == block.attn.window_size // 2, "the second block of a stage attends in shifted windows"
    assert block.attn_res.position == "res_post", "Swin V2 is res-post-norm"
    assert Swin(SwinConfig.preset("swin-tiny-test")).stages[0].blocks[0].attn_res.position == "pre"


def test_res_post_norm_sits_inside_the_branch_before_drop_path():
    """Swin V2: x + drop_path(norm(attn(x))). A dropped branch adds nothing, not the norm's bias."""
    cfg = blocks.BlockConfig(dim=8, n_heads=2, mlp_hidden=16, norm_position="res_post", drop_path=0.999)
    res = blocks._Residual(cfg).train()
    with torch.no_grad():
        res.norm.bias.fill_(3.0)
    x = torch.randn(64, 4, 8)
    out = res(x, lambda h: 2 * h)
    kept = (out - x).abs().amax(dim=(1, 2)) > 0
    assert (out[~kept] == x[~kept]).all(), "a dropped branch must leave x unchanged"


@pytest.mark.parametrize("position", blocks.NORM_POSITIONS)
def test_block_runs_the_residual_function(position, monkeypatch):
    calls = []
    real = blocks.residual

    def spy(x, sublayer, norm=None, position="pre"):
        calls.append(position)
        return real(x, sublayer, norm, position)

    monkeypatch.setattr(blocks, "residual", spy)
    block = blocks.Block(blocks.BlockConfig(dim=8, n_heads=2, mlp_hidden=16, norm_position=position)).eval()
    block(torch.randn(2, 3, 8))
    assert len(calls) == 2, "both sublayers go through blocks.residual"


def test_multi_head_attention_runs_split_and_merge_heads(monkeypatch):
    """A wrong split_heads changes the layer's output: the layer runs the function of chapter 03's exercise."""
    mha = multi_head.MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 5, 8)
    before = mha(x)
    real = multi_head.split_heads
    monkeypatch.setattr(multi_head, "split_heads", lambda t, h: real(t.flip(-1), h))
    assert not torch.allclose(mha(x), before)


@pytest.mark.parametrize("bad", ["fused", "flash", "", None])
def test_an_unknown_attention_path_is_rejected_by_name(bad):
    q = torch.randn(1, 2, 3, 4)
    expected = r"attn_impl must be one of \('eager', 'sdpa'\), got " + repr(bad).replace("'", "\\'")
    with pytest.raises(ValueError, match=expected):
        attention.scaled_dot_product_attention(q, q, q, attn_impl=bad)


@pytest.mark.parametrize("cls", [norms.LayerNorm, norms.RMSNorm])
def test_an_unknown_norm_path_is_rejected_by_name(cls):
    with pytest.raises(ValueError, match=r"impl must be one of \('eager', 'fused'\), got 'sdpa'"):
        cls(8, impl="sdpa")


def test_configs_share_one_vocabulary():
    """Width is `dim`, heads `n_heads`, blocks `n_layers`, the MLP hidden width `mlp_hidden`, the attention path
    `attn_impl`."""
    from dataclasses import fields
    for cfg in (ViTConfig, DINOv2Config, DecoderLMConfig, Seq2SeqConfig, SwinConfig, blocks.BlockConfig):
        names = {f.name for f in fields(cfg)}
        assert {"dim", "n_heads"} <= names, f"{cfg.__name__}: {sorted(names)}"
        assert not names & {"d_model", "embed_dim", "num_heads", "d_ff", "fused", "hidden_dim", "depth"}, cfg.__name__
        assert "attn_impl" in names, cfg.__name__
