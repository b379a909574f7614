"""What a reader of the book sees of a chapter: every result on the page, once, in a learner's words.

The chapter notebooks keep their checking out of sight (``tools/notebooks.py``: claims, checks and quotes sit
in cells the book removes). This module checks the other side of that bargain, on the stored notebooks and
the chapters' first pages, without running anything:

* **The evidence shows** (:func:`hidden_evidence`). A visible code cell that computes a value a hidden check
  or claim later asserts on must let the reader see it: the cell, or a visible cell after it and before the
  check, prints, displays or plots something computed from that value, and has a visible output. A claim
  whose value the prose quotes (``glue=``, or :func:`course_lib.experiment.quote` of the same expression,
  shown with ``{glue:text}``) shows it in the prose instead.
* **A finding appears once** (:func:`finding_boxes`): in the prose, with its glued value; a claim's folded
  box (``course_lib.experiment.Claim.html``) stays out of the book (its cell is tagged ``remove-cell``;
  nbval still compares it, and ``make seeds`` still logs it).
* **Counts are integers** (:func:`float_counts`): no whole number printed as a float before what it counts
  ("4.0 of the 4 runs", "41.0 tokens") in what the reader sees: the prose with its glued values rendered as
  the book renders them, and the outputs the book shows.
* **No maintainer language** (:func:`maintainer_words`): none of :data:`MAINTAINER_PHRASES` in the prose,
  the outputs or the comments of visible code, except the few uses :data:`ALLOWED` lists, where the book
  discusses the word itself.
* **Alt text says what the figure shows** (:func:`alt_numbers`): every number in a figure's alt text is a
  number of the notebook's data: a literal of its code (a parameter of the experiment), or a value it printed,
  displayed or glued, at the precision the alt text gives it.
* **A chapter's first page says what its pages show** (:func:`index_problems`): every number in a summary
  of a page (a bullet of "What this chapter covers" that starts with ``{doc}`page```) is glued from that page
  (``{glue:text}`page.ipynb::name```) or is a number that page shows its reader.

    python -m tools.reading            # every chapter: what breaks these rules (exit 1 if anything)
    python -m tools.reading chapters/02-attention
"""

from __future__ import annotations

import argparse
import ast
import html
import io
import math
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools import notebooks
from tools.course_book import ROOT

#: tags that keep a cell's code out of the book, and tags that keep its outputs out
REMOVED_INPUT = set(notebooks.REMOVED_INPUT)
REMOVED_OUTPUT = set(notebooks.REMOVED_OUTPUT)
#: course_lib.experiment's helpers: the checking ones, and the one that records a value for the prose
CHECKING = {"claim", "check"}
QUOTING = "quote"
GLUE_MIME = "application/papermill.record/text/plain"
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
#: the set-up cell's tag (imports, the seed, the device): the book folds the whole cell as the page's machinery,
#: and its comments may name it (tools/notebooks.py's HARNESS_TAGS)
SET_UP = {"hide-cell", "hide_cell"} & set(notebooks.FOLDED_INPUT)


# ---- reading a notebook as the book shows it ---------------------------------------------------------------

def tags(cell) -> set[str]:
    return set(cell.metadata.get("tags", []))


def code_visible(cell) -> bool:
    return cell.cell_type == "code" and not tags(cell) & REMOVED_INPUT


def outputs_visible(cell) -> bool:
    return cell.cell_type == "code" and not tags(cell) & REMOVED_OUTPUT


