"""What the similarity report finds on a planted class: recall per disguise and per ring size, false flags, margins.

:func:`run` writes a class's submissions into a course folder and runs ``make similarity``'s command on it, as an
instructor does; :func:`measure` reads its pairs' and groups' CSVs back against what was planted:

* a copy (:class:`~tests.grading.similarity.planted.Copy`) is found when its pair is flagged; a pair of two
  copies of one source is planted too;
* a ring (:class:`~tests.grading.similarity.rings.Ring`, source and copiers) is found when one group holds all
  its members; the group's other members are named (none on the planted classes);
* an independent pair of learners is every other pair of two learners; a flagged one is a false flag (the issue
  allows at most one per assignment);
* a learner who worked alone and is flagged against the reference *matches the book's code* (:attr:`Figures.book`):
  a pasted solution looks the same, so the report keeps that flag, apart from the pairs of learners; it is not a
  pair of learners and does not count as one.

    python -m tests.grading.similarity.measure [a|b|c|d|a-rings|b-rings|c-rings|d-rings ...]

prints the figures of each class named (all of them by default): ``a``, ``b``, ``c`` and ``d`` as planted (classes
C and D are their independent learners alone), ``<x>-rings`` their independent learners with the rings of each
of rings.LAYOUTS.
"""

from __future__ import annotations

import csv
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.grading.similarity import planted
from tests.grading.similarity.planted import REFERENCE, ROOT, Copy, Submission
from tests.grading.similarity.rings import Ring


@dataclass
class Planted:
    """One assignment's planted class: its learners, its copies and its rings."""

    name: str
    slug: str
    learners: dict[str, Submission]
    copies: list[Copy]
    rings: list[Ring] = field(default_factory=list)


def read_csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def new_course(root: Path) -> Path:
    for folder in ("exercises", "solutions"):
        (root / folder).symlink_to(ROOT / folder)
    return root


def run(root: Path, classes: list[Planted]) -> dict[str, tuple[list[dict], list[dict]]]:
    """Write the classes (one per assignment) into ``root`` and run the command once: each assignment's pairs' and
    groups' CSV rows."""
    from classroom.similarity.command import main

    for c in classes:
        planted.write_class(root, c.slug, c.learners)
    assert main(["--root", str(root), *[a for c in classes for a in ("--assignment", c.slug)]]) == 0
    out = root / "similarity"
    return {c.slug: (read_csv(out / f"{c.slug}.csv"), read_csv(out / f"{c.slug}-groups.csv")) for c in classes}


def pair_of(row: dict) -> tuple[str, str]:
    return row["learner_a"], row["learner_b"]


def score(row: dict) -> float:
    return float(row["score"]) if row["score"] else 0.0


def chance(row: dict) -> float:
    return float(row["chance"]) if row["chance"] else float("inf")


@dataclass
class Figures:
    """What :func:`measure` found on one assignment's class."""

    name: str
    slug: str
    learners: int
    by_disguise: dict[str, tuple[int, int]]  # disguise: (copies found, copies)
    pairs_found: tuple[int, int]  # planted pairs flagged (copier and source, and two copies of one source)
    by_ring_size: dict[int, tuple[int, int]]  # ring size: (rings found, rings)
    ring_outsiders: list[str]  # members of a ring's group who are not of the ring
    missed: list[tuple[tuple[str, str], str, str]]  # planted pairs not flagged: (pair, how, score)
    false_flags: list[tuple[tuple[str, str], str, str]]  # independent pairs of learners flagged: (pair, score, chance)
    book: list[tuple[str, str]]  # learners who worked alone, flagged against the reference: (learner, score)
    independent: int  # independent pairs of learners
    lowest_copy: tuple[float, tuple[str, str]]  # the planted pair with the lowest score
    lowest_copy_by_score: tuple[float, tuple[str, str]]  # ... of those flagged on their score alone
    highest_independent: tuple[float, tuple[str, str]]  # of the independent pairs of learners
    highest_book: tuple[float, tuple[str, str]]  # of the learners who worked alone, against the reference
    highest_copy_chance: tuple[float, tuple[str, str]]  # whole-notebook copies' and rings' largest chance
    lowest_independent_chance: tuple[float, tuple[str, str]]

    def lines(self) -> list[str]:
        out = [f"{self.name} {self.slug}: {self.learners} learners"]
        out.append("  copies found by disguise: " + ", ".join(f"{d} {a}/{b}" for d, (a, b) in
                                                              sorted(self.by_disguise.items())))
        out.append(f"  planted pairs flagged: {self.pairs_found[0]}/{self.pairs_found[1]}")
        if self.by_ring_size:
            out.append("  rings found by size: " + ", ".join(f"{k}: {a}/{b}" for k, (a, b) in
                                                           sorted(self.by_ring_size.items()))
                       + (f" (outsiders in a ring's group: {self.ring_outsiders})" if self.ring_outsiders else ""))
        out.append(f"  independent pairs of learners flagged: {len(self.false_flags)} of {self.independent} "
                   f"{self.false_flags}")
        out.append(f"  matches the book's code (learners who worked alone, flagged against the reference): "
                   f"{self.book}; the highest {self.highest_book}")
        if self.missed:
            out.append(f"  MISSED: {self.missed}")
        out.append(f"  lowest copy score {self.lowest_copy}, of those flagged on their score alone "
                   f"{self.lowest_copy_by_score}; highest independent pair of learners {self.highest_independent}")
        out.append(f"  largest chance of a whole-notebook copy {self.highest_copy_chance}; smallest of an "
                   f"independent pair {self.lowest_independent_chance}")
        return out


