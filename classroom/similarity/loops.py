"""Loops as the values they leave (a mixin of the evaluator).

A loop is run once on symbolic items: each name it updates is bound to a
placeholder for its value before an iteration, and what the body leaves there
is folded into the loop's value. A list that a loop appends to is the
comprehension that builds it (``[e for x in xs]``); nested loops are one
comprehension with two generators; a total a loop adds to is ``sum`` of a
generator. ``for a, b in zip(xs, ys)`` takes items of ``xs`` and ``ys`` in
lockstep, in whatever order they are named; ``for i in range(len(xs))``
reading ``i`` only as ``xs[i]`` (and ``ys[i]``) is the loop over ``xs`` (and
``ys``); ``i = 0; while i < n: ...; i += 1`` is ``for i in range(n)``.
"""

from __future__ import annotations

import ast

from classroom.similarity.ir import Node, sorted_kids
from classroom.similarity.program import stored_names


class Loops:
    """The evaluator's loops and comprehensions (see the module's text)."""

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