def glued(nb) -> dict[str, str]:
    """Every value the notebook records for its prose (MyST-NB glue), as its stored ``text/plain``."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name and GLUE_MIME in out.get("data", {}):
                found[name] = "".join(out["data"][GLUE_MIME])
    return found


#: a glue role in MyST Markdown: {glue}`name`, {glue:text}`name:.2f`, {glue:text}`page.ipynb::name:.2f`
GLUE_ROLE = re.compile(r"\{glue(?::(?:text|any|md))?\}`([^`]+)`")


def glue_reference(text: str) -> tuple[str, str, str]:
    """``(page, name, format)`` of a glue role's content, read as MyST-NB reads it (``page`` '' for this one):
    the format after the last colon, then the page before ``::`` (so a glue from another page needs a format)."""
    key_format = text.rsplit(":", 1)
    key, fmt = key_format if len(key_format) == 2 else (key_format[0], "s")
    page, _, key = key.rpartition("::")
    return page, key, fmt


def render_glue(text: str, values: dict[str, str], pages: dict[str, dict[str, str]] | None = None) -> str:
    """``text`` with each glue role replaced by what the book prints for it (MyST-NB's own formatting)."""
    from myst_nb.core.variables import format_plain_text

    def paste(match: re.Match) -> str:
        page, key, fmt = glue_reference(match.group(1))
        source = values if not page else (pages or {}).get(page, {})
        if key not in source:
            return f"⟨no glue {match.group(1)}⟩"
        try:
            return format_plain_text(source[key], fmt)
        except (ValueError, TypeError):
            return f"⟨glue {match.group(1)} does not format⟩"

    return GLUE_ROLE.sub(paste, text)


def output_text(out) -> str:
    """The text a reader sees of one stored output ('' for a glue record or an image)."""
    if out.get("output_type") == "stream":
        return "".join(out.get("text", ""))
    data = out.get("data", {})
    if GLUE_MIME in data or any(m in data for m in IMAGE_MIMES):
        return ""
    if "text/html" in data:
        page = "".join(data["text/html"])
        return html.unescape(re.sub(r"<[^>]+>", " ", page))
    return "".join(data.get("text/plain", ""))


def shows_output(cell) -> bool:
    """Whether the book shows the reader an output of this code cell (text, a table or a figure)."""
    return outputs_visible(cell) and any(output_text(o).strip() or any(m in o.get("data", {}) for m in IMAGE_MIMES)
                                         for o in cell.get("outputs", []))


@dataclass(frozen=True)
class Shown:
    """One piece of what the reader sees: where (cell index, what kind) and its text."""

    cell: int
    kind: str  # "prose", "output" or "comment"
    text: str


def reader_view(nb) -> list[Shown]:
    """What a reader of the book sees of a notebook: its prose with the glued values pasted, the outputs the
    book shows, and the comments of the code it shows."""
    values = glued(nb)
    seen = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            seen.append(Shown(i, "prose", render_glue(cell.source, values)))
        elif cell.cell_type == "code":
            if outputs_visible(cell):
                seen += [Shown(i, "output", t) for t in map(output_text, cell.get("outputs", [])) if t.strip()]
            if code_visible(cell) and not tags(cell) & SET_UP:
                seen += [Shown(i, "comment", c) for c in comments(cell.source)]
    return seen


def comments(source: str) -> list[str]:
    """The comments of a cell's code (IPython magics and shell lines skipped)."""
    lines = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        return [tok.string.lstrip("# ") for tok in tokenize.generate_tokens(io.StringIO(lines).readline)
                if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def parse(source: str) -> ast.Module | None:
    lines = ["pass  # " + line if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


# ---- (a) the evidence shows --------------------------------------------------------------------------------

#: names a check may read that are no result of the page: Python's and the notebooks' usual modules
NOT_DATA = {"torch", "math", "np", "numpy", "F", "nn", "plt", "random", "itertools", "functools", "collections",
            "device", "SEED", "True", "False", "None"} | set(dir(__builtins__) if isinstance(__builtins__, dict)
                                                               else dir(__import__("builtins")))
#: calls that show their arguments to the reader
SHOWING_NAMES = {"print", "display", "pprint", "Markdown", "HTML"}
#: methods of a Matplotlib axes or figure, and of pyplot, that draw data
DRAWING = {"plot", "imshow", "matshow", "bar", "barh", "scatter", "hist", "errorbar", "fill_between", "loglog",
           "semilogx", "semilogy", "axhline", "axvline", "axhspan", "axvspan", "text", "annotate", "table", "step",
           "stem", "pcolormesh", "pcolor", "contour", "contourf", "quiver", "arrow", "boxplot", "violinplot",
           "set_xticklabels", "set_yticklabels", "set_title", "set_xticks", "set_yticks", "legend", "hlines",
           "vlines", "pie", "stairs", "heatmap", "set_xlabel", "set_ylabel", "suptitle", "axline"}
#: calls that make a random stream or a device, not a result
NOT_RESULTS = {"generator", "Generator", "device", "manual_seed"}


def _root(node) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def reads(node) -> set[str]:
    """The names an expression (or statement) reads, but those of :data:`NOT_DATA`."""
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - NOT_DATA


def _targets(target) -> set[str]:
    """The names a target binds or changes (``x``, ``x, y``, ``x[i]``, ``x.attr``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_targets(t) for t in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _targets(target.value)
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        return {_root(target)} - {""}
    return set()


def _is_literal(node) -> bool:
    """A value the code spells out (the reader sees it in the source): constants, containers of them,
    arithmetic on them, ``torch.tensor(...)`` of them, ``range``/``torch.arange`` of them."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or _is_literal(k) for k in node.keys) and all(_is_literal(v) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_literal(node.left) and _is_literal(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        if name in {"tensor", "range", "arange", "linspace", "zeros", "ones", "eye"}:
            return all(_is_literal(a) for a in node.args)
    return False


@dataclass
class Binding:
    """A statement that binds or changes ``names``, reading ``inputs``; ``kind`` says whether it makes a result."""

    names: set[str]
    inputs: set[str]
    kind: str  # "result", "literal" (spelled out in the code), "code" (a def, class, import, stream, device)
    line: int


def bindings(tree: ast.Module) -> list[Binding]:
    """What each statement of a cell binds, in order (into loops, ``if``, ``with`` and ``try``; not into ``def``)."""
    found: list[Binding] = []

    def kind_of(value) -> str:
        if _is_literal(value):
            return "literal"
        if isinstance(value, ast.Call) and (getattr(value.func, "id", None) in NOT_RESULTS
                                            or getattr(value.func, "attr", None) in NOT_RESULTS):
            return "code"
        if isinstance(value, ast.Lambda):
            return "code"
        return "result"

    def visit(stmts, outer: set[str]):
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append(Binding({s.name}, set(), "code", s.lineno))
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                found.append(Binding({(a.asname or a.name).split(".")[0] for a in s.names}, set(), "code", s.lineno))
            elif isinstance(s, ast.Assign):
                names = set().union(*(_targets(t) for t in s.targets))
                inputs = reads(s.value) | outer | {n for t in s.targets if not isinstance(t, ast.Name)
                                                   for n in reads(t)}
                found.append(Binding(names, inputs, kind_of(s.value), s.lineno))
            elif isinstance(s, (ast.AugAssign, ast.AnnAssign)) and s.value is not None:
                found.append(Binding(_targets(s.target), reads(s.value) | reads(s.target) | outer,
                                     "result", s.lineno))
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                loop = reads(s.iter)
                found.append(Binding(_targets(s.target), loop | outer,
                                     "literal" if _is_literal(s.iter) else "result", s.lineno))
                visit(s.body, outer | loop)
                visit(s.orelse, outer)
            elif isinstance(s, (ast.While, ast.If)):
                visit(s.body, outer | reads(s.test))
                visit(s.orelse, outer | reads(s.test))
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                for item in s.items:
                    if item.optional_vars is not None:
                        found.append(Binding(_targets(item.optional_vars), reads(item.context_expr) | outer,
                                             "result", s.lineno))
                visit(s.body, outer)
            elif isinstance(s, ast.Try):
                for block in (s.body, s.orelse, s.finalbody, *[h.body for h in s.handlers]):
                    visit(block, outer)
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute):
                # x.append(y), x.update(...), x.add_(...): the call changes x with what it is given
                root = _root(s.value.func.value)
                args = [*s.value.args, *(k.value for k in s.value.keywords)]
                if root and root not in NOT_DATA and args:
                    found.append(Binding({root}, set().union(*map(reads, args)) | outer, "result", s.lineno))
    visit(tree.body, set())
    return found


def _showing_functions(trees: list[ast.Module]) -> set[str]:
    """Functions the notebook defines that print, display or draw what they are given."""
    found = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)) and any(
                    isinstance(c, ast.Call) and _shows(c, set()) for c in ast.walk(node)):
                if isinstance(node, ast.FunctionDef):
                    found.add(node.name)
    return found


