"""The guards around a learner's function while it is checked: no forbidden routine, no reference, no patching.

:func:`forbid_calls` watches the learner's code with two guards, so that
switching one off does not help: a ``TorchFunctionMode`` and a profiler that
sees every Python call and every call of a builtin. :func:`take_snapshot` and
:func:`first_change` are the one tamper detector of the grader: ``forbid_calls``
uses it around each call of the learner's function, and the grading sandbox
(:mod:`grader.sandbox`) between the cells of a whole notebook.
"""

from __future__ import annotations

import contextlib
import operator
import os
import sys
from typing import Any, Callable, Iterable

import torch
import torch._dynamo  # noqa: F401 - see below
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

from .failures import ForbiddenCall

# torch.optim imports torch._dynamo the first time an optimizer is made, and that import rebinds some of torch's
# own functions (torch.manual_seed among them) to wrapped versions. Made inside a checked call (a capstone's
# training loop), that rebinding would read as the learner's patch of torch; imported here, before any snapshot,
# it is part of torch as every check finds it.


def package_dir(name: str) -> str | None:
    """The folder of an installed package, found without importing it (the grading kernel cannot import course_lib)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return os.path.abspath(list(spec.submodule_search_locations)[0])
    return os.path.dirname(os.path.abspath(spec.origin)) if spec.origin else None


#: code a learner's function may not run while it is checked: the reference model and the grader itself
_REFERENCE_DIRS = tuple(d for d in (package_dir("course_lib"), os.path.dirname(os.path.abspath(__file__))) if d)
_THIS_FILE = os.path.abspath(__file__)  # the only grader code a learner's call may run: the guard itself


# --------------------------------------------------------------------------
# Forbidden routines
# --------------------------------------------------------------------------
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
        self.depth = 0  # inside its own handler, where torch has taken it off the stack for the call

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if id(func) in self.forbidden:
            raise ForbiddenCall(
                f"{self.exercise}: your code calls {_name_of(func)}, which does the exercise "
                "for you. Compute it yourself from basic tensor operations."
            )
        self.depth += 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.depth -= 1


# --------------------------------------------------------------------------
# The guard's own watch on itself: the profiler replaced or removed, torch's function modes switched off
# --------------------------------------------------------------------------
#: the audit events of a change of the profiler or tracer (CPython raises them for sys.setprofile and settrace,
#: and when it removes a profile function that raised, as a deep recursion makes it)
_HOOK_EVENTS = frozenset({"sys.setprofile", "sys.settrace"})
_watches: list[dict] = []  # the guards now watching, innermost last
_hooked: list[bool] = []


def _audit(event: str, args: tuple) -> None:
    if _watches and event in _HOOK_EVENTS and not _watches[-1]["own"]:
        _watches[-1]["changes"].append(event)


def _watch_audit_events() -> None:
    """Install the guard's audit hook, once per process (Python offers no way to remove one)."""
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked.append(True)


#: folders of code that is not the learner's: the grader's, torch's, the standard library's (a learner's code is
#: a cell, ``<ipython-input-...>`` or ipykernel's ``/tmp/ipykernel_*/...py``, or a module of their own)
_LIBRARY_DIRS = tuple(sorted({os.path.dirname(os.path.abspath(__file__)), os.path.dirname(torch.__file__),
                              os.path.dirname(os.__file__)}))


def _learners(filename: str) -> bool:
    return not filename.startswith(_LIBRARY_DIRS) and filename != __file__


class ShapeWatch(TorchFunctionMode):
    """Notes whether any torch routine run inside it returns a tensor whose last two axes are ``shape``.

    For a contract a comparison cannot see: the full score matrix never built
    (``(n_q, n_k)``) by attention computed over blocks of keys.
    """

    def __init__(self, shape: tuple[int, int]):
        super().__init__()
        self.shape, self.hit = tuple(shape), False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, Tensor) and out.ndim >= 2 and tuple(out.shape[-2:]) == self.shape:
            self.hit = True
        return out


