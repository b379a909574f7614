"""Disguises applied by a program: class B's copies are made from a learner's code, not written by hand.

Each disguise takes a :class:`~tests.grading.similarity.planted.Submission` and a seeded
``random.Random`` and returns the disguised copy (the code still computes the same thing, so the copy
still passes the hidden checks), or None where it finds nothing to change:

* ``rename``: every local name of every function (nested functions' too) becomes another word, a builtin's
  name where the function does not use that builtin;
* ``dead``: after assignments, statements whose values nothing uses, and ``if False:`` blocks;
* ``reorder``: neighbouring statements that do not depend on each other swapped;
* ``respell``: a tensor method called as a torch function or the other way round, ``dim``/``keepdim``
  between keyword and position, ``.shape[i]`` and ``.size(i)``, ``len(x)`` and ``x.shape[0]``;
* ``extract``: the value of an assignment moved into a new function (in the cell or an added one);
* ``inline``: a helper of one ``return`` written out where it is called;
* ``loops``: an appending loop as a comprehension, and a comprehension as an appending loop;
* ``move``: every exercise written in a function of an added cell, the solution cell calling it.
"""

from __future__ import annotations

import ast
import builtins
import copy
import random

import torch

from tests.grading.similarity.planted import Submission

MODULES = {"torch", "F", "math", "np", "nn"}
WORDS = ["acc", "alpha", "arr", "base", "blob", "buf", "cur", "data", "delta", "elem", "entry", "foo", "frame",
         "grid2", "hold", "item", "kappa", "left", "mat", "node", "obj", "omega", "part", "pivot", "prev", "qty",
         "raw", "res", "right", "row2", "scratch", "slab", "stash", "tau", "temp", "tile2", "tmp", "unit", "val",
         "vec", "work", "zeta"]
BUILTIN_WORDS = ["input", "max", "sum", "type", "min", "all", "any", "map", "iter", "next", "filter", "id",
                 "object", "format", "hash", "vars", "dir", "list", "tuple", "range", "zip", "len", "abs", "round"]
#: tensor ops that are a torch function and a Tensor method with the same arguments after the tensor
METHODS = sorted(n for n in (
    "sum", "mean", "amax", "amin", "argmax", "exp", "log", "sqrt", "abs", "matmul", "masked_fill", "transpose",
    "flatten", "unsqueeze", "squeeze", "softmax", "log_softmax", "logsumexp", "gather", "clamp_min", "isfinite",
    "tril", "triu", "logical_not", "any", "movedim", "index_select", "max", "min", "reshape", "permute", "div",
    "mul", "add", "unflatten", "chunk", "split", "unbind", "take_along_dim", "isneginf", "nan_to_num")
    if hasattr(torch, n) and hasattr(torch.Tensor, n))
#: ops whose argument after the tensor is ``dim``; of those, the ones whose next is ``keepdim``
DIM_SECOND = {"sum", "mean", "amax", "amin", "argmax", "softmax", "log_softmax", "logsumexp", "any", "unsqueeze",
              "squeeze", "max", "min", "gather", "index_select"}
KEEPDIM_THIRD = {"sum", "mean", "amax", "amin", "argmax", "logsumexp", "any", "max", "min"}
MUTATORS = {"append", "extend", "insert", "pop"}
#: the exercises' tensor parameters (never renamed): len(x) is x.shape[0] for these, not for a list of blocks
TENSORS = {"q", "k", "v", "scores", "images", "patches", "weight", "bias", "cls_token", "dist_token", "pos_embed",
           "cls_logits", "dist_logits", "teacher_logits", "labels"}


def parse(sub: Submission) -> tuple[dict[str, ast.Module], list[tuple[str, ast.Module]]]:
    return ({k: ast.parse(v) for k, v in sub.cells.items()}, [(a, ast.parse(v)) for a, v in sub.added])


def unparse(cells: dict[str, ast.Module], added: list[tuple[str, ast.Module]]) -> Submission:
    fix = ast.fix_missing_locations
    return Submission({k: "\n" + ast.unparse(fix(v)) + "\n" for k, v in cells.items()},
                      [(a, "\n" + ast.unparse(fix(v)) + "\n") for a, v in added])


def trees(cells, added) -> list[ast.Module]:
    return list(cells.values()) + [t for _, t in added]


def top_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [s for s in tree.body if isinstance(s, ast.FunctionDef)]


def names_in(node: ast.AST, ctx=None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and (ctx is None or isinstance(n.ctx, ctx))}


def fresh(rng: random.Random, taken: set[str], pool=WORDS) -> str:
    options = [w for w in pool if w not in taken]
    name = rng.choice(options) if options else f"v{len(taken)}"
    taken.add(name)
    return name


