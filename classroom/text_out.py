"""Text out is text: what a learner or a roster controls, written where a spreadsheet or a terminal reads it.

Every CSV the course writes (``grades.csv``, the Canvas, Moodle and nbgrader exports, the similarity report's
pairs and groups, the hub's accounts) goes through :func:`csv_writer`, whose every cell is :func:`spreadsheet_cell`:
a cell that starts like a formula (OWASP's rule: ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, here
also after leading spaces, and a line feed) gets a leading apostrophe, so that a spreadsheet shows the text
instead of running it; a plain number (``-0.5``, ``10``) is left as it is, since it runs nothing.

What ``make grade`` and its neighbours print of a learner's names goes through :func:`shown`: control
characters (a terminal's escape sequences) are written as escapes, never obeyed, and a name is cut to a
length a table can hold.
"""

from __future__ import annotations

import csv
import re
from typing import Any, Iterable

from grader.failures import printable

#: what a spreadsheet may take for the start of a formula (OWASP's CSV injection rule, and a line feed)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
#: a plain number, which a spreadsheet reads as a number and runs nothing
NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def spreadsheet_cell(value: Any) -> str:
    """``value`` as a CSV cell no spreadsheet runs: a leading apostrophe before a formula's start."""
    text = "" if value is None else str(value)
    if NUMBER.fullmatch(text):
        return text
    if text.startswith(FORMULA_START) or text.lstrip(" ").startswith(FORMULA_START):
        return "'" + text
    return text


def is_inert(text: str) -> bool:
    """Whether a CSV cell as read back is inert: a plain number, or text that does not start like a formula."""
    return spreadsheet_cell(text) == text


class _SafeWriter:
    """``csv.writer`` whose every cell is :func:`spreadsheet_cell`."""

    def __init__(self, fh, **options):
        self._writer = csv.writer(fh, **options)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([spreadsheet_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class _SafeDictWriter(csv.DictWriter):
    """``csv.DictWriter`` whose every cell is :func:`spreadsheet_cell` (the header is the course's own)."""

    def _dict_to_list(self, rowdict):
        return [spreadsheet_cell(v) for v in super()._dict_to_list(rowdict)]


def csv_writer(fh, **options) -> _SafeWriter:
    """A CSV writer for ``fh`` whose cells are inert in a spreadsheet (``options``: ``csv.writer``'s)."""
    return _SafeWriter(fh, **options)


def csv_dict_writer(fh, fieldnames, **options) -> _SafeDictWriter:
    """A ``csv.DictWriter`` for ``fh`` whose cells are inert in a spreadsheet."""
    return _SafeDictWriter(fh, fieldnames, **options)


#: how much of a learner's name a printed line shows
SHOWN = 80


def shown(text: Any, limit: int = SHOWN) -> str:
    """A name or text a learner chose, as a terminal line may print it: escapes instead of control characters,
    at most ``limit`` characters."""
    text = printable(str(text))
    return text if len(text) <= limit else text[:limit] + "..."
