"""An exercise's code as the values it computes: what a disguise cannot change.

:func:`exercise_graph` runs the learner's function symbolically on its
parameters and returns the graph of values its result depends on
(:mod:`classroom.similarity.ir`). What that leaves out or makes one:

* **names**: a local (``cls``, ``self``, ``sum`` or ``max`` shadowing a builtin
  included) is replaced by the value it holds, a parameter by its position;
* **statement order and temporaries**: a value is named by its operation and
  operands, wherever it was computed and however many names it passed through;
* **dead code**: a statement whose value the result never uses is not in the
  graph (nor are comments, docstrings, ``print``, ``if False:`` blocks, code
  after ``return``, and ``x.contiguous()``, ``x.clone()``, ``x * 1``);
* **helpers**: a function the learner defined (in any cell, called from the
  exercise, itself or through other helpers) is inlined where it is called;
  a nested function or a lambda too. Calling another exercise stays a call;
* **loop style**: a loop that appends to a list and the comprehension that
  builds it are one value, nested loops one comprehension with two
  generators; ``for i in range(len(xs))`` reading ``xs[i]`` is ``for x in xs``;
  a ``while`` loop over a counter is the ``for`` loop over its range; a loop
  summing into a total is ``sum`` of a generator;
* **spelling**: method and function form, positional and keyword arguments,
  aliases of an op (:mod:`classroom.similarity.spelling`), ``.shape[i]``,
  ``.size(i)``, ``.size()[i]``, ``len(x)`` and tuple unpacking of the shape;
  ``x.dim()``, ``x.ndim`` and ``len(x.shape)``; ``.max(dim).values`` and
  ``.amax(dim)``; ``if not c: a else: b`` and ``if c: b else: a``; an
  einsum's letters.

A learner's code is hostile input: evaluation never runs it, never follows
more than :data:`MAX_INLINE` nested helper calls, and stops at
:data:`MAX_NODES` values or :data:`MAX_CALLS` inlined calls
(:class:`TooLarge`). Statements and functions are here; expressions, calls
and loops are the evaluator's mixins (:mod:`classroom.similarity.expressions`,
:mod:`classroom.similarity.calls`, :mod:`classroom.similarity.loops`).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from classroom.similarity.calls import Calls
from classroom.similarity.expressions import BINOPS, NEGATED, Expressions
from classroom.similarity.ir import Node
from classroom.similarity.loops import Loops
from classroom.similarity.program import (
    Closure,
    Definition,
    Program,
    imported,
    mutates,
    outside,
    receiver_root,
    stored_names,
)
from classroom.similarity.spelling import constant_label

#: helper calls inlined inside each other at most (deeper ones stay calls)
MAX_INLINE = 8
#: values one exercise may make at most, and helper calls it may inline (a hostile notebook cannot make the
#: report run for long: the course's largest solution makes about 400 values and inlines a dozen calls)
MAX_NODES = 60_000
MAX_CALLS = 2_000
#: a string longer than this is any string (an error message, not an operand such as "bicubic")
MAX_STRING = 40


class TooLarge(Exception):
    """The exercise's code makes more values than :data:`MAX_NODES`."""


