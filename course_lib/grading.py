"""What the hidden tests of the exercises use: compare a learner's function with
the reference in :mod:`course_lib` over many random cases.

A hidden test reads like this::

    from course_lib import attention as ref
    from course_lib.grading import check_function, attention_cases
    check_function(attention_scores, ref.attention_scores, attention_cases(seed=0),
                   diagnoses=SCORE_MISTAKES, forbidden=FUSED_ATTENTION)

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
import math
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
    "forbid_calls",
    "attention_cases",
    "score_cases",
    "softmax_cases",
    "mask_sizes",
    "SCORE_MISTAKES",
    "SOFTMAX_MISTAKES",
    "CAUSAL_MASK_MISTAKES",
    "ATTENTION_MISTAKES",
]

_COURSE_LIB_DIR = os.path.dirname(os.path.abspath(__file__))
_THIS_FILE = os.path.abspath(__file__)


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


@contextlib.contextmanager
def forbid_calls(forbidden: Iterable[Callable] = (), *, exercise: str = "this exercise", reference: bool = True):
    """Fail with :class:`ForbiddenCall` if the code inside calls a forbidden routine.

    Args:
        forbidden: torch functions or methods (matched by identity, so an alias
            such as ``sdpa = F.scaled_dot_product_attention`` is caught too).
        exercise: name used in the message.
        reference: also forbid any code defined in :mod:`course_lib` (other
            than this grading module), however it was imported or aliased.
    """
    violations: list[str] = []
    previous = sys.getprofile()

    def profiler(frame, event, arg):  # pragma: no cover - runs under the profiler
        if event == "call":
            filename = frame.f_code.co_filename
            if filename.startswith(_COURSE_LIB_DIR) and os.path.abspath(filename) != _THIS_FILE:
                module = os.path.splitext(os.path.basename(filename))[0]
                violations.append(f"course_lib.{module}.{frame.f_code.co_name}")
                raise ForbiddenCall(
                    f"{exercise}: your code calls the reference course_lib.{module}."
                    f"{frame.f_code.co_name}. Write the computation yourself."
                )

    if reference:
        sys.setprofile(profiler)
    try:
        with _ForbidTorch(forbidden, exercise):
            yield
    finally:
        if reference:
            sys.setprofile(previous)
    if violations:  # the profiler's exception may have been swallowed by the learner's code
        raise ForbiddenCall(f"{exercise}: your code calls the reference {violations[0]}. Write the computation yourself.")


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
        return self.map_tensors(lambda t: t.detach().clone())

    def in_float64(self) -> "Case":
        return self.map_tensors(lambda t: t.double() if t.is_floating_point() else t)


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
    ok = (diff <= atol + rtol * b64.abs()) | both_nan | (a64 == b64)
    return bool(ok.all())


def _tolerance(reference: Callable, case: Case, ref64: Tensor) -> tuple[float, float]:
    """(atol, rtol) for one case: a multiple of the reference's own error in the case's dtype."""
    if not ref64.is_floating_point():
        return 0.0, 0.0
    dtypes = [t.dtype for t in list(case.args) + list(case.kwargs.values()) if isinstance(t, Tensor) and t.is_floating_point()]
    dtype = dtypes[0] if dtypes else ref64.dtype
    eps = torch.finfo(dtype).eps
    with torch.no_grad():
        ref_low = reference(*case.clone().args, **case.clone().kwargs)
    finite = torch.isfinite(ref64)
    own_err = float((ref_low.double() - ref64).abs()[finite].max()) if finite.any() else 0.0
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
) -> None:
    """Compare ``learner`` with ``reference`` on every case; raise :class:`ExerciseFailure` on the first mismatch.

    Checks, per case: no forbidden call, a tensor result of the right shape and
    dtype, values within the derived tolerance, inputs not modified in place,
    and (with ``check_grad``) the gradients with respect to every floating
    input.

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
            with forbid_calls(forbidden, exercise=name):
                out = learner(*mine.args, **mine.kwargs)
        except ExerciseFailure:
            raise
        except NotImplementedError:
            raise ExerciseFailure(f"{name} is not implemented yet: replace `raise NotImplementedError()` with your code.") from None
        except Exception as exc:  # the learner's bug, reported with the case
            raise ExerciseFailure(f"{name} raised {type(exc).__name__}: {exc} ({label}).") from None
        out = _as_tensor_result(out, name, label)

        case64 = pristine.in_float64()
        with torch.no_grad():
            ref64 = reference(*case64.args, **case64.kwargs)
            expected_dtype = reference(*pristine.clone().args, **pristine.clone().kwargs).dtype
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
            raise ExerciseFailure(f"{name} gives wrong values ({label}): {_describe_diff(out, ref64)}.{found}")
        for before, after in zip(_tensors(pristine), _tensors(mine)):
            if before.shape != after.shape or not torch.equal(before, after.detach()):
                raise ExerciseFailure(f"{name} modified one of its inputs in place ({label}); work on a new tensor instead.")
        if check_grad:
            _check_gradients(name, out, mine, reference, case64, label)
    return None


