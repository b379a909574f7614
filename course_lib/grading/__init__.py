"""What the hidden tests of the exercises use: compare a learner's function with
the reference in :mod:`course_lib` over many random cases.

A hidden test reads like this::

    from course_lib import attention as ref
    from course_lib import grading
    from course_lib.grading import attention as cases
    grading.check_function(attention_scores, ref.attention_scores, cases.score_cases(seed=0),
                           diagnoses=cases.SCORE_MISTAKES, forbidden=grading.FUSED_ATTENTION)

This package holds the generic machinery; each chapter's random cases and
likely mistakes live in a module of their own (``course_lib.grading.attention``
for chapter 02, ...).

:func:`check_function` runs the learner's function on every :class:`Case`
and compares its result with the reference's, computed in float64 for the
comparison. When they disagree it does not print the expected answer: it
looks for the *likely mistake* instead, by comparing the learner's result with
a list of :class:`Mistake` variants of the reference (no scale, softmax over
the wrong axis, inverted mask, ...), and names the one that matches.

Tolerances are not set by hand: for each case the reference is run in the
case's dtype and in float64, and the learner is allowed a small multiple of
the reference's own error (with a floor of a few units in the last place).

While the learner's function runs, a guard fails the exercise if it calls
into :mod:`course_lib` (the reference itself) or one of torch's fused
routines that would do the exercise for it (see :data:`FUSED_ATTENTION`,
:data:`SOFTMAX`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import numbers
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

__all__ = [
    "Case",
    "Mistake",
    "ExerciseFailure",
    "ForbiddenCall",
    "FUSED_ATTENTION",
    "SOFTMAX",
    "LAYER_NORM",
    "check_function",
    "same_value",
    "forbid_calls",
]

_COURSE_LIB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_THIS_FILE = os.path.abspath(__file__)  # the only course_lib code a learner's call may run: the guard itself


class ExerciseFailure(AssertionError):
    """A hidden test found the learner's function wrong; the message says how."""


class ForbiddenCall(ExerciseFailure):
    """The learner's function called the reference or a fused routine."""


# --------------------------------------------------------------------------
# Forbidden routines
# --------------------------------------------------------------------------
#: torch's own attention: an exercise that asks for attention must not call it.
FUSED_ATTENTION: tuple[Callable, ...] = (
    F.scaled_dot_product_attention,
    F.multi_head_attention_forward,
)
#: every spelling of softmax, for the exercise that writes softmax out.
SOFTMAX: tuple[Callable, ...] = (
    torch.softmax,
    torch.log_softmax,
    torch.special.softmax,
    torch.special.log_softmax,
    torch._softmax,
    torch._log_softmax,
    F.softmax,
    F.log_softmax,
    F.softmin,
    F.gumbel_softmax,
    Tensor.softmax,
    Tensor.log_softmax,
)
#: torch's normalization routines (for the normalization chapter).
LAYER_NORM: tuple[Callable, ...] = (
    F.layer_norm,
    torch.layer_norm,
    torch.native_layer_norm,
    F.rms_norm,
    torch.rms_norm,
    F.batch_norm,
    torch.batch_norm,
    F.group_norm,
    F.instance_norm,
)


def _name_of(func: Callable) -> str:
    """A readable name: ``torch.softmax``, ``Tensor.softmax``, ``torch.nn.functional.softmax``."""
    mod = getattr(func, "__module__", None) or ""
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    owner, _, short = qual.rpartition(".")
    if owner in ("TensorBase", "Tensor", "_TensorBase"):
        return f"Tensor.{short}"
    if owner == "_VariableFunctionsClass" or mod.startswith("torch._C") or not mod:
        return f"torch.{short or qual}"
    return f"{mod}.{qual}"


class _ForbidTorch(TorchFunctionMode):
    def __init__(self, forbidden: Iterable[Callable], exercise: str):
        super().__init__()
        self.forbidden = {id(f): f for f in forbidden}
        self.exercise = exercise

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if id(func) in self.forbidden:
            raise ForbiddenCall(
                f"{self.exercise}: your code calls {_name_of(func)}, which does the exercise "
                "for you. Compute it yourself from basic tensor operations."
            )
        return func(*args, **(kwargs or {}))