class Evaluator(Expressions, Calls, Loops):
    """Runs one exercise's function symbolically over a learner's :class:`Program` (see the module's text)."""

    def __init__(self, program: Program, exercises: frozenset[str]):
        self.program = program
        self.exercises = exercises
        self.table: dict[int, Node] = {}
        self.cell = 0
        self.level = 0  # loops and comprehension generators open around the code being evaluated
        self.inlining: list[int] = []
        self.memo: dict[tuple, Node] = {}
        self.names: set[str] = set()  # the names the learner chose (evidence for the page, never compared)
        self.helpers: list[Definition] = []  # the learner's functions the exercise reaches, in order
        self.loading: set[str] = set()
        self.effects: list[Node] = []  # changes to objects the function was given (an update in place)
        self.calls = 0

    def mk(self, op: str, kids=(), at: ast.AST | None = None) -> Node:
        n = Node(op, kids)
        n = self.table.setdefault(n.h, n)
        if len(self.table) > MAX_NODES:
            raise TooLarge(f"more than {MAX_NODES} values")
        line = getattr(at, "lineno", None)
        if line is not None:
            n.lines.add((self.cell, line))
        return n

    def const(self, value: object, at=None) -> Node:
        label = constant_label(value)
        if label is not None:
            return self.mk(label, (), at)
        if isinstance(value, str):
            return self.mk(f"str:{value}" if len(value) <= MAX_STRING else "str", (), at)
        if isinstance(value, bytes):
            return self.mk("bytes", (), at)
        return self.mk(f"const:{type(value).__name__}", (), at)

    def is_const(self, node, value) -> bool:
        return isinstance(node, Node) and node.op == constant_label(value)

    def number(self, node) -> float | int | None:
        if isinstance(node, Node) and node.op.startswith("const:") and not node.kids:
            try:
                value = ast.literal_eval(node.op[6:])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                value = None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return value
        text = node.op[6:] if isinstance(node, Node) and node.op.startswith("const:") else ""
        return {"inf": math.inf, "-inf": -math.inf}.get(text)

    def value(self, v) -> Node:
        """A value that may be a function, as a node (a function passed as a value is its code)."""
        if isinstance(v, Node):
            return v
        if id(v.fn) in self.inlining or len(self.inlining) >= MAX_INLINE:
            return self.mk("function")
        self.inlining.append(id(v.fn))
        try:
            body = self.function(v.fn, [self.mk(f"lparam:{i}") for i in range(len(v.fn.args.args))], {},
                                 getattr(v, "env", {}), v.cell)
        finally:
            self.inlining.pop()
        return self.mk("lambda", [body])

    def phi(self, cond, a, b, at=None) -> Node:
        a, b = self.value(a), self.value(b)
        if a == b:
            return a
        if isinstance(cond, Node):
            if cond.op.startswith("const:"):
                return a if cond.op not in ("const:False", "const:None", "const:0") else b
            if cond.op == "not":
                return self.phi(cond.kids[0], b, a, at)
            if cond.op.startswith("cmp:") and cond.op[4:] in NEGATED:
                return self.phi(self.mk("cmp:" + NEGATED[cond.op[4:]], cond.kids, at), b, a, at)
        return self.mk("phi", [self.value(cond), a, b], at)

    def function(self, fn, args: list, kwargs: dict, env: dict, cell: int | None = None) -> Node:
        """The value a function returns for these operands (its body evaluated, parameters bound)."""
        local = dict(env)
        spec = fn.args
        params = spec.posonlyargs + spec.args
        defaults = [None] * (len(params) - len(spec.defaults)) + list(spec.defaults)
        for i, (p, d) in enumerate(zip(params, defaults)):
            if i < len(args):
                local[p.arg] = args[i]
            elif p.arg in kwargs:
                local[p.arg] = kwargs.pop(p.arg)
            elif d is not None:
                local[p.arg] = self.ev(d, env)
            else:
                local[p.arg] = self.mk("missing")
        for p, d in zip(spec.kwonlyargs, spec.kw_defaults):
            local[p.arg] = kwargs.pop(p.arg) if p.arg in kwargs else (self.ev(d, env) if d else self.mk("missing"))
        if spec.vararg:
            local[spec.vararg.arg] = self.mk("seq", [self.value(a) for a in args[len(params):]])
        if spec.kwarg:
            local[spec.kwarg.arg] = self.mk("dict", [self.mk(f"arg:{k}", [self.value(v)])
                                                     for k, v in sorted(kwargs.items())])
        saved = self.cell
        self.cell = self.cell if cell is None else cell
        try:
            if isinstance(fn, ast.Lambda):
                return self.value(self.ev(fn.body, local))
            self.names.update(n for n in stored_names(fn.body))
            out_env, ret = self.block(fn.body, local)
            return ret if ret is not None else self.mk("const:None")
        finally:
            self.cell = saved

    def inline(self, target: Definition | Closure, args: list, kwargs: dict, at) -> Node:
        key = (id(target.fn), tuple(self.value(a).h for a in args),
               tuple(sorted((k, self.value(v).h) for k, v in kwargs.items())))
        if key in self.memo:
            return self.memo[key]
        if id(target.fn) in self.inlining or len(self.inlining) >= MAX_INLINE:
            return self.mk("call:helper", [self.value(a) for a in args], at)
        self.calls += 1
        if self.calls > MAX_CALLS:
            raise TooLarge(f"more than {MAX_CALLS} helper calls")
        if isinstance(target, Definition) and target not in self.helpers:
            self.helpers.append(target)
            self.names.add(target.name)
            self.names.update(a.arg for a in target.fn.args.args)
        self.inlining.append(id(target.fn))
        try:
            env = target.env if isinstance(target, Closure) else {}
            out = self.function(target.fn, list(args), dict(kwargs), env, target.cell)
        finally:
            self.inlining.pop()
        self.memo[key] = out
        return out

    def block(self, stmts: list[ast.stmt], env: dict) -> tuple[dict | None, Node | None]:
        """Run statements: the names' values after them (None if every path returned or raised) and the
        value returned (None if no path returned)."""
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                return None, (self.value(self.ev(s.value, env)) if s.value else self.mk("const:None", (), s))
            if isinstance(s, ast.Raise):
                return None, self.mk("raise", [self.value(self.ev(s.exc, env))] if s.exc else [], s)
            if isinstance(s, ast.Assert):
                cond = self.ev(s.test, env)
                rest_env, rest = self.block(stmts[i + 1:], env)
                failed = self.mk("raise", [self.mk("builtin:AssertionError")], s)
                return rest_env, self.phi(cond, rest if rest is not None else self.mk("const:None"), failed, s)
            if isinstance(s, ast.If):
                cond = self.ev(s.test, env)
                if isinstance(cond, Node) and cond.op.startswith("const:"):
                    taken = s.orelse if cond.op in ("const:False", "const:None", "const:0") else s.body
                    env_after, ret = self.block(taken, dict(env))
                    if env_after is None:
                        return None, ret
                    env = env_after
                    continue
                then_env, then_ret = self.block(s.body, dict(env))
                else_env, else_ret = self.block(s.orelse, dict(env))
                if then_env is None and else_env is None:
                    return None, self.phi(cond, then_ret, else_ret, s)
                if then_env is None or else_env is None:
                    left_ret = then_ret if then_env is None else else_ret
                    rest_env, rest = self.block(stmts[i + 1:], then_env if then_env is not None else else_env)
                    rest = rest if rest is not None else self.mk("const:None")
                    both = (left_ret, rest) if then_env is None else (rest, left_ret)
                    return rest_env, self.phi(cond, *both, s)
                env = self.merge(cond, then_env, else_env, s)
                continue
            env = self.statement(s, env)
        return env, None

    def merge(self, cond, a: dict, b: dict, at) -> dict:
        out = {}
        for name in list(a) + [n for n in b if n not in a]:
            x, y = a.get(name), b.get(name)
            if x is y or (isinstance(x, Node) and x == y):
                out[name] = x
            elif isinstance(x, Closure) or isinstance(y, Closure):
                out[name] = x if x is not None else y
            else:
                out[name] = self.phi(cond, x if x is not None else self.mk("unbound"),
                                     y if y is not None else self.mk("unbound"), at)
        return out

    def statement(self, s: ast.stmt, env: dict) -> dict:
        if isinstance(s, ast.Assign):
            value = self.ev(s.value, env)
            for t in s.targets:
                self.store(t, value, env, s)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.store(s.target, self.ev(s.value, env), env, s)
        elif isinstance(s, ast.AugAssign):
            current = self.ev(s.target, env)
            self.store(s.target, self.binop(BINOPS.get(type(s.op), "?"), current, self.ev(s.value, env), s), env, s)
        elif isinstance(s, ast.Expr):
            self.expression_statement(s.value, env)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            env = self.loop(s, env)
        elif isinstance(s, ast.While):
            env = self.while_loop(s, env)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                v = self.ev(item.context_expr, env)
                if item.optional_vars is not None:
                    self.store(item.optional_vars, v, env, s)
            env_after, _ = self.block(s.body, env)
            env = env_after if env_after is not None else env
        elif isinstance(s, ast.Try):
            env_after, _ = self.block(s.body + s.orelse + s.finalbody, env)
            env = env_after if env_after is not None else env
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            env[s.name] = Closure(s, env, self.cell, s.name)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for name, path in imported(s).items():
                env[name] = self.mk(f"mod:{path}")
        return env

    def expression_statement(self, e: ast.expr, env: dict) -> None:
        """A call whose value is dropped: kept only when it changes a local (``xs.append(x)``, ``x.add_(1)``)."""
        if not isinstance(e, ast.Call) or not isinstance(e.func, ast.Attribute) or not mutates(e.func.attr):
            return
        receiver = self.ev(e.func.value, env)
        if not isinstance(receiver, Node) or receiver.op.startswith("mod:"):
            return
        args = [self.ev(a, env) for a in e.args]
        method = e.func.attr
        if method == "append" and len(args) == 1:
            new = self.concat(receiver, self.mk("seq", [self.value(args[0])], e), e)
        elif method == "extend" and len(args) == 1:
            new = self.concat(receiver, self.value(args[0]), e)
        elif method.endswith("_"):
            kwargs = {k.arg: self.ev(k.value, env) for k in e.keywords if k.arg}
            new = self.op_call(method[:-1], [receiver] + args, kwargs, e)
        else:
            new = self.mk(f"call:{method}", [receiver] + [self.value(a) for a in args], e)
        self.store(e.func.value, new, env, e)
        root = self.ev(receiver_root(e.func.value), env)
        if isinstance(root, Node) and outside(root):
            self.effects.append(new)

    def store(self, target: ast.expr, value, env: dict, at) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            star = next((i for i, t in enumerate(elts) if isinstance(t, ast.Starred)), None)
            for i, t in enumerate(elts):
                if star is None or i < star:
                    part = self.index(value, self.const(i), at)
                elif i == star:
                    after = len(elts) - star - 1
                    part = self.mk("getitem", [self.value(value), self.mk("slice", [
                        self.const(star), self.const(-after) if after else self.const(None), self.const(None)])], at)
                else:
                    part = self.index(value, self.const(i - len(elts)), at)
                self.store(t.value if isinstance(t, ast.Starred) else t, part, env, at)
        elif isinstance(target, ast.Subscript):
            base = self.ev(target.value, env)
            new = self.mk("setitem", [self.value(base), self.subscript_index(target.slice, env),
                                      self.value(value)], at)
            self.store(target.value, new, env, at)
            if outside(self.value(base)):
                self.effects.append(new)
        elif isinstance(target, ast.Attribute):
            base = self.ev(target.value, env)
            self.store(target.value, self.mk(f"setattr:{target.attr}", [self.value(base), self.value(value)], at),
                       env, at)
        elif isinstance(target, ast.Starred):
            self.store(target.value, value, env, at)


