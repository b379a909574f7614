"""One spelling for every way of writing the same torch call.

``x.softmax(dim=-1)``, ``torch.softmax(x, -1)`` and ``F.softmax(x, dim=-1)``
are one call: the method's receiver is the function's first argument, the
namespace (``torch``, ``torch.nn.functional``, ``torch.Tensor``) is dropped,
an alias is its op (``mm`` and ``bmm`` are ``matmul``, ``concat`` is ``cat``),
and every argument is named by the op's own signature (torch's native
schemas, or the Python signature of a function written in Python), so a
keyword and a positional argument are the same operand, and an argument equal
to its default is left out. A shape given as separate numbers
(``x.view(b, -1)``) or as one tuple (``x.view((b, -1))``) is one tuple.
"""

from __future__ import annotations

import functools
import inspect
import math

import torch
import torch.nn.functional as F

#: namespaces whose functions are the tensor ops themselves (a module-level function and a Tensor method)
TORCH = ("torch.nn.functional.", "torch.Tensor.", "torch.")
#: other names of the same op
ALIASES = {
    "mm": "matmul", "bmm": "matmul", "concat": "cat", "concatenate": "cat", "swapaxes": "transpose",
    "swapdims": "transpose", "multiply": "mul", "divide": "div", "true_divide": "div", "subtract": "sub",
    "absolute": "abs", "clip": "clamp", "greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le",
    "not_equal": "ne", "negative": "neg", "moveaxis": "movedim", "arccos": "acos", "arcsin": "asin",
    "arctan": "atan", "special.softmax": "softmax", "special.log_softmax": "log_softmax", "special.expit": "sigmoid",
    "special.logsumexp": "logsumexp", "nn.functional.softmax": "softmax", "ger": "outer",
}
#: ops that are Python's operators, written as functions or methods
OPERATORS = {"matmul": "@", "add": "+", "mul": "*", "div": "/", "sub": "-", "pow": "**"}
#: ops that are Python's comparisons
COMPARISONS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "eq": "==", "ne": "!="}
#: ops that are Python's bitwise operators on boolean tensors
LOGICAL = {"logical_and": "&", "logical_or": "|", "logical_xor": "^", "bitwise_and": "&", "bitwise_or": "|",
           "bitwise_xor": "^"}
#: ``x.new_ones(x.shape)`` is ``torch.ones_like(x)``
FACTORIES_LIKE = {"new_ones": "ones_like", "new_zeros": "zeros_like", "new_empty": "empty_like",
                  "new_full": "full_like"}
#: ops that return their input's values unchanged (a copy or a layout change): the value is the receiver
IDENTITIES = frozenset({"contiguous", "clone", "as_tensor"})
#: ops whose shape argument may be spelled as separate numbers; the value is where the shape starts
SHAPE_ARGUMENT = {"view": 1, "reshape": 1, "permute": 1, "expand": 1, "repeat": 1, "tile": 1, "flip": 1,
                  "new_zeros": 1, "new_ones": 1, "new_empty": 1, "zeros": 0, "ones": 0, "empty": 0, "rand": 0,
                  "randn": 0}
#: the commutative operators (their operands are put in canonical order)
COMMUTATIVE = frozenset({"+", "*", "&", "|", "^", "==", "!=", "and", "or"})


def op_name(path: str) -> str:
    """The canonical op of a dotted function name: ``torch.nn.functional.softmax`` -> ``softmax``;
    names outside torch keep their module (``math.sqrt``)."""
    for prefix in TORCH:
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    return ALIASES.get(path, path)


@functools.lru_cache(maxsize=None)
def signatures(name: str) -> tuple[tuple[tuple[str, bool, object, bool], ...], ...]:
    """The op's argument lists (one per overload): (name, keyword-only, default, a tensor) per argument.

    A function written in Python (``F.interpolate``) has its Python signature; a native op has torch's
    schemas (``aten::sum``'s overloads); an op with neither has none, and keeps its arguments as written.
    """
    for holder in (F, torch):
        fn = getattr(holder, name, None)
        if inspect.isfunction(fn):
            try:
                params = inspect.signature(fn).parameters.values()
            except (TypeError, ValueError):
                break
            if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
                break
            return (tuple((p.name, p.kind == p.KEYWORD_ONLY,
                           None if p.default is inspect.Parameter.empty else p.default, False) for p in params),)
    if name.startswith("_") or not name.isidentifier():
        return ()
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return ()
    out = []
    for s in schemas:
        if "out" in s.overload_name or any(a.name == "out" for a in s.arguments):
            continue
        out.append(tuple((a.name, a.kwarg_only, a.default_value, str(a.type).startswith("Tensor") and
                          not str(a.type).startswith("Tensor[]")) for a in s.arguments))
    return tuple(out)


def constant_label(value: object) -> str | None:
    """The label of a constant (``const:-1``), or None for a value that is not a plain constant.

    A float that is a whole number is its integer (``2.0`` and ``2`` divide a tensor alike).
    """
    if isinstance(value, bool) or value is None:
        return f"const:{value!r}"
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            value = int(value)
        return f"const:{value!r}"
    if isinstance(value, int):
        return f"const:{value!r}"
    if isinstance(value, (list, tuple)):
        return "const:" + repr(tuple(value))
    return None


def bind(name: str, args: list, kwargs: dict, is_default, is_number) -> list[tuple[str, object]]:
    """The call's operands named by the op's signature, defaults left out: ``[("self", x), ("dim", -1)]``.

    The overload is the first that takes these arguments, a number never standing for a tensor operand
    (``x.max(-1)`` is ``max(self, dim)``, not ``max(self, other)``). ``is_default(value, default)`` says
    whether an operand equals a signature's default, ``is_number(value)`` whether it is a constant number.
    With no overload that takes the arguments, positional operands are named by position (``"0"``,
    ``"1"``) and keywords by their name.
    """
    for params in signatures(name):
        positional = [p for p in params if not p[1]]
        names = {p[0] for p in params}
        if len(args) > len(positional) or not set(kwargs) <= names:
            continue
        given = dict(zip((p[0] for p in positional), args))
        if set(given) & set(kwargs):
            continue
        tensors = {p[0] for p in params if p[3]}
        if any(is_number(v) for k, v in {**given, **kwargs}.items() if k in tensors):
            continue
        given.update(kwargs)
        return [(p[0], given[p[0]]) for p in params if p[0] in given and not is_default(given[p[0]], p[2])]
    return [(str(i), a) for i, a in enumerate(args)] + sorted(kwargs.items())
