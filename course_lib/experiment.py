"""Experiments that give the same verdict on any machine: one seed, and claims checked where they are made.

A chapter's experiment trains or measures something and the prose says what
it shows. Two things make such a statement trustworthy, and this module gives
both to every notebook:

* **One seed setting.** :func:`start` reads the seed from the environment
  variable ``COURSE_SEED`` (default ``0``), seeds torch and Python with it and
  returns it; :func:`generator` gives the notebook's ``k``-th independent
  random stream for that seed. Running a notebook with ``COURSE_SEED=3`` redoes
  every random choice it makes (``make seeds`` runs seeds drawn afresh).
  ``COURSE_THREADS`` sets torch's thread count (default 1: the models are tiny).
* **Findings are checks.** :func:`claim` states what an experiment shows as
  a sentence with its measured number, backed by a comparison of that number
  with a threshold. The sentence is written with a format field where the
  number goes::

      claim("The ViT reaches {:.2f} on the test scenes, well above chance.", acc, ">", 0.5)

  In a notebook (and the book) the reader sees the sentence with this run's
  number; how it was checked (the measurement, the threshold, the margin) is
  folded one click away (:meth:`Claim.html`). When the comparison fails, the
  cell fails, naming the value and the threshold. Its text line is::

      ✓ The ViT reaches ⟨0.83⟩ on the test scenes, well above chance.  [measured 0.8312 > 0.5, margin +0.331]

  The numbers in ⟨⟩ and in brackets are the machine's own rounding of the
  measurement: they differ in the last digits between CPUs, thread counts and
  GPUs, so the notebook tests compare everything but them
  (``tests/nbval_sanitize.cfg``); the sentence and its verdict must be
  identical everywhere. The margin says how far the measurement is from
  failing; ``make seeds`` reports the smallest margin of every claim over seeds.
* **Checks the reader never sees.** :func:`check` is the same comparison with
  no output: a count of failures that must be zero, two computations that must
  agree, a fact the prose relies on. The notebook keeps such checks in a cell
  the book removes, and nbval and ``make seeds`` still run them.

A notebook keeps its claims and checks out of the code a reader studies: they
sit in cells tagged ``remove-input`` (a claim's finding shows, its code does
not) or ``remove-cell`` (checks and quotes, which show nothing), and
``tools.notebooks`` flags a visible cell that calls them.

With ``glue=NAME`` a claim also records its measured value under ``NAME`` for
the prose: in a Markdown cell of the same notebook, ``{glue:text}`NAME:.2f```
shows the number this run measured (MyST-NB's glue), so a number quoted in the
text is never typed by hand. :func:`quote` records a value that is not a claim.
"""

from __future__ import annotations

import json
import math
import operator
import os
import random
import string
import sys
from dataclasses import asdict, dataclass, field
from html import escape
from typing import Any

import torch

__all__ = ["SEED_ENV", "THREADS_ENV", "LOG_ENV", "start", "seed", "generator", "reseed", "claim", "check", "evaluate",
           "quote", "Claim", "ClaimFailed"]

SEED_ENV = "COURSE_SEED"
THREADS_ENV = "COURSE_THREADS"
LOG_ENV = "COURSE_CLAIMS_LOG"  # a JSON-lines file every claim is appended to (make seeds, make portability)
NOTEBOOK_ENV = "COURSE_NOTEBOOK"  # the notebook's path, written into that log by the runner

_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq,
        "in": None}


