"""Diagnosis: when a learner's result is wrong, name the likely mistake, never the expected answer.

A :class:`Mistake` is a plausible wrong implementation written as a variant
of the reference. When the learner's result matches a variant (and the
variant differs from the reference), its message is the feedback. Where
several variants give the failing case's result, the other cases of the
comparison decide (:func:`corroborated`): a learner's cases are drawn from a
seed of their own, and two mistakes that agree on one draw rarely agree on
all. For a
function that assembles modules it is handed, :func:`first_divergence` finds
the first handed module whose input differs from the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from .cases import Case
from .compare import close, same_value
from .learner import Learner, module_slots, record_module_inputs

#: how much nearer a mistake's result than the reference's a learner's result must be to show that mistake
NEARER = 0.1

#: the learner's results on the other cases of a comparison, computed only where asked for: ``others()`` gives
#: ``(case, result, the reference's result)`` triples (the reference's tensors in float64)
Others = Callable[[], Sequence[tuple[Case, Any, Any]]]


@dataclass
class Mistake:
    """A plausible wrong implementation, written as a variant of the reference.

    ``variant`` takes the same arguments as the function under test. If the
    learner's result matches it (and not the reference), ``message`` is shown.
    """

    message: str
    variant: Callable[..., Any]
    #: run the variant on the case in its own dtype, not in float64: a mistake that shows only as float32's
    #: overflow (an exp without the maximum subtracted is exact in float64 on the same scores)
    native: bool = False


def _variant(mistake: Mistake, case: Case) -> Any:
    """The mistake's result on the case (None where the variant cannot run on it)."""
    try:
        with torch.no_grad():
            return mistake.variant(*case.args, **case.kwargs)
    except Exception:
        return None


def _distance(a: Tensor, b: Tensor) -> float:
    """The largest difference between two results of one shape (equal entries, infinities and NaN against NaN
    included, count as no difference)."""
    a64, b64 = a.detach().double(), b.detach().double()
    same = (torch.isnan(a64) & torch.isnan(b64)) | (a64 == b64)
    gap = torch.where(same, torch.zeros_like(a64), (a64 - b64).abs())
    gap = torch.nan_to_num(gap, nan=float("inf"), posinf=float("inf"))
    return float(gap.max()) if gap.numel() else 0.0


def tensor_mistake_matches(out: Tensor, wrong: Any, ref64: Tensor, check_tol: tuple[float, float] | None = None) -> \
        float | None:
    """How far ``out`` lies from a mistake's result ``wrong``, or None where ``out`` does not show that mistake.

    ``out`` shows the mistake when it agrees with ``wrong`` to 1e-4 relative
    (1e-2 in a low precision), ``wrong`` is one the check rejects (outside
    ``check_tol``, the check's own ``(atol, rtol)``; without it, outside the
    same 1e-4), and ``out`` is ten times nearer ``wrong`` than the reference
    (:data:`NEARER`, with ``check_tol``). The last rule keeps a small error
    (float32 rounding in an ill-conditioned case, where every result is tiny)
    from being read as a mistake whose result differs from the reference by a
    little more.
    """
    if not isinstance(wrong, Tensor) or wrong.shape != out.shape:
        return None
    if out.dtype == torch.bool or wrong.dtype == torch.bool:
        same = torch.equal(out.bool(), wrong.bool()) and not torch.equal(wrong.bool(), ref64.bool())
        return 0.0 if same else None
    atol, rtol = 1e-2 * max(1.0, float(torch.nan_to_num(wrong).abs().max())), 1e-2
    if out.dtype in (torch.float64, torch.float32):
        atol, rtol = atol * 1e-2, rtol * 1e-2
    distinct_tol = check_tol if check_tol is not None else (atol, rtol)
    if not close(out, wrong, atol, rtol) or close(wrong, ref64, *distinct_tol):
        return None
    to_wrong = _distance(out, wrong)
    if check_tol is not None and not to_wrong <= NEARER * _distance(out, ref64):
        return None
    return to_wrong


