"""Position-wise feed-forward networks (chapter 05).

The same small network is applied to every token independently: attention
mixes information *across* tokens, the MLP transforms each token's features.

* :class:`MLP`: ``fc2(act(fc1(x)))``: the 2017 Transformer's ReLU FFN
  (``mlp_hidden = 4 dim``) and ViT's GELU MLP, exact or tanh-approximated.
* :class:`SwiGLU`: ``down(silu(gate(x)) * up(x))`` (Shazeer, 2020), the gated
  MLP of Llama and DINOv2-g. With three matrices instead of two, a hidden width
  of ``2/3 * 4 dim`` keeps the parameter count of the 4x MLP
  (:func:`swiglu_hidden_dim`).

The size and arithmetic of these layers are counted in :mod:`course_lib.counting`
(``mlp_param_count``, ``mlp_flops``, ``layer_flops``).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ACTIVATIONS", "activation", "MLP", "SwiGLU", "swiglu", "swiglu_hidden_dim", "make_mlp"]

#: activation name -> function. "gelu" is the exact erf form; "gelu_tanh" the tanh approximation.
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "quick_gelu": lambda x: x * (1.702 * x).sigmoid(),
}


def activation(name: str):
    """Look up an activation by name (see :data:`ACTIVATIONS`)."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}: expected one of {sorted(ACTIVATIONS)}") from None


class MLP(nn.Module):
    """Two-layer MLP applied to each token: ``(..., dim) -> (..., out_dim)``.

    Args:
        dim: input width.  hidden: hidden width (``4 * dim`` in the papers).
        act: activation name, e.g. ``"relu"`` (2017) or ``"gelu"`` (ViT, BERT).
        bias: biases on both layers.  dropout: after the activation and after fc2.
        out_dim: output width (``dim`` by default).
    """

    def __init__(self, dim: int, hidden: int, *, act: str = "gelu", bias: bool = True, dropout: float = 0.0,
                 out_dim: int | None = None):
        super().__init__()
        self.act_name, self.act = act, activation(act)
        self.fc1 = nn.Linear(dim, hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, out_dim or dim, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))

    def extra_repr(self) -> str:
        return f"act={self.act_name!r}"


def swiglu_hidden_dim(dim: int, expansion: float = 4.0, multiple_of: int = 1) -> int:
    """Hidden width of a SwiGLU with the parameters of an MLP of ``expansion * dim``.

    ``int(2/3 * expansion * dim)`` rounded up to a multiple of ``multiple_of``
    (Llama uses 256; DINOv2-g uses 8).
    """
    hidden = int(2 * expansion * dim / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


class SwiGLU(nn.Module):
    """Gated MLP: ``down(silu(gate(x)) * up(x))``; ``(..., dim) -> (..., dim)``.

    Args:
        dim: input and output width.  hidden: width of the gate and up projections.
        bias: biases on the three projections (Llama: none; DINOv2: yes).
    """

    def __init__(self, dim: int, hidden: int, *, bias: bool = False, dropout: float = 0.0, act: str = "silu"):
        super().__init__()
        self.act_name, self.act = act, activation(act)
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        if self.act_name == "silu":  # the function of chapter 07's exercise
            return self.drop(swiglu(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight,
                                    self.gate_proj.bias, self.up_proj.bias, self.down_proj.bias))
        return self.drop(self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x)))


def swiglu(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor, b_gate: Tensor | None = None,
           b_up: Tensor | None = None, b_down: Tensor | None = None) -> Tensor:
    """The SwiGLU MLP as a function: ``(silu(x W_gate^T + b_gate) * (x W_up^T + b_up)) W_down^T + b_down``.

    ``x``: ``(..., dim)``; ``w_gate``, ``w_up``: ``(hidden, dim)``; ``w_down``:
    ``(dim, hidden)`` (``nn.Linear``'s layout); the biases are optional (Llama
    has none, DINOv2's SwiGLU has them). :class:`SwiGLU` runs this function.
    """
    return F.linear(F.silu(F.linear(x, w_gate, b_gate)) * F.linear(x, w_up, b_up), w_down, b_down)


def make_mlp(kind: str, dim: int, hidden: int, *, bias: bool = True, dropout: float = 0.0) -> nn.Module:
    """``"relu"``, ``"gelu"``, ``"gelu_tanh"`` (an :class:`MLP`) or ``"swiglu"``."""
    if kind == "swiglu":
        return SwiGLU(dim, hidden, bias=bias, dropout=dropout)
    return MLP(dim, hidden, act=kind, bias=bias, dropout=dropout)