def _tensors(case: Case) -> list[Tensor]:
    return [t for t in list(case.args) + list(case.kwargs.values()) if isinstance(t, Tensor)]


def _check_gradients(name: str, out: Tensor, mine: Case, reference: Callable, case64: Case, label: str) -> None:
    inputs = [t for t in _tensors(mine) if t.is_floating_point()]
    if not out.requires_grad:
        raise ExerciseFailure(f"{name}'s result is cut off from the autograd graph ({label}): avoid .detach(), .data or numpy.")
    g = torch.Generator().manual_seed(1234)
    upstream = torch.randn(out.shape, generator=g, dtype=torch.float64)
    grads = torch.autograd.grad((out * upstream.to(out.dtype)).sum(), inputs, allow_unused=True)
    ref_in = case64.map_tensors(lambda t: t.detach().clone().requires_grad_(True) if t.is_floating_point() else t)
    ref_inputs = [t for t in _tensors(ref_in) if t.is_floating_point()]
    ref_out = reference(*ref_in.args, **ref_in.kwargs)
    ref_grads = torch.autograd.grad((ref_out * upstream).sum(), ref_inputs, allow_unused=True)
    for i, (mg, rg) in enumerate(zip(grads, ref_grads)):
        rg = torch.zeros_like(ref_inputs[i]) if rg is None else rg
        mg = torch.zeros_like(inputs[i]) if mg is None else mg
        scale = max(1.0, float(rg.abs().max()))
        eps = torch.finfo(inputs[i].dtype).eps
        if not _close(mg, rg, 1e3 * eps * scale, 1e3 * eps):
            raise ExerciseFailure(
                f"{name}: the values are right but the gradient with respect to input {i + 1} is not "
                f"({label}, {_describe_diff(mg, rg)}). Avoid in-place edits of tensors autograd needs, "
                "and make masked entries contribute no gradient (no NaN)."
            )


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


# --------------------------------------------------------------------------
# Random cases for the attention exercises (chapter 02)
# --------------------------------------------------------------------------
_BATCH_SHAPES = [(), (2,), (3,), (2, 3)]


def _random_mask(g: torch.Generator, batch: tuple, n_q: int, n_k: int, kind: str) -> tuple[Tensor | None, str]:
    if kind == "none":
        return None, "no mask"
    if kind == "causal":
        return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), "causal mask"
    if kind == "padding":
        b = batch[0] if batch else 1
        lengths = torch.randint(1, n_k + 1, (b,), generator=g)
        m = torch.arange(n_k)[None, :] < lengths[:, None]
        m = m.view((b,) + (1,) * (len(batch) - 1) + (1, n_k)) if batch else m.view(1, n_k)
        return m, f"padding mask, lengths {lengths.tolist()}"
    if kind == "random":
        m = torch.rand(batch + (n_q, n_k), generator=g) < 0.6
        if n_q > 1:
            m[..., 0, :] = False  # a query that sees nothing
        return m, "random mask with a fully masked query row"
    raise ValueError(kind)


def mask_sizes(seed: int = 0, n: int = 12) -> list[Case]:
    """Cases ``(n,)`` and ``(n_q, n_k)`` sizes for a causal-mask function."""
    g = torch.Generator().manual_seed(seed)
    sizes = [4, 1, 2, 3] + torch.randint(4, 40, (n,), generator=g).tolist()
    return [Case((s,), label=f"n={s}") for s in sizes]


