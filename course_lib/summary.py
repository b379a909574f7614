"""A block's sublayers as a short table: what each holds and how many parameters, instead of a module repr.

``print(block)`` lists every Linear, Dropout and Identity down the tree, and
the structure a reader wants (which sublayers, in which order, how large) is
lost in it. :func:`layer_table` gives one row per direct sublayer: its name,
its class, the layers that hold its weights (``Linear 64→256``, ``LayerNorm
64``), and its parameter count.
"""

from __future__ import annotations

from collections import Counter

from torch import nn


def _weights(layer: nn.Module) -> str | None:
    """A layer that holds weights, in a few characters (None for one that holds none)."""
    if isinstance(layer, nn.Linear):
        return f"Linear {layer.in_features}→{layer.out_features}"
    if isinstance(layer, nn.Embedding):
        return f"Embedding {layer.num_embeddings}×{layer.embedding_dim}"
    own = [p for p in layer.parameters(recurse=False)]
    if not own:
        return None
    shape = "×".join(str(s) for s in own[0].shape)
    return f"{type(layer).__name__} {shape}"


def layer_table(block: nn.Module, title: str | None = None) -> str:
    """One row per direct sublayer of ``block``: name, class, the layers holding its weights, parameters.

    Layers with the same description are counted (``4 × Linear 64→64``); a
    sublayer with no weights of its own shows ``-``.
    """
    rows = []
    for name, sub in block.named_children():
        parts = Counter(d for d in (_weights(m) for m in sub.modules()) if d is not None)
        held = ", ".join(d if n == 1 else f"{n} × {d}" for d, n in parts.items()) or "-"
        rows.append((name, type(sub).__name__.lstrip("_"), held, sum(p.numel() for p in sub.parameters())))
    total = sum(p.numel() for p in block.parameters())
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{title or type(block).__name__}: {total:,} parameters"]
    lines += [f"  {n:<{width[0]}}  {c:<{width[1]}}  {h:<{width[2]}}  {p:>9,}" for n, c, h, p in rows]
    return "\n".join(lines)
