"""The judge's side of a grading run: the learner's function as a proxy that lives in another process.

Under ``make grade``, :class:`grader.autograde.GuardedExecute` does not run a
hidden test in the learner's kernel. It runs :func:`grader.registry.check` in
its own process (the nbgrader process, which the learner's code cannot reach)
with a :class:`RemoteLearner` in place of the learner's function. The cases,
the reference's results, the tolerances, the comparisons and the diagnosis
all stay here; each call of the proxy sends one case to the kernel
(:mod:`grader.runner`), which runs the learner's function and sends back its
output and its inputs as they are after the call.

So the checker's code is the same whether the learner's function is called
here (the tests, a learner's own run) or in the kernel: only
:func:`grader.checker.call_learner` and the first-divergence trace look at
:func:`current`, the proxy being judged, to send the guards' settings along.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import pickle
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

import torch
from torch import Tensor

from .cases import Case, tensors_of
from .failures import ExerciseFailure, ForbiddenCall

#: how large a reply from the kernel may be (a learner's output that fills the disk is refused, not read)
MAX_REPLY_BYTES = 512 * 1024 * 1024


#: the marker of a value the judge cannot read back (its type's name travels instead)
OPAQUE = "__grader_opaque__"


def resolve(path: str) -> Any:
    """The object at ``"module:attr.attr"`` (how the judge names forbidden routines and allowed classes)."""
    module, _, qual = path.partition(":")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


class Channel(Protocol):
    def request(self, kind: str, **payload: Any) -> dict: ...


class Opaque:
    """A value the learner's function returned that is not data the judge reads (its class is named as the learner's)."""

    def __repr__(self) -> str:
        return f"<a {type(self).__name__} object>"


def locate(obj: Any) -> str:
    """``"module:attr.attr"``, a path that names ``obj`` in a process without course_lib (a torch routine, a class)."""
    names = []
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if mod and qual:
        names.append(f"{mod}:{qual}")
    short = getattr(obj, "__name__", None)
    if short:
        names += [f"{m}:{short}" for m in ("torch", "torch.nn.functional", "torch.special", "torch.linalg",
                                           "torch._C._nn", "torch.nn.init", "torch.autograd")]
        names.append(f"torch:Tensor.{short}")
    for name in names:
        try:
            if resolve(name) is obj:
                return name
        except (ImportError, AttributeError, ValueError):
            continue
    raise TypeError(f"the judge cannot name {obj!r} for the grading kernel (tried {names})")


def _restore(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {OPAQUE}:
        return type(str(value[OPAQUE]), (Opaque,), {})()
    if type(value) in (list, tuple):
        return type(value)(_restore(v) for v in value)
    if type(value) is dict:
        return {k: _restore(v) for k, v in value.items()}
    return value


def _apply_after(value: Any, after: Any) -> None:
    """Make the judge's copy of an argument what the kernel's became (the checker then sees any in-place change)."""
    if after is None:
        return
    with torch.no_grad():
        if isinstance(value, Tensor) and isinstance(after, Tensor):
            if value.shape == after.shape and value.dtype == after.dtype:
                if not torch.equal(value, after):
                    value.copy_(after)
            else:
                value.data = after.clone()
        elif isinstance(value, torch.nn.Module) and isinstance(after, dict):
            value.load_state_dict(after, strict=False)
        elif isinstance(value, torch.Generator) and isinstance(after, Tensor):
            value.set_state(after)
        elif isinstance(value, (list, tuple)) and isinstance(after, list):
            for v, a in zip(value, after):
                _apply_after(v, a)


@dataclass
class _Guard:
    exercise: str
    forbidden: list[str]
    allowed: list[str]
    label: str
    watch: Any = None  # a grader.guards.ShapeWatch: its shape goes to the kernel, the kernel's verdict comes back


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


class RemoteLearner:
    """The learner's function, called in the grading kernel through a :class:`Channel`."""

    def __init__(self, channel: Channel, name: str):
        self.channel, self.name, self.__name__ = channel, name, name
        self._guard = _Guard(name, [], [], "")
        self._ready: dict[tuple, dict] = {}  # answers fetched ahead, by the identity of the call's arguments
        info = self._ask("describe", name=name)
        if "missing" in info:
            raise ExerciseFailure(info["missing"])
        self.is_callable, self.type_name = bool(info.get("callable")), str(info.get("type"))
        params = [str(p) for p in info.get("params", [])]
        import inspect

        self.__signature__ = inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                                for p in params]) if params else None

    def _ask(self, kind: str, **payload) -> dict:
        reply = self.channel.request(kind, **payload)
        if "failure" in reply:
            raise (ForbiddenCall if reply.get("forbidden") else ExerciseFailure)(str(reply["failure"]))
        return reply

    @contextlib.contextmanager
    def guarding(self, exercise: str, forbidden: Iterable[Callable], allowed: Iterable[Any], label: str,
                 watch: Any = None):
        """The guards' settings the next calls carry to the kernel (forbidden routines, allowed blocks, a shape watch)."""
        previous = self._guard
        self._guard = _Guard(exercise, [locate(f) for f in forbidden],
                             [locate(type(a) if isinstance(a, torch.nn.Module) else a) for a in allowed], label, watch)
        try:
            yield
        finally:
            self._guard = previous

    def prefetch(self, cases: list[Case], exercise: str, forbidden: Iterable[Callable], allowed: Iterable[Any],
                 gradients: bool = False) -> None:
        """Run the learner's function on every case in one trip to the kernel (with the gradient check's
        backward pass where ``gradients``); the calls that follow, with these very arguments, use the answers."""
        reply = self._ask("call_many", name=self.name, cases=list(cases), exercise=exercise,
                          forbidden=[locate(f) for f in forbidden],
                          allowed=[locate(type(a) if isinstance(a, torch.nn.Module) else a) for a in allowed],
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
        if "failure" in reply:
            raise (ForbiddenCall if reply.get("forbidden") else ExerciseFailure)(str(reply["failure"]))
        if watch is not None:
            watch.hit = watch.hit or bool(reply.get("watched"))
        values = list(args) + list(kwargs.values())
        for value, after in zip(values, reply.get("after", [])):
            _apply_after(value, after)
        if reply.get("same_as") is not None and 0 <= int(reply["same_as"]) < len(values):
            return values[int(reply["same_as"])]
        out = _restore(reply.get("out"))
        if reply.get("requires_grad") and isinstance(out, Tensor):
            inputs = [t for t in tensors_of(case) if t.requires_grad]
            return _RemoteGraph.apply(self, reply, out, *inputs)
        return out

    def backward(self, handle: int, upstream: Tensor) -> list:
        return list(self._ask("backward", handle=handle, upstream=upstream.detach())["grads"])

    def trace(self, case: Case, labels: list[str]) -> list[tuple[str, Tensor | None]]:
        g = self._guard
        reply = self._ask("trace", name=self.name, case=case, labels=labels, exercise=g.exercise,
                          forbidden=g.forbidden, allowed=g.allowed)
        return [(str(label), t) for label, t in reply["calls"]]

    def release(self) -> None:
        self._ready.clear()
        self.channel.request("release")


def _key(args: tuple, kwargs: dict) -> tuple:
    return tuple(id(a) for a in args) + tuple((k, id(v)) for k, v in kwargs.items())


#: the learner being judged in another process, while :func:`grader.registry.check` runs for it
_CURRENT: contextvars.ContextVar[RemoteLearner | None] = contextvars.ContextVar("grader_remote", default=None)


def current() -> RemoteLearner | None:
    return _CURRENT.get()


@contextlib.contextmanager
def judging(learner: RemoteLearner):
    token = _CURRENT.set(learner)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class FileChannel:
    """Requests and replies as files in a folder the kernel can see; ``run(code)`` executes a line in the kernel."""

    def __init__(self, folder: str, run: Callable[[str], None]):
        self.folder, self.run, self.count = folder, run, 0
        os.makedirs(folder, exist_ok=True)

    def request(self, kind: str, **payload: Any) -> dict:
        self.count += 1
        ask = os.path.join(self.folder, f"request-{self.count}.pt")
        answer = os.path.join(self.folder, f"reply-{self.count}.pt")
        torch.save({"kind": kind, **payload}, ask)
        try:
            self.run(f"import grader.runner as _grader_runner; _grader_runner.serve({ask!r}, {answer!r})")
            return read_reply(answer)
        finally:
            for path in (ask, answer):
                with contextlib.suppress(OSError):
                    os.remove(path)


def read_reply(path: str) -> dict:
    """The kernel's reply as data (``weights_only``: tensors, numbers, strings, containers), or a failure."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return {"failure": "your function gave no answer (the kernel wrote no reply)"}
    if size > MAX_REPLY_BYTES:
        return {"failure": f"your function's result is {size / 2**20:.0f} MiB, over the grader's limit"}
    try:
        reply = torch.load(path, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, AttributeError) as exc:
        return {"failure": f"the grader could not read your function's result as data ({type(exc).__name__})"}
    if not isinstance(reply, dict):
        return {"failure": "the grader could not read your function's result as data"}
    return reply

