"""The kernel's side of a grading run: call the learner's function on the inputs the judge sends, return the outputs.

Under ``make grade`` the hidden tests do not run in the learner's kernel. The
judge (:mod:`grader.judge`, in the nbgrader process) draws the cases, computes
the reference's results and compares; the kernel only receives inputs and
returns outputs, through files in a folder both can see. This module is all
of the grader the kernel needs: it holds no reference and no expected value,
and neither :mod:`course_lib` nor :mod:`grader.assignments` is visible inside
the fence.

What travels, and how, is :mod:`grader.wire`, which both sides import (this
one never imports the judge): the reply can only hold tensors, numbers,
strings and containers of them, so whatever the learner's code does in this
process, the judge reads data, never code.

The guards of :mod:`grader.guards` still watch each call (a forbidden routine,
a patched function); they are a second line. The first is that nothing here
decides a grade.
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

from . import wire
from .cases import Case, tensors_of
from .checker import call_learner
from .compare import upstream_gradient
from .failures import ExerciseFailure, ForbiddenCall, learner_text
from .guards import ShapeWatch
from .learner import LocalLearner

#: outputs kept for a later backward request, by handle: (output, the inputs that require grad)
_GRAPHS: dict[int, tuple[Tensor, list[Tensor]]] = {}


#: the learner's functions as their test cells saw them (:func:`capture`), judged after the notebook's last cell
_CAPTURED: dict[str, object] = {}
_MISSING = object()


def _namespace() -> dict:
    from IPython import get_ipython

    shell = get_ipython()
    return shell.user_ns if shell is not None else globals()


def capture(name: str) -> None:
    """Keep the learner's object ``name`` as it is now: its hidden test, run after the notebook's last cell,
    calls this one (a later cell may define another of that name)."""
    _CAPTURED[name] = _namespace().get(name, _MISSING)


def _function(name: str):
    found = _CAPTURED.get(name, _MISSING)
    if found is _MISSING:
        found = _namespace().get(name, _MISSING)
    if found is _MISSING:
        raise ExerciseFailure(f"{name} is not defined: run the cell that defines it (or do not rename it).")
    return found


def describe(name: str) -> dict:
    """What the judge needs to know of the learner's object before calling it."""
    try:
        fn = _function(name)
    except ExerciseFailure as exc:
        return {"missing": str(exc)}
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    return {"callable": callable(fn), "type": learner_text(type(fn).__name__, 60), "params": params}


def call(name: str, case: Case, exercise: str, forbidden: list[str], allowed: list[str],
         watch: tuple[int, int] | None = None) -> dict:
    """Run the learner's function on one case under the guards; its output, and its inputs as they are after the call.

    ``watch``: a shape ``(a, b)``; the reply says whether the learner's code
    built a tensor whose last two axes are that shape.
    """
    fn = _function(name)
    watcher = ShapeWatch(watch) if watch is not None else None
    try:
        out = call_learner(LocalLearner(fn, name), case, exercise, _resolved(forbidden), _resolved(allowed),
                           watch=watcher)
    except ForbiddenCall as exc:
        return {"failure": str(exc), "forbidden": True}
    except ExerciseFailure as exc:
        return {"failure": str(exc)}
    values = list(case.args) + list(case.kwargs.values())
    same = next((i for i, v in enumerate(values) if out is v and not isinstance(v, (int, float, str, bool))), None)
    reply = {"out": wire.as_data(out), "same_as": same, "after": [wire.state_after(v) for v in values],
             "requires_grad": isinstance(out, Tensor) and out.requires_grad,
             "watched": bool(watcher and watcher.hit)}
    if reply["requires_grad"]:
        handle = len(_GRAPHS) + 1
        _GRAPHS[handle] = (out, [t for t in tensors_of(case) if t.requires_grad])
        reply["handle"] = handle
    return reply


def call_many(name: str, cases: list[Case], exercise: str, forbidden: list[str], allowed: list[str],
              gradients: bool = False) -> dict:
    """:func:`call` on every case; with ``gradients``, each result's backward pass for the gradient check's
    upstream gradient too (the graph is kept, should the judge send another)."""
    replies = []
    for case in cases:
        reply = call(name, case, exercise, forbidden, allowed)
        if gradients and reply.get("requires_grad"):
            out, inputs = _GRAPHS[reply["handle"]]
            upstream = upstream_gradient(out.shape).to(out.dtype)
            try:
                reply["grads"] = _grads(out, inputs, upstream, keep=True)
            except Exception as exc:  # noqa: BLE001 - the learner's graph, reported to the judge
                reply["grads_failure"] = ("computing the gradient of your result raised "
                                          f"{learner_text(type(exc).__name__, 60)}: {learner_text(exc)}")
            reply["upstream"] = upstream
        replies.append(reply)
    return {"replies": replies}


def backward(handle: int, upstream: Tensor) -> dict:
    """The gradients of ``(out * upstream).sum()`` with respect to the inputs that require grad (None where unused)."""
    out, inputs = _GRAPHS.pop(handle)
    try:
        grads = _grads(out, inputs, upstream.to(out.dtype))
    except Exception as exc:  # noqa: BLE001 - the learner's graph, reported to the judge
        return {"failure": ("computing the gradient of your result raised "
                            f"{learner_text(type(exc).__name__, 60)}: {learner_text(exc)}")}
    return {"grads": grads}


def _grads(out: Tensor, inputs: list[Tensor], upstream: Tensor, keep: bool = False) -> list[Tensor | None]:
    """The gradients of ``(out * upstream).sum()``, the form the in-process check takes
    (:func:`grader.compare.check_gradients`): the same values as ``grad_outputs=upstream``, without loading
    torch's symbolic-shape machinery (sympy), which an explicit ``grad_outputs`` does: a second per kernel."""
    grads = torch.autograd.grad((out * upstream).sum(), inputs, allow_unused=True, retain_graph=keep)
    return [None if g is None else g.detach() for g in grads]


def trace(name: str, case: Case, labels: list[str], exercise: str, forbidden: list[str], allowed: list[str]) -> dict:
    """The inputs each handed-over module receives while the learner's function runs (for the first divergence)."""
    learner = LocalLearner(_function(name), name)
    calls = learner.trace(case, labels, exercise, _resolved(forbidden), _resolved(allowed))
    return {"calls": [(label, None if t is None else t.detach()) for label, t in calls]}


def _resolved(names: list[str]) -> list:
    return [wire.resolve(n) for n in names]


def release() -> dict:
    _GRAPHS.clear()
    return {}


def serve(request_path: str, reply_path: str) -> None:
    """Answer one request of the judge: read it, run it, write the reply (errors included) for the judge to read."""
    try:
        request = wire.read_request(request_path)
        kind = request.pop("kind")
        handler = {"describe": describe, "call": call, "call_many": call_many, "backward": backward, "trace": trace,
                   "release": release}[kind]
        reply = handler(**request)
    except ExerciseFailure as exc:
        reply = {"failure": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - whatever happened, the judge gets an answer
        reply = {"failure": ("the grader could not run your function: "
                             f"{learner_text(type(exc).__name__, 60)}: {learner_text(exc)}")}
    wire.write(reply_path, reply)
