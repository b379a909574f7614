"""How much of what a learner hands in the course takes: every bound, in one place, checked before anything parses it.

A submission is read by the course in several places (``make grade``'s intake, a zip's import, nbgrader, the static
reader, the grading kernel's outputs, the pages). Each reads it *after* :func:`read_notebook` has checked it against
:data:`NOTEBOOK`: its size in bytes, the depth of its JSON, its number of cells and the bytes of source in each cell
and in all of them. A notebook over one of them is refused with the value and the rule named, before nbgrader, the
static reader or a kernel sees it; the learner's file is left as it is.

The bounds are sized from the course's own notebooks with a wide margin (:data:`HONEST_PEAKS`, measured over every
notebook of ``solutions/``, ``exercises/`` and ``chapters/``): an honest learner never meets one.

While grading, what the kernel prints is bounded too (:data:`OUTPUTS`): each cell keeps at most ``cell_bytes`` of
output and the notebook ``notebook_bytes``; the rest is cut, with a note in the cell, so that a flood costs its own
notebook's page, never the grader's memory. The static reader (:mod:`grader.static`) runs with its own memory and
time (:data:`STATIC_READING`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: the largest of each measure over the course's own notebooks (solutions/, exercises/ and chapters/, with their
#: stored outputs): the bounds below stay far above them
HONEST_PEAKS = {"bytes": 358_497, "depth": 8, "cells": 52, "cell_source": 4_872, "source": 41_874}


@dataclass(frozen=True)
class NotebookBounds:
    """What one submitted notebook may be (:func:`read_notebook` checks each)."""

    bytes: int = 16 << 20  # the file, outputs and images included (honest: 0.36 MB)
    depth: int = 32  # nesting of its JSON (honest: 8)
    cells: int = 1_000  # cells (honest: 52)
    cell_source: int = 256 << 10  # bytes of source in one cell (honest: 4.9 KB)
    source: int = 2 << 20  # bytes of source in all cells (honest: 42 KB)


@dataclass(frozen=True)
class OutputBounds:
    """What grading keeps of the outputs a kernel sends (each output's text and data counted in bytes)."""

    cell_bytes: int = 1 << 20  # one cell's outputs (a figure is about 50 KB)
    notebook_bytes: int = 4 << 20  # all cells' outputs together


@dataclass(frozen=True)
class StaticBudget:
    """The static reader's own memory (its address space, in MiB) and seconds, per notebook."""

    memory_mb: int = 1024
    seconds: float = 30.0


NOTEBOOK = NotebookBounds()
OUTPUTS = OutputBounds()
STATIC_READING = StaticBudget()


class Refused(ValueError):
    """A notebook outside :class:`NotebookBounds`, or not a notebook: the message names the value and the rule."""


def shown_value(value: object) -> str:
    """A value from a learner's file, as a message quotes it: its repr, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


def json_depth(data: bytes) -> int:
    """The nesting depth of JSON text ``data``, found without parsing it (no recursion, every step in C or NumPy):
    escapes and strings removed, then the running count of the brackets left. A file nested 100,000 deep costs
    one pass."""
    import numpy as np

    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")  # escaped backslashes, then escaped quotes
    plain = _STRINGS.sub(b"", plain).translate(None, _NOT_BRACKETS)
    if not plain:
        return 0
    marks = np.frombuffer(plain, dtype=np.uint8)
    steps = np.where((marks == 0x5B) | (marks == 0x7B), 1, -1).astype(np.int64)
    return int(steps.cumsum().max())


_STRINGS = re.compile(rb'"[^"]*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def read_notebook(data: bytes, bounds: NotebookBounds = NOTEBOOK) -> dict:
    """A submitted notebook's JSON, checked against ``bounds`` before and after it is parsed; :class:`Refused`
    naming the value and the rule otherwise. Not yet validated against nbformat's schema (the caller does)."""
    if len(data) > bounds.bytes:
        raise Refused(f"the file is {_size(len(data))}, over the course's limit of {_size(bounds.bytes)} for a "
                      "notebook (clear large outputs and try again)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    depth = json_depth(data)
    if depth > bounds.depth:
        raise Refused(f"its JSON is nested more than {bounds.depth} levels deep (a notebook needs about 8): "
                      "not a notebook the course can read")
    try:
        raw = json.loads(text)
    except RecursionError:
        raise Refused(f"its JSON is nested more than {bounds.depth} levels deep: not a notebook the course can "
                      "read") from None
    except json.JSONDecodeError as exc:
        raise Refused(f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); the file was left as "
                      "it is") from None
    if not isinstance(raw, dict):
        raise Refused(f"not a notebook (its JSON is a {type(raw).__name__}, not an object)")
    if raw.get("nbformat") != 4:
        raise Refused(f"not an nbformat 4 notebook (nbformat={shown_value(raw.get('nbformat'))})")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise Refused("not a notebook (it has no list of cells)")
    if len(cells) > bounds.cells:
        raise Refused(f"it has {len(cells)} cells, over the course's limit of {bounds.cells}")
    total = 0
    for index, cell in enumerate(cells):
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        size = sum(len(s.encode("utf-8", "surrogatepass")) for s in source if isinstance(s, str)) \
            if isinstance(source, list) else len(source.encode("utf-8", "surrogatepass")) \
            if isinstance(source, str) else 0
        if size > bounds.cell_source:
            raise Refused(f"cell {index + 1} holds {_size(size)} of source, over the course's limit of "
                          f"{_size(bounds.cell_source)} for one cell")
        total += size
    if total > bounds.source:
        raise Refused(f"its cells hold {_size(total)} of source together, over the course's limit of "
                      f"{_size(bounds.source)}")
    return raw


# --------------------------------------------------------------------------
# While a notebook is graded: its time, and the outputs kept
# --------------------------------------------------------------------------
#: the share of a notebook's budget kept for the hidden tests of what ran: the cells stop before it
JUDGING_SHARE = 0.25


@dataclass
class Budget:
    """One notebook's wall-clock budget (``seconds``; 0: none): its cells run until :meth:`cells_left` is spent,
    a quarter of it (:data:`JUDGING_SHARE`) kept for judging what ran."""

    seconds: float
    started: float

    @classmethod
    def starting(cls, seconds: float) -> "Budget":
        import time

        return cls(float(seconds), time.monotonic())

    def _left(self, share: float) -> float:
        import time

        if self.seconds <= 0:
            return float("inf")
        return self.started + self.seconds * share - time.monotonic()

    def cells_left(self) -> float:
        """Seconds the cells may still run (negative: spent)."""
        return self._left(1.0 - JUDGING_SHARE)

    def left(self) -> float:
        """Seconds left of the whole budget (negative: spent)."""
        return self._left(1.0)


#: an error output's message and traceback lines are cut to this many characters each (they are always kept: a test
#: cell scores by its error)
ERROR_TEXT = 2000


@dataclass
class OutputKeeper:
    """What a notebook's cells may still keep of their outputs (:data:`OUTPUTS`): :meth:`admit` decides per message."""

    bounds: OutputBounds = OUTPUTS
    notebook: int = 0
    cells: dict = None  # cell index -> bytes kept
    cut: set = None  # the cells whose outputs were cut

    def __post_init__(self):
        self.cells, self.cut = {}, set()

    def admit(self, msg_type: str, content: dict, cell_index: int) -> bool:
        """Whether an output message may be kept; an error is always kept, its texts cut to :data:`ERROR_TEXT`
        (``content`` is changed in place). Counts what it admits."""
        if msg_type == "error":
            content["evalue"] = str(content.get("evalue", ""))[:ERROR_TEXT]
            content["traceback"] = [str(line)[:ERROR_TEXT] for line in list(content.get("traceback") or [])[:40]]
            return True
        size = output_bytes(content)
        kept = self.cells.get(cell_index, 0)
        if kept + size > self.bounds.cell_bytes or self.notebook + size > self.bounds.notebook_bytes:
            self.cut.add(cell_index)
            return False
        self.cells[cell_index] = kept + size
        self.notebook += size
        return True


def output_bytes(content: dict) -> int:
    """About how many bytes an output message's content holds: its text, its data's values, its metadata."""
    size = len(str(content.get("text", "")))
    for part in ("data", "metadata"):
        values = content.get(part)
        if isinstance(values, dict):
            size += sum(len(v) if isinstance(v, str) else len(json.dumps(v, default=str)) for v in values.values())
    return size
