"""The checker: run a learner's function on every case and compare it with the reference.

:func:`check_function` is what every exercise's hidden test runs (through
:func:`grader.registry.check`). Per case it checks, in order: no forbidden
call, a result of the reference's type, shape and dtype, values within the
derived tolerance (:mod:`grader.compare`), inputs not modified in place, and,
where the exercise asks for it, the gradients. On the first mismatch it raises
:class:`~grader.failures.ExerciseFailure` with the likely mistake
(:mod:`grader.diagnosis`). :func:`check_table` is its variant for tables
computed from integers, where float32 and float64 results both pass.

Both return None on purpose: nbgrader reads a number left as the value of a
test cell as partial credit.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import torch
from torch import Tensor

from .cases import Case, tensors_of
from .compare import check_gradients, close, describe_diff, describe_value, same_value, value_tolerance
from .diagnosis import Mistake, first_divergence, match_mistake, match_table_mistake, match_value_mistake
from .failures import ExerciseFailure
from .guards import ShapeWatch
from .learner import Learner, as_learner


def call_learner(learner: Learner | Callable, case: Case, name: str, forbidden: Iterable[Callable] = (),
                 allowed: Iterable[Any] = (), watch: ShapeWatch | None = None) -> Any:
    """The learner's result on one case, run under the guards; its errors become :class:`ExerciseFailure`.

    ``learner``: a :class:`~grader.learner.Learner`, or a plain function (run
    here). ``watch``: a :class:`~grader.guards.ShapeWatch` to run the call
    inside (it notes the shapes the learner's code builds).
    """
    label = case.label or "a random case"
    try:
        return as_learner(learner, name).call(case, name, forbidden, allowed, watch)
    except ExerciseFailure:
        raise
    except NotImplementedError:
        raise ExerciseFailure(f"{name} is not implemented yet: replace `raise NotImplementedError()` "
                              "with your code.") from None
    except Exception as exc:  # the learner's bug, reported with the case
        raise ExerciseFailure(f"{name} raised {type(exc).__name__}: {exc} ({label}).") from None


def _inputs(case: Case) -> list:
    return [a for a in list(case.args) + list(case.kwargs.values()) if not isinstance(a, (int, float, str, bool))]


def check_new_object(name: str, out: Any, mine: Case, reference: Callable, pristine: Case, label: str) -> None:
    """Fail when the learner returns one of its inputs itself (the very object) where the reference returns a new one.

    A caller that later changes the result would change its own input too:
    "returns a new list" and "returns a new tensor" are part of the contract.
    """
    if out is None or not any(out is a for a in _inputs(mine)):
        return
    probe = pristine.clone()
    with torch.no_grad():
        theirs = reference(*probe.args, **probe.kwargs)
    if not any(theirs is a for a in _inputs(probe)):
        kind = "tensor" if isinstance(out, Tensor) else type(out).__name__
        raise ExerciseFailure(f"{name} returned its input {kind} itself ({label}); return a new {kind}, so that "
                              "changing the result does not change the caller's input.")


def as_tensor_result(out: Any, name: str, label: str) -> Tensor:
    if isinstance(out, Tensor):
        return out
    hint = " Did you forget to `return` it?" if out is None else ""
    raise ExerciseFailure(f"{name} should return a torch.Tensor, but returned {type(out).__name__} ({label}).{hint}")


def check_function(
    learner: Learner | Callable,
    reference: Callable,
    cases: Sequence[Case],
    *,
    name: str | None = None,
    diagnoses: Sequence[Mistake] = (),
    forbidden: Iterable[Callable] = (),
    check_grad: bool = False,
    allowed: Iterable[Any] = (),
    formulations: tuple[Callable, ...] = (),
) -> None:
    """Compare ``learner`` with ``reference`` on every case; raise :class:`ExerciseFailure` on the first mismatch.

    Checks, per case: no forbidden call, a tensor result of the right shape and
    dtype, values within the derived tolerance, inputs not modified in place,
    and (with ``check_grad``) the gradients with respect to every floating
    input. ``allowed`` names course_lib building blocks the learner is handed
    and may call; ``formulations`` other correct ways to compute the result,
    whose rounding also counts in the tolerance
    (:func:`~grader.compare.value_tolerance`). ``learner`` is a
    :class:`~grader.learner.Learner` or a plain function (run here).

    Returns None on purpose: nbgrader reads a number left as the value of a
    test cell as partial credit.
    """
    learner = as_learner(learner)
    name = name or learner.name
    if not learner.is_callable:
        raise ExerciseFailure(f"{name} is not a function (got {learner.type_name}).")
    forbidden = tuple(forbidden)
    prepared = []
    for case in cases:
        mine = case.clone()
        if check_grad:
            mine = mine.map_tensors(lambda t: t.requires_grad_(True) if t.is_floating_point() else t)
        prepared.append((case, case.clone(), mine))
    # where a call is a trip to the grading kernel, one trip for every case (and its gradients)
    learner.prefetch([mine for _, _, mine in prepared], name, forbidden, allowed, gradients=check_grad)
    for case, pristine, mine in prepared:
        label = case.label or "a random case"
        out = call_learner(learner, mine, name, forbidden, allowed)
        with torch.no_grad():
            expected = reference(*pristine.clone().args, **pristine.clone().kwargs)
        if not isinstance(expected, Tensor):  # numbers, lists, tuples, dicts...
            check_value(name, out, expected, pristine, mine, diagnoses, label)
            check_new_object(name, out, mine, reference, pristine, label)
            continue
        out = as_tensor_result(out, name, label)

        case64 = pristine.in_float64()
        with torch.no_grad():
            ref64 = reference(*case64.args, **case64.kwargs)
            expected_dtype = expected.dtype
        if out.shape != ref64.shape:
            msg = f"{name} returned shape {tuple(out.shape)}, expected {tuple(ref64.shape)} ({label})."
            msg += match_mistake(out, pristine, diagnoses, ref64, exact=True)
            raise ExerciseFailure(msg)
        if out.dtype != expected_dtype:
            raise ExerciseFailure(
                f"{name} returned dtype {out.dtype}, expected {expected_dtype} ({label}). "
                "Keep the dtype of the inputs; do not convert to another precision (or to float for a mask)."
            )
        atol, rtol = value_tolerance(reference, pristine, ref64, formulations)
        if not close(out, ref64, atol, rtol):
            found = match_mistake(out, pristine, diagnoses, ref64)
            if torch.isnan(out).any() and not torch.isnan(ref64).any() and not found:
                found = " Your result contains NaN where the reference has none."
            if not found:
                found = first_divergence(learner, reference, pristine, forbidden, allowed)
            raise ExerciseFailure(f"{name} gives wrong values ({label}): {describe_diff(out, ref64)}.{found}")
        for before, after in zip(tensors_of(pristine), tensors_of(mine)):
            if before.shape != after.shape or not torch.equal(before, after.detach()):
                raise ExerciseFailure(f"{name} modified one of its inputs in place ({label}); "
                                      "work on a new tensor instead.")
        check_new_object(name, out, mine, reference, pristine, label)
        if check_grad:
            check_gradients(name, out, mine, reference, case64, label)
    return None


def check_value(name, out, expected, pristine: Case, mine: Case, diagnoses: Sequence[Mistake], label: str) -> None:
    if out is None and expected is not None:
        raise ExerciseFailure(f"{name} returned None ({label}). Did you forget to `return` the result?")
    if not same_value(out, expected):
        found = match_value_mistake(out, pristine, diagnoses, expected)
        raise ExerciseFailure(f"{name} gives a wrong result ({label}): {describe_value(out, expected)}.{found}")
    if not same_value([*mine.args, *mine.kwargs.values()], [*pristine.args, *pristine.kwargs.values()]):
        raise ExerciseFailure(f"{name} modified one of its inputs in place ({label}); work on a copy instead.")


def check_table(learner: Learner | Callable, reference: Callable, cases: Sequence[Case], *, name: str | None = None,
                diagnoses: Sequence[Mistake] = ()) -> None:
    """Compare a learner's table (a tensor computed from integer arguments) with the float64 reference.

    The result must be a floating tensor of the reference's shape. Its values
    may differ from the reference by ``32 * eps * m``, where ``eps`` is the
    precision of the learner's dtype (float32 or float64 both pass) and ``m``
    the largest integer argument (angles grow with the position or the offset,
    and so does their rounding error). On a mismatch the likely mistake is
    named, never the expected values. Calls into :mod:`course_lib` are
    forbidden. Returns None (nbgrader reads a value as partial credit).
    """
    learner = as_learner(learner)
    name = name or learner.name
    if not learner.is_callable:
        raise ExerciseFailure(f"{name} is not a function (got {learner.type_name}).")
    learner.prefetch(list(cases), name, (), ())
    for case in cases:
        label = case.label or "a random case"
        out = call_learner(learner, case, name)
        if not isinstance(out, Tensor):
            hint = " Did you forget to `return` it?" if out is None else ""
            raise ExerciseFailure(f"{name} should return a torch.Tensor, but returned {type(out).__name__} "
                                  f"({label}).{hint}")
        expected = reference(*case.args, **case.kwargs)
        if out.shape != expected.shape:
            msg = f"{name} returned shape {tuple(out.shape)}, expected {tuple(expected.shape)} ({label})."
            raise ExerciseFailure(msg + match_table_mistake(out, case, diagnoses, expected, shape_only=True))
        if not out.is_floating_point() or out.dtype in (torch.float16, torch.bfloat16):
            raise ExerciseFailure(
                f"{name} returned dtype {out.dtype} ({label}); return float32 or float64 values "
                "(integer positions must become floats before the division)."
            )
        scale = max([1] + [abs(a) for a in case.args if isinstance(a, int)])
        atol = 32 * torch.finfo(out.dtype).eps * scale
        diff = (out.detach().double().cpu() - expected).abs()
        if torch.isnan(diff).any() or float(diff.max()) > atol:
            worst = float(torch.nan_to_num(diff, nan=float("inf")).max())
            raise ExerciseFailure(f"{name} gives wrong values ({label}): max abs difference {worst:.3g}."
                                  + match_table_mistake(out, case, diagnoses, expected))
    return None