#: builtins a learner's function may not call while it is checked: they would blind the guard
#: (a profiler or tracer of their own, or a thread the profiler does not see).
_GUARD_BREAKERS: tuple[Callable, ...] = tuple(
    f for f in (
        sys.setprofile, sys.settrace, getattr(sys, "_setprofileallthreads", None), getattr(sys, "_settraceallthreads", None),
        getattr(sys, "monitoring", None) and sys.monitoring.use_tool_id,
        getattr(sys, "monitoring", None) and sys.monitoring.register_callback,
        __import__("_thread").start_new_thread, getattr(__import__("_thread"), "start_joinable_thread", None),
    ) if f is not None
)

#: modules whose functions a learner might replace to make a check pass (``torch.allclose = lambda *a: True``).
_WATCHED_MODULES = ("torch", "torch.nn.functional", "torch.testing", "torch.linalg", "torch.special", "numpy",
                    "numpy.testing", "math", "builtins", "sys", "operator", "functools", "copy")


def _watched_namespaces() -> list[tuple[str, dict]]:
    spaces = [(name, vars(sys.modules[name])) for name in _WATCHED_MODULES if name in sys.modules]
    spaces.append(("torch.Tensor", vars(torch.Tensor)))
    spaces.append(("torch.nn.Module", vars(torch.nn.Module)))
    spaces += [(name, vars(mod)) for name, mod in list(sys.modules.items())
               if name.startswith("course_lib") and mod is not None]
    return spaces


def _snapshot() -> list[tuple[str, dict, dict]]:
    return [(name, ns, dict(ns)) for name, ns in _watched_namespaces()]


def _replaced(snapshot) -> str | None:
    """The first watched name rebound or deleted since ``snapshot``, or None."""
    for name, ns, before in snapshot:
        if len(ns) == len(before) and all(ns.get(k, _MISSING) is v for k, v in before.items()):
            continue
        for k, v in before.items():
            if ns.get(k, _MISSING) is not v and not (k.startswith("__") and k.endswith("__")):
                return f"{name}.{k}"
    return None


_MISSING = object()


