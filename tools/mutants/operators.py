"""Which small changes a mutant makes: one node of the solution's syntax tree, changed as a slip of the pen would.

A swapped operator, a flipped comparison, a changed constant or axis, a
dropped scale, a skipped call, swapped arguments, a swapped reduction, a
deleted statement, an input returned unchanged...: :func:`proposals` lists
them for one node, :mod:`tools.mutants.mutate` applies them.
"""

from __future__ import annotations

import ast
import copy

# Names that are modules rather than values: `torch.exp(x)` is not a method call on `torch`.
MODULE_NAMES = {"torch", "math", "F", "nn", "np", "numpy", "re", "collections", "itertools", "functools",
                "random", "heapq", "os", "sys", "json", "string", "operator", "typing", "unicodedata"}

# Binary operators and what each one becomes.
BINOP_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub, ast.Mult),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.Div, ast.Add),
    ast.Div: (ast.Mult, ast.FloorDiv),
    ast.FloorDiv: (ast.Div, ast.Mult),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
    ast.MatMult: (ast.Mult,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitOr: (ast.BitAnd,),
    ast.BitXor: (ast.BitOr,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
}
COMPARE_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}
# Reductions and other routines with a plausible twin.
NAME_SWAPS = {
    "sum": "mean", "mean": "sum", "max": "min", "min": "max", "amax": "amin", "amin": "amax",
    "argmax": "argmin", "argmin": "argmax", "tril": "triu", "triu": "tril", "maximum": "minimum",
    "minimum": "maximum", "clamp_min": "clamp_max", "clamp_max": "clamp_min", "floor": "ceil", "ceil": "floor",
    "any": "all", "all": "any", "cumsum": "cumprod", "prod": "sum", "exp": "log", "log": "exp",
    "sin": "cos", "cos": "sin", "var": "std", "std": "var", "rsqrt": "sqrt", "sqrt": "rsqrt",
    "topk": "kthvalue", "sorted": "reversed", "append": "extend", "extend": "append",
    "unsqueeze": "squeeze", "repeat_interleave": "repeat",
}


def _int_value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _int_node(v: int) -> ast.expr:
    return ast.Constant(v) if v >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-v))


def _float_value(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) is float:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is float:
        return -node.operand.value
    return None


def _float_node(v: float) -> ast.expr:
    return ast.Constant(v) if v >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-v))


def _params(func: ast.AST | None) -> list[str]:
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return []
    a = func.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return [n for n in names if n not in ("self", "cls")]