def _qkv(g, batch, n_q, n_k, d_k, d_v, dtype, spread):
    q = (torch.randn(batch + (n_q, d_k), generator=g, dtype=torch.float64) * spread).to(dtype)
    k = (torch.randn(batch + (n_k, d_k), generator=g, dtype=torch.float64) * spread).to(dtype)
    v = torch.randn(batch + (n_k, d_v), generator=g, dtype=torch.float64).to(dtype)
    return q, k, v


def attention_cases(seed: int = 0, n: int = 24, *, masks: bool = True, values: bool = True) -> list[Case]:
    """Random ``(q, k, v[, mask])`` cases covering batch shapes, ``n_q != n_k``,
    ``d_k != d_v``, float32/float64, small and large score spreads, and the
    mask kinds none/causal/padding/random (with a fully masked row)."""
    g = torch.Generator().manual_seed(seed)
    kinds = ["none", "causal", "padding", "random"] if masks else ["none"]
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        n_q, n_k = (int(x) for x in torch.randint(1, 9, (2,), generator=g))
        if i % 5 == 0:
            n_k = n_q
        d_k = [1, 3, 8, 16, 64][int(torch.randint(0, 5, (1,), generator=g))]
        d_v = [2, 5, 8][int(torch.randint(0, 3, (1,), generator=g))]
        dtype = torch.float64 if i % 3 == 0 else torch.float32
        spread = 4.0 if i % 4 == 3 else 1.0
        q, k, v = _qkv(g, batch, n_q, n_k, d_k, d_v, dtype, spread)
        kind = kinds[i % len(kinds)]
        mask, mask_label = _random_mask(g, batch, n_q, n_k, kind)
        args = (q, k, v) if values else (q, k)
        label = f"batch {batch}, n_q={n_q}, n_k={n_k}, d_k={d_k}" + (f", d_v={d_v}" if values else "")
        label += f", {str(dtype).replace('torch.', '')}"
        if masks:
            args = args + (mask,)
            label += f", {mask_label}"
        cases.append(Case(args, label=label))
    return cases