@contextlib.contextmanager
def forbid_calls(forbidden: Iterable[Callable] = (), *, exercise: str = "this exercise", reference: bool = True,
                 allowed: Iterable[Any] = ()):
    """Fail with :class:`ForbiddenCall` if the code inside calls a forbidden routine.

    Two guards watch the code, so switching one off does not help: a
    TorchFunctionMode, and a profiler that sees every Python call (into
    :mod:`course_lib`, or into a forbidden Python function) and every call of a
    builtin (a forbidden torch routine however reached, even under
    ``torch._C.DisableTorchFunction``; ``sys.setprofile``; starting a thread).
    The code may not replace functions of torch, numpy, math, builtins or
    course_lib either (``torch.allclose = lambda *a, **k: True``).

    Args:
        forbidden: torch functions or methods (matched by identity, so an alias
            such as ``sdpa = F.scaled_dot_product_attention`` is caught too).
        exercise: name used in the message.
        reference: also forbid any code defined in :mod:`course_lib` (other
            than this file, the guard itself), however it was imported or aliased.
        allowed: course_lib building blocks the exercise hands to the learner
            (functions, classes or module instances): calling them, and
            whatever they call in turn, is not a violation. An exercise that
            assembles a ViT from course_lib blocks passes the block class here.
    """
    forbidden = tuple(forbidden)
    violations: list[str] = []
    previous = sys.getprofile()
    allowed_codes = _code_objects(allowed)
    inside_allowed: list[Any] = []  # frames of allowed code now running
    forbidden_codes = {f.__code__: f for f in forbidden if hasattr(f, "__code__")}
    forbidden_builtins = {id(f): f for f in forbidden if not hasattr(f, "__code__")}
    forbidden_methods = {getattr(f, "__name__", None) for f in forbidden
                         if getattr(f, "__objclass__", None) is not None}  # Tensor.softmax and co., bound at call time
    breakers = {id(f): f for f in _GUARD_BREAKERS}

    def fail(message: str):
        violations.append(message)
        raise ForbiddenCall(message)

    def profiler(frame, event, arg):  # pragma: no cover - runs under the profiler
        if inside_allowed:
            if event == "return" and frame is inside_allowed[-1]:
                inside_allowed.pop()
            elif event == "call" and frame.f_code in allowed_codes:
                inside_allowed.append(frame)
            return
        if event == "call":
            code = frame.f_code
            if code in allowed_codes:
                inside_allowed.append(frame)
                return
            if code in forbidden_codes:
                fail(f"{exercise}: your code calls {_name_of(forbidden_codes[code])}, which does the exercise "
                     "for you. Compute it yourself from basic tensor operations.")
            filename = code.co_filename
            if filename.startswith(_COURSE_LIB_DIR) and os.path.abspath(filename) != _THIS_FILE:
                module = os.path.relpath(os.path.splitext(filename)[0], _COURSE_LIB_DIR).replace(os.sep, ".")
                fail(f"{exercise}: your code calls the reference course_lib.{module}.{code.co_name}. "
                     "Write the computation yourself.")
        elif event == "c_call" and frame.f_code.co_filename != __file__:  # the guard's own calls are fine
            if id(arg) in breakers:
                fail(f"{exercise}: your code calls {_name_of(arg)} while it is being checked; "
                     "exercises may not change the profiler or tracer, or start threads.")
            if id(arg) in forbidden_builtins or (
                    forbidden_methods and getattr(arg, "__name__", None) in forbidden_methods
                    and isinstance(getattr(arg, "__self__", None), Tensor)):
                fail(f"{exercise}: your code calls {_name_of(forbidden_builtins.get(id(arg), arg))}, which does the "
                     "exercise for you. Compute it yourself from basic tensor operations.")

    before = _snapshot()
    if reference or forbidden:
        sys.setprofile(profiler)
    try:
        with _ForbidTorch(forbidden, exercise):
            yield
    finally:
        still_mine = sys.getprofile() is profiler
        if reference or forbidden:
            sys.setprofile(previous)
    if violations:  # the profiler's exception may have been swallowed by the learner's code
        raise ForbiddenCall(violations[0])
    if (reference or forbidden) and not still_mine:
        raise ForbiddenCall(f"{exercise}: your code replaced the profiler the checks use; exercises may not call "
                            "sys.setprofile or sys.settrace.")
    changed = _replaced(before)
    if changed:
        raise ForbiddenCall(f"{exercise}: your code replaced {changed} while it was being checked; "
                            "exercises may not patch torch, numpy or the course's modules.")


def _code_objects(allowed: Iterable[Any]) -> set:
    """The code objects of functions, of every method of classes (and their course_lib bases), of modules' classes."""
    codes = set()
    for item in allowed:
        if isinstance(item, torch.nn.Module):
            item = type(item)
        if isinstance(item, type):
            for klass in item.__mro__:
                if not klass.__module__.startswith("course_lib"):  # nn.Module.__call__ would let anything through
                    continue
                for member in vars(klass).values():
                    member = getattr(member, "__func__", member)  # staticmethod, classmethod
                    if isinstance(member, property):
                        member = member.fget
                    code = getattr(member, "__code__", None)
                    if code is not None:
                        codes.add(code)
        else:
            item = getattr(item, "__func__", item)
            code = getattr(item, "__code__", None)
            if code is None:
                raise TypeError(f"allowed: {item!r} is not a Python function, class or module")
            codes.add(code)
    return codes


