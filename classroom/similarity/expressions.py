"""Expressions as values: names, constants, operators, subscripts, attributes (a mixin of the evaluator).

A name is the value it holds; an operator's commutative operands are put in
canonical order (``a + b`` is ``b + a``), a comparison ``a > b`` is ``b < a``,
arithmetic on constants is done (``-float("inf")`` is ``-inf``), ``x * 1``
and ``x + 0`` are ``x``, and ``x[:, None]`` is ``x.unsqueeze(1)``. A
subscript of something known is taken (``(b, c, h, w)[0]`` is ``b``;
``x.shape[:2][1]`` is ``x.shape[1]``; ``x.max(dim).values`` is ``x.amax(dim)``).
"""

from __future__ import annotations

import ast
import builtins
import math

from classroom.similarity.ir import Node, sorted_kids
from classroom.similarity.program import Closure
from classroom.similarity.spelling import COMMUTATIVE

BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
          ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
          ast.RShift: ">>"}
COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is",
           ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
#: a comparison and its negation: the condition of a branch is kept in its first form, the branches swapped
NEGATED = {"is not": "is", "!=": "==", "not in": "in"}
CONSTANTS = {"math.inf": math.inf, "torch.inf": math.inf, "numpy.inf": math.inf, "math.pi": math.pi,
             "torch.pi": math.pi, "numpy.pi": math.pi, "math.e": math.e, "torch.nan": math.nan,
             "math.nan": math.nan}


