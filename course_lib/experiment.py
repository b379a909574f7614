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
* **Claims are checks.** :func:`claim` states what an experiment shows as a
  comparison of a measured value with a threshold. It prints the statement
  with a tick when it holds, and fails the cell, naming the measured value and
  the threshold, when it does not. Its output line is::

      ✓ test accuracy above 0.7  [measured 0.83 > 0.7, margin +0.13]

  The part in brackets is the machine's own rounding of the measurement: it
  differs in the last digits between CPUs, thread counts and GPUs, so the
  notebook tests compare everything but it (``tests/nbval_sanitize.cfg``);
  the statement and its verdict must be identical everywhere. The margin says
  how far the measurement is from failing; ``make seeds`` reports the smallest
  margin of every claim over seeds. In a notebook (and the book) the claim
  shows as a finding, the statement and the measured value, with the check
  folded one click away (:meth:`Claim.html`); the line above is its text.

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
import sys
from dataclasses import asdict, dataclass
from html import escape
from typing import Any

import torch

__all__ = ["SEED_ENV", "THREADS_ENV", "LOG_ENV", "start", "seed", "generator", "reseed", "claim", "evaluate", "quote",
           "Claim", "ClaimFailed"]

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
    """One checked statement: ``value op threshold`` (``op`` one of ``> >= < <= == in``)."""

    statement: str
    value: float
    op: str
    threshold: Any
    margin: float  # how far ``value`` is from breaking the claim, in its units; 0 for an exact claim
    relative: float  # the margin over the threshold's scale (see ``_relative``); nan for an exact claim
    holds: bool

    def line(self) -> str:
        """The claim as text: ``✓ statement  [measured value op threshold, margin m]``."""
        mark = "✓" if self.holds else "✗"
        return f"{mark} {self.statement}  [measured {self._measured()}]"

    def html(self) -> str:
        """The claim as a finding: the statement and the measured value, the check folded one click away."""
        mark = "✓" if self.holds else "✗"
        return (f'<details class="course-claim"><summary>{mark} {escape(self.statement)}: '
                f'<span class="course-claim-value">{escape(_fmt(self.value))}</span></summary>'
                f'checked: {escape(f"[measured {self._measured()}]")}</details>')

    def _measured(self) -> str:
        if self.op == "in":
            lo, hi = self.threshold
            core = f"{_fmt(self.value)} between {_fmt(lo)} and {_fmt(hi)}"
        else:
            core = f"{_fmt(self.value)} {self.op} {_fmt(self.threshold)}"
        return core if self.op == "==" else f"{core}, margin {self.margin:+.3g}"


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


def evaluate(statement: str, value: Any, op: str, threshold: Any) -> Claim:
    """The :class:`Claim` of ``value op threshold``, without printing or raising."""
    if op not in _OPS:
        raise ValueError(f"claim: op={op!r} is not one of {', '.join(_OPS)}")
    if not isinstance(statement, str) or not statement.strip():
        raise ValueError("claim: the statement must be a non-empty string saying what the experiment shows")
    v = _number(value, "the measured value")
    if op == "==":
        t = _number(threshold, "the threshold")
        holds = v == t
        return Claim(statement, v, op, t, 0.0, math.nan, holds)
    if op == "in":
        if not (isinstance(threshold, (tuple, list)) and len(threshold) == 2):
            raise ValueError(f"claim: with op='in' the threshold must be (low, high), got {threshold!r}")
        lo, hi = (float(_number(t, "a bound")) for t in threshold)
        if not lo < hi:
            raise ValueError(f"claim: the interval ({lo}, {hi}) is empty")
        margin = min(v - lo, hi - v)
        holds = lo <= v <= hi and not math.isnan(v)
        return Claim(statement, v, op, (lo, hi), margin, _relative(margin, (hi - lo) / 2), holds)
    t = float(_number(threshold, "the threshold"))
    v = float(v)
    holds = bool(_OPS[op](v, t)) and not math.isnan(v)
    margin = (v - t) if op in (">", ">=") else (t - v)
    return Claim(statement, v, op, t, margin, _relative(margin, abs(t)), holds)


def claim(statement: str, value: Any, op: str, threshold: Any, *, glue: str | None = None) -> None:
    """Check that ``value op threshold`` holds, print the verdict, fail the cell if it does not.

    Args:
        statement: what the experiment shows, in the prose's words ("the deep residual net trains
            better than the deep plain one"). It is printed as it is, so it must not contain a
            measured number (those change from machine to machine; thresholds are fine).
        value: the measurement, a number or a one-element tensor.
        op: ``">"``, ``">="``, ``"<"``, ``"<="``, ``"=="`` (exact: counts, equal tokens), or
            ``"in"`` with ``threshold = (low, high)``.
        threshold: what the value is compared with.
        glue: also record ``value`` under this name for the prose (``{glue:text}`NAME:.2f```).

    Raises :class:`ClaimFailed` when the claim does not hold. Nothing is returned, so a cell that
    ends with a claim shows only its line (:func:`evaluate` gives the :class:`Claim` itself).
    """
    c = evaluate(statement, value, op, threshold)
    _log(c)
    if glue is not None:
        quote(glue, c.value)
    _show(c)
    if not c.holds:
        raise ClaimFailed(f"the experiment does not show what the text says: {statement!r}: "
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


def _log(c: Claim) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    record = asdict(c) | {"notebook": os.environ.get(NOTEBOOK_ENV, ""), "seed": seed(),
                          "threads": torch.get_num_threads(),
                          "capability": torch.backends.cpu.get_cpu_capability()}
    for key in ("value", "margin", "relative"):
        if isinstance(record[key], float) and not math.isfinite(record[key]):
            record[key] = None
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