# --------------------------------------------------------------------------
# Cases and mistakes
# --------------------------------------------------------------------------
@dataclass
class Case:
    """One call of the function under test: its arguments and a readable label."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    label: str = ""

    def map_tensors(self, fn: Callable[[Tensor], Tensor]) -> "Case":
        conv = lambda x: fn(x) if isinstance(x, Tensor) else x  # noqa: E731
        return Case(tuple(conv(a) for a in self.args), {k: conv(v) for k, v in self.kwargs.items()}, self.label)

    def clone(self) -> "Case":
        """A copy the function under test may not change the original through (tensors cloned, the rest deep-copied)."""
        keep = lambda x: x if isinstance(x, Tensor) or callable(x) else copy.deepcopy(x)  # noqa: E731
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


@dataclass
class Mistake:
    """A plausible wrong implementation, written as a variant of the reference.

    ``variant`` takes the same arguments as the function under test. If the
    learner's result matches it (and not the reference), ``message`` is shown.
    """

    message: str
    variant: Callable[..., Any]


def _as_tensor_result(out: Any, name: str, label: str) -> Tensor:
    if isinstance(out, Tensor):
        return out
    hint = " Did you forget to `return` it?" if out is None else ""
    raise ExerciseFailure(f"{name} should return a torch.Tensor, but returned {type(out).__name__} ({label}).{hint}")


def _close(a: Tensor, b: Tensor, atol: float, rtol: float) -> bool:
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


def _perturbed(case: Case, eps: float, g: torch.Generator) -> Case:
    """The case with every floating tensor moved by about one rounding (relative ``eps``)."""
    return case.map_tensors(
        lambda t: t * (1 + eps * torch.randn(t.shape, generator=g, dtype=t.dtype)) if t.is_floating_point() else t)


def _in_dtype(case: Case, dtype: torch.dtype) -> Case:
    """The case with its floating tensors and modules (deep-copied) converted to ``dtype``."""
    def conv(x):
        if isinstance(x, torch.nn.Module):
            return copy.deepcopy(x).to(dtype)
        return x.to(dtype) if isinstance(x, Tensor) and x.is_floating_point() else x
    return Case(tuple(conv(a) for a in case.args), {k: conv(v) for k, v in case.kwargs.items()}, case.label)


def _tolerance(reference: Callable, case: Case, ref64: Tensor, trials: int = 4) -> tuple[float, float]:
    """(atol, rtol) for one case: a multiple of the error any correct implementation makes in the case's dtype.

    One run of the reference in the case's dtype can be luckily accurate, so the
    reference runs ``trials`` times, at the case's inputs and at inputs moved by
    one rounding: its error in the case's dtype at each point (for a float64 case,
    its float32 error scaled down by the ratio of the two epsilons, since float64
    against itself shows nothing), and how far the float64 result moves between
    the points (how ill-conditioned the case is, whatever the implementation).
    """
    if not ref64.is_floating_point():
        return 0.0, 0.0
    dtypes = [t.dtype for t in list(case.args) + list(case.kwargs.values()) if isinstance(t, Tensor) and t.is_floating_point()]
    dtype = dtypes[0] if dtypes else ref64.dtype
    eps = torch.finfo(dtype).eps
    low, factor = (torch.float32, eps / torch.finfo(torch.float32).eps) if dtype == torch.float64 else (dtype, 1.0)
    finite = torch.isfinite(ref64)

    def run(c: Case) -> Tensor:
        c = c.clone()
        with torch.no_grad():
            return reference(*c.args, **c.kwargs).double()

    def gap(a: Tensor, b: Tensor) -> float:
        ok = finite & torch.isfinite(a) & torch.isfinite(b)
        return float((a - b).abs()[ok].max()) if a.shape == b.shape and ok.any() else 0.0

    own_err, g = 0.0, torch.Generator().manual_seed(4321)
    case64 = case.in_float64()
    for trial in range(trials):
        try:
            point = case64 if trial == 0 else _perturbed(case64, eps, g)
            exact = ref64.double() if trial == 0 else run(point)
            own_err = max(own_err, gap(exact, ref64.double()), factor * gap(run(_in_dtype(point, low)), exact))
        except Exception:  # a reference that cannot run this way gets the other estimates and the floor
            continue
    magnitude = float(ref64.abs()[finite].max()) if finite.any() else 1.0
    atol = max(8.0 * own_err, 16.0 * eps * max(1.0, magnitude))
    rtol = 16.0 * eps
    return atol, rtol


def _describe_diff(out: Tensor, expected: Tensor) -> str:
    if out.dtype == torch.bool or expected.dtype == torch.bool:
        wrong = int((out.bool() != expected.bool()).sum())
        return f"{wrong} of {out.numel()} entries differ"
    diff = (out.detach().double() - expected.detach().double()).abs()
    diff = torch.nan_to_num(diff, nan=float("inf"))
    return f"max abs difference {float(diff.max()):.3g}"


def check_function(
    learner: Callable,
    reference: Callable,
    cases: Sequence[Case],
    *,
    name: str | None = None,
    diagnoses: Sequence[Mistake] = (),
    forbidden: Iterable[Callable] = (),
    check_grad: bool = False,
    allowed: Iterable[Any] = (),
) -> None:
    """Compare ``learner`` with ``reference`` on every case; raise :class:`ExerciseFailure` on the first mismatch.

    Checks, per case: no forbidden call, a tensor result of the right shape and
    dtype, values within the derived tolerance, inputs not modified in place,
    and (with ``check_grad``) the gradients with respect to every floating
    input. ``allowed`` names course_lib building blocks the learner is handed
    and may call (see :func:`forbid_calls`).

    Returns None on purpose: nbgrader reads a number left as the value of a
    test cell as partial credit.
    """
    name = name or getattr(learner, "__name__", "your function")
    if not callable(learner):
        raise ExerciseFailure(f"{name} is not a function (got {type(learner).__name__}).")
    forbidden = tuple(forbidden)
    for case in cases:
        label = case.label or "a random case"
        pristine = case.clone()
        mine = case.clone()
        if check_grad:
            mine = mine.map_tensors(lambda t: t.requires_grad_(True) if t.is_floating_point() else t)
        try:
            with forbid_calls(forbidden, exercise=name, allowed=allowed):
                out = learner(*mine.args, **mine.kwargs)
        except ExerciseFailure:
            raise
        except NotImplementedError:
            raise ExerciseFailure(f"{name} is not implemented yet: replace `raise NotImplementedError()` with your code.") from None
        except Exception as exc:  # the learner's bug, reported with the case
            raise ExerciseFailure(f"{name} raised {type(exc).__name__}: {exc} ({label}).") from None
        with torch.no_grad():
            expected = reference(*pristine.clone().args, **pristine.clone().kwargs)
        if not isinstance(expected, Tensor):  # numbers, lists, tuples, dicts...
            _check_value(name, out, expected, pristine, mine, diagnoses, label)
            continue
        out = _as_tensor_result(out, name, label)

        case64 = pristine.in_float64()
        with torch.no_grad():
            ref64 = reference(*case64.args, **case64.kwargs)
            expected_dtype = expected.dtype
        if out.shape != ref64.shape:
            msg = f"{name} returned shape {tuple(out.shape)}, expected {tuple(ref64.shape)} ({label})."
            msg += _match_mistake(out, pristine, diagnoses, ref64, exact=True)
            raise ExerciseFailure(msg)
        if out.dtype != expected_dtype:
            raise ExerciseFailure(
                f"{name} returned dtype {out.dtype}, expected {expected_dtype} ({label}). "
                "Keep the dtype of the inputs; do not convert to another precision (or to float for a mask)."
            )
        atol, rtol = _tolerance(reference, pristine, ref64)
        if not _close(out, ref64, atol, rtol):
            found = _match_mistake(out, pristine, diagnoses, ref64)
            if torch.isnan(out).any() and not torch.isnan(ref64).any() and not found:
                found = " Your result contains NaN where the reference has none."
            if not found:
                found = _first_divergence(learner, reference, pristine, forbidden, allowed)
            raise ExerciseFailure(f"{name} gives wrong values ({label}): {_describe_diff(out, ref64)}.{found}")
        for before, after in zip(_tensors(pristine), _tensors(mine)):
            if before.shape != after.shape or not torch.equal(before, after.detach()):
                raise ExerciseFailure(f"{name} modified one of its inputs in place ({label}); work on a new tensor instead.")
        if check_grad:
            _check_gradients(name, out, mine, reference, case64, label)
    return None


def same_value(a: Any, b: Any) -> bool:
    """Equality for results that are not a single tensor: numbers (floats to 1e-6 relative),
    strings, bytes, tensors (to 1e-5), and lists, tuples and dicts of them, compared recursively."""
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
    return type(a) is type(b) and a == b


def _describe_value(out: Any, expected: Any) -> str:
    kind = lambda x: "a list or tuple" if isinstance(x, (list, tuple)) else type(x).__name__  # noqa: E731
    if kind(out) != kind(expected) and not (isinstance(out, numbers.Number) and isinstance(expected, numbers.Number)):
        return f"expected {kind(expected)}, got {type(out).__name__}"
    if isinstance(expected, dict) and out.keys() != expected.keys():
        return f"expected the keys {sorted(map(str, expected))}, got {sorted(map(str, out))}"
    if isinstance(expected, (list, tuple, dict)) and len(out) != len(expected):
        return f"expected {len(expected)} items, got {len(out)}"
    return "the value differs from the reference's"


def _check_value(name, out, expected, pristine: Case, mine: Case, diagnoses: Sequence[Mistake], label: str) -> None:
    if out is None and expected is not None:
        raise ExerciseFailure(f"{name} returned None ({label}). Did you forget to `return` the result?")
    if not same_value(out, expected):
        found = ""
        for mistake in diagnoses:
            try:
                c = pristine.clone()
                wrong = mistake.variant(*c.args, **c.kwargs)
            except Exception:
                continue
            if same_value(out, wrong) and not same_value(wrong, expected):
                found = " Likely mistake: " + mistake.message
                break
        raise ExerciseFailure(f"{name} gives a wrong result ({label}): {_describe_value(out, expected)}.{found}")
    if not same_value(list(mine.args) + list(mine.kwargs.values()), list(pristine.args) + list(pristine.kwargs.values())):
        raise ExerciseFailure(f"{name} modified one of its inputs in place ({label}); work on a copy instead.")


def _tensors(case: Case) -> list[Tensor]:
    return [t for t in list(case.args) + list(case.kwargs.values()) if isinstance(t, Tensor)]


def _reference_grads(reference: Callable, case: Case, upstream: Tensor) -> list[Tensor | None]:
    """Gradients of ``(reference(case) * upstream).sum()`` with respect to the case's floating inputs."""
    inp = case.map_tensors(lambda t: t.detach().clone().requires_grad_(True) if t.is_floating_point() else t)
    leaves = [t for t in _tensors(inp) if t.is_floating_point()]
    out = reference(*inp.args, **inp.kwargs)
    return list(torch.autograd.grad((out * upstream.to(out.dtype)).sum(), leaves, allow_unused=True))


