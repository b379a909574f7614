"""The class list, ``id,name,email``: one reader for `make hub-users` (accounts) and `make export-grades` (names).

Each caller words what it does with a row it cannot use: the hub skips it and goes on, the export refuses
the whole list before writing anything.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ("id", "name", "email")


class RosterError(ValueError):
    """The class list breaks a rule; the message names the row and the rule."""


@dataclass(frozen=True)
class Entry:
    """One learner of the list, stripped of surrounding blanks; ``line`` is the file's line (the header is 1)."""

    line: int
    id: str
    name: str = ""
    email: str = ""


@dataclass(frozen=True)
class Unusable:
    """A row that names no new learner: its id is empty (``first`` is None) or already on line ``first``."""

    line: int
    id: str
    first: int | None


def read_roster(path: Path) -> tuple[list[Entry], list[Unusable]]:
    """The list's learners in the file's order (each id once) and its unusable rows; RosterError on the header."""
    entries: dict[str, Entry] = {}
    unusable = []
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise RosterError(f"{path}: the header {reader.fieldnames} lacks the column(s) {missing}; "
                              f"a class list's columns are {','.join(COLUMNS)}")
        for line, row in enumerate(reader, start=2):
            ident = (row["id"] or "").strip()
            if not ident or ident in entries:
                unusable.append(Unusable(line, ident, entries[ident].line if ident else None))
                continue
            entries[ident] = Entry(line, ident, (row["name"] or "").strip(), (row["email"] or "").strip())
    return list(entries.values()), unusable
