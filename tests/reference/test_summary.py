"""course_lib.summary: a block's sublayers as a table, every parameter counted once."""

from __future__ import annotations

from torch import nn

from course_lib.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from course_lib.summary import layer_table


def test_one_row_per_sublayer_with_its_weights_and_parameters():
    block = Seq2SeqTransformer(Seq2SeqConfig.preset("tiny")).decoder[0]
    lines = layer_table(block, "decoder layer").splitlines()
    total = sum(p.numel() for p in block.parameters())
    assert lines[0] == f"decoder layer: {total:,} parameters"
    names = [name for name, _ in block.named_children()]
    assert [line.split()[0] for line in lines[1:]] == names
    counts = [int(line.split()[-1].replace(",", "")) for line in lines[1:]]
    assert counts == [sum(p.numel() for p in sub.parameters()) for sub in block.children()]
    d = block.self_attn.q_proj.in_features
    assert f"4 × Linear {d}→{d}" in lines[1] and "LayerNorm" in lines[-1]


def test_layers_without_weights_show_a_dash():
    block = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Dropout(0.1))
    lines = layer_table(block).splitlines()
    assert lines[0] == "Sequential: 20 parameters"
    assert lines[1].split()[1:4] == ["Linear", "Linear", "3→5"] and lines[2].split()[1:3] == ["ReLU", "-"]