#: builtins a learner's function may not call while it is checked: they would blind the guard
#: (a profiler or tracer of their own, or a thread the profiler does not see).
_GUARD_BREAKERS: tuple[Callable, ...] = tuple(
    f for f in (
        sys.setprofile, sys.settrace, getattr(sys, "_setprofileallthreads", None),
        getattr(sys, "_settraceallthreads", None),
        getattr(sys, "monitoring", None) and sys.monitoring.use_tool_id,
        getattr(sys, "monitoring", None) and sys.monitoring.register_callback,
        __import__("_thread").start_new_thread, getattr(__import__("_thread"), "start_joinable_thread", None),
    ) if f is not None
)


# --------------------------------------------------------------------------
# The tamper detector
# --------------------------------------------------------------------------
#: modules whose functions a learner might replace to make a check pass (``torch.allclose = lambda *a: True``).
WATCHED_MODULES = ("torch", "torch.nn.functional", "torch.testing", "torch.linalg", "torch.special", "numpy",
                   "numpy.testing", "math", "builtins", "sys", "operator", "functools", "copy")
#: the builtins the checks use (ipykernel itself rebinds ``_``, input, getpass and friends between cells)
CHECKED_BUILTINS = ("abs", "all", "any", "bool", "float", "int", "isinstance", "issubclass", "len", "max", "min",
                    "range", "round", "sum", "zip", "type", "getattr", "setattr", "hasattr", "callable", "repr", "str",
                    "list", "tuple", "dict", "set", "sorted", "enumerate", "map", "filter", "iter", "next", "id",
                    "__import__", "compile", "exec", "eval", "open", "vars", "object", "super", "print", "format",
                    "hash", "divmod", "pow")
CHECKED_SYS = ("audit", "addaudithook", "setprofile", "getprofile", "settrace", "gettrace", "exit", "modules")
_PACKAGES = ("course_lib", "grader")
_MISSING = object()


def take_snapshot(*, between_cells: bool = False) -> list[tuple[str, dict, dict]]:
    """What the checks rely on, as ``(name, namespace, entries)``.

    Around one call of a learner's function every entry of the watched modules
    counts. Between the cells of a notebook (``between_cells``) only their
    functions and submodules do, the builtins the checks use and the hooks of
    :mod:`sys`: torch and IPython change some other values of their own, and
    ``sys.modules`` is watched for the packages the checks import.
    """
    snap = []
    spaces = [(n, vars(sys.modules[n])) for n in WATCHED_MODULES if n in sys.modules]
    spaces += [("torch.Tensor", vars(torch.Tensor)), ("torch.nn.Module", vars(torch.nn.Module))]
    spaces += [(n, vars(m)) for n, m in list(sys.modules.items())
               if m is not None and n.startswith(_PACKAGES) and n.split(".")[0] in _PACKAGES]
    for name, ns in spaces:
        if between_cells and name == "sys":
            entries = {k: ns[k] for k in CHECKED_SYS if k in ns}
        elif between_cells and name == "builtins":
            entries = {k: ns[k] for k in CHECKED_BUILTINS if k in ns}
        elif between_cells:
            entries = {k: v for k, v in ns.items()
                       if not k.startswith("__") and (callable(v) or isinstance(v, type(sys)))}
        else:  # every entry; the dunders (a module's own bookkeeping) are left out when a change is named
            entries = dict(ns)
        if name in _PACKAGES:  # a package's names loaded on first use (grader's): binding one is a change too
            entries.update({k: ns.get(k, _MISSING) for k in ns.get("_EXPORTS", ())})
        snap.append((name, ns, entries))
    if between_cells:
        snap.append(("sys.modules", sys.modules, {k: v for k, v in sys.modules.items()
                                                  if k.split(".")[0] in ("torch", "numpy") + _PACKAGES
                                                  and v is not None}))
    return snap


