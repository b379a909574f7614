"""Cases: the calls a hidden test makes, the conversions the comparison needs, and the building blocks of the
assignments' case generators (random values drawn from a seed, dtypes and their labels, stand-in modules)."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor


@dataclass
class Case:
    """One call of the function under test: its arguments and a readable label."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    label: str = ""

    def map_tensors(self, fn: Callable[[Tensor], Tensor]) -> "Case":
        conv = lambda x: fn(x) if isinstance(x, Tensor) else x
        return Case(tuple(conv(a) for a in self.args), {k: conv(v) for k, v in self.kwargs.items()}, self.label)

    def clone(self) -> "Case":
        """A copy the function under test may not change the original through (tensors cloned, the rest deep-copied)."""
        keep = lambda x: x if isinstance(x, Tensor) or callable(x) else copy.deepcopy(x)
        copied = Case(tuple(keep(a) for a in self.args), {k: keep(v) for k, v in self.kwargs.items()}, self.label)
        return copied.map_tensors(lambda t: t.detach().clone())

    def in_float64(self) -> "Case":
        """The case in float64: floating tensors and torch modules (deep-copied) converted."""
        def conv(x):
            if isinstance(x, torch.nn.Module):
                return copy.deepcopy(x).double()
            if isinstance(x, torch.Generator):  # the reference must not advance the learner's generator
                return copy.deepcopy(x)
            return x.double() if isinstance(x, Tensor) and x.is_floating_point() else x
        return Case(tuple(conv(a) for a in self.args), {k: conv(v) for k, v in self.kwargs.items()}, self.label)


def perturbed(case: Case, eps: float, g: torch.Generator) -> Case:
    """The case with every floating tensor moved by about one rounding (relative ``eps``)."""
    return case.map_tensors(
        lambda t: t * (1 + eps * torch.randn(t.shape, generator=g, dtype=t.dtype)) if t.is_floating_point() else t)


def in_dtype(case: Case, dtype: torch.dtype) -> Case:
    """The case with its floating tensors and modules (deep-copied) converted to ``dtype``."""
    def conv(x):
        if isinstance(x, torch.nn.Module):
            return copy.deepcopy(x).to(dtype)
        return x.to(dtype) if isinstance(x, Tensor) and x.is_floating_point() else x
    return Case(tuple(conv(a) for a in case.args), {k: conv(v) for k, v in case.kwargs.items()}, case.label)


def strided(t: Tensor) -> Tensor:
    """The same values in a non-contiguous layout: the last two axes stored transposed.

    The layout is dense, so ``clone()`` and ``to()`` keep it; code that calls
    ``view`` where the memory does not allow it fails, as it would on a
    transposed or sliced tensor in a real model.
    """
    if t.ndim < 2 or t.shape[-1] < 2 or t.shape[-2] < 2:
        return t
    return t.transpose(-2, -1).contiguous().transpose(-2, -1)


def with_strided_layout(case: Case) -> Case | None:
    """The case with every tensor of two or more axes (of at least 2 x 2) made non-contiguous; None if none is."""
    changed = case.map_tensors(strided)
    if all(a is b for a, b in zip(tensors_of(changed), tensors_of(case))):
        return None
    return Case(changed.args, changed.kwargs, f"{case.label}, non-contiguous inputs" if case.label else
                "non-contiguous inputs")


@dataclass(frozen=True)
class LargeInputs:
    """A numerically hard repeat of a case: the floating tensors at ``positions`` multiplied by ``factor``.

    For an exercise whose softmax (or log-sum-exp) the chapter warns about:
    scores far beyond 88, where ``exp`` overflows in float32, which a correct
    implementation handles by subtracting the maximum first.
    """

    factor: float
    positions: tuple[int, ...]

    def __call__(self, case: Case) -> Case:
        args = tuple(a * self.factor if i in self.positions and isinstance(a, Tensor) and a.is_floating_point() else a
                     for i, a in enumerate(case.args))
        where = ", ".join(str(i + 1) for i in self.positions)
        return Case(args, dict(case.kwargs), f"{case.label}, argument(s) {where} times {self.factor:g}")


def tensors_of(case: Case) -> list[Tensor]:
    """The tensor arguments of a case, in order."""
    return [t for t in list(case.args) + list(case.kwargs.values()) if isinstance(t, Tensor)]


# --------------------------------------------------------------------------
# Building blocks of the assignments' case generators
# --------------------------------------------------------------------------
def randint(g: torch.Generator, low: int, high: int) -> int:
    """One integer in [low, high) drawn from ``g``."""
    return int(torch.randint(low, high, (1,), generator=g))


def randn(g: torch.Generator, shape: tuple, dtype: torch.dtype = torch.float64, scale: float = 1.0) -> Tensor:
    """Normal values of ``shape`` drawn from ``g`` in float64, times ``scale``, then converted to ``dtype``
    (so a case draws the same values whatever its dtype)."""
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def alternating_dtype(i: int, period: int = 3) -> torch.dtype:
    """The dtype of a family's ``i``-th case: float64 once every ``period`` cases (the first included), else float32."""
    return torch.float64 if i % period == 0 else torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    """A dtype as a case's label names it: ``float32``, not ``torch.float32``."""
    return str(dtype).replace("torch.", "")


@contextlib.contextmanager
def global_rng_from(g: torch.Generator):
    """torch's global RNG seeded from ``g`` inside (for modules that initialize from it), restored after:
    the cases depend on the seed alone."""
    state = torch.random.get_rng_state()
    torch.manual_seed(randint(g, 0, 2**31 - 1))
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def frozen(module: torch.nn.Module) -> torch.nn.Module:
    """The module in eval mode with no trainable parameter: a fixed function handed to the learner."""
    for p in module.parameters():
        p.requires_grad_(False)
    return module.eval()


def stand_in_block(g: torch.Generator, n_tok: int, d: int, mlp_hidden: int) -> list[torch.nn.Module]:
    """``[attn, mlp, norm1, norm2]`` of a block made of torch modules only, float64 and frozen.

    ``attn`` stands in for attention: a dense map over all tokens' features
    (so a learner who applies it per token fails); the norms have affine
    parameters far from 1 and 0, so a forgotten or swapped norm shows. Built
    under :func:`global_rng_from`, so the cases depend on the seed alone.
    """
    nn = torch.nn
    with global_rng_from(g):
        attn = nn.Sequential(nn.Flatten(-2, -1), nn.Linear(n_tok * d, n_tok * d), nn.Tanh(),
                             nn.Unflatten(-1, (n_tok, d)))
        mlp = nn.Sequential(nn.Linear(d, mlp_hidden), nn.GELU(), nn.Linear(mlp_hidden, d))
        norm1, norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        with torch.no_grad():
            for m in list(attn) + list(mlp):
                if isinstance(m, nn.Linear):
                    m.weight.mul_(2.0)
                    m.bias.normal_(0.0, 0.5)
            for norm in (norm1, norm2):
                norm.weight.uniform_(0.3, 2.5)
                norm.bias.normal_(0.0, 0.7)
    return [frozen(m.double()) for m in (attn, mlp, norm1, norm2)]
