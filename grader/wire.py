"""The wire format between the judge and the grading kernel: what travels, and how it is read back.

Under ``make grade`` the judge (:mod:`grader.judge`, in the nbgrader process)
and the kernel's side (:mod:`grader.runner`) talk through files in a folder
both can see. Both import this module, and nothing else of each other.

A request is a dict, ``{"kind": ..., **payload}``, written by the judge
(:func:`write`) and read by the kernel (:func:`read_request`); the kernel
runs :data:`SERVE` to answer it. The kinds and their payloads:

* ``describe(name)``: is the learner's object callable, its type, its parameters;
* ``call(name, case, exercise, forbidden, allowed, watch)``: one case, under the guards;
* ``call_many(name, cases, exercise, forbidden, allowed, gradients)``: every case of a
  comparison in one trip (and the gradient check's backward pass);
* ``backward(handle, upstream)``: the gradients of a result kept in the kernel;
* ``trace(name, case, labels, exercise, forbidden, allowed)``: the inputs of the handed-over modules;
* ``release()``: forget the results kept for a backward pass.

Routines and classes travel as names, ``"module:attr.attr"`` (:func:`locate`
here, :func:`resolve` there). A reply is data only: the kernel turns what the
learner's function returned into tensors, numbers, strings and containers of
them (:func:`as_data`), naming anything else by its type (:data:`OPAQUE`),
and the judge reads it with ``torch.load(weights_only=True)``
(:func:`read_reply`), so whatever the learner's code does in its process, the
judge reads data, never code. A reply with ``"failure"`` says why there is no
result.
"""

from __future__ import annotations

import copyreg
import importlib
import numbers
import os
from collections import OrderedDict
from typing import Any, Iterable

import torch
from torch import Tensor

from .failures import learner_text


def generator_from_state(device: str, state: Tensor) -> torch.Generator:
    """A generator on ``device`` in ``state``: how a copied or pickled :class:`torch.Generator` is rebuilt."""
    generator = torch.Generator(device=device)
    generator.set_state(state)
    return generator


def _reduce_generator(generator: torch.Generator):
    return generator_from_state, (str(generator.device), generator.get_state())


# Copying or pickling a torch.Generator goes through its state here, not through torch's own __reduce__, which
# drops a reference to None on every call (torch 2.13): a process that copies generators for hours (a grading
# run's cases are cloned and sent to the kernel, each with its generator) reaches "deallocating None" and dies.
# copy.deepcopy and pickle (torch.save) both read this table before a class's own __reduce__.
copyreg.pickle(torch.Generator, _reduce_generator)

#: how large a reply from the kernel may be (a learner's output that fills the disk is refused, not read)
MAX_REPLY_BYTES = 512 * 1024 * 1024
#: the marker of a value the judge cannot read back (its type's name travels instead)
OPAQUE = "__grader_opaque__"
#: the line the judge runs in the kernel to have one request answered (``.format(ask=..., answer=...)``)
SERVE = "import grader.runner as _grader_runner; _grader_runner.serve({ask!r}, {answer!r})"


# --------------------------------------------------------------------------
# Names of routines and classes
# --------------------------------------------------------------------------
def resolve(path: str) -> Any:
    """The object at ``"module:attr.attr"`` (how the judge names forbidden routines and allowed classes)."""
    module, _, qual = path.partition(":")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


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


def name_forbidden(routines: Iterable[Any]) -> list[str]:
    """The forbidden routines of a call, as the names that travel."""
    return [locate(f) for f in routines]


def name_allowed(blocks: Iterable[Any]) -> list[str]:
    """The allowed building blocks of a call (a module stands for its class), as the names that travel."""
    return [locate(type(a) if isinstance(a, torch.nn.Module) else a) for a in blocks]


# --------------------------------------------------------------------------
# The kernel's side: values as data
# --------------------------------------------------------------------------
def as_data(value: Any, depth: int = 0) -> Any:
    """The value as data the judge may load: tensors detached, containers rebuilt, anything else by its type's name."""
    if depth > 20:
        return {OPAQUE: "a structure nested too deeply"}
    if isinstance(value, Tensor):
        return value.detach()
    if value is None or type(value) in (bool, int, float, complex, str, bytes):
        return value
    if isinstance(value, (torch.dtype, torch.device)):
        return value
    if isinstance(value, numbers.Number) and hasattr(value, "item"):  # a numpy scalar compares as the number it is
        return value.item()
    if type(value) in (list, tuple):
        return type(value)(as_data(v, depth + 1) for v in value)
    if type(value) is torch.Size:
        return tuple(value)
    if type(value) in (dict, OrderedDict):
        return {as_data(k, depth + 1): as_data(v, depth + 1) for k, v in value.items()}
    return {OPAQUE: learner_text(type(value).__name__, 60)}