def _gradient_error(reference: Callable, mine: Case, case64: Case, upstream: Tensor,
                    ref_grads: list[Tensor | None], trials: int = 4) -> list[float]:
    """Per input, how far a correct gradient in the case's dtype may fall from the float64 one.

    Rounding makes any correct implementation's gradient a random draw around the
    exact one, and one draw of the reference's own error can be luckily small (a
    gradient that is exactly zero in theory, such as the cosine of 1-d vectors, is
    pure cancellation noise). So the reference is run ``trials`` times, at the
    case's inputs and at inputs moved by one rounding of the case's dtype:

    * its error in the case's dtype at each point (for a float64 case, its float32
      error scaled down by the ratio of the two epsilons: float64 against itself
      shows nothing), and
    * how far the float64 gradient itself moves between the points, which measures
      how ill-conditioned the case is (a softmax of huge logits, nearly-zero
      vectors normalized), whatever the implementation.

    The largest of these, per input, is returned.
    """
    dtype = next((t.dtype for t in _tensors(mine) if t.is_floating_point()), torch.float64)
    eps = torch.finfo(dtype).eps
    low, factor = (torch.float32, eps / torch.finfo(torch.float32).eps) if dtype == torch.float64 else (dtype, 1.0)
    g = torch.Generator().manual_seed(4321)
    errors = [0.0] * len(ref_grads)

    def spread(grads: list[Tensor | None], against: list[Tensor | None], scale: float) -> None:
        for i, (lg, rg) in enumerate(zip(grads, against)):
            if rg is None or lg is None or not lg.numel() or lg.shape != rg.shape:
                continue
            finite = torch.isfinite(rg) & torch.isfinite(lg.double())
            if finite.any():
                errors[i] = max(errors[i], scale * float((lg.double() - rg.double()).abs()[finite].max()))

    for trial in range(trials):
        point = case64 if trial == 0 else _perturbed(case64, eps, g)
        try:
            exact = _reference_grads(reference, point, upstream) if trial else ref_grads
            spread(exact, ref_grads, 1.0)
            rounded = _reference_grads(reference, point.map_tensors(
                lambda t: t.to(low) if t.is_floating_point() else t), upstream)
            spread(rounded, exact, factor)
        except Exception:  # a reference that cannot run this way gets the other estimates and the floor
            continue
    return errors


