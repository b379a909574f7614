"""What every family's converter shares: reading HF config values and loading a mapped state dict."""

from __future__ import annotations

import re

from torch import Tensor, nn

__all__ = ["HF_ACTIVATIONS", "square", "load_checked", "rename"]

#: HF ``hidden_act`` -> course_lib activation name (every family's config reader uses it).
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu",
                  "silu": "silu", "swish": "silu", "quick_gelu": "quick_gelu"}


def square(value, name: str) -> int:
    """An HF size given as ``n`` or ``(n, n)``; a non-square pair is a ValueError naming it."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2 or value[0] != value[1]:
            raise ValueError(f"only square {name}s are supported, got {name}={value}")
        value = value[0]
    return int(value)


def load_checked(model: nn.Module, state: dict[str, Tensor]) -> nn.Module:
    """``model.load_state_dict(state, strict=True)``, with a ValueError naming the first missing, extra or
    misshaped key."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    name = type(model).__name__
    if missing:
        raise ValueError(f"the state dict lacks {len(missing)} weight(s) this {name} needs, e.g. {missing[0]!r}")
    if extra:
        raise ValueError(f"the state dict has {len(extra)} weight(s) this {name} does not, e.g. {extra[0]!r}")
    for k, v in state.items():
        if v.shape != own[k].shape:
            raise ValueError(f"{k!r} has shape {tuple(v.shape)}, but this {name} expects {tuple(own[k].shape)}")
    model.load_state_dict(state, strict=True)
    return model


def rename(key: str, rules: list[tuple[str, str]], what: str) -> str:
    """The course_lib name of HF ``key``: the first ``(pattern, replacement)`` rule that matches it whole.

    A key no rule matches is a ValueError naming it and the model (``what``).
    """
    for pattern, target in rules:
        if re.fullmatch(pattern, key):
            return re.sub(pattern, target, key)
    raise ValueError(f"no course_lib {what} parameter for the Hugging Face key {key!r}")