def state_after(value: Any) -> Any:
    """An argument after the call, as the judge needs it to see in-place changes: tensors, module states, generators,
    and lists, tuples and dicts of them."""
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, torch.nn.Module):
        return {k: v.detach().clone() for k, v in value.state_dict().items()}
    if isinstance(value, torch.Generator):
        return value.get_state()
    if isinstance(value, (list, tuple)) and any(isinstance(v, (Tensor, torch.nn.Module)) for v in value):
        return [state_after(v) for v in value]
    if isinstance(value, dict) and any(isinstance(v, (Tensor, torch.nn.Module)) for v in value.values()):
        # a dict of parameters trained in place (a capstone's training loop); keys the judge cannot have sent
        # (anything but a string or an int) are the learner's own and stay in the kernel
        return {k: state_after(v) for k, v in value.items() if type(k) in (str, int)}
    return None


# --------------------------------------------------------------------------
# The judge's side: data back to values
# --------------------------------------------------------------------------
class Opaque:
    """A value the learner's function returned that the judge cannot read as data.

    Its class is named as the learner's value's class was.
    """

    def __repr__(self) -> str:
        return f"<a {type(self).__name__} object>"


def restore(value: Any) -> Any:
    """The learner's result as the judge compares it: :data:`OPAQUE` markers become :class:`Opaque` objects."""
    if isinstance(value, dict) and set(value) == {OPAQUE}:
        return type(learner_text(value[OPAQUE], 60), (Opaque,), {})()
    if type(value) in (list, tuple):
        return type(value)(restore(v) for v in value)
    if type(value) is dict:
        return {k: restore(v) for k, v in value.items()}
    return value


def apply_after(value: Any, after: Any) -> None:
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
                apply_after(v, a)
        elif isinstance(value, dict) and isinstance(after, dict):
            for k, v in value.items():
                if k in after:
                    apply_after(v, after[k])


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------
def write(path: str, message: dict) -> None:
    """A request (the judge) or a reply (the kernel), as a new file: whatever stands at ``path`` (a link the kernel
    left, to make the judge write elsewhere) is replaced, never written through."""
    if os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        torch.save(message, f)


def read_request(path: str) -> dict:
    """The judge's request (the kernel trusts the judge: cases hold modules and generators)."""
    return torch.load(path, weights_only=False)


def read_reply(path: str) -> dict:
    """The kernel's reply as data (``weights_only``: tensors, numbers, strings, containers), or a failure.

    The kernel wrote it, in a folder it can write: the file is opened without following a link, and read only if
    it is a plain file within :data:`MAX_REPLY_BYTES` (a link to the instructor's files, a pipe that never ends,
    a file that never stops growing are each a failure of the learner's, read no further)."""
    import io
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {"failure": "your function gave no answer (the kernel wrote no reply)"}
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return {"failure": "the kernel's reply is not a plain file; it was not read"}
        if st.st_size > MAX_REPLY_BYTES:
            return {"failure": f"your function's result is {st.st_size / 2**20:.0f} MiB, over the grader's limit"}
        data = f.read(MAX_REPLY_BYTES + 1)
    if len(data) > MAX_REPLY_BYTES:
        return {"failure": "your function's result is over the grader's limit"}
    try:
        reply = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:  # noqa: BLE001 - whatever the kernel wrote: the learner's failure, not the judge's
        return {"failure": f"the grader could not read your function's result as data ({type(exc).__name__})"}
    if not isinstance(reply, dict):
        return {"failure": "the grader could not read your function's result as data"}
    why = over_budget(reply)
    if why:
        return {"failure": f"the grader did not read your function's result: {why}"}
    return reply


#: what one reply may hold, counted as a tree (an object shared by two containers counts twice, as the judge reads
#: it twice): its nodes, its depth, and its tensors' elements (a view counts its elements, not its storage's)
MAX_NODES = 200_000
MAX_DEPTH = 48
MAX_ELEMENTS = 1 << 26
#: the tensors a reply may hold: plain, strided, in memory, of a dtype the judge computes with
_DTYPES = {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
           torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool}


def over_budget(reply: Any) -> str | None:
    """Why the judge will not read ``reply`` (None: it will): too many nodes, too deep, too many elements, or a
    tensor that is not plain data in memory (a subclass, a sparse or meta tensor, an unusual dtype)."""
    nodes = elements = 0
    stack = [(reply, 0)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"it holds over {MAX_NODES:,} values"
        if depth > MAX_DEPTH:
            return f"it is nested over {MAX_DEPTH} levels deep"
        if isinstance(value, Tensor):
            if type(value) is not Tensor and type(value) is not torch.nn.Parameter:
                return f"it holds a tensor of another class ({learner_text(type(value).__name__, 60)})"
            if value.layout != torch.strided or value.device.type != "cpu" or value.is_meta:
                return f"it holds a {value.layout} tensor on {value.device}, not a plain tensor in memory"
            if value.dtype not in _DTYPES:
                return f"it holds a tensor of dtype {value.dtype}"
            elements += value.numel()
            if elements > MAX_ELEMENTS:
                return f"its tensors hold over {MAX_ELEMENTS:,} numbers"
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, dict):
            stack.extend((k, depth + 1) for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, str) and len(value) > 1 << 20:
            return "it holds a string over a million characters long"
        elif isinstance(value, bytes) and len(value) > 1 << 20:
            return "it holds bytes over a megabyte long"
    return None