def _check_gradients(name: str, out: Tensor, mine: Case, reference: Callable, case64: Case, label: str) -> None:
    inputs = [t for t in _tensors(mine) if t.is_floating_point()]
    if not out.requires_grad:
        raise ExerciseFailure(f"{name}'s result is cut off from the autograd graph ({label}): avoid .detach(), .data or numpy.")
    g = torch.Generator().manual_seed(1234)
    upstream = torch.randn(out.shape, generator=g, dtype=torch.float64)
    grads = torch.autograd.grad((out * upstream.to(out.dtype)).sum(), inputs, allow_unused=True)
    ref_inputs = [t for t in _tensors(case64) if t.is_floating_point()]
    ref_grads = _reference_grads(reference, case64, upstream)
    own = _gradient_error(reference, mine, case64, upstream, ref_grads)
    for i, (mg, rg) in enumerate(zip(grads, ref_grads)):
        rg = torch.zeros_like(ref_inputs[i]) if rg is None else rg
        mg = torch.zeros_like(inputs[i]) if mg is None else mg
        scale = max(1.0, float(rg.abs().max())) if rg.numel() else 1.0
        eps = torch.finfo(inputs[i].dtype).eps
        if not _close(mg, rg, max(1e3 * eps * scale, 8.0 * own[i]), 1e3 * eps):
            raise ExerciseFailure(
                f"{name}: the values are right but the gradient with respect to input {i + 1} is not "
                f"({label}, {_describe_diff(mg, rg)}). Avoid in-place edits of tensors autograd needs, "
                "and make masked entries contribute no gradient (no NaN)."
            )


