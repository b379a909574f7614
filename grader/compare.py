"""Comparison and tolerance: is a learner's result the reference's, up to the rounding any correct code makes?

Tolerances are not set by hand. For each case the reference runs in the
case's dtype and in float64, at the case's inputs and at inputs moved by one
rounding (:func:`rounding_error`); a learner is allowed a small multiple of
that error, with a floor of a few units in the last place. The same estimate
serves the values (:func:`value_tolerance`) and the gradients
(:func:`check_gradients`).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

import torch
from torch import Tensor

from .cases import Case, in_dtype, perturbed, tensors_of
from .failures import ExerciseFailure

#: how many points the error estimate samples: the case itself and three inputs moved by one rounding
TRIALS = 4


def close(a: Tensor, b: Tensor, atol: float, rtol: float) -> bool:
    if a.shape != b.shape:
        return False
    a64, b64 = a.detach().double(), b.detach().double()
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return bool(torch.equal(a.detach().bool(), b.detach().bool()))
    both_nan = torch.isnan(a64) & torch.isnan(b64)
    diff = (a64 - b64).abs()
    finite = torch.isfinite(b64)  # an infinite expected entry is matched only by the same infinity
    ok = ((diff <= atol + rtol * b64.abs()) & finite) | both_nan | (a64 == b64)
    return bool(ok.all())


def rounding_error(evaluate: Callable[[Case], list], case64: Case, dtype: torch.dtype,
                   exact: list | None = None, trials: int = TRIALS) -> list[float]:
    """Per result of ``evaluate``, how far a correct implementation in ``dtype`` may fall from float64.

    One run of the reference in ``dtype`` can be luckily accurate (a result
    that is exactly zero in theory is pure cancellation noise), so the
    reference runs ``trials`` times, at the case's inputs and at inputs moved
    by one rounding of ``dtype``, and the largest of these is kept:

    * its error in ``dtype`` at each point (for a float64 case, its float32
      error scaled down by the ratio of the two epsilons: float64 against
      itself shows nothing), and
    * how far the float64 result itself moves between the points, which
      measures how ill-conditioned the case is (a softmax of huge logits,
      nearly-zero vectors normalized), whatever the implementation.

    ``evaluate`` maps a case to a list of tensors (or None entries);
    ``exact`` is its float64 value at ``case64`` when already known.
    """
    eps = torch.finfo(dtype).eps
    low, factor = (torch.float32, eps / torch.finfo(torch.float32).eps) if dtype == torch.float64 else (dtype, 1.0)
    g = torch.Generator().manual_seed(4321)
    base = exact if exact is not None else evaluate(case64)
    errors = [0.0] * len(base)

    def spread(results: list, against: list, scale: float) -> None:
        for i, (a, b) in enumerate(zip(results, against)):
            if a is None or b is None or not b.numel() or a.shape != b.shape:
                continue
            a, b = a.detach().double(), b.detach().double()
            finite = torch.isfinite(a) & torch.isfinite(b)
            if finite.any():
                errors[i] = max(errors[i], scale * float((a - b).abs()[finite].max()))

    for trial in range(trials):
        try:
            point = case64 if trial == 0 else perturbed(case64, eps, g)
            here = base if trial == 0 else evaluate(point)
            spread(here, base, 1.0)
            spread(evaluate(in_dtype(point, low)), here, factor)
        except Exception:  # a reference that cannot run this way gets the other estimates and the floor
            continue
    return errors


def case_dtype(case: Case, default: torch.dtype) -> torch.dtype:
    """The dtype of a case's first floating tensor (the precision the learner computes in)."""
    return next((t.dtype for t in tensors_of(case) if t.is_floating_point()), default)


def value_floor(case: Case, ref64: Tensor) -> tuple[float, float]:
    """The least (atol, rtol) :func:`value_tolerance` ever gives this case: a few units in the last place of the
    case's dtype, at the size of the result."""
    if not ref64.is_floating_point():
        return 0.0, 0.0
    eps = torch.finfo(case_dtype(case, ref64.dtype)).eps
    finite = torch.isfinite(ref64)
    magnitude = float(ref64.abs()[finite].max()) if finite.any() else 1.0
    return 16.0 * eps * max(1.0, magnitude), 16.0 * eps


def value_tolerance(reference: Callable, case: Case, ref64: Tensor,
                    formulations: tuple[Callable, ...] = ()) -> tuple[float, float]:
    """(atol, rtol) for one case's values: eight times the reference's own rounding error, floored
    (:func:`value_floor`).

    ``formulations``: other correct ways to compute the same result whose
    rounding differs in kind from the reference's (a softmax as
    ``exp(s - logsumexp(s))`` rounds a quantity the size of the scores before
    the exp); the largest rounding error among them and the reference counts.
    """
    floor, rtol = value_floor(case, ref64)
    if not ref64.is_floating_point():
        return floor, rtol
    dtype = case_dtype(case, ref64.dtype)

    def evaluator(fn: Callable) -> Callable[[Case], list]:
        def evaluate(c: Case) -> list:
            c = c.clone()
            with torch.no_grad():
                return [fn(*c.args, **c.kwargs).double()]
        return evaluate

    case64 = case.in_float64()
    own_err = max(rounding_error(evaluator(fn), case64, dtype, exact=[ref64.double()])[0]
                  for fn in (reference, *formulations))
    return max(8.0 * own_err, floor), rtol


