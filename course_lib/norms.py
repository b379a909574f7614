"""Normalization layers: LayerNorm and RMSNorm, written out (chapter 04).

Both normalize each token's feature vector on its own (never across the batch
or the sequence, unlike BatchNorm), then rescale it with a learned gain:

* **LayerNorm** (Ba et al., 2016): ``y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta``,
  the mean and the (biased) variance taken over the last axis.
* **RMSNorm** (Zhang & Sennrich, 2019): ``y = x / sqrt(mean(x^2) + eps) * gamma``:
  no centering and no shift, only the magnitude is normalized.

Under half precision the statistics are computed in float32 and the result is
cast back: a sum of squares of bf16 numbers loses most of its digits.

For comparison, :func:`batch_norm` normalizes each *feature* with statistics
taken over the batch (and the sequence), optionally over real tokens only, and
:func:`layer_norm_backward` writes out LayerNorm's gradient.

Each layer has the explicit path (``impl="eager"``), which the book walks
through, and PyTorch's fused kernel (``impl="fused"``, the default), which the
models use for speed; they agree to floating-point error. (Attention has the
same switch, ``attn_impl``, with ``"sdpa"`` naming its fused kernel.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["layer_norm", "rms_norm", "batch_norm", "layer_norm_backward", "NORM_IMPLS", "LayerNorm", "RMSNorm",
           "make_norm"]

_HALF = (torch.float16, torch.bfloat16)


def _standardize(h: Tensor, mean: Tensor, var: Tensor, eps: float, weight: Tensor | None,
                 bias: Tensor | None) -> Tensor:
    """``(h - mean) / sqrt(var + eps) * weight + bias``: the step LayerNorm and BatchNorm share."""
    y = (h - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight.to(y.dtype)
    if bias is not None:
        y = y + bias.to(y.dtype)
    return y


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last axis, written out.

    Args:
        x: ``(..., dim)``.
        weight, bias: ``(dim,)`` gain ``gamma`` and shift ``beta`` (or None).
    Returns:
        ``(..., dim)`` in the dtype of ``x``.
    """
    h = x.float() if x.dtype in _HALF else x
    mean = h.mean(dim=-1, keepdim=True)
    var = (h - mean).pow(2).mean(dim=-1, keepdim=True)  # biased, as in the paper
    return _standardize(h, mean, var, eps, weight, bias).to(x.dtype)


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last axis, written out: ``x / sqrt(mean(x^2) + eps) * weight``.

    Args:
        x: ``(..., dim)``;  weight: ``(dim,)`` or None.
    Returns:
        ``(..., dim)`` in the dtype of ``x``. As in Llama, the normalized
        vector is cast back to the input dtype before the gain is applied.
    """
    h = x.float() if x.dtype in _HALF else x
    y = (h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype)
    return y if weight is None else y * weight.to(x.dtype)


def batch_norm(
    x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5, mask: Tensor | None = None
) -> Tensor:
    """BatchNorm in training mode, written out: per-feature statistics over every axis but the last.

    For a sequence batch ``(batch, seq, features)`` the mean and the (biased)
    variance of each feature are taken over all ``batch * seq`` positions
    (Ioffe & Szegedy, 2015), and every position is normalized with them:
    ``y = (x - mean) / sqrt(var + eps) * weight + bias``. Without a mask this
    equals ``F.batch_norm(x.reshape(-1, features), None, None, training=True)``.

    ``torch.nn.functional.batch_norm`` knows nothing of padding: padded slots
    enter its statistics like real tokens. With ``mask`` the statistics are
    taken over the real tokens only; every position, padding included, is then
    normalized with them (the padded outputs are meaningless and ignored
    downstream). No running statistics are kept: this is the training-mode path.

    Args:
        x: ``(..., features)``, e.g. ``(batch, seq, features)`` or ``(batch, features)``.
        weight, bias: ``(features,)`` gain ``gamma`` and shift ``beta`` (or None).
        mask: bool ``x.shape[:-1]`` (e.g. ``(batch, seq)``), True for real
            tokens, with at least one True; None means every position is real.
    Returns:
        ``(..., features)`` in the dtype of ``x``.
    """
    h = x.float() if x.dtype in _HALF else x
    dims = tuple(range(h.ndim - 1))
    if mask is None:
        mean = h.mean(dim=dims, keepdim=True)
        var = (h - mean).pow(2).mean(dim=dims, keepdim=True)  # biased, as in training mode
    else:
        if mask.shape != h.shape[:-1]:
            raise ValueError(f"batch_norm: mask has shape {tuple(mask.shape)}, expected {tuple(h.shape[:-1])}")
        real = mask.bool().unsqueeze(-1)  # (..., 1)
        count = real.sum(dim=dims, keepdim=True).to(h.dtype)
        zero = torch.zeros((), dtype=h.dtype, device=h.device)
        mean = torch.where(real, h, zero).sum(dim=dims, keepdim=True) / count
        var = torch.where(real, (h - mean).pow(2), zero).sum(dim=dims, keepdim=True) / count
    return _standardize(h, mean, var, eps, weight, bias).to(x.dtype)


def layer_norm_backward(grad_out: Tensor, x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """The gradient of :func:`layer_norm` with respect to ``x``, written out.

    With ``xhat = (x - mean) / sqrt(var + eps)`` and ``g = grad_out * weight``,
    all means over the last axis of width ``d``::

        grad_x = (g - mean(g) - xhat * mean(g * xhat)) / sqrt(var + eps)

    The two subtracted terms are the paths through the mean and through the
    variance. (The gradients of the gain and the shift are
    ``sum(grad_out * xhat)`` and ``sum(grad_out)`` over the leading axes.)

    Args:
        grad_out: ``(..., dim)``, the gradient of the loss with respect to the output.
        x: ``(..., dim)``, the input of the forward pass.
        weight: ``(dim,)`` gain ``gamma`` or None (a gain of ones).
    Returns:
        ``(..., dim)`` in the dtype of ``x``.
    """
    h = x.float() if x.dtype in _HALF else x
    g = grad_out.to(h.dtype)
    mean = h.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((h - mean).pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = (h - mean) * rstd
    if weight is not None:
        g = g * weight.to(h.dtype)
    dx = rstd * (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    return dx.to(x.dtype)


NORM_IMPLS = ("eager", "fused")


def _check_impl(impl: str) -> str:
    if impl not in NORM_IMPLS:
        raise ValueError(f"impl must be one of {NORM_IMPLS}, got {impl!r}")
    return impl


class LayerNorm(nn.Module):
    """LayerNorm with learnable gain and (optional) shift.

    Args:
        dim: feature width normalized over.
        eps: added to the variance (ViT checkpoints use 1e-12 or 1e-6; the
            2017 Transformer 1e-6; PyTorch's default is 1e-5).
        bias: learn the shift ``beta``.
        impl: ``"eager"`` (the explicit :func:`layer_norm`) or ``"fused"`` (``torch.nn.functional.layer_norm``).
    """

    def __init__(self, dim: int, eps: float = 1e-5, *, bias: bool = True, impl: str = "fused"):
        super().__init__()
        self.dim, self.eps, self.impl = dim, eps, _check_impl(impl)
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        """``(..., dim) -> (..., dim)``."""
        if x.shape[-1] != self.dim:
            raise ValueError(f"LayerNorm({self.dim}) got an input whose last axis is {x.shape[-1]}")
        if self.impl == "fused":  # the kernel accumulates half-precision inputs in float32 itself
            w = self.weight.to(x.dtype)
            return F.layer_norm(x, (self.dim,), w, None if self.bias is None else self.bias.to(x.dtype), self.eps)
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}, bias={self.bias is not None}, impl={self.impl!r}"


class RMSNorm(nn.Module):
    """RMSNorm: scale each vector to unit root-mean-square, then by a learned gain.

    Args:
        dim: feature width.  eps: added to the mean square (Llama uses 1e-5 or 1e-6).
        impl: ``"eager"`` (the explicit :func:`rms_norm`) or ``"fused"`` (``torch.nn.functional.rms_norm``).
    """

    def __init__(self, dim: int, eps: float = 1e-6, *, impl: str = "fused"):
        super().__init__()
        self.dim, self.eps, self.impl = dim, eps, _check_impl(impl)
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., dim) -> (..., dim)``."""
        if x.shape[-1] != self.dim:
            raise ValueError(f"RMSNorm({self.dim}) got an input whose last axis is {x.shape[-1]}")
        if self.impl == "fused":
            h = x.float() if x.dtype in _HALF else x
            return F.rms_norm(h, (self.dim,), None, self.eps).to(x.dtype) * self.weight.to(x.dtype)
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}, impl={self.impl!r}"


def make_norm(kind: str, dim: int, eps: float, *, bias: bool = True) -> nn.Module:
    """``"layernorm"`` or ``"rmsnorm"`` of width ``dim``."""
    if kind == "layernorm":
        return LayerNorm(dim, eps, bias=bias)
    if kind == "rmsnorm":
        return RMSNorm(dim, eps)
    raise ValueError(f"unknown norm {kind!r}: expected 'layernorm' or 'rmsnorm'")
