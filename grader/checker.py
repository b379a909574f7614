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

import functools
import numbers
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import Tensor

from .cases import Case, dtype_name, is_integer, tensors_of
from .compare import (
    check_gradients,
    close,
    describe_diff,
    describe_value,
    same_value,
    value_tolerance,
    values_agree,
)
from .diagnosis import Mistake, first_divergence, match_mistake, match_table_mistake, match_value_mistake
from .failures import STUB, STUB_MESSAGE, ExerciseFailure, NotWritten, learner_text
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
    except NotImplementedError as exc:
        if exc.args in ((), (STUB_MESSAGE,)):  # the release's stub (or a bare one of the learner's)
            raise NotWritten(f"{name} is not implemented yet: replace the line `{STUB}` with your code.") from None
        raise ExerciseFailure(f"{name} raised NotImplementedError: {learner_text(exc)} ({label}).") from None
    except Exception as exc:  # the learner's bug, reported with the case
        raise ExerciseFailure(f"{name} raised {learner_text(type(exc).__name__, 60)}: {learner_text(exc)} ({label})."
                              + integer_dtype_hint(case)) from None


def integer_dtype_hint(case: Case) -> str:
    """For a call that failed on integer inputs other than int64: the likely mistake, that the code takes int64 only."""
    others = sorted({dtype_name(t.dtype) for t in tensors_of(case) if is_integer(t) and t.dtype != torch.int64})
    if not others:
        return ""
    return (f" Likely mistake: your code only handles int64 integer inputs; the ones here are {', '.join(others)}, "
            "which the exercise names among the dtypes it takes. Convert with .long() where torch needs int64 "
            "indices (one_hot, scatter, indexing with int16), and build integer results in the input's dtype.")


def dtype_message(name: str, out: Tensor, expected: torch.dtype, case: Case, label: str) -> str:
    """The message for a result of the wrong dtype; for integer inputs, that the result's dtype follows them."""
    msg = f"{name} returned dtype {out.dtype}, expected {expected} ({label})."
    ints = [t.dtype for t in tensors_of(case) if is_integer(t)]
    if is_integer(torch.empty(0, dtype=expected)) and expected in ints:
        return (msg + f" The result is {dtype_name(out.dtype)} for {dtype_name(expected)} input: the dtype should "
                "follow the input (build it with torch.full_like / new_full, or from the input's own values; "
                "torch.full and torch.tensor make int64).")
    return msg + " Keep the dtype of the inputs; do not convert to another precision (or to float for a mask)."


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
    for i, (case, pristine, mine) in enumerate(prepared):
        label = case.label or "a random case"
        out = call_learner(learner, mine, name, forbidden, allowed)
        others = functools.partial(other_results, learner, reference, prepared, i, name, forbidden, allowed)
        with torch.no_grad():
            expected = reference(*pristine.clone().args, **pristine.clone().kwargs)
        if not isinstance(expected, Tensor):  # numbers, lists, tuples, dicts...
            check_value(name, out, expected, pristine, mine, diagnoses, label, others)
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
            raise ExerciseFailure(dtype_message(name, out, expected_dtype, pristine, label))
        agrees, (atol, rtol) = values_agree(out, reference, pristine, ref64, formulations)
        if not agrees:
            found = match_mistake(out, pristine, diagnoses, ref64, check_tol=(atol, rtol), others=others)
            found = found or naive_numerics(learner, reference, pristine, name, forbidden, allowed, formulations)
            if not found and (torch.isnan(out).any() and not torch.isnan(ref64).any()
                              or torch.isinf(out).any() and not torch.isinf(ref64).any()):
                found = " Your result contains NaN or infinite values where the reference has none."
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


def naive_numerics(learner: Learner, reference: Callable, case: Case, name: str, forbidden=(), allowed=(),
                   formulations: tuple = ()) -> str:
    """The likely mistake of a numerically naive formula (``case.naive``), when the learner's code, wrong on this
    case, is right on the same problem made easy for that formula (the inputs moved to mean 0, in float64)."""
    if case.naive is None:
        return ""
    try:
        easy = case.naive.easy(case.clone())
        with torch.no_grad():
            expected = reference(*easy.in_float64().args, **easy.in_float64().kwargs)
        atol, rtol = value_tolerance(reference, easy, expected, formulations)
        out = as_learner(learner).call(easy.clone(), name, forbidden, allowed)
    except Exception:
        return ""
    if isinstance(out, Tensor) and out.shape == expected.shape and close(out, expected, atol, rtol):
        return " Likely mistake: " + case.naive.message
    return ""


