"""The ViT's four ways of knowing where a patch sits (``ViTConfig.positions``), the ablation of chapter 9."""

from __future__ import annotations

import pytest
import torch

from course_lib import swin
from course_lib.positional import relative_position_index
from course_lib.vit import POSITIONS, RelativePositionBias, ViT, ViTConfig


def _model(positions: str, pool: str = "cls", seed: int = 0) -> ViT:
    torch.manual_seed(seed)
    cfg = ViTConfig(image_size=16, patch_size=4, dim=32, n_layers=2, n_heads=4, num_classes=5, positions=positions,
                    pool=pool, class_token=pool == "cls", attn_impl="eager")
    model = ViT(cfg).eval()
    with torch.no_grad():  # weights start near zero (relative tables at zero): make every parameter count
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return model


def _shuffle_patches(images: torch.Tensor, perm: torch.Tensor, patch: int = 4) -> torch.Tensor:
    """Move the image's P x P patches to new places on the grid (the pixels inside a patch stay as they are)."""
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    tiles = images.reshape(b, c, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c, patch, patch)
    tiles = tiles[:, perm]
    return tiles.reshape(b, gh, gw, c, patch, patch).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("positions", POSITIONS)
def test_only_a_model_with_positions_sees_where_its_patches_are(positions, pool):
    model = _model(positions, pool)
    x = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        same, moved = model(x), model(_shuffle_patches(x, perm))
    if positions == "none":  # a set of patches: rearranging them changes nothing
        torch.testing.assert_close(moved, same, atol=1e-5, rtol=1e-5)
    else:
        assert (moved - same).abs().max() > 1e-3, f"{positions}: rearranging the patches left the output unchanged"


def test_relative_positions_depend_on_the_offset_only():
    bias = RelativePositionBias((3, 4), n_heads=2, n_prefix=1)
    with torch.no_grad():
        bias.table.normal_()
    b = bias()                                   # (heads, 1 + 12, 1 + 12)
    assert b.shape == (2, 13, 13)
    pos = [(i, j) for i in range(3) for j in range(4)]
    for q in range(12):
        for k in range(12):
            for q2 in range(12):
                for k2 in range(12):
                    dq = (pos[q][0] - pos[k][0], pos[q][1] - pos[k][1])
                    d2 = (pos[q2][0] - pos[k2][0], pos[q2][1] - pos[k2][1])
                    if dq == d2:
                        assert torch.equal(b[:, 1 + q, 1 + k], b[:, 1 + q2, 1 + k2])
                    elif q == q2:  # different offsets from one query: different table rows
                        assert not torch.equal(b[:, 1 + q, 1 + k], b[:, 1 + q2, 1 + k2])
    # the prefix token's three biases: one for asking, one for being asked, one for itself
    assert torch.equal(b[:, 0, 1:], b[:, 0, 1:2].expand(-1, 12))
    assert torch.equal(b[:, 1:, 0], b[:, 1:2, 0].expand(-1, 12))
    assert len({b[0, 0, 1].item(), b[0, 1, 0].item(), b[0, 0, 0].item()}) == 3


@pytest.mark.parametrize("grid", [(1, 1), (2, 5), (4, 4)])
def test_relative_position_index_numbers_every_offset_once(grid):
    gh, gw = grid
    idx = relative_position_index(grid)
    assert idx.shape == (gh * gw, gh * gw) and idx.dtype == torch.long
    assert idx.min() >= 0 and idx.max() < (2 * gh - 1) * (2 * gw - 1)
    assert len(idx.unique()) == (2 * gh - 1) * (2 * gw - 1)
    assert (idx.diagonal() == (gh - 1) * (2 * gw - 1) + gw - 1).all()  # offset (0, 0)
    assert torch.equal(idx + idx.T, torch.full_like(idx, 2 * ((gh - 1) * (2 * gw - 1) + gw - 1)))  # -offset mirrors


def test_vit_grids_and_swin_windows_number_offsets_with_one_function():
    assert swin.relative_position_index is relative_position_index
    assert torch.equal(relative_position_index((3, 3)), relative_position_index(3))
    small, big = relative_position_index((2, 3)), relative_position_index((2, 3), table_size=(4, 5))
    table = torch.arange(7 * 9).view(7, 9)  # offsets of a 4 x 5 grid; the 2 x 3 grid's sit in its middle
    assert torch.equal(table[2:5, 2:7].reshape(-1)[small], table.reshape(-1)[big])
    with pytest.raises(ValueError, match="cannot hold"):
        relative_position_index((3, 3), table_size=(2, 5))


def test_2d_positions_are_a_row_half_and_a_column_half():
    model = _model("learned_2d")
    table = model.pos_embed_for((4, 4))[0, 1:].view(4, 4, 32)
    half = 16
    assert torch.equal(table[1, 0, :half], table[1, 3, :half]) and torch.equal(table[0, 2, half:], table[3, 2, half:])
    assert not torch.equal(table[0, 0, :half], table[1, 0, :half])
    assert model.pos_embed_for((6, 5)).shape == (1, 1 + 30, 32)  # each axis resampled on its own
    assert model.num_params(include_embeddings=False) == model.num_params() - 32 - 4 * 16 - 4 * 16 - 32


@pytest.mark.parametrize("positions", ["relative", "none"])
def test_models_without_a_position_table_add_nothing_to_the_input(positions):
    model = _model(positions)
    assert model.pos_embed is None
    assert torch.count_nonzero(model.pos_embed_for((4, 4))) == 0


def test_relative_positions_refuse_a_grid_they_did_not_learn():
    model = _model("relative")
    with pytest.raises(ValueError, match=r"relative positions were learned on the \(4, 4\) grid; got a \(6, 6\) grid"):
        model(torch.randn(1, 3, 24, 24))
    maps = model.get_attention_maps(torch.randn(1, 3, 16, 16))
    assert len(maps) == 2 and maps[0].shape == (1, 4, 17, 17)


def test_an_unknown_position_scheme_is_named_with_the_known_ones():
    expected = r"positions must be one of \('learned', 'learned_2d', 'relative', 'none'\), got 'sincos'"
    with pytest.raises(ValueError, match=expected):
        ViTConfig(positions="sincos")


def test_the_default_keeps_the_one_learned_table_of_the_paper():
    model = _model("learned")
    names = {n for n, _ in model.named_parameters()}
    assert "pos_embed" in names and not any(n.startswith(("pos_rows", "pos_cols", "rel_pos")) for n in names)
