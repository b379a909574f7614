"""The judge's side of a grading run: the learner's function as a proxy that lives in another process.

Under ``make grade``, :class:`grader.autograde.GuardedExecute` does not run a
hidden test in the learner's kernel. It runs :func:`grader.registry.check` in
its own process (the nbgrader process, which the learner's code cannot reach)
with a :class:`RemoteLearner` in place of the learner's function. The cases,
the reference's results, the tolerances, the comparisons and the diagnosis
all stay here; each call of the proxy sends one case to the kernel
(:mod:`grader.runner`), which runs the learner's function and sends back its
output and its inputs as they are after the call (:mod:`grader.wire`).

The checker's code is the same whether the learner's function is called here
(the tests, a learner's own run) or in the kernel: it talks to a
:class:`~grader.learner.Learner`, and a RemoteLearner is one whose guards'
settings travel to the kernel with each call.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

import torch
from torch import Tensor

from . import wire
from .cases import Case, tensors_of
from .failures import ExerciseFailure, ForbiddenCall
from .guards import ShapeWatch
from .learner import Learner


class Channel(Protocol):
    def request(self, kind: str, **payload: Any) -> dict: ...


@dataclass
class _Guard:
    """The guards' settings the next calls carry to the kernel."""

    exercise: str
    forbidden: list[str]
    allowed: list[str]
    label: str
    watch: ShapeWatch | None = None  # its shape goes to the kernel, the kernel's verdict comes back


class _RemoteGraph(torch.autograd.Function):
    """The learner's output, with a backward that asks the kernel for the gradients of its own graph."""

    @staticmethod
    def forward(ctx, learner, answer, out, *inputs):
        ctx.learner, ctx.answer = learner, answer
        return out.clone()

    @staticmethod
    def backward(ctx, upstream):
        answer = ctx.answer
        ready = answer.get("upstream")
        if isinstance(ready, Tensor) and ready.shape == upstream.shape and torch.equal(ready, upstream):
            if answer.get("grads_failure"):  # the kernel already ran this very backward pass
                raise ExerciseFailure(str(answer["grads_failure"]))
            grads = list(answer["grads"])
        else:
            grads = ctx.learner.backward(answer["handle"], upstream)
        return (None, None, None, *grads)


class RemoteLearner(Learner):
    """The learner's function, called in the grading kernel through a :class:`Channel`.

    The proxy is its own :attr:`function`: calling it sends the case with the
    settings of the guards it runs under (:meth:`guarding`).
    """

    def __init__(self, channel: Channel, name: str):
        self.channel, self.name, self.__name__ = channel, name, name
        self.function = self
        self._guard = _Guard(name, [], [], "")
        self._ready: dict[tuple, dict] = {}  # answers fetched ahead, by the identity of the call's arguments
        info = self._ask("describe", name=name)
        if "missing" in info:
            raise ExerciseFailure(info["missing"])
        self.is_callable, self.type_name = bool(info.get("callable")), str(info.get("type"))
        params = [str(p) for p in info.get("params", [])]
        self.__signature__ = inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                                for p in params]) if params else None

    def _ask(self, kind: str, **payload) -> dict:
        return _verdict(self.channel.request(kind, **payload))

    @contextlib.contextmanager
    def guarding(self, exercise: str, forbidden: Iterable[Callable] = (), allowed: Iterable[Any] = (),
                 label: str = "", watch: ShapeWatch | None = None, transparent: tuple = ()):
        """The guards' settings the calls inside carry to the kernel (``transparent`` code runs here, unguarded)."""
        previous = self._guard
        self._guard = _Guard(exercise, wire.name_forbidden(forbidden), wire.name_allowed(allowed), label, watch)
        try:
            yield
        finally:
            self._guard = previous

    def prefetch(self, cases: list[Case], exercise: str, forbidden: Iterable[Callable], allowed: Iterable[Any],
                 gradients: bool = False) -> None:
        """Run the learner's function on every case in one trip to the kernel (with the gradient check's
        backward pass where ``gradients``); the calls that follow, with these very arguments, use the answers."""
        reply = self._ask("call_many", name=self.name, cases=list(cases), exercise=exercise,
                          forbidden=wire.name_forbidden(forbidden), allowed=wire.name_allowed(allowed),
                          gradients=gradients)
        for case, answer in zip(cases, reply["replies"]):
            self._ready[_key(case.args, case.kwargs)] = answer

    def __call__(self, *args, **kwargs):
        case = Case(tuple(args), dict(kwargs), self._guard.label)
        watch = self._guard.watch
        reply = self._ready.pop(_key(args, kwargs), None) if watch is None else None
        if reply is None:
            reply = self.channel.request("call", name=self.name, case=case, exercise=self._guard.exercise,
                                         forbidden=self._guard.forbidden, allowed=self._guard.allowed,
                                         watch=None if watch is None else tuple(watch.shape))
        _verdict(reply)
        if watch is not None:
            watch.hit = watch.hit or bool(reply.get("watched"))
        values = list(args) + list(kwargs.values())
        for value, after in zip(values, reply.get("after", [])):
            wire.apply_after(value, after)
        if reply.get("same_as") is not None and 0 <= int(reply["same_as"]) < len(values):
            return values[int(reply["same_as"])]
        out = wire.restore(reply.get("out"))
        if reply.get("requires_grad") and isinstance(out, Tensor):
            inputs = [t for t in tensors_of(case) if t.requires_grad]
            return _RemoteGraph.apply(self, reply, out, *inputs)
        return out

    def backward(self, handle: int, upstream: Tensor) -> list:
        return list(self._ask("backward", handle=handle, upstream=upstream.detach())["grads"])

    def trace(self, case: Case, labels: list[str], exercise: str, forbidden: Iterable[Callable] = (),
              allowed: Iterable[Any] = ()) -> list[tuple[str, Tensor | None]]:
        """The inputs of the handed-over modules, recorded in the kernel while the learner's function runs."""
        with self.guarding(exercise, forbidden, allowed, case.label):
            g = self._guard
            reply = self._ask("trace", name=self.name, case=case, labels=labels, exercise=g.exercise,
                              forbidden=g.forbidden, allowed=g.allowed)
        return [(str(label), t) for label, t in reply["calls"]]

    def release(self) -> None:
        self._ready.clear()
        self.channel.request("release")


def _verdict(reply: dict) -> dict:
    """The reply, or the failure it reports raised as the learner's (a forbidden call as :class:`ForbiddenCall`)."""
    if "failure" in reply:
        raise (ForbiddenCall if reply.get("forbidden") else ExerciseFailure)(str(reply["failure"]))
    return reply


def _key(args: tuple, kwargs: dict) -> tuple:
    return tuple(id(a) for a in args) + tuple((k, id(v)) for k, v in kwargs.items())


class FileChannel:
    """Requests and replies as files in a folder the kernel can see; ``run(code)`` executes a line in the kernel."""

    def __init__(self, folder: str, run: Callable[[str], None]):
        self.folder, self.run, self.count = folder, run, 0
        os.makedirs(folder, exist_ok=True)

    def request(self, kind: str, **payload: Any) -> dict:
        self.count += 1
        ask = os.path.join(self.folder, f"request-{self.count}.pt")
        answer = os.path.join(self.folder, f"reply-{self.count}.pt")
        wire.write(ask, {"kind": kind, **payload})
        try:
            self.run(wire.SERVE.format(ask=ask, answer=answer))
            return wire.read_reply(answer)
        finally:
            for path in (ask, answer):
                with contextlib.suppress(OSError):
                    os.remove(path)