def values_agree(out: Tensor, reference: Callable, case: Case, ref64: Tensor,
                 formulations: tuple[Callable, ...] = ()) -> tuple[bool, tuple[float, float]]:
    """Whether ``out`` is the reference's result within :func:`value_tolerance`, and that tolerance.

    The tolerance is never below its floor, so a result within the floor
    agrees whatever the estimate would say, and the estimate (the reference
    run eight more times) is made only for a result outside it: the same
    verdict, in a fraction of the time for the usual right answer. The
    tolerance returned is then the floor.
    """
    floor = value_floor(case, ref64)
    if close(out, ref64, *floor):
        return True, floor
    tolerance = value_tolerance(reference, case, ref64, formulations)
    return close(out, ref64, *tolerance), tolerance


def upstream_gradient(shape) -> Tensor:
    """The fixed random upstream gradient the gradient check sends back through a result of this shape."""
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(1234), dtype=torch.float64)


def reference_grads(reference: Callable, case: Case, upstream: Tensor) -> list[Tensor | None]:
    """Gradients of ``(reference(case) * upstream).sum()`` with respect to the case's floating inputs."""
    inp = case.map_tensors(lambda t: t.detach().clone().requires_grad_(True) if t.is_floating_point() else t)
    leaves = [t for t in tensors_of(inp) if t.is_floating_point()]
    out = reference(*inp.args, **inp.kwargs)
    return list(torch.autograd.grad((out * upstream.to(out.dtype)).sum(), leaves, allow_unused=True))


def check_gradients(name: str, out: Tensor, mine: Case, reference: Callable, case64: Case, label: str) -> None:
    """The learner's gradients (through ``out``, for a random upstream gradient) against the float64 reference's."""
    inputs = [t for t in tensors_of(mine) if t.is_floating_point()]
    if not out.requires_grad:
        raise ExerciseFailure(f"{name}'s result is cut off from the autograd graph ({label}): "
                              "avoid .detach(), .data or numpy.")
    upstream = upstream_gradient(out.shape)
    grads = torch.autograd.grad((out * upstream.to(out.dtype)).sum(), inputs, allow_unused=True)
    ref_inputs = [t for t in tensors_of(case64) if t.is_floating_point()]
    ref_grads = reference_grads(reference, case64, upstream)
    pairs = []
    for i, (mg, rg) in enumerate(zip(grads, ref_grads)):
        rg = torch.zeros_like(ref_inputs[i]) if rg is None else rg
        mg = torch.zeros_like(inputs[i]) if mg is None else mg
        scale = max(1.0, float(rg.abs().max())) if rg.numel() else 1.0
        eps = torch.finfo(inputs[i].dtype).eps
        pairs.append((mg, rg, 1e3 * eps * scale, 1e3 * eps))  # the floor of the tolerance, and its rtol
    if all(close(mg, rg, floor, rtol) for mg, rg, floor, rtol in pairs):
        return  # within the floor: within the tolerance, whatever the estimate below would say
    own = rounding_error(lambda c: reference_grads(reference, c, upstream), case64,
                         case_dtype(mine, torch.float64), exact=ref_grads)
    for i, (mg, rg, floor, rtol) in enumerate(pairs):
        if not close(mg, rg, max(floor, 8.0 * own[i]), rtol):
            raise ExerciseFailure(
                f"{name}: the values are right but the gradient with respect to input {i + 1} is not "
                f"({label}, {describe_diff(mg, rg)}). Avoid in-place edits of tensors autograd needs, "
                "and make masked entries contribute no gradient (no NaN)."
            )


def describe_diff(out: Tensor, expected: Tensor) -> str:
    if out.dtype == torch.bool or expected.dtype == torch.bool:
        wrong = int((out.bool() != expected.bool()).sum())
        return f"{wrong} of {out.numel()} entries differ"
    diff = (out.detach().double() - expected.detach().double()).abs()
    diff = torch.nan_to_num(diff, nan=float("inf"))
    return f"max abs difference {float(diff.max()):.3g}"


def same_value(a: Any, b: Any) -> bool:
    """Equality for results that are not a single tensor: numbers (floats to 1e-6 relative),
    strings, bytes, tensors (to 1e-5), generators (by their state), and lists, tuples and dicts of them,
    compared recursively."""
    if isinstance(b, Tensor):
        if not isinstance(a, Tensor) or a.shape != b.shape:
            return False
        if b.is_floating_point():
            return bool(torch.allclose(a.detach().double(), b.detach().double(), rtol=1e-5, atol=1e-6, equal_nan=True))
        return bool(torch.equal(a.detach(), b.detach()))
    if isinstance(a, Tensor) and a.ndim == 0 and isinstance(b, numbers.Number):
        a = a.item()
    if isinstance(b, bool) or isinstance(a, bool):
        return type(a) is type(b) and a == b
    if isinstance(b, numbers.Integral):
        return isinstance(a, numbers.Integral) and int(a) == int(b)
    if isinstance(b, numbers.Real):
        return isinstance(a, numbers.Real) and math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(b, dict):
        return isinstance(a, dict) and a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in b)
    if isinstance(b, torch.Generator):  # one by its state: a copy in the same state is the same generator
        return isinstance(a, torch.Generator) and torch.equal(a.get_state(), b.get_state())
    return type(a) is type(b) and a == b


def describe_value(out: Any, expected: Any) -> str:
    kind = lambda x: "a list or tuple" if isinstance(x, (list, tuple)) else type(x).__name__
    if kind(out) != kind(expected) and not (isinstance(out, numbers.Number) and isinstance(expected, numbers.Number)):
        return f"expected {kind(expected)}, got {type(out).__name__}"
    if isinstance(expected, dict) and out.keys() != expected.keys():
        return f"expected the keys {sorted(map(str, expected))}, got {sorted(map(str, out))}"
    if isinstance(expected, (list, tuple, dict)) and len(out) != len(expected):
        return f"expected {len(expected)} items, got {len(out)}"
    return "the value differs from the reference's"
