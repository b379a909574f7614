"""Diagnosis: when a learner's result is wrong, name the likely mistake, never the expected answer.

A :class:`Mistake` is a plausible wrong implementation written as a variant
of the reference. When the learner's result matches a variant (and the
variant differs from the reference), its message is the feedback. For a
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


@dataclass
class Mistake:
    """A plausible wrong implementation, written as a variant of the reference.

    ``variant`` takes the same arguments as the function under test. If the
    learner's result matches it (and not the reference), ``message`` is shown.
    """

    message: str
    variant: Callable[..., Any]


def match_mistake(out: Tensor, case: Case, diagnoses: Sequence[Mistake], ref64: Tensor, exact: bool = False) -> str:
    """The likely mistake whose variant the learner's result matches; where several match (two mistakes that
    agree closely on this case, GELU and its tanh approximation), the closest, the first listed on a tie."""
    best: tuple[float, str] | None = None
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
        if close(out, wrong, atol, rtol) and not close(wrong, ref64, atol, rtol):
            gap = torch.nan_to_num((out.detach().double() - wrong.detach().double()).abs(), nan=0.0, posinf=0.0)
            distance = float(gap.max()) if gap.numel() else 0.0
            if best is None or distance < best[0]:
                best = (distance, mistake.message)
    return "" if best is None else " Likely mistake: " + best[1]


def match_value_mistake(out: Any, case: Case, diagnoses: Sequence[Mistake], expected: Any) -> str:
    """The likely mistake behind a wrong result that is not a tensor (a number, a list, a dict...)."""
    for mistake in diagnoses:
        try:
            c = case.clone()
            wrong = mistake.variant(*c.args, **c.kwargs)
        except Exception:
            continue
        if same_value(out, wrong) and not same_value(wrong, expected):
            return " Likely mistake: " + mistake.message
    return ""


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