# --------------------------------------------------------------------------
def rename(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    changed = False
    for tree in trees(cells, added):
        for fn in top_functions(tree):
            params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
            local = set(names_in(fn, ast.Store))
            for node in ast.walk(fn):
                if node is not fn and isinstance(node, (ast.FunctionDef, ast.Lambda)):
                    local |= {a.arg for a in node.args.args}
                    if isinstance(node, ast.FunctionDef):
                        local.add(node.name)
            local -= params
            used_globals = names_in(fn, ast.Load) - local - params
            taken = set(local) | params | used_globals | MODULES
            pool = WORDS + [b for b in BUILTIN_WORDS if b not in used_globals]
            mapping = {name: fresh(rng, taken, pool) for name in sorted(local)}
            if not mapping:
                continue
            changed = True
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and node.id in mapping:
                    node.id = mapping[node.id]
                elif isinstance(node, ast.arg) and node.arg in mapping:
                    node.arg = mapping[node.arg]
                elif node is not fn and isinstance(node, ast.FunctionDef) and node.name in mapping:
                    node.name = mapping[node.name]
    return unparse(cells, added) if changed else None


DEAD = ["{t} = {v}", "{t} = [{v}, {v}]", "{t} = str(type({v}))", "{t} = id({v})", "{t} = ({v},)",
        "if False:\n    {v} = {v}"]


def dead(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    changed = False

    def visit(body: list[ast.stmt], taken: set[str]) -> list[ast.stmt]:
        nonlocal changed
        out = []
        for s in body:
            for field in ("body", "orelse"):
                if isinstance(s, (ast.For, ast.If, ast.While, ast.With)) and getattr(s, field, None):
                    setattr(s, field, visit(getattr(s, field), taken))
            out.append(s)
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                    and rng.random() < 0.6:
                code = rng.choice(DEAD).format(t=fresh(rng, taken), v=s.targets[0].id)
                out.extend(ast.parse(code).body)
                changed = True
        return out

    for tree in trees(cells, added):
        for fn in top_functions(tree):
            fn.body = visit(fn.body, set(names_in(fn)) | MODULES | {a.arg for a in fn.args.args})
    return unparse(cells, added) if changed else None


def reads_writes(s: ast.stmt) -> tuple[set[str], set[str]]:
    reads, writes = names_in(s, ast.Load), names_in(s, ast.Store)
    for n in ast.walk(s):
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store):
            writes |= names_in(n.value)
        if isinstance(n, ast.AugAssign):
            writes |= names_in(n.target)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and (n.func.attr in MUTATORS or n.func.attr.endswith("_")):
            writes |= names_in(n.func.value)
    return reads, writes


def reorder(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    changed = False

    def visit(body: list[ast.stmt]) -> None:
        nonlocal changed
        i = 0
        while i + 1 < len(body):
            a, b = body[i], body[i + 1]
            for s in (a,):
                for field in ("body", "orelse"):
                    if isinstance(s, (ast.For, ast.If, ast.While, ast.With)) and getattr(s, field, None):
                        visit(getattr(s, field))
            simple = (ast.Assign, ast.AugAssign, ast.Expr)
            if isinstance(a, simple) and isinstance(b, simple) and not (
                    isinstance(a, ast.Expr) and isinstance(a.value, ast.Constant)):
                ra, wa = reads_writes(a)
                rb, wb = reads_writes(b)
                if not (wa & (rb | wb)) and not (wb & ra) and rng.random() < 0.8:
                    body[i], body[i + 1] = b, a
                    changed = True
                    i += 2
                    continue
            i += 1

    for tree in trees(cells, added):
        for fn in top_functions(tree):
            visit(fn.body)
    return unparse(cells, added) if changed else None


class Respell(ast.NodeTransformer):
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.changed = False

    def coin(self) -> bool:
        hit = self.rng.random() < 0.6
        self.changed = self.changed or hit
        return hit

    def visit_Subscript(self, node: ast.Subscript):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int) and self.coin():
            if node.slice.value == 0 and isinstance(node.value.value, ast.Name) and node.value.value.id in TENSORS \
                    and self.rng.random() < 0.5:
                return ast.Call(ast.Name("len", ast.Load()), [node.value.value], [])
            return ast.Call(ast.Attribute(node.value.value, "size", ast.Load()), [node.slice], [])
        return node

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "size" and len(node.args) == 1 and not node.keywords \
                and self.coin():
            return ast.Subscript(ast.Attribute(f.value, "shape", ast.Load()), node.args[0], ast.Load())
        if isinstance(f, ast.Name) and f.id == "len" and len(node.args) == 1 and isinstance(node.args[0], ast.Name) \
                and node.args[0].id in TENSORS and self.coin():
            return ast.Subscript(ast.Attribute(node.args[0], "shape", ast.Load()), ast.Constant(0), ast.Load())
        if not isinstance(f, ast.Attribute) or f.attr not in METHODS or any(isinstance(a, ast.Starred)
                                                                            for a in node.args):
            return node
        module = isinstance(f.value, ast.Name) and f.value.id in MODULES
        if module and f.value.id in ("torch", "F") and node.args and self.coin():  # function -> method
            receiver, rest = node.args[0], node.args[1:]
            if f.attr in ("reshape", "permute") and len(rest) == 1 and isinstance(rest[0], ast.Tuple):
                rest = rest[0].elts
            node = ast.Call(ast.Attribute(receiver, f.attr, ast.Load()), rest, node.keywords)
        elif not module and self.coin():  # method -> function
            rest = node.args
            if f.attr in ("reshape", "permute") and len(rest) > 1:
                rest = [ast.Tuple(rest, ast.Load())]
            node = ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), f.attr, ast.Load()), [f.value] + rest,
                            node.keywords)
        return self.dim_spelling(node)

    def dim_spelling(self, node: ast.Call) -> ast.Call:
        f = node.func
        method = not (isinstance(f.value, ast.Name) and f.value.id in MODULES)
        op = f.attr
        before = 0 if method else 1  # arguments before dim
        keywords = {k.arg: k for k in node.keywords}
        if op in DIM_SECOND and len(node.args) == before and "dim" in keywords and self.coin():
            node.args.append(keywords.pop("dim").value)
            if op in KEEPDIM_THIRD and "keepdim" in keywords and self.rng.random() < 0.5:
                node.args.append(keywords.pop("keepdim").value)
            node.keywords = list(keywords.values())
        elif op in DIM_SECOND and len(node.args) == before + 1 and not keywords and self.coin():
            node.keywords = [ast.keyword("dim", node.args.pop())]
        return node


