"""Predict, then run: an exercise whose answer is a number, a few numbers or a shape the learner works out by hand.

Each chapter assignment asks the learner to predict one result before a cell shows it: the shape of a product,
a gradient on a two-number example, the memory of a cache. The learner writes the prediction as a function
with no arguments that returns it::

    def predicted_center():
        return [0.2, 9.3]

so that it is graded as every exercise is (:class:`~grader.registry.Exercise`, one
:class:`~grader.registry.Comparison`): called in the grading kernel, compared outside it, its likely wrong
answers named by :class:`~grader.diagnosis.Mistake`, in Check your work as in the gradebook. The similarity
report leaves predictions out (:attr:`grader.registry.Assignment.written`): every learner who is right
writes the same ``return``.

The learner's answer may be a number, a list, a tuple, a ``torch.Size``, a tensor or a NumPy array of numbers
(64 at most); :func:`prediction`'s adapter reads it as a flat float64 tensor and snaps it to the listed answer (right or
wrong) it is within the question's tolerance of, so "0.49" for a loss asked to two decimals is the right answer
and a wrong answer written with other rounding is still named. Anything else is refused with what was expected.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from .cases import Case
from .diagnosis import Mistake
from .failures import ExerciseFailure
from .registry import Comparison, Exercise

#: the label of the one case: what the feedback calls the call
LABEL = "your prediction"


def prediction(name: str, points: float, answer: Sequence[float] | float, *, form: str,
               wrong: dict[str, Sequence[float] | float], tolerance: float = 1e-6) -> Exercise:
    """The exercise of one prediction.

    Args:
        name: the learner's function (``predicted_...``), also its cell's grade_id.
        points: what its test cell is worth.
        answer: the right answer, as numbers (a shape as its sizes).
        form: what the question asks for, as the feedback says it ("two numbers, like [1.0, 2.0]").
        wrong: the answers a typical misunderstanding gives, each with the message that names it
            (``"Likely mistake: ..."``).
        tolerance: how far from an answer a prediction still counts as it (the question's rounding), besides
            a relative 1e-6 (a float32 tensor of the answer).
    """
    right = torch.tensor(answer, dtype=torch.float64).reshape(-1)
    listed = [right] + [torch.tensor(v, dtype=torch.float64).reshape(-1) for v in wrong.values()]
    lengths = [len(v) for v in listed[1:] if len(v) != len(right)]
    if len(lengths) != len(set(lengths)):  # a wrong length is named by its length alone (match_mistake's exact)
        raise ValueError(f"{name}: two wrong answers of one length other than the answer's cannot be told apart")

    def adapt(function: Callable[[], Any]) -> Callable[[], Tensor]:
        def predicted() -> Tensor:
            """The learner's prediction as a flat float64 tensor, snapped to a listed answer within ``tolerance``.

            Inline, every line: the guards let this adapter's own code through, not the grader's it would call."""
            value = function()
            found: list[float] | None = []
            stack = [value]
            while stack and found is not None and len(found) <= 64:
                item = stack.pop()
                if isinstance(item, bool) or isinstance(item, Tensor) and (item.dtype == torch.bool
                                                                         or item.is_complex() or item.numel() > 64):
                    found = None
                elif isinstance(item, numbers.Real):
                    found.append(float(item))
                elif isinstance(item, Tensor):
                    found += [float(v) for v in item.detach().reshape(-1).tolist()]
                elif isinstance(item, (list, tuple)) and len(item) <= 64:
                    stack += list(reversed(item))
                elif type(item).__module__ == "numpy" and hasattr(item, "tolist"):
                    stack.append(item.tolist())
                else:
                    found = None
            if not found or len(found) > 64 or any(v != v or v in (float("inf"), float("-inf")) for v in found):
                shown = "".join(c if c.isprintable() else "?" for c in repr(value)[:80])
                hint = " Did you forget to `return` it?" if value is None else ""
                finite = ", all finite" if found and len(found) <= 64 else ""
                raise ExerciseFailure(f"{name} should return {form}{finite}; it returned {shown}.{hint}")
            out = torch.tensor(found, dtype=torch.float64)
            for listed_answer in listed:
                if listed_answer.shape == out.shape and bool(((out - listed_answer).abs()
                                                                 <= tolerance + 1e-6 * listed_answer.abs()).all()):
                    return listed_answer.clone()
            return out
        return predicted

    def reference() -> Tensor:
        return right.clone()

    def cases(seed: int = 0) -> list[Case]:
        return [Case((), label=LABEL)]

    def variant(value: Tensor) -> Callable[[], Tensor]:
        return lambda: value.clone()

    mistakes = tuple(Mistake(message, variant(v)) for message, v in zip(wrong, listed[1:]))
    return Exercise(name, points, (Comparison(reference, cases, seed=0, mistakes=mistakes, layouts=False),),
                    adapt=adapt, function=lambda: list(answer) if isinstance(answer, (list, tuple)) else answer,
                    prediction=True)