def _kind(x: Any) -> str:
    if isinstance(x, Tensor):
        return "a torch.Tensor"
    if isinstance(x, bool):
        return "a bool"
    if isinstance(x, numbers.Integral):
        return "an int"
    if isinstance(x, numbers.Real):
        return "a float"
    return {list: "a list", tuple: "a tuple", dict: "a dict", str: "a str", type(None): "None"}.get(
        type(x), f"a {type(x).__name__}")


def container_mismatch(out: Any, expected: Any, where: str = "the result") -> str:
    """Where a result equal in value to the reference's has other types: a list for a tuple, a 0-d tensor for an
    int... ("" when the types agree). Containers must be of the reference's kind, numbers plain Python numbers."""
    if isinstance(expected, (list, tuple)):
        if type(out) is not type(expected):
            return f"{where} is {_kind(out)} where {_kind(expected)} is expected"
        for i, (a, b) in enumerate(zip(out, expected)):
            found = container_mismatch(a, b, f"item {i} of {where}")
            if found:
                return found
        return ""
    if isinstance(expected, dict):
        for key in expected:
            found = container_mismatch(out[key], expected[key], f"{where}[{key!r}]")
            if found:
                return found
        return ""
    if isinstance(expected, numbers.Number) and not isinstance(expected, bool):
        plain = isinstance(out, numbers.Real) and not isinstance(out, bool)
        if not plain or (isinstance(expected, numbers.Integral) and not isinstance(out, numbers.Integral)):
            return f"{where} is {_kind(out)} where {_kind(expected)} is expected"
    return ""


def other_results(learner: Learner, reference: Callable, prepared: Sequence[tuple[Case, Case, Case]], failed: int,
                  name: str, forbidden: Iterable[Callable] = (), allowed: Iterable[Any] = ()) -> list[tuple]:
    """``(case, learner's result, reference's result)`` on every case but the one that failed, the evidence that
    tells apart two mistakes one case cannot (:func:`grader.diagnosis.corroborated`).

    The cases before it passed, so there the learner's result is the
    reference's; the ones after it are run (answers fetched already, where
    the learner's code runs in its own kernel), and those the learner's code
    fails on are left out. The reference's tensors are in float64.
    """
    found = []
    for j, (_, pristine, mine) in enumerate(prepared):
        if j == failed:
            continue
        with torch.no_grad():
            theirs = reference(*pristine.clone().args, **pristine.clone().kwargs)
            if isinstance(theirs, Tensor):
                c64 = pristine.in_float64()
                theirs = reference(*c64.args, **c64.kwargs)
        if j < failed:
            found.append((pristine, theirs, theirs))
            continue
        try:
            out = call_learner(learner, mine, name, forbidden, allowed)
        except ExerciseFailure:
            continue
        found.append((pristine, out, theirs))
    return found


def check_value(name, out, expected, pristine: Case, mine: Case, diagnoses: Sequence[Mistake], label: str,
                others: Callable[[], list] = list) -> None:
    if out is None and expected is not None:
        raise ExerciseFailure(f"{name} returned None ({label}). Did you forget to `return` the result?")
    if not same_value(out, expected):
        found = match_value_mistake(out, pristine, diagnoses, expected, others)
        raise ExerciseFailure(f"{name} gives a wrong result ({label}): {describe_value(out, expected)}.{found}")
    mismatch = container_mismatch(out, expected)
    if mismatch:
        raise ExerciseFailure(
            f"{name} returns the right values in the wrong types ({label}): {mismatch}. Return what the exercise "
            "says: a tuple where it says a tuple (a pair (a, b) is a tuple, not a list), a list where it says a "
            "list, and plain Python numbers (int(...), .item() or .tolist() turn 0-d tensors into them).")
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