def respell(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    t = Respell(rng)
    for tree in trees(cells, added):
        for fn in top_functions(tree):
            t.visit(fn)
    return unparse(cells, added) if t.changed else None


def extract(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    changed = False
    taken = {n for tree in trees(cells, added) for n in names_in(tree)} | {
        f.name for tree in trees(cells, added) for f in top_functions(tree)}
    new_added = []
    for grade_id, tree in list(cells.items()):
        for fn in top_functions(tree):
            params = {a.arg for a in fn.args.args}
            nested = {n.name for n in ast.walk(fn) if n is not fn and isinstance(n, ast.FunctionDef)}
            local = names_in(fn, ast.Store) | params | nested  # a nested function is passed to the helper
            candidates = [s for s in fn.body if isinstance(s, (ast.Assign, ast.Return)) and s.value is not None
                          and sum(1 for _ in ast.walk(s.value)) >= 6 and any(isinstance(n, ast.Call)
                                                                               for n in ast.walk(s.value))
                          and not any(isinstance(n, (ast.ListComp, ast.GeneratorExp, ast.Lambda, ast.DictComp))
                                      for n in ast.walk(s.value))]
            if not candidates or rng.random() < 0.2:
                continue
            s = rng.choice(candidates)
            free = sorted(names_in(s.value, ast.Load) & local)
            name = fresh(rng, taken, ["_" + w for w in WORDS] + [w + "_part" for w in WORDS])
            helper = ast.FunctionDef(name, ast.arguments([], [ast.arg(v) for v in free], None, [], [], None, []),
                                     [ast.Return(copy.deepcopy(s.value))], [], None)
            s.value = ast.Call(ast.Name(name, ast.Load()), [ast.Name(v, ast.Load()) for v in free], [])
            if rng.random() < 0.5:
                tree.body.insert(tree.body.index(fn), helper)
            else:
                new_added.append((grade_id, ast.Module([helper], [])))
            changed = True
    return unparse(cells, added + new_added) if changed else None


def inline(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    helpers = {}
    for tree in trees(cells, added):
        for fn in top_functions(tree):
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if fn.name not in cells and len(body) == 1 and isinstance(body[0], ast.Return) \
                    and not fn.args.vararg and not fn.args.kwonlyargs and not fn.args.defaults:
                helpers[fn.name] = fn
    changed = False

    class Inline(ast.NodeTransformer):
        def visit_Call(self, node):
            nonlocal changed
            self.generic_visit(node)
            fn = helpers.get(node.func.id) if isinstance(node.func, ast.Name) else None
            if fn is None or node.keywords or len(node.args) != len(fn.args.args):
                return node
            body = [s for s in fn.body if isinstance(s, ast.Return)][0].value
            mapping = {a.arg: v for a, v in zip(fn.args.args, node.args)}

            class Sub(ast.NodeTransformer):
                def visit_Name(self, n):
                    return copy.deepcopy(mapping[n.id]) if n.id in mapping and isinstance(n.ctx, ast.Load) else n

            changed = True
            return Sub().visit(copy.deepcopy(body))

    for name, tree in cells.items():
        for fn in top_functions(tree):
            if fn.name == name:
                Inline().visit(fn)
    return unparse(cells, added) if changed else None


def loops(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    changed = False

    def appending(loop: ast.stmt, acc: str):
        """(element, generators) of a for loop (or two nested) whose only statement appends to acc."""
        gens = []
        while isinstance(loop, ast.For) and len(loop.body) == 1 and not loop.orelse:
            gens.append(ast.comprehension(loop.target, loop.iter, [], 0))
            loop = loop.body[0]
        if gens and isinstance(loop, ast.Expr) and isinstance(loop.value, ast.Call) \
                and isinstance(loop.value.func, ast.Attribute) and loop.value.func.attr == "append" \
                and isinstance(loop.value.func.value, ast.Name) and loop.value.func.value.id == acc \
                and len(loop.value.args) == 1:
            return loop.value.args[0], gens
        return None

    def visit(body: list[ast.stmt]) -> list[ast.stmt]:
        nonlocal changed
        out: list[ast.stmt] = []
        for s in body:
            prev = out[-1] if out else None
            if isinstance(prev, ast.Assign) and len(prev.targets) == 1 and isinstance(prev.targets[0], ast.Name) \
                    and isinstance(prev.value, ast.List) and not prev.value.elts and isinstance(s, ast.For):
                found = appending(s, prev.targets[0].id)
                if found and rng.random() < 0.9:
                    elt, gens = found
                    out[-1] = ast.Assign([prev.targets[0]], ast.ListComp(elt, gens))
                    changed = True
                    continue
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                    and isinstance(s.value, ast.ListComp) and all(not g.ifs for g in s.value.generators) \
                    and rng.random() < 0.9:
                acc = s.targets[0].id
                inner: ast.stmt = ast.Expr(ast.Call(ast.Attribute(ast.Name(acc, ast.Load()), "append", ast.Load()),
                                                    [s.value.elt], []))
                for g in reversed(s.value.generators):
                    inner = ast.For(g.target, g.iter, [inner], [])
                out += [ast.Assign([ast.Name(acc, ast.Store())], ast.List([], ast.Load())), inner]
                changed = True
                continue
            out.append(s)
        return out

    for tree in trees(cells, added):
        for fn in top_functions(tree):
            fn.body = visit(fn.body)
    return unparse(cells, added) if changed else None


def move(sub: Submission, rng: random.Random) -> Submission | None:
    cells, added = parse(sub)
    taken = {n for tree in trees(cells, added) for n in names_in(tree)} | {
        f.name for tree in trees(cells, added) for f in top_functions(tree)}
    new_added = []
    for grade_id, tree in cells.items():
        for fn in top_functions(tree):
            if fn.name != grade_id:
                continue
            impl = copy.deepcopy(fn)
            impl.name = fresh(rng, taken, ["_" + w for w in WORDS] + [w + "_impl" for w in WORDS])
            fn.body = [ast.Return(ast.Call(ast.Name(impl.name, ast.Load()),
                                           [ast.Name(a.arg, ast.Load()) for a in fn.args.args], []))]
            new_added.append((grade_id, ast.Module([impl], [])))
    return unparse(cells, added + new_added) if new_added else None


DISGUISES = {f.__name__: f for f in (rename, dead, reorder, respell, extract, inline, loops, move)}


def disguise(sub: Submission, names: list[str], rng: random.Random) -> tuple[Submission, list[str]]:
    """The submission under each named disguise in turn, and the names of those that changed something."""
    applied = []
    for name in names:
        out = DISGUISES[name](sub, rng)
        if out is not None:
            sub = out
            applied.append(name)
    return sub, applied


def exercises_only(sub: Submission, keep: set[str]) -> Submission:
    """The part of a submission that is the named exercises (and added cells that follow them)."""
    return Submission({k: v for k, v in sub.cells.items() if k in keep}, [a for a in sub.added if a[0] in keep])


assert not set(BUILTIN_WORDS) - set(dir(builtins))
