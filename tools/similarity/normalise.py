"""An exercise's code as the values it computes: what a disguise cannot change.

:func:`exercise_graph` runs the learner's function symbolically on its
parameters and returns the graph of values its result depends on
(:mod:`tools.similarity.ir`). What that leaves out or makes one:

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
  aliases of an op (:mod:`tools.similarity.spelling`), ``.shape[i]``,
  ``.size(i)``, ``.size()[i]``, ``len(x)`` and tuple unpacking of the shape;
  ``x.dim()``, ``x.ndim`` and ``len(x.shape)``; ``.max(dim).values`` and
  ``.amax(dim)``; ``if not c: a else: b`` and ``if c: b else: a``; an
  einsum's letters.

A learner's code is hostile input: evaluation never runs it, never follows
more than :data:`MAX_INLINE` nested helper calls, and stops at
:data:`MAX_NODES` values (:class:`TooLarge`).
"""

from __future__ import annotations

import ast
import builtins
import math
from dataclasses import dataclass, field

from tools.similarity.ir import Node, sorted_kids
from tools.similarity.spelling import (
    COMMUTATIVE,
    COMPARISONS,
    FACTORIES_LIKE,
    IDENTITIES,
    LOGICAL,
    OPERATORS,
    SHAPE_ARGUMENT,
    bind,
    constant_label,
    op_name,
)

#: helper calls inlined inside each other at most (deeper ones stay calls)
MAX_INLINE = 8
#: values one exercise may make at most, and helper calls it may inline (a hostile notebook cannot make the
#: report run for long: the course's largest solution makes about 400 values and inlines a dozen calls)
MAX_NODES = 60_000
MAX_CALLS = 2_000
#: a string longer than this is any string (an error message, not an operand such as "bicubic")
MAX_STRING = 40
#: methods that change the object they are called on (the name's value becomes the call's)
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "sort", "reverse", "remove",
                      "pop", "clear"})
#: calls whose only effect is output (never part of a result)
OUTPUT = frozenset({"print", "display", "pprint", "breakpoint"})
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


class TooLarge(Exception):
    """The exercise's code makes more values than :data:`MAX_NODES`."""


@dataclass
class Definition:
    """A function the learner defined at a cell's top level (or a lambda bound to a name there)."""

    fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    cell: int
    name: str


@dataclass
class Closure:
    """A function defined inside another (or a lambda), with the values its names had there."""

    fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    env: dict
    cell: int
    name: str


@dataclass
class Program:
    """A notebook's top level, every code cell in order: functions, constants and imported names."""

    functions: dict[str, Definition] = field(default_factory=dict)
    constants: dict[str, tuple[ast.expr, int]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)

    def add(self, tree: ast.Module, cell: int) -> None:
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = Definition(stmt, cell, stmt.name)
                self.constants.pop(stmt.name, None)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.modules.update(imported(stmt))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name, value = stmt.targets[0].id, stmt.value
                if isinstance(value, ast.Lambda):
                    self.functions[name] = Definition(value, cell, name)
                elif isinstance(value, ast.Name) and value.id in self.functions:
                    self.functions[name] = self.functions[value.id]
                else:
                    self.functions.pop(name, None)
                    self.constants[name] = (value, cell)


def imported(stmt: ast.Import | ast.ImportFrom) -> dict[str, str]:
    """The names an import statement binds, each to its dotted path (``F`` -> ``torch.nn.functional``)."""
    if isinstance(stmt, ast.Import):
        return {(a.asname or a.name.split(".")[0]): (a.name if a.asname else a.name.split(".")[0])
                for a in stmt.names}
    if stmt.level or not stmt.module:
        return {}
    return {(a.asname or a.name): f"{stmt.module}.{a.name}" for a in stmt.names if a.name != "*"}