def new_axis(index: ast.expr) -> int | None:
    """The axis an index such as ``[:, None]``, ``[None]`` or ``[..., None]`` inserts (it is ``unsqueeze``);
    None for any other index."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    nones = [i for i, p in enumerate(parts) if isinstance(p, ast.Constant) and p.value is None]
    if len(nones) != 1:
        return None
    where = nones[0]
    for i, p in enumerate(parts):
        full = isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None
        ellipsis = isinstance(p, ast.Constant) and p.value is Ellipsis and i == 0
        if i != where and not (full or ellipsis):
            return None
    if isinstance(parts[0], ast.Constant) and parts[0].value is Ellipsis:
        return where - len(parts)
    return where


class Expressions:
    """The evaluator's expressions (see the module's text)."""

    def ev(self, e: ast.expr | None, env: dict):
        if e is None:
            return self.mk("const:None")
        method = getattr(self, f"ev_{type(e).__name__}", None)
        if method is not None:
            return method(e, env)
        kids = [self.value(self.ev(c, env)) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)]
        return self.mk(f"ast:{type(e).__name__}", kids, e)

    def ev_Constant(self, e: ast.Constant, env):
        return self.const(e.value, e)

    def ev_Name(self, e: ast.Name, env):
        if e.id in env:
            return env[e.id]
        return self.load_global(e.id, e)

    def load_global(self, name: str, at):
        program = self.program
        if name in self.exercises and name in program.functions:
            return self.mk(f"ex:{name}", (), at)
        if name in program.functions:
            return program.functions[name]
        if name in program.constants and name not in self.loading:
            expr, cell = program.constants[name]
            self.loading.add(name)
            saved, self.cell = self.cell, cell
            try:
                return self.ev(expr, {})
            finally:
                self.cell = saved
                self.loading.discard(name)
        if name in program.modules:
            return self.module(program.modules[name], at)
        if name in self.exercises:
            return self.mk(f"ex:{name}", (), at)
        if hasattr(builtins, name):
            return self.mk(f"builtin:{name}", (), at)
        return self.mk("global", (), at)

    def module(self, path: str, at=None) -> Node:
        if path in CONSTANTS:
            return self.const(CONSTANTS[path], at)
        return self.mk(f"mod:{path}", (), at)

    def ev_Attribute(self, e: ast.Attribute, env):
        base = self.ev(e.value, env)
        if isinstance(base, Node) and base.op.startswith("mod:"):
            return self.module(f"{base.op[4:]}.{e.attr}", e)
        base = self.value(base)
        if e.attr in ("mT", "mH"):
            return self.op_call("transpose", [base, self.const(-2), self.const(-1)], {}, e)
        if e.attr in ("values", "indices") and base.op in ("call:max", "call:min"):
            return self.index(base, self.const(0 if e.attr == "values" else 1), e)
        return self.mk(f"attr:{e.attr}", [base], e)

    def ev_Subscript(self, e: ast.Subscript, env):
        base = self.value(self.ev(e.value, env))
        axis = new_axis(e.slice)
        if axis is not None:
            return self.op_call("unsqueeze", [base, self.const(axis)], {}, e)
        return self.index(base, self.subscript_index(e.slice, env), e)

    def subscript_index(self, s: ast.expr, env) -> Node:
        if isinstance(s, ast.Slice):
            return self.mk("slice", [self.value(self.ev(x, env)) for x in (s.lower, s.upper, s.step)], s)
        if isinstance(s, ast.Tuple):
            return self.mk("seq", [self.subscript_index(x, env) for x in s.elts], s)
        return self.value(self.ev(s, env))

    def index(self, base, i: Node, at) -> Node:
        base = self.value(base)
        k = self.number(i)
        if base.op == "seq" and isinstance(k, int) and -len(base.kids) <= k < len(base.kids) \
                and not any(x.op == "star" for x in base.kids):
            return base.kids[k]
        if base.op == "getitem" and base.kids[1].op == "slice" and isinstance(k, int) and k >= 0:
            start, stop, step = base.kids[1].kids
            first = 0 if self.is_const(start, None) else self.number(start)
            if isinstance(first, int) and first >= 0 and self.is_const(step, None):
                return self.index(base.kids[0], self.const(first + k), at)
        if base.op in ("call:max", "call:min") and isinstance(k, int) and k == 0 \
                and any(a.op == "arg:dim" for a in base.kids):
            return self.mk("call:a" + base.op[5:], base.kids, at)
        return self.mk("getitem", [base, i], at)

    def ev_BinOp(self, e: ast.BinOp, env):
        return self.binop(BINOPS.get(type(e.op), "?"), self.ev(e.left, env), self.ev(e.right, env), e)

    def binop(self, op: str, a, b, at) -> Node:
        a, b = self.value(a), self.value(b)
        x, y = self.number(a), self.number(b)
        if x is not None and y is not None and op in "+-*/" and abs(x) < 1e15 and abs(y) < 1e15:
            try:
                return self.const({"+": x + y, "-": x - y, "*": x * y, "/": x / y if y else math.nan}[op], at)
            except (OverflowError, ValueError):
                pass
        if (op in "+-" and y == 0) or (op in "*/" and y == 1):
            return a
        if (op == "+" and x == 0) or (op == "*" and x == 1):
            return b
        if op == "+" and any(v.op in ("seq", "comp", "concat") for v in (a, b)):
            return self.concat(a, b, at)
        kids = sorted_kids([a, b]) if op in COMMUTATIVE else [a, b]
        return self.mk(op, kids, at)

    def concat(self, a: Node, b: Node, at) -> Node:
        parts = [p for v in (a, b) for p in (v.kids if v.op == "concat" else (v,))]
        merged: list[Node] = []
        for p in parts:
            if p.op == "seq" and not p.kids:
                continue
            if merged and p.op == "seq" and merged[-1].op == "seq":
                merged[-1] = self.mk("seq", merged[-1].kids + p.kids, at)
            else:
                merged.append(p)
        if not merged:
            return self.mk("seq", [], at)
        return merged[0] if len(merged) == 1 else self.mk("concat", merged, at)

    def ev_UnaryOp(self, e: ast.UnaryOp, env):
        v = self.value(self.ev(e.operand, env))
        if isinstance(e.op, ast.UAdd):
            return v
        if isinstance(e.op, ast.USub):
            x = self.number(v)
            return self.const(-x, e) if x is not None else self.mk("neg", [v], e)
        if isinstance(e.op, ast.Not):
            return v.kids[0] if v.op == "not" else self.mk("not", [v], e)
        return v.kids[0] if v.op == "~" else self.mk("~", [v], e)

    def ev_BoolOp(self, e: ast.BoolOp, env):
        op = "and" if isinstance(e.op, ast.And) else "or"
        return self.mk(op, sorted_kids(self.value(self.ev(v, env)) for v in e.values), e)

    def ev_Compare(self, e: ast.Compare, env):
        parts = []
        left = self.value(self.ev(e.left, env))
        for op, right in zip(e.ops, e.comparators):
            right = self.value(self.ev(right, env))
            parts.append(self.compare(COMPARE.get(type(op), "?"), left, right, e))
            left = right
        return parts[0] if len(parts) == 1 else self.mk("and", sorted_kids(parts), e)

    def compare(self, name: str, a: Node, b: Node, at) -> Node:
        """One comparison, ``a > b`` written as ``b < a``, the operands of ``==`` in canonical order."""
        if name in (">", ">="):
            name, a, b = {">": "<", ">=": "<="}[name], b, a
        kids = sorted_kids([a, b]) if name in ("==", "!=", "is", "is not") else [a, b]
        return self.mk(f"cmp:{name}", kids, at)

    def ev_IfExp(self, e: ast.IfExp, env):
        return self.phi(self.ev(e.test, env), self.ev(e.body, env), self.ev(e.orelse, env), e)

    def ev_Tuple(self, e, env):
        return self.mk("seq", [self.value(self.ev(x, env)) for x in e.elts], e)

    ev_List = ev_Set = ev_Tuple

    def ev_Dict(self, e: ast.Dict, env):
        return self.mk("dict", [self.mk("pair", [self.value(self.ev(k, env)), self.value(self.ev(v, env))])
                                for k, v in zip(e.keys, e.values)], e)

    def ev_Starred(self, e: ast.Starred, env):
        return self.mk("star", [self.value(self.ev(e.value, env))], e)

    def ev_JoinedStr(self, e: ast.JoinedStr, env):
        return self.mk("fstr", [self.value(self.ev(v.value, env)) for v in e.values
                                if isinstance(v, ast.FormattedValue)], e)

    def ev_Lambda(self, e: ast.Lambda, env):
        return Closure(e, dict(env), self.cell, "lambda")

    def ev_NamedExpr(self, e: ast.NamedExpr, env):
        v = self.ev(e.value, env)
        self.store(e.target, v, env, e)
        return v
