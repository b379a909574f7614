"""The learner's function as the checker sees it: one interface, wherever the function runs.

The checker (:mod:`grader.checker`, :mod:`grader.diagnosis`) never calls a
learner's function directly, and never asks where it runs. It holds a
:class:`Learner` and asks it to

* :meth:`~Learner.call` it on a case under the guards (forbidden routines,
  allowed building blocks, an optional :class:`~grader.guards.ShapeWatch`);
* :meth:`~Learner.prefetch` the results of many cases at once (where a call
  is a trip to another process);
* :meth:`~Learner.trace` the inputs its handed-over modules receive (the first divergence).

Three kinds, one factory (:func:`as_learner`):

* :class:`LocalLearner`: the function in this process, called under
  :func:`grader.guards.guarded` (the tests, a learner's own run of a hidden
  test, and the kernel's side of ``make grade``);
* :class:`grader.judge.RemoteLearner`: the judge's proxy for the function in
  the grading kernel; the guards' settings travel with each call;
* :class:`Adapted`: either of them behind the grader's adapter for an
  exercise that works by side effect (an in-place update): the adapter runs
  here, the learner's function wherever it is.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import inspect
from typing import Any, Callable, ContextManager, Iterable

import torch
from torch import Tensor

from .cases import Case
from .guards import ShapeWatch, guarded


class Learner(abc.ABC):
    """A learner's function, wherever it runs.

    Attributes:
        name: the function's name, as the feedback names it.
        function: what a call runs: the learner's function, an adapter, or the proxy to the kernel.
        is_callable: whether the learner's object is a function at all.
        type_name: its type's name, for the feedback when it is not.
    """

    name: str
    function: Callable
    is_callable: bool
    type_name: str

    @abc.abstractmethod
    def guarding(self, exercise: str, forbidden: Iterable[Callable] = (), allowed: Iterable[Any] = (),
                 label: str = "", watch: ShapeWatch | None = None,
                 transparent: tuple = ()) -> ContextManager:
        """The guards the calls of :attr:`function` run under.

        ``transparent``: the grader's own code that runs between the checker
        and the learner's function (an adapter, a recording hook): not a
        violation itself, while everything it calls is still checked.
        """

    def call(self, case: Case, exercise: str, forbidden: Iterable[Callable] = (), allowed: Iterable[Any] = (),
             watch: ShapeWatch | None = None) -> Any:
        """The learner's result on one case, under the guards (its errors propagate)."""
        fn = self.function  # looked up before the guards start: they refuse the grader's own code
        with self.guarding(exercise, forbidden, allowed, case.label or "a random case", watch):
            return fn(*case.args, **case.kwargs)

    def prefetch(self, cases: list[Case], exercise: str, forbidden: Iterable[Callable], allowed: Iterable[Any],
                 gradients: bool = False) -> None:
        """Compute the results of these very cases ahead of their calls (where a call is a trip elsewhere)."""
        return None  # here a call costs nothing: nothing to fetch ahead

    def trace(self, case: Case, labels: list[str], exercise: str, forbidden: Iterable[Callable] = (),
              allowed: Iterable[Any] = ()) -> list[tuple[str, Tensor | None]]:
        """(slot, first tensor input) of every call of a handed-over module while the function runs, in order."""
        return record_module_inputs(self.function, case, labels, functools.partial(
            self.guarding, exercise, forbidden, allowed, case.label))

    def adapted(self, adapt: Callable[[Callable], Callable]) -> Learner:
        """This learner behind the grader's adapter ``adapt(function)``."""
        return Adapted(self, adapt)

    def release(self) -> None:
        """Forget what was kept for later calls."""
        return None  # here nothing is kept


class LocalLearner(Learner):
    """The learner's function in this process."""

    def __init__(self, function: Any, name: str | None = None, transparent: tuple = (), allowed: tuple = ()):
        """``allowed``: course code every call lets through besides what each step allows (Check your work's
        right callee, put in place of a learner's wrong one, in the contract steps too)."""
        self.function, self.transparent, self.allowed = function, tuple(transparent), tuple(allowed)
        self.name = name or getattr(function, "__name__", "your function")
        self.is_callable, self.type_name = callable(function), type(function).__name__

    def guarding(self, exercise, forbidden=(), allowed=(), label="", watch=None, transparent=()):
        return guarded(forbidden, exercise=exercise, allowed=tuple(allowed) + self.allowed, watch=watch,
                       transparent=self.transparent + tuple(transparent))


class Adapted(Learner):
    """A learner behind the grader's adapter: the adapter runs here, let through by the guards."""

    def __init__(self, inner: Learner, adapt: Callable[[Callable], Callable]):
        self.inner, self.function = inner, adapt(inner.function)
        self.name, self.is_callable, self.type_name = inner.name, inner.is_callable, inner.type_name

    def guarding(self, exercise, forbidden=(), allowed=(), label="", watch=None, transparent=()):
        return self.inner.guarding(exercise, forbidden, allowed, label, watch, tuple(transparent) + (self.function,))


def as_learner(learner: Any, name: str | None = None) -> Learner:
    """The :class:`Learner` for what a hidden test hands over: a Learner as it is, anything else as a local one."""
    return learner if isinstance(learner, Learner) else LocalLearner(learner, name)


# --------------------------------------------------------------------------
# The modules a case hands over, and the inputs they receive
# --------------------------------------------------------------------------
def module_slots(fn: Callable, case: Case) -> list[tuple[str, torch.nn.Module]]:
    """The modules a case hands over (directly or in a list), named as ``fn``'s parameters."""
    try:
        params = list(inspect.signature(fn).parameters)
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


def record_module_inputs(fn: Callable, case: Case, labels: list[str],
                         fence: Callable[..., ContextManager] | None = None) -> list[tuple[str, Tensor | None]]:
    """(label, first tensor input) of every call of a module ``case`` hands over while ``fn`` runs, in order.

    ``fence(transparent=(hook,))``: the guards to run ``fn`` under (the
    learner's side), the recording hook let through; errors are swallowed
    (what was recorded until then is the answer).
    """
    calls: list[tuple[str, Tensor | None]] = []
    handles = []

    def hook(mod, inputs, label):
        first = next((t for t in inputs if isinstance(t, Tensor)), None)
        calls.append((label, None if first is None else first.detach().clone()))

    for (_, module), label in zip(module_slots(fn, case), labels):
        handles.append(module.register_forward_pre_hook(functools.partial(hook, label=label)))
    guards = contextlib.nullcontext() if fence is None else fence(transparent=(hook,))
    try:
        with torch.no_grad(), guards:
            fn(*case.args, **case.kwargs)
    except Exception:
        pass
    finally:
        for h in handles:
            h.remove()
    return calls