def first_change(snapshot) -> str | None:
    """The first watched name rebound or deleted since ``snapshot`` was taken, or None.

    A namespace whose every entry is still the same object is passed at C speed (around each call of a
    learner's function there are thousands of entries); only one that differs is read name by name, so a
    change of a dunder alone (a module's own bookkeeping) is not named.
    """
    for name, ns, before in snapshot:
        try:
            if all(map(operator.is_, map(ns.__getitem__, before), before.values())):
                continue
        except KeyError:  # an entry was deleted: found below
            pass
        for key, value in before.items():
            if key.startswith("__") and key.endswith("__"):
                continue
            if ns.get(key, _MISSING) is not value:
                return f"{name}[{key!r}]" if name == "sys.modules" else f"{name}.{key}"
    return None


# --------------------------------------------------------------------------
# The guard
# --------------------------------------------------------------------------
@contextlib.contextmanager
def forbid_calls(forbidden: Iterable[Callable] = (), *, exercise: str = "this exercise", reference: bool = True,
                 allowed: Iterable[Any] = (), transparent: Iterable[Any] = ()):
    """Fail with :class:`ForbiddenCall` if the code inside calls a forbidden routine.

    Two guards watch the code, so switching one off does not help: a
    TorchFunctionMode, and a profiler that sees every Python call (into
    :mod:`course_lib` or the grader, or into a forbidden Python function) and every call of a
    builtin (a forbidden torch routine however reached, even under
    ``torch._C.DisableTorchFunction``; ``sys.setprofile``; starting a thread).
    The code may not replace functions of torch, numpy, math, builtins or
    course_lib either (``torch.allclose = lambda *a, **k: True``).

    Args:
        forbidden: torch functions or methods (matched by identity, so an alias
            such as ``sdpa = F.scaled_dot_product_attention`` is caught too).
        exercise: name used in the message.
        reference: also forbid any code defined in :mod:`course_lib` or in the
            grader (other than this file, the guard itself), however it was
            imported or aliased.
        allowed: course_lib building blocks the exercise hands to the learner
            (functions, classes or module instances): calling them, and
            whatever they call in turn, is not a violation. An exercise that
            assembles a ViT from course_lib blocks passes the block class here.
        transparent: grader code that runs between the checker and the
            learner's code (an adapter that calls the learner's function, a
            TorchFunctionMode that watches it): it is not a violation itself,
            but everything it calls is still checked.
    """
    forbidden = tuple(forbidden)
    violations: list[str] = []
    previous = sys.getprofile()
    allowed_codes = _code_objects(allowed)
    transparent_codes = _nested(_code_objects(transparent))
    inside_allowed: list[Any] = []  # frames of allowed code now running
    forbidden_codes = {f.__code__: f for f in forbidden if hasattr(f, "__code__")}
    forbidden_builtins = {id(f): f for f in forbidden if not hasattr(f, "__code__")}
    forbidden_methods = {getattr(f, "__name__", None) for f in forbidden
                         if getattr(f, "__objclass__", None) is not None}  # Tensor.softmax and co., bound at call time
    breakers = {id(f): f for f in _GUARD_BREAKERS}

    def fail(message: str):
        violations.append(message)
        raise ForbiddenCall(message)

    switched_off = (f"{exercise}: your code switched off a guard the checks use while it was being checked "
                    "({what}); exercises may not change torch's function modes, the profiler or the tracer, "
                    "so this exercise scores zero.")

    learner_code: dict = {}  # code object -> whether it is the learner's (checked once each)
    all_disabled, stack_size, stack_at = (torch._C._is_torch_function_all_disabled,
                                          torch._C._len_torch_function_stack, torch._C._get_function_stack_at)

    def untouched(code) -> None:
        """In the learner's code: torch's function modes on, and the guard's own mode on top of them."""
        if all_disabled():
            fail(switched_off.format(what="torch's function modes, with DisableTorchFunction"))
        if mode.depth == 0:
            n = stack_size()
            if n == 0 or stack_at(n - 1) is not mode:
                fail(switched_off.format(what="the guard's TorchFunctionMode, taken off torch's stack"))

    def profiler(frame, event, arg):  # pragma: no cover - runs under the profiler
        if event == "call" or event == "c_call":
            code = frame.f_code
            mine = learner_code.get(code)
            if mine is None:
                mine = learner_code[code] = _learners(code.co_filename)
            if mine:
                untouched(code)
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
            if code in transparent_codes:
                return
            if code in forbidden_codes:
                fail(f"{exercise}: your code calls {_name_of(forbidden_codes[code])}, which does the exercise "
                     "for you. Compute it yourself from basic tensor operations.")
            filename = code.co_filename
            home = next((d for d in _REFERENCE_DIRS if filename.startswith(d + os.sep)), None)
            if home and os.path.abspath(filename) != _THIS_FILE:
                module = os.path.relpath(os.path.splitext(filename)[0], os.path.dirname(home)).replace(os.sep, ".")
                fail(f"{exercise}: your code calls the reference {module}.{code.co_name}. "
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

    before = take_snapshot()
    mode = _ForbidTorch(forbidden, exercise)
    watch = {"own": True, "changes": []}
    profiling = bool(reference or forbidden)
    _watch_audit_events()
    _watches.append(watch)
    try:
        with mode:
            if profiling:
                sys.setprofile(profiler)
            watch["own"] = False
            try:
                yield
            finally:
                watch["own"] = True
                still_mine = sys.getprofile() is profiler
                if profiling:
                    sys.setprofile(previous)
            stack_kept = (torch._C._len_torch_function_stack() > 0
                          and torch._C._get_function_stack_at(torch._C._len_torch_function_stack() - 1) is mode)
    finally:
        _watches.remove(watch)
    if violations:  # the profiler's exception may have been swallowed by the learner's code
        raise ForbiddenCall(violations[0])
    if profiling and (watch["changes"] or not still_mine):
        raise ForbiddenCall(switched_off.format(what="the profiler, removed or replaced: sys.setprofile, "
                                                     "sys.settrace, or an error that made Python drop it"))
    if not stack_kept:
        raise ForbiddenCall(switched_off.format(what="torch's function mode stack, changed"))
    changed = first_change(before)
    if changed:
        raise ForbiddenCall(f"{exercise}: your code replaced {changed} while it was being checked; "
                            "exercises may not patch torch, numpy or the course's modules.")


@contextlib.contextmanager
def guarded(forbidden: Iterable[Callable] = (), *, exercise: str, allowed: Iterable[Any] = (),
            transparent: Iterable[Any] = (), watch: ShapeWatch | None = None):
    """:func:`forbid_calls` inside an optional :class:`ShapeWatch`: how a learner's function is called.

    It lives here, beside the guard, because the guard lets no other grader
    code run while it watches (its own file excepted).
    """
    with watch or contextlib.nullcontext():
        with forbid_calls(forbidden, exercise=exercise, allowed=allowed,
                          transparent=tuple(transparent) + ((ShapeWatch,) if watch else ())):
            yield


def _code_objects(allowed: Iterable[Any]) -> set:
    """The code objects of functions, of every method of classes (and their course_lib bases), of modules' classes."""
    codes = set()
    for item in allowed:
        if isinstance(item, torch.nn.Module):
            item = type(item)
        if isinstance(item, type):
            for klass in item.__mro__:
                if klass.__module__.split(".")[0] not in _PACKAGES:  # nn.Module.__call__ would let anything through
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


def _nested(codes: set) -> set:
    """The code objects and every code object defined inside them (comprehensions, lambdas, inner functions)."""
    out, todo = set(), list(codes)
    while todo:
        code = todo.pop()
        if code not in out:
            out.add(code)
            todo += [c for c in code.co_consts if hasattr(c, "co_code")]
    return out
