"""The Swin paper's cost formulas in course_lib.counting, against what the layers actually compute."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from course_lib import counting as C
from course_lib.multi_head import MultiHeadAttention
from course_lib.swin import PatchMerging, Swin, SwinConfig, WindowAttention, stage_shapes, swin_block

SIZES = [(8, 8, 16, 4, 2), (14, 14, 32, 7, 4), (12, 8, 24, 4, 3), (6, 12, 12, 2, 1)]  # h, w, C, M, heads


def raw_flops(module, *args, **kwargs) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(*args, **kwargs)
    return counter.get_total_flops()


@pytest.mark.parametrize("h,w,dim,ws,heads", SIZES)
def test_global_attention_costs_omega_msa(h, w, dim, ws, heads):
    layer = MultiHeadAttention(dim, heads, attn_impl="eager")
    macs = raw_flops(layer, torch.randn(1, h * w, dim)) // 2
    assert macs == 4 * h * w * dim**2 + 2 * (h * w) ** 2 * dim == sum(C.swin_attention_macs(h, w, dim).values())


@pytest.mark.parametrize("h,w,dim,ws,heads", SIZES)
@pytest.mark.parametrize("shifted", [False, True])
def test_window_attention_costs_omega_w_msa_shifted_or_not(h, w, dim, ws, heads, shifted):
    layer = WindowAttention(dim, heads, ws, ws // 2 if shifted else 0, attn_impl="eager")
    macs = raw_flops(layer, torch.randn(1, h * w, dim), (h, w)) // 2
    assert macs == 4 * h * w * dim**2 + 2 * ws**2 * h * w * dim == sum(C.swin_attention_macs(h, w, dim, ws).values())


def test_global_and_windowed_differ_only_in_the_attention_term_by_hw_over_m2():
    g, wd = C.swin_attention_macs(56, 56, 96), C.swin_attention_macs(56, 56, 96, 7)
    assert g["projections"] == wd["projections"]
    assert g["attention"] == wd["attention"] * (56 * 56) // 49


def test_global_count_is_half_of_mha_flops():
    assert sum(C.swin_attention_macs(5, 7, 24).values()) * 2 == sum(C.mha_flops(35, 24).values())


@pytest.mark.parametrize("h,w", [(8, 8), (7, 5)])
def test_patch_merging_macs_match_the_layer(h, w):
    merge = PatchMerging(16)
    assert raw_flops(merge, torch.randn(1, h * w, 16), (h, w)) // 2 == C.patch_merging_macs(h, w, 16)


def test_swin_block_macs_match_the_block():
    block = swin_block(32, 4, 4, shift=2, mlp_ratio=3.0, attn_impl="eager")
    macs = raw_flops(block, torch.randn(1, 64, 32), hw=(8, 8)) // 2
    assert macs == sum(C.swin_block_macs(8, 8, 32, 4, 96).values())


@pytest.mark.parametrize("preset", ["swin-tiny-test", "swin-t"])
def test_a_whole_swin_is_embedding_plus_blocks_plus_merging_plus_head(preset):
    cfg = SwinConfig.preset(preset)
    with torch.device("meta"):
        model = Swin(cfg)
    rows = stage_shapes(cfg)
    h0, w0 = rows[0]["height"], rows[0]["width"]
    total = h0 * w0 * cfg.in_chans * cfg.patch_size**2 * cfg.dim + cfg.num_features * cfg.num_classes
    for i, r in enumerate(rows):
        block = C.swin_block_macs(r["height"], r["width"], r["dim"], r["window"], int(cfg.mlp_ratio * r["dim"]))
        total += r["depth"] * sum(block.values())
        if i < len(rows) - 1:
            total += C.patch_merging_macs(r["height"], r["width"], r["dim"])
    images = torch.empty(1, cfg.in_chans, *cfg.image_size, device="meta")
    assert C.count_flops(model, images) == 2 * total


def test_count_flops_sees_the_fused_path_and_switches_it_back():
    layer = MultiHeadAttention(16, 2, attn_impl="sdpa")
    x = torch.randn(1, 10, 16)
    assert raw_flops(layer, x) < C.count_flops(layer, x) == 2 * sum(C.swin_attention_macs(2, 5, 16).values())
    assert layer.attn_impl == "sdpa"


@pytest.mark.parametrize("call, message", [
    (lambda: C.swin_attention_macs(14, 12, 32, 7), "multiples of window_size"),
    (lambda: C.swin_attention_macs(0, 8, 32), "h=0"),
    (lambda: C.swin_attention_macs(8, 8, 32, 0), "window_size=0"),
    (lambda: C.swin_block_macs(8, 8, 32, 4, 2.5), "mlp_hidden=2.5"),
    (lambda: C.patch_merging_macs(8, 8, -1), "dim=-1"),
])
def test_bad_sizes_raise_naming_the_value_and_the_rule(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_count_flops_needs_a_module():
    with pytest.raises(TypeError, match="nn.Module"):
        C.count_flops(lambda x: x @ x, torch.randn(3, 3))