def _shows(call: ast.Call, showing: set[str]) -> bool:
    """Whether a call shows the reader its arguments: print/display, a drawing method, a showing function."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in SHOWING_NAMES or func.id in showing
    if isinstance(func, ast.Attribute):
        return func.attr in DRAWING or (func.attr == "show" and _root(func) in {"plt", "fig"})
    return False


def _shown_names(cell_tree: ast.Module, tainted: set[str], showing: set[str],
                 last_shown: bool) -> tuple[bool, set[str]]:
    """Walk a visible cell's statements in order: whether it shows something computed from ``tainted``, and
    the names computed from them by its end."""
    tainted = set(tainted)
    shown = False
    for b_stmt in _flat(cell_tree.body):
        if not isinstance(b_stmt, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try)):
            calls = [c for c in ast.walk(b_stmt) if isinstance(c, ast.Call) and _shows(c, showing)]
            if any(reads(c) & tainted for c in calls):
                shown = True
        tree = ast.Module(body=[b_stmt], type_ignores=[])
        for b in bindings(tree):
            if b.inputs & tainted:
                tainted |= b.names
    if last_shown and cell_tree.body and isinstance(cell_tree.body[-1], ast.Expr):
        if reads(cell_tree.body[-1]) & tainted:
            shown = True
    return shown, tainted


def _flat(stmts):
    """The statements of a block and of the blocks inside it (not inside a def), in order."""
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield s
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(s, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _flat(inner)
        for handler in getattr(s, "handlers", []):
            yield from _flat(handler.body)


def _prose_glue(nb) -> set[str]:
    """The glue names the notebook's prose shows."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for match in GLUE_ROLE.finditer(cell.source):
                page, key, _ = glue_reference(match.group(1))
                if not page:
                    names.add(key)
    return names


