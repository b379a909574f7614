"""course_lib.training.average_checkpoints: the mean of a run's snapshots (Vaswani et al., 2017, sec. 6.1)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_lib.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from course_lib.training import average_checkpoints


def _snapshots(k: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """``k`` state dicts of one small model: random weights, one integer counter each."""
    g = torch.Generator().manual_seed(seed)
    return [{"w": torch.randn(3, 4, generator=g), "b": torch.randn(4, generator=g),
             "count": torch.tensor(10 * i)} for i in range(k)]


# ---------------------------------------------------------------- what it computes
@pytest.mark.parametrize("k", [1, 2, 5, 20])
def test_floating_tensors_are_the_element_wise_mean(k):
    snaps = _snapshots(k, seed=k)
    avg = average_checkpoints(snaps)
    for key in ("w", "b"):
        expected = torch.stack([s[key] for s in snaps]).mean(0)
        torch.testing.assert_close(avg[key], expected, rtol=0, atol=1e-6)


def test_keys_keep_the_first_state_dicts_order_and_shapes_and_dtypes_are_kept():
    snaps = _snapshots(3)
    avg = average_checkpoints(snaps)
    assert list(avg) == list(snaps[0])
    for key, value in avg.items():
        assert value.shape == snaps[0][key].shape and value.dtype == snaps[0][key].dtype


def test_integer_tensors_come_from_the_last_snapshot():
    snaps = _snapshots(4)
    assert average_checkpoints(snaps)["count"].item() == 30


def test_the_average_of_identical_snapshots_is_that_snapshot():
    snap = _snapshots(1)[0]
    avg = average_checkpoints([snap, snap, snap])
    for key in snap:
        torch.testing.assert_close(avg[key], snap[key], rtol=0, atol=1e-6)


def test_inputs_are_left_untouched_and_the_result_shares_no_memory_with_them():
    snaps = _snapshots(2)
    before = [{k: v.clone() for k, v in s.items()} for s in snaps]
    avg = average_checkpoints(snaps)
    for key in avg:
        avg[key].add_(1)
    one = average_checkpoints(snaps[:1])
    for key in one:
        one[key].add_(1)
    for s, b in zip(snaps, before):
        for key in s:
            assert torch.equal(s[key], b[key]), f"{key} was modified"


def test_half_precision_is_summed_in_float32():
    # 1,000 snapshots of 0.1 in bfloat16: a bfloat16 running sum stalls once its spacing exceeds 0.2 and its
    # mean comes out near 0.03; summed in float32, the mean is 0.1 rounded to bfloat16
    values = [torch.full((8,), 0.1, dtype=torch.bfloat16)] * 1000
    naive = torch.zeros(8, dtype=torch.bfloat16)
    for v in values:
        naive = naive + v
    assert (naive / 1000).max() < 0.05, "the case must be one where a bfloat16 sum goes wrong"
    avg = average_checkpoints([{"x": v} for v in values])["x"]
    assert avg.dtype == torch.bfloat16
    assert torch.equal(avg, values[0])


def test_accepts_any_iterable_of_state_dicts():
    snaps = _snapshots(3)
    from_generator = average_checkpoints(s for s in snaps)
    for key in snaps[0]:
        assert torch.equal(from_generator[key], average_checkpoints(snaps)[key])


# ---------------------------------------------------------------- with a real model
def test_seq2seq_snapshots_average_into_a_model_that_keeps_its_tied_weights():
    cfg = Seq2SeqConfig.preset("tiny")
    snaps = []
    for seed in range(3):
        torch.manual_seed(seed)
        snaps.append({k: v.clone() for k, v in Seq2SeqTransformer(cfg).state_dict().items()})
    model = Seq2SeqTransformer(cfg)
    model.load_state_dict(average_checkpoints(snaps))
    assert model.out_proj.weight is model.tgt_emb.weight is model.src_emb.weight
    expected = torch.stack([s["src_emb.weight"] for s in snaps]).mean(0)
    torch.testing.assert_close(model.src_emb.weight.detach(), expected, rtol=0, atol=1e-6)
    fc = "encoder.0.mlp.fc1.weight"
    torch.testing.assert_close(model.state_dict()[fc], torch.stack([s[fc] for s in snaps]).mean(0), rtol=0, atol=1e-6)


def test_averaging_commutes_with_a_linear_layer():
    # a linear map is linear in its weights: the averaged layer's output is the mean of the layers' outputs
    torch.manual_seed(0)
    layers = [nn.Linear(5, 3) for _ in range(4)]
    x = torch.randn(7, 5)
    avg = nn.Linear(5, 3)
    avg.load_state_dict(average_checkpoints([layer.state_dict() for layer in layers]))
    with torch.no_grad():
        torch.testing.assert_close(avg(x), torch.stack([layer(x) for layer in layers]).mean(0), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- bad input
def test_an_empty_list_is_refused():
    with pytest.raises(ValueError, match="at least one state dict"):
        average_checkpoints([])


def test_different_keys_are_refused_naming_them():
    a, b = _snapshots(2)
    b["extra"] = b.pop("b")
    with pytest.raises(ValueError, match=r"state_dicts\[1\] has other keys.*'b'.*'extra'"):
        average_checkpoints([a, b])


def test_a_missing_key_alone_is_refused():
    a, b = _snapshots(2)
    del b["w"]
    with pytest.raises(ValueError, match=r"missing \['w'\]"):
        average_checkpoints([a, b])


def test_different_shapes_are_refused_naming_the_key_and_both_shapes():
    a, b = _snapshots(2)
    b["w"] = torch.zeros(4, 3)
    with pytest.raises(ValueError, match=r"'w' has shape \(4, 3\) in state_dicts\[1\] but \(3, 4\)"):
        average_checkpoints([a, b])


def test_different_dtypes_are_refused_naming_the_key_and_both_dtypes():
    a, b = _snapshots(2)
    b["b"] = b["b"].double()
    with pytest.raises(ValueError, match=r"'b' has dtype torch.float64 in state_dicts\[1\] but torch.float32"):
        average_checkpoints([a, b])


def test_a_value_that_is_not_a_tensor_is_refused():
    a, b = _snapshots(2)
    b["w"] = [[0.0] * 4] * 3
    with pytest.raises(TypeError, match=r"state_dicts\[1\]\['w'\] must be a tensor, got list"):
        average_checkpoints([a, b])


def test_an_entry_that_is_not_a_mapping_is_refused():
    with pytest.raises(TypeError, match=r"state_dicts\[1\] must be a mapping.*got Tensor"):
        average_checkpoints([_snapshots(1)[0], torch.zeros(3)])