def match_mistake(out: Tensor, case: Case, diagnoses: Sequence[Mistake], ref64: Tensor, exact: bool = False,
                  check_tol: tuple[float, float] | None = None, others: Others = tuple) -> str:
    """The likely mistake whose variant the learner's result matches (:func:`tensor_mistake_matches`).

    Where several match on this case (two mistakes that agree closely here,
    GELU and its tanh approximation), the one the ``others`` cases bear out
    best (:func:`corroborated`), then the closest here, then the first
    listed. ``exact``: a result of the wrong shape, which the shape alone
    names. ``check_tol``: the check's own ``(atol, rtol)`` on this case.
    """
    c = case.in_float64()
    found = []
    for mistake in diagnoses:
        wrong = _variant(mistake, case.clone() if mistake.native else c)
        if not isinstance(wrong, Tensor) or wrong.shape != out.shape:
            continue
        if exact:  # shape mistakes: the shape alone is the evidence
            return " Likely mistake: " + mistake.message
        distance = tensor_mistake_matches(out, wrong, ref64, check_tol)
        if distance is not None:
            found.append((distance, mistake))
    found.sort(key=lambda hit: hit[0])  # stable: the first listed on a tie

    def evidence(mistake: Mistake, other: Case, got: Any, theirs: Any) -> int:
        wrong = _variant(mistake, other.clone() if mistake.native else other.in_float64())
        if not isinstance(theirs, Tensor) or tensor_mistake_matches(wrong, wrong, theirs) is None:
            return 0  # the mistake cannot run here, or gives the reference's result: no evidence either way
        return 1 if isinstance(got, Tensor) and tensor_mistake_matches(got, wrong, theirs) is not None else -1

    return _message(corroborated([m for _, m in found], others, evidence, near=True))


def match_value_mistake(out: Any, case: Case, diagnoses: Sequence[Mistake], expected: Any,
                        others: Others = tuple) -> str:
    """The likely mistake behind a wrong result that is not a tensor (a number, a list, a dict...).

    Where several mistakes give this very result, the one the ``others`` cases
    bear out best (:func:`corroborated`), then the first listed: two mistakes
    often agree on one case (a training loop that stops one merge early, for
    either of two reasons)."""
    found = [m for m in diagnoses if _value_shows(out, _variant(m, case.clone()), expected)]

    def evidence(mistake: Mistake, other: Case, got: Any, theirs: Any) -> int:
        wrong = _variant(mistake, other.clone())
        if wrong is None or same_value(wrong, theirs):
            return 0
        return 1 if same_value(got, wrong) else -1

    return _message(corroborated(found, others, evidence))


def _value_shows(out: Any, wrong: Any, expected: Any) -> bool:
    """Whether ``out`` is the mistake's result ``wrong``, which is not the reference's ``expected``."""
    return wrong is not None and same_value(out, wrong) and not same_value(wrong, expected)


def corroborated(candidates: Sequence[Mistake], others: Others,
                 evidence: Callable[[Mistake, Case, Any, Any], int], near: bool = False) -> Mistake | None:
    """Of the mistakes the failing case shows, the one the other cases bear out best (the first on a tie); with
    ``near`` (a match to within a tolerance, not an equality), none where no other case bears it out and some
    contradict it.

    On each other case a mistake whose result differs from the reference's
    bears out where the learner's result shows it and contradicts where it
    does not (``evidence(mistake, case, result, reference's result)``: +1, -1,
    or 0 where the case cannot tell); the score is the sum. One draw can make
    another error look like a mistake (a float32 rounding that happens to
    equal a missing eps): no other draw then shows it, and no mistake is named
    rather than the wrong one. A mistake that shows only on some inputs (a
    bias left out where it defaults) is borne out by the others of them, if
    there are any: an exact match (a count, a list) is named even where it is
    the only one.
    """
    if not candidates or (len(candidates) == 1 and not near):
        return candidates[0] if candidates else None
    seen = others()
    votes = [[evidence(m, other, got, theirs) for other, got, theirs in seen] for m in candidates]
    best = max(range(len(candidates)), key=lambda i: (sum(votes[i]), -i))
    lone = near and 1 not in votes[best] and -1 in votes[best]
    return None if lone else candidates[best]


def _message(mistake: Mistake | None) -> str:
    return "" if mistake is None else " Likely mistake: " + mistake.message


def match_table_mistake(out: Tensor, case: Case, diagnoses: Sequence[Mistake], expected: Tensor,
                        shape_only: bool = False) -> str:
    """The likely mistake behind a wrong table (see :func:`grader.checker.check_table`)."""
    for mistake in diagnoses:
        try:
            wrong = mistake.variant(*case.args, **case.kwargs)
        except Exception:
            continue
        if not isinstance(wrong, Tensor) or wrong.shape != out.shape:
            continue
        if shape_only:
            return " Likely mistake: " + mistake.message
        wrong = wrong.double()
        near = float((out.detach().double().cpu() - wrong).abs().max()) <= 1e-4 * max(1.0, float(wrong.abs().max()))
        differs = wrong.shape != expected.shape or not torch.allclose(wrong, expected, atol=1e-6)
        if near and differs:
            return " Likely mistake: " + mistake.message
    return ""


def first_divergence(learner: Learner, reference: Callable, case: Case, forbidden=(), allowed=()) -> str:
    """For a function that assembles handed-over modules: the first module whose input differs from the reference's."""
    labels = [name for name, _ in module_slots(learner.function, case)]
    if not labels:
        return ""
    mine = learner.trace(case.clone(), labels, "trace", forbidden, allowed)
    theirs = record_module_inputs(reference, case.in_float64(), labels)
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