def measure(c: Planted, rows: list[dict], groups: list[dict]) -> Figures:
    copies = planted.planted_pairs(c.copies, c.slug)
    by_pair = {pair_of(r): r for r in rows}
    flagged = {p for p, r in by_pair.items() if r["flagged"] == "yes"}
    by_disguise: dict[str, list[int]] = {}
    for cp in c.copies:
        found = by_disguise.setdefault(cp.disguise, [0, 0])
        found[0] += cp.pair in flagged
        found[1] += 1
    members: dict[str, set[str]] = {}
    for g in groups:
        members.setdefault(g["group"], set()).add(g["learner"])
    by_size: dict[int, list[int]] = {}
    outsiders: list[str] = []
    for ring in c.rings:
        if len(ring.members) < 3:
            continue
        holding = [m for m in members.values() if ring.members <= m]
        found = by_size.setdefault(len(ring.members), [0, 0])
        found[0] += bool(holding)
        found[1] += 1
        for m in holding:
            outsiders += sorted(m - ring.members)
    independent = [r for p, r in by_pair.items() if p not in copies and p[1] != REFERENCE]
    alone = [r for p, r in by_pair.items() if p not in copies and p[1] == REFERENCE]
    false = [(pair_of(r), r["score"], r["chance"]) for r in independent if r["flagged"] == "yes"]
    book = [(r["learner_a"], r["score"]) for r in alone if r["flagged"] == "yes"]
    planted_rows = [by_pair[p] for p in copies]
    whole = [by_pair[p] for p in copies if by_pair[p]["comparable"] and "one exercise" not in copies[p]]
    return Figures(
        c.name, c.slug, len(c.learners), {d: tuple(v) for d, v in by_disguise.items()},
        (sum(p in flagged for p in copies), len(copies)), {k: tuple(v) for k, v in by_size.items()}, outsiders,
        [(p, how, by_pair[p]["score"]) for p, how in copies.items() if p not in flagged], false, book,
        len(independent),
        min(((score(r), pair_of(r)) for r in planted_rows), default=(0.0, ("", ""))),
        min(((score(r), pair_of(r)) for r in planted_rows if r["flagged_by"] == "score"),
            default=(float("inf"), ("", ""))),
        max(((score(r), pair_of(r)) for r in independent), default=(0.0, ("", ""))),
        max(((score(r), pair_of(r)) for r in alone), default=(0.0, ("", ""))),
        max(((chance(r), pair_of(r)) for r in whole), default=(0.0, ("", ""))),
        min(((chance(r), pair_of(r)) for r in independent if r["chance"]), default=(float("inf"), ("", ""))))


# --------------------------------------------------------------------------
# The classes
# --------------------------------------------------------------------------
def independent_of(name: str, slug: str) -> dict[str, Submission]:
    """A planted class's learners who worked alone."""
    module = planted.load(name)
    copiers = {c.copier for c in module.COPIES if c.slug == slug}
    return {k: v for k, v in module.LEARNERS[slug].items() if k not in copiers}


def planted_class(name: str, slug: str) -> Planted:
    """A class as planted (class_a.py, class_b.py, ...)."""
    module = planted.load(name)
    return Planted(name, slug, module.LEARNERS[slug], [c for c in module.COPIES if c.slug == slug])


#: the seed of the ring classes made from classes A and B (the issue's number)
RING_SEED = 53


def ring_class(name: str, slug: str, layout: str, seed: int = RING_SEED) -> Planted:
    """A planted class's independent learners with the rings of one layout (rings.py)."""
    from tests.grading.similarity import rings

    module = planted.load(name)
    learners, made, copies = rings.build(slug, independent_of(name, slug), layout, seed,
                                         exclude=frozenset(module.SOLUTION_LIKE))
    return Planted(f"{name}-rings-{layout}", slug, learners, copies, made)


def classes(which: str) -> list[list[Planted]]:
    """The planted classes ``which`` names, as lists of one class per assignment (each list is one course)."""
    from tests.grading.similarity import rings

    slugs = list(planted.NOTEBOOKS)
    if which in ("a", "b", "c", "d"):
        return [[planted_class(which, s) for s in slugs]]
    if which in ("a-rings", "b-rings", "c-rings", "d-rings"):
        return [[ring_class(which[0], s, layout) for s in slugs] for layout in rings.LAYOUTS]
    raise ValueError(f"no planted class {which!r}")


def main(names: list[str]) -> int:
    for which in names or ["a", "b", "c", "d", "a-rings", "b-rings", "c-rings", "d-rings"]:
        for course in classes(which):
            with tempfile.TemporaryDirectory() as tmp:
                found = run(new_course(Path(tmp)), course)
            for c in course:
                print("\n".join(measure(c, *found[c.slug]).lines()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