# --------------------------------------------------------------------------
# Where an assembled model first goes wrong
# --------------------------------------------------------------------------
def _module_slots(learner: Callable, case: Case) -> list[tuple[str, torch.nn.Module]]:
    """The modules a case hands over (directly or in a list), named as the learner's parameters."""
    try:
        params = list(inspect.signature(learner).parameters)
    except (TypeError, ValueError):
        params = []
    named = [(params[i] if i < len(params) else f"argument {i + 1}", a) for i, a in enumerate(case.args)]
    named += list(case.kwargs.items())
    slots = []
    for name, value in named:
        if isinstance(value, torch.nn.Module) and not isinstance(value, torch.nn.ModuleList):
            slots.append((name, value))
        elif isinstance(value, (list, tuple, torch.nn.ModuleList)) and value and all(
                isinstance(m, torch.nn.Module) for m in value):
            slots += [(f"{name}[{j}]", m) for j, m in enumerate(value)]
    return slots


def _trace(fn: Callable, case: Case, labels: list[str], guard=None) -> list[tuple[str, Tensor | None]]:
    """(slot, first tensor input) of every call of a handed-over module while ``fn`` runs, in order."""
    slots = _module_slots(fn, case)
    calls: list[tuple[str, Tensor | None]] = []
    handles = []
    for (_, module), label in zip(slots, labels):
        def hook(mod, inputs, label=label):
            first = next((t for t in inputs if isinstance(t, Tensor)), None)
            calls.append((label, None if first is None else first.detach().clone()))
        handles.append(module.register_forward_pre_hook(hook))
    try:
        with torch.no_grad(), (guard or contextlib.nullcontext()):
            fn(*case.args, **case.kwargs)
    except Exception:
        pass
    finally:
        for h in handles:
            h.remove()
    return calls