def _int_env(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: must be a whole number >= {minimum}") from None
    if value < minimum:
        raise ValueError(f"{name}={raw!r}: must be a whole number >= {minimum}")
    return value


def seed() -> int:
    """The seed of this run: ``COURSE_SEED`` from the environment, 0 when it is not set."""
    return _int_env(SEED_ENV, 0, 0)


def start() -> int:
    """Seed torch and Python's ``random`` with :func:`seed`, set torch's threads; return the seed.

    Call it once, in a notebook's first cell. The thread count comes from
    ``COURSE_THREADS`` (default 1: the course's models are too small to gain
    from more, and one thread keeps two notebooks on one machine from fighting).
    """
    s = seed()
    torch.manual_seed(s)
    random.seed(s)
    torch.set_num_threads(_int_env(THREADS_ENV, 1, 1))
    return s


def reseed(k: int) -> None:
    """Seed torch's global generator for the notebook's ``k``-th stream (model inits, dropout).

    Use it where a cell needs a fresh, known starting point (``torch.manual_seed``
    with a fixed number would ignore ``COURSE_SEED``).
    """
    torch.manual_seed(generator(k).initial_seed())


def generator(k: int = 0, device: str | torch.device = "cpu") -> torch.Generator:
    """The notebook's ``k``-th random stream for this run's seed: ``(B,) -> ...`` data, inits, noise.

    Streams with different ``k`` are independent, and every stream changes with
    ``COURSE_SEED``; with the default seed 0, stream ``k`` is seeded with ``k``.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise ValueError(f"k={k!r}: the stream number must be an int >= 0")
    return torch.Generator(device=device).manual_seed(seed() * 1_000_003 + k)


@dataclass(frozen=True)
class Claim:
    """One checked statement: ``value op threshold`` (``op`` one of ``> >= < <= == in``).

    ``statement`` is the sentence as written, with its format fields; ``shown`` the numbers it names besides the
    measured value (by field name).
    """

    statement: str
    value: float
    op: str
    threshold: Any
    margin: float  # how far ``value`` is from breaking the claim, in its units; 0 for an exact claim
    relative: float  # the margin over the threshold's scale (see ``_relative``); nan for an exact claim
    holds: bool
    shown: dict = field(default_factory=dict)

    def sentence(self, mark=str) -> str:
        """The statement with its numbers filled in, each passed through ``mark`` once formatted."""
        return _fill(self.statement, self.value, self.shown, mark)

    def line(self) -> str:
        """The claim as text: ``✓ sentence with ⟨numbers⟩  [measured value op threshold, margin m]``."""
        mark = "✓" if self.holds else "✗"
        return f"{mark} {self.sentence(lambda v: f'⟨{v}⟩')}  [measured {self._measured()}]"

    def html(self) -> str:
        """The claim as a finding: the sentence with this run's numbers, how it was checked folded one click away."""
        def value(text: str) -> str:
            return f'<span class="course-claim-value">{escape(text)}</span>'

        sentence = _fill(escape(self.statement), self.value, self.shown, value)
        return (f'<details class="course-claim"><summary>{sentence}</summary>'
                f'<p class="course-claim-check">Checked as the page runs: {self._check_html(value)}</p></details>')

    def _check_html(self, value) -> str:
        measured = value(_fmt(self.value))
        if self.op == "in":
            lo, hi = self.threshold
            rule = f"between {escape(_fmt(lo))} and {escape(_fmt(hi))}"
        else:
            rule = f"{_OP_WORDS[self.op]} {escape(_fmt(self.threshold))}"
        margin = "" if self.op == "==" else f" (margin {value(f'{self.margin:+.3g}')})"
        return f"the measured value, {measured}, must be {rule}{margin}."

    def _measured(self) -> str:
        if self.op == "in":
            lo, hi = self.threshold
            core = f"{_fmt(self.value)} between {_fmt(lo)} and {_fmt(hi)}"
        else:
            core = f"{_fmt(self.value)} {self.op} {_fmt(self.threshold)}"
        return core if self.op == "==" else f"{core}, margin {self.margin:+.3g}"


_OP_WORDS = {">": "more than", ">=": "at least", "<": "less than", "<=": "at most", "==": "exactly"}


def _fields(statement: str) -> list[tuple[str, str]]:
    """The format fields of a sentence as (name, format spec); the measured value's name is ''."""
    try:
        return [(name, spec or "") for _, name, spec, conv in string.Formatter().parse(statement) if name is not None]
    except ValueError as e:
        raise ValueError(f"claim: {statement!r} is not a valid format string ({e})") from None


def _fill(statement: str, value: Any, shown: dict, mark) -> str:
    """``statement`` with each field replaced by ``mark(formatted number)``; ``{{`` and ``}}`` become braces."""
    out = []
    for literal, name, spec, _ in string.Formatter().parse(statement):
        out.append(literal)
        if name is not None:
            out.append(mark(format(value if name == "" else shown[name], spec)))
    return "".join(out)


class ClaimFailed(AssertionError):
    """An experiment did not show what the prose says it shows."""


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}"
    return repr(x)


def _number(x: Any, what: str) -> float | int | bool:
    if isinstance(x, torch.Tensor):
        if x.numel() != 1:
            raise ValueError(f"claim: {what} must be a single number, got a tensor of shape {tuple(x.shape)}")
        x = x.item()
    if isinstance(x, (bool, int)):
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"claim: {what} must be a number, got {x!r}") from None


def _relative(margin: float, scale: float) -> float:
    return margin / scale if scale > 0 else margin


def evaluate(statement: str, value: Any, op: str, threshold: Any, shown: dict | None = None) -> Claim:
    """The :class:`Claim` of ``value op threshold``, without printing or raising.

    ``shown`` gives the numbers that the sentence's named fields show (``{gap:.2f}``), besides the value.
    """
    if op not in _OPS:
        raise ValueError(f"claim: op={op!r} is not one of {', '.join(_OPS)}")
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError("claim: the statement must be a non-empty string saying what the experiment shows")
    shown = {name: _number(x, f"the shown number {name!r}") for name, x in (shown or {}).items()}
    missing = sorted({name for name, _ in _fields(statement) if name and name not in shown})
    if missing or any(name.isdigit() for name, _ in _fields(statement)):
        raise ValueError(f"claim: {statement!r} names fields {missing} that are not given: use {{}} for the "
                         "measured value and {name} for a number passed as name=...")
    v = _number(value, "the measured value")
    if op == "==":
        t = _number(threshold, "the threshold")
        holds = v == t
        return Claim(statement, v, op, t, 0.0, math.nan, holds, shown)
    if op == "in":
        if not (isinstance(threshold, (tuple, list)) and len(threshold) == 2):
            raise ValueError(f"claim: with op='in' the threshold must be (low, high), got {threshold!r}")
        lo, hi = (float(_number(t, "a bound")) for t in threshold)
        if not lo < hi:
            raise ValueError(f"claim: the interval ({lo}, {hi}) is empty")
        margin = min(v - lo, hi - v)
        holds = lo <= v <= hi and not math.isnan(v)
        return Claim(statement, v, op, (lo, hi), margin, _relative(margin, (hi - lo) / 2), holds, shown)
    t = float(_number(threshold, "the threshold"))
    v = float(v)
    holds = bool(_OPS[op](v, t)) and not math.isnan(v)
    margin = (v - t) if op in (">", ">=") else (t - v)
    return Claim(statement, v, op, t, margin, _relative(margin, abs(t)), holds, shown)


