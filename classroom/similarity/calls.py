"""Calls as values (a mixin of the evaluator): the learner's helpers inlined, another exercise kept as a
call, a torch op in its one spelling (:mod:`classroom.similarity.spelling`), ``print`` and its kind dropped."""

from __future__ import annotations

import ast

from classroom.similarity.ir import Node
from classroom.similarity.program import OUTPUT, Closure, Definition
from classroom.similarity.spelling import (
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


class Calls:
    """The evaluator's calls (see the module's text)."""

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
        """A tensor op in its one spelling (:mod:`classroom.similarity.spelling`)."""
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