def _first_divergence(learner: Callable, reference: Callable, case: Case, forbidden=(), allowed=()) -> str:
    """For a function that assembles handed-over modules: the first module whose input differs from the reference's."""
    labels = [name for name, _ in _module_slots(learner, case)]
    if not labels:
        return ""
    mine = _trace(learner, case.clone(), labels, forbid_calls(forbidden, exercise="trace", allowed=allowed))
    theirs = _trace(reference, case.in_float64(), labels)
    seen: dict[str, int] = {}
    for i, (label, expected) in enumerate(theirs):
        if i < len(mine) and mine[i][0] != label:
            matched = " (the calls before it matched)" if i else ""
            return (f" First divergence: call {i + 1} of the given modules is `{mine[i][0]}` in your code but "
                    f"`{label}` in the reference{matched}: check the order of the steps (where is the norm "
                    "applied, which output feeds which step?).")
        k = seen.get(label, 0)
        seen[label] = k + 1
        mine_k = [t for lab, t in mine if lab == label]
        nth = f"{k + 1}{'st' if k == 0 else 'nd' if k == 1 else 'rd' if k == 2 else 'th'} call of "
        if len(mine_k) <= k:
            return (f" The reference calls `{label}` ({seen[label]} time(s) so far) but your code "
                    f"{'never calls it' if not mine_k else f'calls it only {len(mine_k)} time(s)'}.")
        got = mine_k[k]
        if expected is None or got is None:
            continue
        if got.shape != expected.shape:
            return (f" First divergence: the input to `{label}` ({nth}it) has shape {tuple(got.shape)}, "
                    f"the reference's {tuple(expected.shape)}: look at what your code does before that call.")
        scale = max(1.0, float(expected.abs().max()))
        diff = float((got.double() - expected).abs().max())
        if not diff <= 1e-3 * scale:
            where = "" if not k and label == theirs[0][0] else " (everything before it matched)"
            return (f" First divergence: the input to `{label}` ({nth}it) differs from the reference's by up to "
                    f"{diff:.3g}{where}: look at what your code does before that call.")
    extra = [lab for lab in {lab for lab, _ in mine} if sum(1 for x, _ in mine if x == lab) > seen.get(lab, 0)]
    if extra:
        return f" Your code calls `{sorted(extra)[0]}` more often than the reference."
    last = theirs[-1][0] if theirs else labels[-1]
    return (f" Every module you were given received the right input; the difference comes after the last call "
            f"(`{last}`): check what your code does with the outputs (residuals, the final norm or head).")


def _match_mistake(out: Tensor, case: Case, diagnoses: Sequence[Mistake], ref64: Tensor, exact: bool = False) -> str:
    for mistake in diagnoses:
        c = case.in_float64()
        try:
            with torch.no_grad():
                wrong = mistake.variant(*c.args, **c.kwargs)
        except Exception:
            continue
        if not isinstance(wrong, Tensor) or wrong.shape != out.shape:
            continue
        if exact:  # shape mistakes: the shape alone is the evidence
            return " Likely mistake: " + mistake.message
        if out.dtype == torch.bool or wrong.dtype == torch.bool:
            if torch.equal(out.bool(), wrong.bool()) and not torch.equal(wrong.bool(), ref64.bool()):
                return " Likely mistake: " + mistake.message
            continue
        atol, rtol = 1e-2 * max(1.0, float(torch.nan_to_num(wrong).abs().max())), 1e-2
        if out.dtype in (torch.float64, torch.float32):
            atol, rtol = atol * 1e-2, rtol * 1e-2
        if _close(out, wrong, atol, rtol) and not _close(wrong, ref64, atol, rtol):
            return " Likely mistake: " + mistake.message
    return ""