def claim(statement: str, value: Any, op: str, threshold: Any, *, glue: str | None = None, **shown: Any) -> None:
    """A finding: show the sentence with its measured number, check ``value op threshold``, fail the cell if not.

    Args:
        statement: the finding as the reader reads it, one sentence with a format field where the measured value
            goes: ``"The deep residual net ends at a loss of {:.2f}, under half the plain net's."``. It starts
            with a capital letter or a digit and ends with a full stop. Other measured numbers it names are
            named fields (``{plain:.2f}``), given as keyword arguments (``plain=loss_plain``).
        value: the measurement, a number or a one-element tensor.
        op: ``">"``, ``">="``, ``"<"``, ``"<="``, ``"=="`` (exact), or ``"in"`` with ``threshold = (low, high)``.
        threshold: what the value is compared with.
        glue: also record ``value`` under this name for the prose (``{glue:text}`NAME:.2f```).

    Raises :class:`ClaimFailed` when the claim does not hold. Nothing is returned, so a cell that ends with a
    claim shows only its finding (:func:`evaluate` gives the :class:`Claim` itself).
    """
    fields = _fields(statement) if isinstance(statement, str) else []
    if not any(name == "" for name, _ in fields):
        raise ValueError(f"claim: {statement!r} has no field for the measured value: a finding says its number "
                         "({} or {:.2f} where it goes); a check the reader need not see is check(...)")
    c = evaluate(statement, value, op, threshold, shown)
    text = c.sentence().strip()
    if not (text[:1].isupper() or text[:1].isdigit() or text[:1] in "'\"") or not text.endswith("."):
        raise ValueError(f"claim: {statement!r} must be a sentence: start with a capital letter, a digit or a "
                         "quotation mark and end with a full stop")
    _log(c, shown=True)
    if glue is not None:
        quote(glue, c.value)
    _show(c)
    _raise_unless_holds(c)


def check(statement: str, value: Any, op: str, threshold: Any) -> None:
    """Check ``value op threshold`` without showing anything; fail the cell, naming the value, if it does not hold.

    For what the page relies on but a reader need not read: a count of failures that must be zero, two
    computations that must agree, a true-or-false fact the prose states. ``statement`` says what is checked, in
    words (it appears only in the error and in ``make seeds``'s table).
    """
    c = evaluate(statement, value, op, threshold)
    _log(c, shown=False)
    _raise_unless_holds(c)


def _raise_unless_holds(c: Claim) -> None:
    if not c.holds:
        raise ClaimFailed(f"the experiment does not show what the text says: {c.statement!r}: "
                          f"measured {_fmt(c.value)}, needs {c.op} {_fmt(c.threshold)}")


def _show(c: Claim) -> None:
    """In a notebook, the claim as a finding (HTML, :meth:`Claim.html`) with its line as the text nbval compares;
    elsewhere its line, printed."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    if shell is None:
        print(c.line())
        return
    from IPython.display import display

    display({"text/plain": c.line(), "text/html": c.html()}, raw=True)


def quote(name: str, value: Any) -> None:
    """Record ``value`` under ``name`` for the prose (MyST-NB glue), showing nothing.

    A Markdown cell of the same notebook shows it with ``{glue:text}`name``` or,
    for a number, with a format: ``{glue:text}`name:.1f```.
    """
    if not name.isidentifier():
        raise ValueError(f"quote: name={name!r} must be an identifier (letters, digits, _)")
    if isinstance(value, torch.Tensor):
        value = value.item()
    try:
        from myst_nb import glue
    except ImportError:  # outside the book's environment there is no prose to quote into
        return
    glue(name, value, display=False)


def _log(c: Claim, shown: bool) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    record = asdict(c) | {"shown": shown, "notebook": os.environ.get(NOTEBOOK_ENV, ""), "seed": seed(),
                          "threads": torch.get_num_threads(),
                          "capability": torch.backends.cpu.get_cpu_capability()}
    for key in ("value", "margin", "relative"):
        if isinstance(record[key], float) and not math.isfinite(record[key]):
            record[key] = None
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