def score_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(q, k)`` cases for a scores function."""
    return attention_cases(seed, n, masks=False, values=False)


def softmax_cases(seed: int = 0, n: int = 24) -> list[Case]:
    """``(scores, mask)`` cases: ordinary and huge scores (overflow), every mask kind."""
    g = torch.Generator().manual_seed(seed)
    kinds = ["none", "causal", "padding", "random"]
    cases = []
    for i in range(n):
        batch = _BATCH_SHAPES[i % len(_BATCH_SHAPES)]
        n_q, n_k = (int(x) for x in torch.randint(1, 9, (2,), generator=g))
        dtype = torch.float64 if i % 3 == 0 else torch.float32
        spread = [1.0, 3.0, 1000.0][i % 3]
        scores = (torch.randn(batch + (n_q, n_k), generator=g, dtype=torch.float64) * spread).to(dtype)
        mask, mask_label = _random_mask(g, batch, n_q, n_k, kinds[i % 4])
        label = f"scores {tuple(scores.shape)} of spread {spread:g}, {str(dtype).replace('torch.', '')}, {mask_label}"
        cases.append(Case((scores, mask), label=label))
    return cases


# --------------------------------------------------------------------------
# Likely mistakes, as variants of the reference
# --------------------------------------------------------------------------
def _scores(q, k, scale):
    return (q @ k.transpose(-2, -1)) * scale


def _softmax(s, mask=None, dim=-1):
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=dim)
    return torch.nan_to_num(w, nan=0.0)


SCORE_MISTAKES = [
    Mistake("the scores are not scaled: divide q @ k^T by sqrt(d_k).", lambda q, k: _scores(q, k, 1.0)),
    Mistake("the scores are divided by d_k; divide by its square root, sqrt(d_k).", lambda q, k: _scores(q, k, 1.0 / q.shape[-1])),
    Mistake("the scores are multiplied by sqrt(d_k); divide by it instead.", lambda q, k: _scores(q, k, math.sqrt(q.shape[-1]))),
    Mistake(
        "the result is (n_k, n_q): queries index the rows, so compute q @ k^T, not k @ q^T.",
        lambda q, k: _scores(k, q, 1.0 / math.sqrt(q.shape[-1])),
    ),
    Mistake(
        "the scale uses the sequence length; the scale is 1/sqrt(d_k) where d_k = q.shape[-1].",
        lambda q, k: _scores(q, k, 1.0 / math.sqrt(k.shape[-2])),
    ),
]

SOFTMAX_MISTAKES = [
    Mistake(
        "the softmax normalizes over the queries (dim=-2); each query's weights over the keys (dim=-1) must sum to 1.",
        lambda s, m: _softmax(s, m, dim=-2),
    ),
    Mistake("the mask is inverted: True means *may attend*, so keep entries where the mask is True.", lambda s, m: _softmax(s, None if m is None else ~m)),
    Mistake("the mask is ignored: set masked scores to -inf before exponentiating.", lambda s, m: _softmax(s, None)),
    Mistake(
        "masked scores are set to 0 rather than -inf, so masked keys still get weight exp(0).",
        lambda s, m: _softmax(s if m is None else s.masked_fill(~m, 0.0)),
    ),
    Mistake(
        "a row with no allowed key comes out uniform: it must be all zeros (fill with -inf, not a large negative number, and handle the empty row).",
        lambda s, m: torch.softmax(s if m is None else s.masked_fill(~m, -1e9), -1),
    ),
    Mistake(
        "masked weights are zeroed after normalizing, so the rows no longer sum to 1: renormalize over the allowed keys.",
        lambda s, m: torch.softmax(s, -1) * (1.0 if m is None else m),
    ),
]

CAUSAL_MASK_MISTAKES = [
    Mistake("off by one: a token may attend to itself, so the diagonal is True.", lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1)),
    Mistake("the mask lets tokens see the future: keep the lower triangle (key j <= query i), not the upper.", lambda n: torch.ones(n, n, dtype=torch.bool).triu()),
    Mistake("the mask is inverted: True must mean *may attend* (j <= i).", lambda n: ~torch.ones(n, n, dtype=torch.bool).tril()),
    Mistake("off by one: key i+1 is in the future of query i.", lambda n: torch.ones(n, n, dtype=torch.bool).tril(1)),
]


def _attention(q, k, v, mask=None, scale=None, dim=-1, invert=False):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if mask is not None and invert:
        mask = ~mask
    return _softmax(_scores(q, k, scale), mask, dim=dim) @ v


ATTENTION_MISTAKES = [
    Mistake("the scores are not scaled by 1/sqrt(d_k).", lambda q, k, v, m=None: _attention(q, k, v, m, scale=1.0)),
    Mistake("the scale uses d_v (the values' width); it is 1/sqrt(d_k), the width of queries and keys.", lambda q, k, v, m=None: _attention(q, k, v, m, scale=1.0 / math.sqrt(v.shape[-1]))),
    Mistake("the scores are divided by d_k instead of sqrt(d_k).", lambda q, k, v, m=None: _attention(q, k, v, m, scale=1.0 / q.shape[-1])),
    Mistake("the softmax runs over the queries (dim=-2); it must run over the keys (dim=-1).", lambda q, k, v, m=None: _attention(q, k, v, m, dim=-2)),
    Mistake("the mask is inverted: True means *may attend*.", lambda q, k, v, m=None: _attention(q, k, v, m, invert=True)),
    Mistake("the mask is ignored.", lambda q, k, v, m=None: _attention(q, k, v, None)),
    Mistake(
        "the weights are transposed: row i of the weights belongs to query i, so compute weights @ v.",
        lambda q, k, v, m=None: _softmax(_scores(q, k, 1.0 / math.sqrt(q.shape[-1])), m).transpose(-2, -1) @ v,
    ),
    Mistake("the scores are not normalized: apply the softmax before weighting the values.", lambda q, k, v, m=None: (_scores(q, k, 1.0 / math.sqrt(q.shape[-1])).masked_fill(~m, 0.0) if m is not None else _scores(q, k, 1.0 / math.sqrt(q.shape[-1]))) @ v),
]