@dataclass
class ExerciseGraph:
    """One exercise of one learner: the values its result depends on, the names the learner chose, and the
    learner's functions it reaches (the exercise's own first)."""

    roots: list[Node]
    names: frozenset[str]
    helpers: list[Definition]


def exercise_graph(program: Program, name: str, exercises: frozenset[str]) -> ExerciseGraph | None:
    """The graph of one exercise's function in a learner's program (None if the program does not define it).

    Raises :class:`TooLarge` for code that makes more than :data:`MAX_NODES` values.
    """
    definition = program.functions.get(name)
    if definition is None:
        return None
    ev = Evaluator(program, exercises - {name})
    ev.helpers.append(definition)
    fn = definition.fn
    params = fn.args.posonlyargs + fn.args.args
    args = [ev.mk(f"param:{i}") for i in range(len(params))]
    kwargs = {p.arg: ev.mk(f"param:{p.arg}") for p in fn.args.kwonlyargs}
    ev.inlining.append(id(fn))
    result = ev.function(fn, args, kwargs, {}, definition.cell)
    signature = {p.arg for p in params + fn.args.kwonlyargs}
    names = frozenset(n for n in ev.names if n not in signature and n != name)
    roots = [ev.mk("return", [result])] + [ev.mk("effect", [e]) for e in ev.effects]
    return ExerciseGraph(roots, names, ev.helpers)