def stored_names(stmts: list[ast.stmt]) -> list[str]:
    """The local names a block assigns or changes in place, in order of first appearance (nested functions
    and comprehensions have their own scopes)."""
    found: list[str] = []

    def root(t: ast.expr) -> None:
        while isinstance(t, (ast.Subscript, ast.Attribute, ast.Starred)):
            t = t.value
        if isinstance(t, ast.Name):
            if t.id not in found:
                found.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                root(e)

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
                             ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in found:
                found.append(node.name)
            return
        if isinstance(node, ast.Assign):
            for t in node.targets:
                root(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            root(node.target)
        elif isinstance(node, ast.NamedExpr):
            root(node.target)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    root(item.optional_vars)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and mutates(node.value.func.attr):
            root(node.value.func.value)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in stmts:
        visit(s)
    return found


#: ops whose result shares its first operand's memory: changing it in place changes the operand
VIEWS = frozenset({"view", "reshape", "transpose", "permute", "expand", "unsqueeze", "squeeze", "flatten", "narrow",
                   "select", "unflatten", "movedim", "diagonal", "t", "detach", "view_as", "as_strided"})


def outside(node: Node) -> bool:
    """A value the function was given (a parameter, an item of something it loops over), or a view of one:
    changing it in place is part of what the function does. A value it made (``torch.zeros_like(x)``) is not."""
    while True:
        if node.op.startswith(("param:", "item")):
            return True
        if node.op in ("carry", "getitem", "setitem") or node.op.startswith(("attr:", "setattr:")):
            node = node.kids[0]
        elif node.op.startswith("call:") and node.op[5:] in VIEWS and node.kids and node.kids[0].op == "arg:self":
            node = node.kids[0].kids[0]
        else:
            return False


def receiver_root(e: ast.expr) -> ast.expr:
    """What an in-place change lands on: ``x`` in ``x[i].mul_(2).add_(1)``."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and mutates(e.func.attr):
            e = e.func.value
        elif isinstance(e, (ast.Subscript, ast.Attribute)):
            e = e.value
        else:
            return e


def mutates(method: str) -> bool:
    return method in MUTATORS or (method.endswith("_") and not method.startswith("_"))


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


def einsum_letters(equation: str) -> str:
    """An einsum equation with its letters renamed in order of first appearance (``"bij,bjk"`` -> ``"abc,acd"``)."""
    names: dict[str, str] = {}
    out = []
    for ch in equation.replace(" ", ""):
        if ch.isalpha():
            names.setdefault(ch, chr(ord("a") + len(names)) if len(names) < 26 else chr(ord("A") + len(names) - 26))
            out.append(names[ch])
        else:
            out.append(ch)
    return "".join(out)


class Evaluator:
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

    # ---------------------------------------------------------------- nodes
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

    # ---------------------------------------------------------------- functions
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

    # ---------------------------------------------------------------- statements
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

    # ---------------------------------------------------------------- loops
    def loop(self, s: ast.For | ast.AsyncFor, env: dict) -> dict:
        it = self.value(self.ev(s.iter, env))
        return self.run_loop(s.target, it, s.body, env, s)

    def run_loop(self, target, it: Node, body: list[ast.stmt], env: dict, at) -> dict:
        stored = stored_names(body)
        carried = [n for n in stored if isinstance(env.get(n), Node)]
        inner = dict(env)
        slots: dict[int, int] = {}
        placeholders = {}
        for n in carried:
            slot = slots[env[n].h] = slots.get(env[n].h, -1) + 1
            inner[n] = placeholders[n] = self.mk("carry", [env[n], self.const(slot)])
        index = self.mk("item", [it, self.const(self.level)], at)
        if target is not None:
            it = self.bind_items(target, it, inner, at)
        self.level += 1
        try:
            after, _ = self.block(body, dict(inner))
        finally:
            self.level -= 1
        after = after if after is not None else inner
        values = {n: after.get(n) for n in carried if isinstance(after.get(n), Node)}
        it, values = self.direct_iteration(it, index, values, at)
        out = dict(env)
        for n in carried:
            out[n] = self.fold(it, env[n], placeholders[n], values.get(n), at)
        for n in stored:
            if n not in carried and isinstance(after.get(n), Node):
                out[n] = self.mk("last", [it, after[n]], at)
        return out

    def bind_items(self, target: ast.expr, it: Node, env: dict, at) -> Node:
        """Bind a loop's target to the items it takes; the iteration's canonical node.

        ``for a, b in zip(xs, ys)`` takes an item of ``xs`` and one of ``ys`` in lockstep, whatever their order
        in the call: its iteration is over the set {xs, ys}."""
        level = self.const(self.level)
        if it.op == "call:builtin.zip" and isinstance(target, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(it.kids) and not any(isinstance(t, ast.Starred) for t in target.elts) \
                and all(k.op[4:].isdigit() for k in it.kids):
            seqs = [k.kids[0] for k in it.kids]
            for t, xs in zip(target.elts, seqs):
                self.store(t, self.mk("item", [xs, level], at), env, at)
            return self.mk("zip", sorted_kids(set(seqs)), at)
        self.store(target, self.mk("item", [it, level], at), env, at)
        return it

    def direct_iteration(self, it: Node, index: Node, values: dict, at) -> tuple[Node, dict]:
        """``for i in range(len(xs))`` whose body reads ``i`` only as ``xs[i]`` (or ``xs[i]`` and ``ys[i]``):
        the loop over ``xs`` itself (over ``xs`` and ``ys`` in lockstep)."""
        if it.op != "call:builtin.range" or len(it.kids) != 1:
            return it, values
        length = it.kids[0].kids[0]
        if length.op != "getitem" or length.kids[0].op != "attr:shape" or not self.is_const(length.kids[1], 0):
            return it, values
        level = index.kids[1]
        memo: dict[int, Node] = {}
        seqs: set[Node] = set()

        def sub(n: Node) -> Node:
            if n.h in memo:
                return memo[n.h]
            if n.op == "getitem" and n.kids[1] == index:
                xs = sub(n.kids[0])
                seqs.add(xs)
                r = self.mk("item", [xs, level])
            elif n == index:
                raise LookupError
            else:
                kids = [sub(k) for k in n.kids]
                r = n if all(a is b for a, b in zip(kids, n.kids)) else self.mk(n.op, kids)
            memo[n.h] = r
            return r

        try:
            moved = {k: sub(v) for k, v in values.items()}
        except LookupError:
            return it, values
        if not seqs:
            return it, values
        return (next(iter(seqs)) if len(seqs) == 1 else self.mk("zip", sorted_kids(seqs), at)), moved

    def fold(self, it: Node, init: Node, carry: Node, body, at) -> Node:
        """The value a loop leaves in a name it updates: a comprehension, a sum, or the loop itself."""
        if not isinstance(body, Node) or body == carry:
            return init
        gen_conds: list[Node] = []
        if body.op == "phi" and carry in body.kids[1:]:
            cond, then, other = body.kids
            body, gen_conds = (other, [self.mk("not", [cond])]) if then == carry else (then, [cond])
        if body.op == "concat" and len(body.kids) == 2 and body.kids[0] == carry:
            tail = body.kids[1]
            gen = self.mk("gen", [it] + gen_conds)
            if tail.op == "seq" and len(tail.kids) == 1:
                return self.concat(init, self.mk("comp", [tail.kids[0], gen], at), at)
            if tail.op == "comp":
                return self.concat(init, self.mk("comp", [tail.kids[0], gen, *tail.kids[1:]], at), at)
        if body.op == "+" and carry in body.kids and self.is_const(init, 0) and not gen_conds:
            other = body.kids[0] if body.kids[1] == carry else body.kids[1]
            comp = self.mk("comp", [other, self.mk("gen", [it])], at)
            return self.mk("call:builtin.sum", [self.mk("arg:0", [comp])], at)
        return self.mk("fold", [it, init, body], at)

    def while_loop(self, s: ast.While, env: dict) -> dict:
        """``i = 0; while i < n: ...; i += 1`` is ``for i in range(n)``; any other while loop a loop on its test."""
        test, body = s.test, s.body
        counter = test.left.id if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) \
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Lt) else None
        last = body[-1] if body else None
        steps = counter is not None and self.is_const(env.get(counter), 0) and (
            (isinstance(last, ast.AugAssign) and isinstance(last.op, ast.Add) and isinstance(last.target, ast.Name)
             and last.target.id == counter and isinstance(last.value, ast.Constant) and last.value.value == 1))
        if steps and counter not in stored_names(body[:-1]):
            bound = self.value(self.ev(test.comparators[0], env))
            it = self.mk("call:builtin.range", [self.mk("arg:0", [bound])], s)
            out = self.run_loop(ast.Name(id=counter, ctx=ast.Store()), it, body[:-1], env, s)
            out[counter] = bound
            return out
        it = self.mk("while", [self.value(self.ev(test, env))], s)
        return self.run_loop(None, it, body, env, s)

    # ---------------------------------------------------------------- expressions
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

    def ev_ListComp(self, e, env):
        return self.comprehension(e, [e.elt], env)

    ev_SetComp = ev_GeneratorExp = ev_ListComp

    def ev_DictComp(self, e: ast.DictComp, env):
        return self.comprehension(e, [e.key, e.value], env)

    def comprehension(self, e, elts: list[ast.expr], env) -> Node:
        inner = dict(env)
        gens = []
        level = self.level
        try:
            for g in e.generators:
                it = self.value(self.ev(g.iter, inner))
                index = self.mk("item", [it, self.const(self.level)], e)
                it = self.bind_items(g.target, it, inner, e)
                self.level += 1
                conds = [self.value(self.ev(c, inner)) for c in g.ifs]
                gens.append((it, index, conds))
            values = [self.value(self.ev(x, inner)) for x in elts]
        finally:
            self.level = level
        elt = values[0] if len(values) == 1 else self.mk("pair", values, e)
        out = []
        for it, index, conds in gens:  # range(len(xs)) read only as xs[i]: xs itself, as the loop does
            it, moved = self.direct_iteration(it, index, {"elt": elt, **{str(i): c for i, c in enumerate(conds)}}, e)
            elt = moved["elt"]
            out.append(self.mk("gen", [it] + [moved[str(i)] for i in range(len(conds))], e))
        return self.mk("comp", [elt] + out, e)

    # ---------------------------------------------------------------- calls
    def ev_Call(self, e: ast.Call, env):
        args = [self.ev(a, env) for a in e.args]
        kwargs = {k.arg: self.ev(k.value, env) for k in e.keywords if k.arg}
        if any(k.arg is None for k in e.keywords):
            kwargs["**"] = self.mk("dstar", [self.value(self.ev(k.value, env)) for k in e.keywords if k.arg is None])
        f = e.func
        if isinstance(f, ast.Attribute):
            receiver = self.ev(f.value, env)
            if isinstance(receiver, Node) and receiver.op.startswith("mod:"):
                return self.path_call(f"{receiver.op[4:]}.{f.attr}", args, kwargs, e)
            return self.method_call(f.attr, self.value(receiver), args, kwargs, e)
        callee = self.ev(f, env)
        if isinstance(callee, (Definition, Closure)):
            return self.inline(callee, args, kwargs, e)
        if callee.op.startswith("mod:"):
            return self.path_call(callee.op[4:], args, kwargs, e)
        if callee.op.startswith("builtin:"):
            return self.builtin_call(callee.op[8:], args, kwargs, e)
        if callee.op.startswith("ex:"):
            return self.exercise_call(callee.op[3:], args, kwargs, e)
        return self.mk("callv", [callee] + self.operands(args, kwargs), e)

    def exercise_call(self, name: str, args: list, kwargs: dict, at) -> Node:
        """A call of another exercise: its operands by position in the exercise's signature, defaults left out."""
        definition = self.program.functions.get(name)
        if definition is not None and not isinstance(definition.fn, ast.Lambda):
            spec = definition.fn.args
            params = [p.arg for p in spec.posonlyargs + spec.args]
            defaults = dict(zip(params[len(params) - len(spec.defaults):], spec.defaults))
            args = list(args)
            for i, p in enumerate(params):
                if p in kwargs and i >= len(args):
                    args += [self.mk("missing")] * (i - len(args)) + [kwargs.pop(p)]
            while args and params[len(args) - 1:len(args)] and isinstance(defaults.get(params[len(args) - 1]),
                                                                         ast.Constant) \
                    and self.is_const(self.value(args[-1]), defaults[params[len(args) - 1]].value):
                args.pop()
        return self.mk(f"call:ex:{name}", self.operands(args, kwargs), at)

    def operands(self, args: list, kwargs: dict) -> list[Node]:
        return [self.mk(f"arg:{i}", [self.value(a)]) for i, a in enumerate(args)] + \
            [self.mk(f"arg:{k}", [self.value(v)]) for k, v in sorted(kwargs.items())]

    def builtin_call(self, name: str, args: list, kwargs: dict, at) -> Node:
        if name in OUTPUT:
            return self.mk("const:None")
        if name == "len" and len(args) == 1 and not kwargs:
            x = self.value(args[0])
            if x.op == "attr:shape":
                return self.mk("attr:ndim", [x.kids[0]], at)
            return self.index(self.mk("attr:shape", [x], at), self.const(0), at)
        if name in ("float", "int") and len(args) == 1 and not kwargs:
            x = self.value(args[0])
            if x.op.startswith("str:"):
                try:
                    return self.const(float(x.op[4:]), at)
                except ValueError:
                    pass
            if self.number(x) is not None:
                return self.const(float(self.number(x)) if name == "float" else int(self.number(x)), at)
        return self.mk(f"call:builtin.{name}", self.operands(args, kwargs), at)

    def path_call(self, path: str, args: list, kwargs: dict, at) -> Node:
        if path.startswith(("torch.", "numpy.")) or path == "torch":
            return self.op_call(op_name(path), args, kwargs, at)
        if path.startswith("builtins."):
            return self.builtin_call(path[9:], args, kwargs, at)
        return self.mk(f"call:{path}", self.operands(args, kwargs), at)

    def method_call(self, method: str, receiver: Node, args: list, kwargs: dict, at) -> Node:
        if method == "size":
            shape = self.mk("attr:shape", [receiver], at)
            dim = args[0] if args else kwargs.get("dim")
            return shape if dim is None else self.index(shape, self.value(dim), at)
        if method in ("dim", "ndimension") and not args:
            return self.mk("attr:ndim", [receiver], at)
        if method in ("view_as", "reshape_as", "expand_as") and len(args) == 1:
            shape = self.mk("attr:shape", [self.value(args[0])], at)
            return self.op_call(method[:-3], [receiver, shape], {}, at)
        if method.endswith("_") and not method.startswith("_"):
            method = method[:-1]
        return self.op_call(op_name(method), [receiver] + args, kwargs, at)

    def op_call(self, name: str, args: list, kwargs: dict, at) -> Node:
        """A tensor op in its one spelling (:mod:`tools.similarity.spelling`)."""
        args = [self.value(a) for a in args]
        kwargs = {k: self.value(v) for k, v in kwargs.items()}
        if name in IDENTITIES and len(args) == 1 and not kwargs:
            return args[0]
        if name in SHAPE_ARGUMENT:
            start = SHAPE_ARGUMENT[name]
            shape = args[start:]
            if len(shape) > 1 or (len(shape) == 1 and self.number(shape[0]) is not None):
                args = args[:start] + [self.mk("seq", shape, at)]
        if name == "einsum" and args:
            if args[0].op.startswith("str:"):
                args[0] = self.mk("str:" + einsum_letters(args[0].op[4:]), (), at)
            if len(args) != 2 or args[1].op != "seq":
                args = [args[0], self.mk("seq", args[1:], at)]
        if name == "clamp" and len(args) == 1 and set(kwargs) in ({"min"}, {"max"}):
            name, args = f"clamp_{next(iter(kwargs))}", args + [next(iter(kwargs.values()))]
            kwargs = {}
        if name == "transpose" and len(args) == 3 and not kwargs:
            dims = [self.number(a) for a in args[1:]]
            if all(isinstance(d, int) for d in dims) and dims[0] > dims[1]:
                args = [args[0], args[2], args[1]]
        if name in OPERATORS and len(args) == 2 and not kwargs:
            return self.binop(OPERATORS[name], args[0], args[1], at)
        if name in COMPARISONS and len(args) == 2 and not kwargs:
            return self.compare(COMPARISONS[name], args[0], args[1], at)
        if name in LOGICAL and len(args) == 2 and not kwargs:
            return self.binop(LOGICAL[name], args[0], args[1], at)
        if name in ("logical_not", "bitwise_not") and len(args) == 1 and not kwargs:
            return args[0].kids[0] if args[0].op == "~" else self.mk("~", [args[0]], at)
        if name in FACTORIES_LIKE and len(args) >= 2 and args[1] == self.mk("attr:shape", [args[0]]):
            name, args = FACTORIES_LIKE[name], [args[0]] + args[2:]
        if name == "log" and len(args) == 1 and not kwargs and args[0].op == "call:softmax":
            name, args, kwargs = "log_softmax", [], {k.op[4:]: k.kids[0] for k in args[0].kids}
        bound = bind(name, args, kwargs, lambda value, default: value.op == constant_label(default),
                     lambda value: self.number(value) is not None)
        return self.mk(f"call:{name}", [self.mk(f"arg:{k}", [v]) for k, v in bound], at)


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
