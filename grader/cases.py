"""Cases: the calls a hidden test makes, the conversions the comparison needs, and the building blocks of the
assignments' case generators (random values drawn from a seed, dtypes and their labels, stand-in modules)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor

from . import wire  # noqa: F401 - how a torch.Generator is copied (wire.generator_from_state), for Case.clone


def within(x, conv: Callable):
    """``conv(x)``, or for a dict holding tensors (a model's parameters by name), a dict of ``conv`` of each value:
    a case's tensors are its tensor arguments and the tensors of its dict arguments."""
    if isinstance(x, dict) and any(isinstance(v, Tensor) for v in x.values()):
        return {k: conv(v) for k, v in x.items()}
    return conv(x)


@dataclass
class Case:
    """One call of the function under test: its arguments and a readable label.

    ``naive``: for an exercise with a numerically naive formula (the one-pass
    variance), its likely mistake and the same problem made easy for it
    (:class:`NaiveFormula`); the checker names it when the learner's result is
    wrong here but right there.
    """

    args: tuple
    kwargs: dict = field(default_factory=dict)
    label: str = ""
    naive: "NaiveFormula | None" = None

    def __getstate__(self) -> dict:
        """What a pickled case holds (the request the grading kernel reads): no ``naive``, grading's own hint,
        whose formula lives with the assignments the kernel never sees."""
        return {**self.__dict__, "naive": None}

    def with_args(self, args: tuple, kwargs: dict, label: str | None = None) -> "Case":
        """The same case (its label and its other fields) with other arguments."""
        return dataclasses.replace(self, args=args, kwargs=kwargs, label=self.label if label is None else label)

    def map_tensors(self, fn: Callable[[Tensor], Tensor]) -> "Case":
        """The case with ``fn`` applied to every tensor argument, and to the tensors of a dict argument
        (a model's parameters by name)."""
        conv = lambda x: fn(x) if isinstance(x, Tensor) else x  # noqa: E731
        return self.with_args(tuple(within(a, conv) for a in self.args),
                              {k: within(v, conv) for k, v in self.kwargs.items()})

    def clone(self) -> "Case":
        """A copy the function under test may not change the original through (tensors cloned, the rest deep-copied)."""
        keep = lambda x: x if isinstance(x, Tensor) or callable(x) else copy.deepcopy(x)
        copied = self.with_args(tuple(keep(a) for a in self.args), {k: keep(v) for k, v in self.kwargs.items()})
        return copied.map_tensors(lambda t: t.detach().clone())

    def in_float64(self) -> "Case":
        """The case in float64: floating tensors and torch modules (deep-copied) converted."""
        def conv(x):
            if isinstance(x, torch.nn.Module):
                return copy.deepcopy(x).double()
            if isinstance(x, torch.Generator):  # the reference must not advance the learner's generator
                return copy.deepcopy(x)
            return x.double() if isinstance(x, Tensor) and x.is_floating_point() else x
        return self.with_args(tuple(within(a, conv) for a in self.args),
                              {k: within(v, conv) for k, v in self.kwargs.items()})


@dataclass(frozen=True)
class NaiveFormula:
    """A numerically naive formula, as a likely mistake that values alone cannot name.

    The one-pass variance ``E[x^2] - E[x]^2`` is right in exact arithmetic and
    wrong in floating point when the mean is large against the spread: no
    variant of the reference run in float64 reproduces its rounding. So the
    checker asks the learner's function the same question made easy for the
    naive formula (``easy(case)``: the inputs moved to mean 0, in float64) and,
    when the answer is right there, names ``message``.
    """

    message: str
    easy: Callable[[Case], Case]


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
    return case.with_args(tuple(within(a, conv) for a in case.args),
                          {k: within(v, conv) for k, v in case.kwargs.items()})


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
    return changed.with_args(changed.args, changed.kwargs, f"{case.label}, non-contiguous inputs" if case.label else
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
        return case.with_args(args, dict(case.kwargs), f"{case.label}, argument(s) {where} times {self.factor:g}")


def is_integer(t: Tensor) -> bool:
    """An integer tensor (not bool, not floating, not complex): ids, positions, lengths, labels, boxes."""
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def in_integer_dtype(case: Case, dtype: torch.dtype) -> Case:
    """The case with its integer tensors in ``dtype`` (the values unchanged), named in the label."""
    changed = case.map_tensors(lambda t: t.to(dtype) if is_integer(t) else t)
    return changed.with_args(changed.args, changed.kwargs,
                             f"{case.label}, integer inputs in {dtype_name(dtype)}" if case.label else
                             f"integer inputs in {dtype_name(dtype)}")


def integer_dtype_repeats(cases: list[Case], dtypes: tuple[torch.dtype, ...], per_dtype: int = 3) -> list[Case]:
    """Repeats of the first cases holding integer tensors, ``per_dtype`` for each of ``dtypes``.

    For an exercise whose text names the integer dtypes it takes besides
    int64 (ids, positions, lengths or boxes in int32, say: what a tokenizer
    or a data loader hands over), and only those: ``dtypes`` are the ones the
    text names, and a result computed from them keeps their dtype. Labels and
    targets of a loss are int64, as torch's own losses take them, and get no
    repeats. Appended after the int64 cases, so that ordinary mistakes are
    named on ordinary inputs first.
    """
    with_ints = [c for c in cases if any(is_integer(t) for t in tensors_of(c))]
    if not with_ints:
        return []
    picks = [[with_ints[(k * per_dtype + j) % len(with_ints)] for j in range(min(per_dtype, len(with_ints)))]
             for k in range(len(dtypes))]
    return [in_integer_dtype(c, dtype) for dtype, chosen in zip(dtypes, picks) for c in chosen]


def tensors_of(case: Case) -> list[Tensor]:
    """The tensor arguments of a case, and the tensors of its dict arguments, in order."""
    found: list[Tensor] = []
    for a in list(case.args) + list(case.kwargs.values()):
        within(a, lambda t: found.append(t) if isinstance(t, Tensor) else None)
    return found


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