def proposals(node: ast.AST, parent: ast.AST | None, func: ast.AST | None, modules: set[str]):
    """(kind, replacement node) pairs for one node; a replacement of None deletes a statement."""
    c = copy.deepcopy
    # Arithmetic: swapped operator, dropped operand (a dropped scale, term or factor).
    if isinstance(node, ast.BinOp):
        for op in BINOP_SWAPS.get(type(node.op), ()):
            yield "operator", ast.BinOp(c(node.left), op(), c(node.right))
        if isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Add, ast.Sub, ast.Pow)):
            yield "drop-operand", c(node.left)
        if isinstance(node.op, (ast.Mult, ast.Add)):
            yield "drop-operand", c(node.right)
    if isinstance(node, ast.AugAssign):
        for op in BINOP_SWAPS.get(type(node.op), ()):
            yield "operator", ast.AugAssign(c(node.target), op(), c(node.value))
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in COMPARE_SWAPS.get(type(op), ()):
                ops = [c(o) for o in node.ops]
                ops[i] = new()
                yield "comparison", ast.Compare(c(node.left), ops, [c(x) for x in node.comparators])
    if isinstance(node, ast.BoolOp):
        flipped = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolean", ast.BoolOp(flipped, [c(v) for v in node.values])
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            yield "not-removal", c(node.operand)
        elif isinstance(node.op, ast.Invert):
            yield "not-removal", c(node.operand)
        elif isinstance(node.op, ast.USub) and _int_value(node) is None and _float_value(node) is None:
            yield "unary-minus", c(node.operand)
    # A condition negated (if, while, conditional expression, comprehension filter).
    if isinstance(node, ast.expr) and (
            (isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is node)
            or (isinstance(parent, ast.comprehension) and node in parent.ifs)):
        if not (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            yield "negate-condition", ast.UnaryOp(ast.Not(), c(node))
    # Constants.
    if isinstance(node, ast.Constant) and node.value in ("-inf", "inf"):
        yield "constant", ast.Constant("inf" if node.value == "-inf" else "-inf")
    v = _int_value(node)
    if v is not None and not (isinstance(node, ast.Constant) and isinstance(parent, ast.UnaryOp)):
        news = {0: [1], 1: [0]}.get(v, []) + [v + 1, v - 1] + ([-v] if v else [])
        for n in dict.fromkeys(news):
            if n != v:
                yield "constant", _int_node(n)
    f = _float_value(node)
    if f is not None and not (isinstance(node, ast.Constant) and isinstance(parent, ast.UnaryOp)):
        for n in dict.fromkeys([f * 2, f / 2, 0.0] if f else [1.0]):
            if n != f:
                yield "constant", _float_node(n)
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "boolean-constant", ast.Constant(not node.value)
    # Calls.
    if isinstance(node, ast.Call):
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        starred = len(positional) != len(node.args)
        if len(node.args) == 1 and not starred:
            yield "skip-call", c(node.args[0])
        on_module = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id in modules
        if isinstance(node.func, ast.Attribute) and not on_module:
            yield "skip-call", c(node.func.value)
        if len(node.args) == 2 and not starred:
            swapped = [c(node.args[1]), c(node.args[0])]
            yield "swap-arguments", ast.Call(c(node.func), swapped, [c(k) for k in node.keywords])
        for i, kw in enumerate(node.keywords):
            if kw.arg is None:
                continue
            rest = [c(k) for j, k in enumerate(node.keywords) if j != i]
            yield "drop-keyword", ast.Call(c(node.func), [c(a) for a in node.args], rest)
            if not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                kws = [c(k) for k in node.keywords]
                kws[i] = ast.keyword(kw.arg, ast.Constant(None))
                yield "none-for-default", ast.Call(c(node.func), [c(a) for a in node.args], kws)
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
        stop = 1 if len(node.args) >= 2 else 0
        if name in ("range", "arange") and node.args and not starred and _int_value(node.args[stop]) is None:
            for op in (ast.Add, ast.Sub):  # the end off by one (a constant end is changed as a constant)
                args = [c(a) for a in node.args]
                args[stop] = ast.BinOp(args[stop], op(), ast.Constant(1))
                yield "off-by-one", ast.Call(c(fn), args, [c(k) for k in node.keywords])
        if name in NAME_SWAPS:
            new_func = ast.Attribute(c(fn.value), NAME_SWAPS[name], ast.Load()) if isinstance(fn, ast.Attribute) \
                else ast.Name(NAME_SWAPS[name], ast.Load())
            yield "swap-routine", ast.Call(new_func, [c(a) for a in node.args], [c(k) for k in node.keywords])
    # Slices.
    if isinstance(node, ast.Slice):
        lo, up, st = node.lower, node.upper, node.step
        if lo is not None and up is None:
            lv = _int_value(lo)
            yield "slice", ast.Slice(None, _int_node(-lv) if lv else c(lo), c(st) if st else None)
        if up is not None and lo is None:
            uv = _int_value(up)
            yield "slice", ast.Slice(_int_node(-uv) if uv and uv < 0 else c(up), None, c(st) if st else None)
        if lo is not None and up is not None:
            yield "slice", ast.Slice(None, c(up), c(st) if st else None)
            yield "slice", ast.Slice(c(lo), None, c(st) if st else None)
        if st is not None:
            yield "slice", ast.Slice(c(lo) if lo else None, c(up) if up else None, None)
    # Statements: deletion, returning an input, negation of a computed value.
    text = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Break, ast.Continue)) or (
            isinstance(node, ast.Expr) and not text):  # a string statement (a docstring) is not code to delete
        yield "delete-statement", None
    if isinstance(node, ast.Return) and node.value is not None:
        for p in _params(func):
            yield "return-input", ast.Return(ast.Name(p, ast.Load()))
        yield "unary-minus", ast.Return(ast.UnaryOp(ast.USub(), c(node.value)))
    if isinstance(node, ast.Assign):
        yield "unary-minus", ast.Assign([c(t) for t in node.targets], ast.UnaryOp(ast.USub(), c(node.value)))