def _checked_values(call: ast.Call) -> list[ast.AST]:
    """The measured values a claim or check compares (and the other numbers a claim's sentence shows)."""
    values = call.args[1:2] + [k.value for k in call.keywords if k.arg == "value"]
    if getattr(call.func, "id", "") == "claim":
        values += [k.value for k in call.keywords if k.arg not in {"glue", "value"}]
    return values


def _statement(call: ast.Call) -> str:
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr):
        return "".join(v.value for v in first.values if isinstance(v, ast.Constant))
    return ast.unparse(first) if first is not None else "?"


def hidden_evidence(nb) -> list[str]:
    """Visible code cells that compute a value a hidden check or claim asserts on, and show the reader nothing
    computed from it before that check (see the module's docstring)."""
    cells = [(i, c, parse(c.source)) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    cells = [(i, c, t) for i, c, t in cells if t is not None]
    binds = {i: bindings(t) for i, _, t in cells}
    showing = _showing_functions([t for _, c, t in cells if code_visible(c)])
    in_prose = _prose_glue(nb)
    quoted = set()  # the expressions the prose shows through quote(name, expr) or claim(..., glue=name)
    for _, _, tree in cells:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", "")
            if name == QUOTING and len(node.args) == 2 and isinstance(node.args[0], ast.Constant):
                glue, value = node.args[0].value, node.args[1]
            elif name == "claim" and len(node.args) >= 2:
                glue = next((k.value.value for k in node.keywords if k.arg == "glue"
                             and isinstance(k.value, ast.Constant)), None)
                value = node.args[1]
            else:
                continue
            if glue in in_prose:
                quoted.add(ast.dump(value))
                if len(reads(value)) == 1:  # quote("acc_pct", 100 * acc) shows acc
                    quoted.add(ast.dump(ast.Name(id=reads(value).pop(), ctx=ast.Load())))
    problems: dict[int, list[str]] = {}
    for h, (hi, hcell, htree) in enumerate(cells):
        if code_visible(hcell):
            continue
        for call in (n for n in ast.walk(htree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in CHECKING):
            glue = next((k.value.value for k in call.keywords if k.arg == "glue" and isinstance(k.value, ast.Constant)),
                        None)
            if glue in in_prose:
                continue
            for value in _checked_values(call):
                if ast.dump(value) in quoted:
                    continue
                names = {n for n in reads(value) if ast.dump(ast.Name(id=n, ctx=ast.Load())) not in quoted}
                sources = _sources(names, call.lineno, h, cells, binds)
                if not sources:
                    continue
                if not any(_displayed(vi, name, h, cells, showing) for vi, name in sources):
                    for vi, name in sorted(sources):
                        problems.setdefault(cells[vi][0], []).append(
                            f"`{name}` ({_statement(call)[:70]!r}, checked in hidden cell {hi})")
    return [f"cell {i} computes what a hidden check reads and shows nothing of it: {'; '.join(sorted(set(why)))}. "
            "Print or draw what it measured, in words a learner reads (the threshold stays in the hidden cell)"
            for i, why in sorted(problems.items())]


def _sources(names: set[str], line: int, h: int, cells, binds) -> set[tuple[int, str]]:
    """The visible cells (by position in ``cells``) and the names in them that a checked value comes from, following
    the hidden cells' own computations back to them (values spelled out in the code, defs, imports and random
    streams are no results: they are left out)."""
    todo = [(n, h, line) for n in names]
    seen, found = set(), set()
    while todo:
        name, at, before = todo.pop()
        if (name, at, before) in seen:
            continue
        seen.add((name, at, before))
        here = [b for b in binds[cells[at][0]] if name in b.names and (before is None or b.line < before)]
        if here:
            if code_visible(cells[at][1]):
                if any(b.kind == "result" for b in here):
                    found.add((at, name))
                continue
            for b in here:
                todo += [(n, at, b.line) for n in b.inputs if n != name or b.line != before]
            if all(b.kind != "result" or name not in b.inputs for b in here):
                continue
        if at == 0:
            continue
        # the name comes from an earlier cell: the last one that binds it
        for back in range(at - 1, -1, -1):
            if any(name in b.names for b in binds[cells[back][0]]):
                todo.append((name, back, None))
                break
    return found


def _receivers(tree: ast.Module, name: str) -> set[str]:
    """The objects whose method a statement of the cell calls to compute ``name`` (``name = obj.method(...)``)."""
    found = set()
    for stmt in _flat(tree.body):
        if isinstance(stmt, ast.Assign) and name in set().union(*(_targets(t) for t in stmt.targets)):
            call = stmt.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                    and isinstance(call.func.value, ast.Name) and call.func.value.id not in NOT_DATA:
                found.add(call.func.value.id)
    return found


def _displayed(vi: int, name: str, h: int, cells, showing) -> bool:
    """Whether the visible cells from ``vi`` up to the hidden cell ``h`` show something computed from ``name``
    (or the object whose method computed it: ``history = tok.train(...)`` is shown by printing ``tok``'s merges)."""
    tainted = {name} | _receivers(cells[vi][2], name)
    for k in range(vi, h):
        _, cell, tree = cells[k]
        last = any(o.get("output_type") == "execute_result" for o in cell.get("outputs", []))
        shown, tainted = _shown_names(tree, tainted, showing, last)  # a hidden cell passes its results on
        if shown and code_visible(cell) and shows_output(cell):
            return True
    return False


# ---- (f) a finding appears once ----------------------------------------------------------------------------

def finding_boxes(nb) -> list[str]:
    """Claims whose folded finding box the book shows: the prose says the finding, with its glued value."""
    found = []
    for i, cell in enumerate(nb.cells):
        if not outputs_visible(cell):
            continue
        boxes = sum("".join(o.get("data", {}).get("text/html", "")).count('class="course-claim"')
                    for o in cell.get("outputs", []))
        if boxes:
            found.append(f"cell {i} shows {boxes} finding box(es) that repeat the prose: say the finding in the "
                         "prose with its glued value (claim(..., glue=name), {glue:text}`name`) and tag the cell "
                         "remove-cell")
    return found


# ---- (b) counts are integers -------------------------------------------------------------------------------

#: a whole number written as a float ("4.0", "41.00", "⟨3.0⟩"), then, on the same line, what it counts:
#: "of [the] [first] N", "out of N", "in N <things>", or one of COUNTED (a plural noun that is no unit of
#: measure, never followed by "per"); "within 0.000 of 1" is a tolerance, not a count
FLOAT_COUNT = re.compile(r"(?<![\w.\-+])(?<!within )(?<!within ⟨)(\d+)\.0+(?![\d.]|e[-+]?\d)(?:⟩)?(?=[ \t]+(?:"
                         r"(?:out[ \t]+)?of[ \t]+(?:the[ \t]+)?(?:[a-z]+[ \t]+)?[\d,]+\b"
                         r"|in[ \t]+(?:the[ \t]+)?[\d,]+[ \t]+[a-z]+s\b|([a-z][a-z-]*)\b(?![ \t]+per\b)))")
#: what the book counts, in the plural: a whole number before one of these is a count
COUNTED = {"tokens", "runs", "entries", "merges", "steps", "images", "patches", "heads", "layers", "blocks", "seeds",
           "samples", "sequences", "words", "characters", "parameters", "pairs", "positions", "classes", "epochs",
           "windows", "queries", "keys", "examples", "ids", "updates", "items", "rows", "columns", "features",
           "regions", "stages", "crops", "views", "prototypes", "errors", "mistakes", "cases", "dates", "sentences",
           "nodes", "experts", "groups", "models", "networks", "points", "neighbours", "pixels", "channels",
           "batches", "lines", "cells", "notebooks", "pages", "chapters", "exercises", "learners", "students"}


def float_counts_in(text: str) -> list[str]:
    """The whole numbers printed as floats before what they count, in a text, with their context."""
    found = []
    for match in FLOAT_COUNT.finditer(text):
        noun = match.group(2)
        if noun and noun.lower() not in COUNTED:
            continue
        found.append(text[max(0, match.start() - 30):match.end() + 30].replace("\n", " ").strip())
    return found


def float_counts(nb) -> list[str]:
    return [f"cell {s.cell} ({s.kind}) prints a count as a float: {hit!r} (format it as an integer: "
            "{:.0f} or :d)" for s in reader_view(nb) if s.kind != "comment" for hit in float_counts_in(s.text)]


# ---- (c) no maintainer language ----------------------------------------------------------------------------

#: words of the course's harness, not of the subject: a reader meets none of them
MAINTAINER_PHRASES = (
    "make seeds", "make portability", "make test", "make check", "make notebooks", "make stability", "nbval",
    "COURSE_SEED", "COURSE_THREADS", "ATEN_CPU_CAPABILITY", "the check", "the checks", "the claim", "the claims",
    "a claim", "checked as the page runs", "is not checked", "not compared", "the suite", "test suite",
    "lecture slides", "margin", "threshold", "stored outputs", "stored output", "CPU kernel", "CPU kernels",
    "seeds drawn afresh", "fresh seeds", "tools.portability", "tools.notebooks", "harness",
)
#: the uses of a phrase the book needs, each with the words around it that make it legitimate (and why)
ALLOWED = {
    # DINO's attention masks keep the patches holding 60 % of the attention: the method's own parameter
    "threshold": ("DINO's own threshold", "a threshold of", "thresholds the"),
    # a learned margin in a loss, should a page discuss one
    "margin": ("a margin loss", "margin-based", "the margin of the hinge"),
}


def maintainer_words_in(text: str) -> list[str]:
    found = []
    for phrase in MAINTAINER_PHRASES:
        for match in re.finditer(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", text, re.I):
            context = text[max(0, match.start() - 40):match.end() + 40]
            if any(ok.lower() in context.lower() for ok in ALLOWED.get(phrase.lower(), ())):
                continue
            found.append(f"{phrase!r} in '…{context.strip()}…'".replace("\n", " "))
    return found


def maintainer_words(nb) -> list[str]:
    return [f"cell {s.cell} ({s.kind}): {hit}" for s in reader_view(nb) for hit in maintainer_words_in(s.text)]


# ---- (d) alt text says what the figure shows ---------------------------------------------------------------

#: a number as prose writes it: -1.35, 3,136, 2.3e-4, 7.0e-4, 80% (a name's digits, x1 or fp16, are no number)
NUMBER = re.compile(r"(?<![\w.^/])[-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.])|(?<![\w.^/])[-−]?\d+(?:\.\d+)?"
                    r"(?:e[-+]?\d+)?(?![\w])(?!\.\d)")


@dataclass(frozen=True)
class Number:
    """A number as written: its value, its decimal places (negative for trailing zeros of a whole number), and
    whether it is a percentage."""

    value: float
    places: int
    percent: bool
    text: str

    def matches(self, x: float) -> bool:
        """Whether ``x`` written at this number's precision is this number (``x`` a fraction for a percentage)."""
        if not math.isfinite(x):
            return False
        candidates = [x * 100, x] if self.percent else [x]
        return any(_rounds_to(c, self.value, self.places) for c in candidates)


def _rounds_to(x: float, value: float, places: int) -> bool:
    step = 10.0 ** -places
    return abs(x - value) <= step / 2 * (1 + 1e-9) + 1e-12 or abs(abs(x) - abs(value)) <= step / 2 * 1e-9


def numbers_in(text: str) -> list[Number]:
    found = []
    for match in NUMBER.finditer(text):
        raw = match.group(0).replace("−", "-")
        clean = raw.replace(",", "")
        mantissa = clean.split("e")[0]
        if "." in mantissa:
            places = len(mantissa.split(".")[1])
        else:
            digits = mantissa.lstrip("-")
            places = -(len(digits) - len(digits.rstrip("0"))) if digits.strip("0") else 0
        if "e" in clean:
            places -= int(clean.split("e")[1])
        percent = text[match.end():match.end() + 2].lstrip().startswith("%")
        found.append(Number(float(clean), places, percent, raw))
    return found


def _literals(tree: ast.Module) -> set[float]:
    """The numbers a cell's code spells out: its numeric constants, and the numbers in its strings (a figure's
    title, labels and legend are part of the figure)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            found.add(float(node.value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= {n.value for n in numbers_in(node.value.replace("..", " to "))}
        elif (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
              and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float))):
            found.add(-float(node.operand.value))
    return found


def notebook_data(nb, upto: int | None = None) -> tuple[set[float], list[float]]:
    """The numbers of a notebook's data: the literals of its code (up to cell ``upto``), and the values it
    printed, displayed or glued (any cell, hidden ones included: the measurements behind the page)."""
    literals: set[float] = set()
    measured: list[float] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tree = parse(cell.source)
        if tree is not None and (upto is None or i <= upto):
            literals |= _literals(tree)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            texts = [output_text(out), "".join(data.get(GLUE_MIME, "")), "".join(data.get("text/plain", ""))]
            for text in texts:
                measured += [n.value for n in numbers_in(text)]
    return literals, measured


def alt_texts(nb) -> list[tuple[int, str]]:
    return [(i, c.metadata["mystnb"]["image"]["alt"]) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and isinstance(c.metadata.get("mystnb", {}).get("image", {}).get("alt"), str)]


def alt_numbers(nb) -> list[str]:
    """Numbers in a figure's alt text that are neither a literal of the code up to the figure nor a value the
    notebook printed, displayed or glued, at the alt text's precision."""
    found = []
    for i, alt in alt_texts(nb):
        literals, measured = notebook_data(nb, upto=i)
        missing = [n.text + ("%" if n.percent else "") for n in numbers_in(alt)
                   if n.value not in literals and not (n.percent and n.value / 100 in literals)
                   and not any(n.matches(x) for x in measured)]
        if missing:
            found.append(f"cell {i}: the alt text's numbers {missing} are not in the figure's data (a literal of "
                         "the code, or a value the notebook prints or glues): glue them (quote) or correct them")
    return found


# ---- (e) a chapter's first page says what its pages show ----------------------------------------------------

COVERS = re.compile(r"^## What this chapter covers\n(.*?)(?=^## )", re.S | re.M)
BULLET = re.compile(r"^- \{doc\}`([^`<>]+)`(.*?)(?=^- |\Z)", re.S | re.M)
ROLE_TARGET = re.compile(r"\{(?:doc|cite|cite:t|cite:p|term|ref|numref)\}`[^`]*`")


def page_numbers(nb) -> list[float]:
    """The numbers a page shows its reader: in its prose (glued values pasted) and its visible outputs."""
    return [n.value for s in reader_view(nb) if s.kind != "comment" for n in numbers_in(s.text)]


def index_problems(chapter: Path) -> list[str]:
    """Numbers in the summaries of a chapter's first page that its pages do not show (or glue) for it."""
    index = chapter / "index.md"
    if not index.exists():
        return []
    text = index.read_text(encoding="utf-8")
    covers = COVERS.search(text)
    if not covers:
        return [f"{index.relative_to(ROOT)}: no '## What this chapter covers' section"]
    found = []
    pages = {}
    for match in BULLET.finditer(covers.group(1)):
        page, summary = match.group(1), match.group(2)
        path = chapter / f"{page}.ipynb"
        if not path.exists():
            found.append(f"{index.relative_to(ROOT)}: the summary of {page} names a page that is not there")
            continue
        nb = pages.setdefault(page, nbformat.read(path, as_version=4))
        values = glued(nb)
        for ref in GLUE_ROLE.finditer(summary):
            target, key, _ = glue_reference(ref.group(1))
            if target and Path(target).stem != page:
                found.append(f"{index.relative_to(ROOT)}: the summary of {page} glues {key} from {target}")
            elif key not in values:
                found.append(f"{index.relative_to(ROOT)}: the summary of {page} glues {key!r}, which {page} "
                             "does not record")
        plain = GLUE_ROLE.sub(" ", ROLE_TARGET.sub(" ", summary))
        shown = page_numbers(nb)
        literals, _ = notebook_data(nb)
        for n in numbers_in(plain):
            if not any(n.matches(x) for x in shown) and n.value not in literals:
                found.append(f"{index.relative_to(ROOT)}: the summary of {page} says {n.text}"
                             f"{'%' if n.percent else ''}, a number {page} does not show: glue it from the page "
                             f"({{glue:text}}`{page}.ipynb::name`) or correct it")
    return found


# ---- everything, for a chapter -----------------------------------------------------------------------------

NOTEBOOK_CHECKS = {
    "evidence": hidden_evidence,
    "finding boxes": finding_boxes,
    "float counts": float_counts,
    "maintainer words": maintainer_words,
    "alt numbers": alt_numbers,
}
#: the pages outside the chapters a learner reads first, checked for maintainer words
FRONT_MATTER = ("intro.md", "notation.md", "glossary.md")


def notebook_problems(path: Path) -> dict[str, list[str]]:
    nb = nbformat.read(path, as_version=4)
    return {name: check(nb) for name, check in NOTEBOOK_CHECKS.items()}


def page_problems(path: Path) -> list[str]:
    """Maintainer words on a Markdown page a learner reads (a chapter's first page, the front matter)."""
    return maintainer_words_in(path.read_text(encoding="utf-8"))


def chapter_problems(chapter: Path) -> list[str]:
    found = []
    for path in sorted(chapter.glob("*.ipynb")):
        for name, problems in notebook_problems(path).items():
            found += [f"{path.relative_to(ROOT)}: {name}: {p}" for p in problems]
    if (chapter / "index.md").exists():
        found += [f"{(chapter / 'index.md').relative_to(ROOT)}: maintainer words: {p}"
                  for p in page_problems(chapter / "index.md")]
    found += [f"index summaries: {p}" for p in index_problems(chapter)]
    return found


def chapters() -> list[Path]:
    return sorted(p for p in (ROOT / "chapters").iterdir() if p.is_dir() and (p / "index.md").exists())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reading", description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="chapter folders (default: every chapter)")
    args = parser.parse_args(argv)
    todo = [p.resolve() for p in args.chapters] or chapters()
    found = [p for chapter in todo for p in chapter_problems(chapter)]
    if not args.chapters:
        found += [f"{name}: maintainer words: {p}" for name in FRONT_MATTER if (ROOT / name).exists()
                  for p in page_problems(ROOT / name)]
    for line in found:
        print(line)
    print("reading: " + ("every result shows, once" if not found else f"{len(found)} problem(s)"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
