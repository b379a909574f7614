"""Mutants no test can tell from the reference (they compute the same thing), listed with the reason in
``tools/mutants_equivalent.toml`` and left out of the kill rate."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .mutate import Mutant

EQUIVALENT_FILE = Path(__file__).resolve().parents[1] / "mutants_equivalent.toml"


@dataclass
class Equivalent:
    assignment: str
    exercise: str
    before: str
    after: str
    reason: str
    used: bool = False


def load_equivalents(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    if not path.exists():
        return []
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, e in enumerate(data.get("equivalent", [])):
        missing = {"assignment", "exercise", "before", "after", "reason"} - set(e)
        if missing:
            raise ValueError(f"{path}: entry {i + 1} lacks {sorted(missing)}")
        if not e["reason"].strip():
            raise ValueError(f"{path}: entry {i + 1} gives no reason")
        out.append(Equivalent(e["assignment"], e["exercise"], e["before"].strip(), e["after"].strip(),
                              e["reason"].strip()))
    return out


def same_lines(s: str) -> str:
    return "\n".join(row.strip() for row in s.strip().splitlines())


def find_equivalent(equivalents: list[Equivalent], assignment: str, exercise: str, m: Mutant) -> Equivalent | None:
    for e in equivalents:
        if (e.assignment, e.exercise) == (assignment, exercise) and same_lines(e.before) == same_lines(m.before) \
                and same_lines(e.after) == same_lines(m.after):
            return e
    return None
