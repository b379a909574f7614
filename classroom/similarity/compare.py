"""How alike two sides' code of one exercise is: the share of their features they have in common.

Each side's code of an exercise is its multiset of features (:func:`classroom.similarity.ir.features`) less
the release's: what the release gives (its signature, its docstring, ``raise NotImplementedError``) never
counts. Two learners are alike by the Dice coefficient of their features, ``2 |A & B| / (|A| + |B|)``;
a learner is like the reference by the share of the learner's features that the reference has,
``|A & R| / |A|``, because the course's functions do more than an exercise asks (options, checks), and
what matters is whether the learner's code is in them. The reference is its best source for that learner
(the course_lib function or the solution notebook's cell).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from classroom.similarity.ir import features
from classroom.similarity.reading import ClassCode, Code


@dataclass
class Side:
    """One side's code of one exercise as compared: its features (the release's removed), where each was
    written, and how much there is."""

    code: Code
    counts: Counter
    lines: dict[int, frozenset]

    @property
    def size(self) -> int:
        return sum(self.counts.values())

    @classmethod
    def of(cls, code: Code, base: Counter) -> Side:
        counts, lines = features(code.roots)
        return cls(code, counts - base, lines)


@dataclass
class ExerciseMatrix:
    """One exercise over a class: every learner's side, the reference's sources, and how alike they are.

    ``similar[i, j]`` for learners ``i`` and ``j`` (Dice); row and column ``n`` (the last) is the reference:
    ``similar[i, n]`` is the share of learner ``i``'s code in the reference source that has most of it,
    ``source[i]`` (an index into ``reference``).
    """

    name: str
    learners: list[str]
    sides: list[Side]
    reference: list[Side]
    similar: np.ndarray
    source: np.ndarray

    @property
    def sizes(self) -> np.ndarray:
        """Each learner's amount of code (features), the reference's (the largest source's) last."""
        return np.array([s.size for s in self.sides] + [max((r.size for r in self.reference), default=0)])


def matrix(name: str, learners: list[str], sides: list[Side], reference: list[Side]) -> ExerciseMatrix:
    """How alike every pair of learners is on one exercise, and every learner and the reference."""
    vocabulary: dict[int, int] = {}
    for side in sides + reference:
        for f in side.counts:
            vocabulary.setdefault(f, len(vocabulary))
    n, m = len(sides), max(len(vocabulary), 1)

    def dense(side: Side) -> np.ndarray:
        v = np.zeros(m, dtype=np.float32)
        for f, c in side.counts.items():
            v[vocabulary[f]] = c
        return v

    x = np.stack([dense(s) for s in sides]) if sides else np.zeros((0, m), dtype=np.float32)
    totals = x.sum(axis=1)
    similar = np.eye(n + 1)
    shared = np.zeros((n, n))
    rows = max(1, 4_000_000 // max(n * m, 1))  # the pairwise shared counts, a block of rows at a time (16 MB)
    for start in range(0, n, rows):
        block = x[start:start + rows]
        shared[start:start + rows] = np.minimum(block[:, None, :], x[None, :, :]).sum(axis=2)
    both = totals[:, None] + totals[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        similar[:n, :n] = np.where(both > 0, 2 * shared / np.where(both > 0, both, 1), 0.0)
    np.fill_diagonal(similar, 1.0)
    source = np.zeros(n, dtype=int)
    if reference and n:
        r = np.stack([dense(s) for s in reference])
        inside = np.minimum(x[:, None, :], r[None, :, :]).sum(axis=2)  # (n, sources)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(totals[:, None] > 0, inside / np.where(totals[:, None] > 0, totals[:, None], 1), 0.0)
        source = share.argmax(axis=1)
        similar[:n, n] = similar[n, :n] = share.max(axis=1)
    return ExerciseMatrix(name, learners, sides, reference, similar, source)


def compare_class(cls: ClassCode) -> list[ExerciseMatrix]:
    """Every exercise's matrix over the class (learners in name order)."""
    learners = sorted(cls.learners)
    out = []
    for name in cls.exercises:
        base = features(cls.release[name].roots)[0]
        sides = [Side.of(cls.code(learner, name), base) for learner in learners]
        out.append(matrix(name, learners, sides, [Side.of(c, base) for c in cls.reference[name]]))
    return out
