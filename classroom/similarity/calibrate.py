"""What is unusual in this class: each pair's evidence of shared code, measured against its classmates.

Two learners who write the one natural form of an exercise are alike, and so
are most of their classmates: their likeness says nothing. Two who share a
form nobody else comes near are the pair to read. So a pair's likeness on an
exercise, ``s`` (:mod:`classroom.similarity.compare`), is set against the
likeness it has *through the class*, ``t``: for every third participant (a
classmate, or the reference), how alike it is to both sides (the lesser of
its two likenesses), and of those the :data:`NEAREST`-th largest, so that a
form which three others share is the class's, not the pair's, while two or
three learners who copied one source still stand out from the rest. The
evidence of the exercise is how many times closer the pair is than that::

    evidence = ln((1 - t + EPSILON) / (1 - s + EPSILON))

0 when the class is as close (or the pair is not alike), about 1.6 for a pair
identical where the class comes within 80%, and ``EPSILON`` keeps two short
identical functions from counting as infinitely close.

A pair's score is the evidence of all its counted exercises, each weighing
by its amount of code (an exercise counts from :data:`COUNTED` features on
both sides; a whole of at least :data:`SUBSTANTIAL`), or, if larger, half the
evidence of one substantial exercise (at least :data:`SUBSTANTIAL` features
on both sides): one large exercise copied into otherwise own work is found,
and one exercise needs twice the evidence of the whole, because it is the
best of several. A pair with no counted exercise has no score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from classroom.similarity.compare import ExerciseMatrix

#: the third participant that measures the class's closeness is the NEAREST-th closest to both sides
NEAREST = 3
#: in a class too small to be its own yardstick (fewer than NEAREST third participants who solved the exercise),
#: the missing ones count
#: as this alike to both sides: independent solutions of an exercise are about half alike (the median pair of
#: the planted classes' exercises: 0.38 to 0.56)
PRIOR = 0.5
#: keeps identical short code from counting as infinitely close (see the module's text)
EPSILON = 0.05
#: an exercise counts in a pair's score when both sides have at least this many features (about eight
#: operations with their operands): the course's shortest solutions (causal_mask, 21-27 features in the
#: planted class) count, a learner's unfinished two-line stub does not
COUNTED = 24
#: a pair's whole needs this many counted features, and one exercise alone flags a pair only from this size:
#: about 25 operations, masked_softmax or patchify written out, not attention_scores or a one-line
#: prepend_cls_add_pos, which independent learners write alike
SUBSTANTIAL = 75
#: one substantial exercise's evidence counts at this share of the whole's
SINGLE = 0.5
#: a pair whose score reaches this is flagged. Measured on the planted class A (tests/grading/similarity):
#: the highest independent pair scores 0.41 (02-attention) and 0.38 (09-vision-transformer), the lowest
#: planted copy 1.21 and 0.73
THRESHOLD = 0.55
#: the pseudo-learner that stands for the course's own code (not a valid student id, so it names no learner)
REFERENCE = "(reference)"


@dataclass
class ExerciseEvidence:
    """One exercise of one pair."""

    exercise: str
    similar: float  # s: how alike the pair's code is
    classmates: float  # t: how alike both sides are to the class (the NEAREST-th third participant)
    evidence: float
    size: int  # the smaller side's features (the learner's, against the reference)
    index: tuple[int, int]  # the sides in the exercise's matrix (the reference is the last index)

    @property
    def counted(self) -> bool:
        return self.size >= COUNTED

    @property
    def substantial(self) -> bool:
        return self.size >= SUBSTANTIAL


@dataclass
class Pair:
    """Two learners, or a learner and the reference, over an assignment's exercises."""

    left: str
    right: str
    exercises: list[ExerciseEvidence]
    whole: float | None = field(init=False)
    single: ExerciseEvidence | None = field(init=False)

    def __post_init__(self) -> None:
        counted = [e for e in self.exercises if e.counted]
        total = sum(e.size for e in counted)
        self.whole = sum(e.evidence * e.size for e in counted) / total if total >= SUBSTANTIAL else None
        big = [e for e in self.exercises if e.substantial]
        self.single = max(big, key=lambda e: e.evidence) if big else None

    @property
    def reference(self) -> bool:
        return self.right == REFERENCE

    @property
    def score(self) -> float | None:
        """The pair's evidence (see the module's text); None if no exercise counts."""
        if not any(e.counted for e in self.exercises):
            return None
        return max(self.whole or 0.0, SINGLE * self.single.evidence if self.single else 0.0)

    def carried_by(self, threshold: float) -> list[ExerciseEvidence]:
        """The counted exercises whose own evidence reaches the threshold, the strongest first."""
        return sorted((e for e in self.exercises if e.counted and e.evidence >= threshold),
                      key=lambda e: -e.evidence * e.size)


def evidence(similar: float | np.ndarray, classmates: float | np.ndarray):
    return np.maximum(0.0, np.log((1 - classmates + EPSILON) / (1 - similar + EPSILON)))


def through_class(similar: np.ndarray, solved: np.ndarray) -> np.ndarray:
    """``t[i, j]``: the NEAREST-th largest, over every third participant ``c`` who solved the exercise
    (``solved[c]``: counted code), of ``min(similar[i, c], similar[j, c])``; PRIOR stands for each such
    participant a small class lacks. A learner who left the exercise as released says nothing of how alike
    its solutions are."""
    n = similar.shape[0]
    out = np.full((n, n), PRIOR)
    rows = np.arange(n)
    thirds = int(solved.sum()) - solved[:, None].astype(int) - solved[None, :].astype(int)  # (i, j)
    for i in range(n):
        both = np.minimum(similar[i][None, :], similar)  # row j, column c
        both[:, ~solved] = -1.0
        both[:, i] = -1.0
        both[rows, rows] = -1.0
        missing = np.maximum(0, NEAREST - thirds[i])  # per row j
        prior = np.where(np.arange(NEAREST)[None, :] < missing[:, None], PRIOR, -1.0)
        out[i] = np.partition(np.concatenate([both, prior], axis=1), -NEAREST, axis=1)[:, -NEAREST]
    return out


def calibrate(matrices: list[ExerciseMatrix]) -> list[Pair]:
    """Every pair of learners and every learner with the reference, highest score first (no score last)."""
    if not matrices:
        return []
    learners = matrices[0].learners
    n = len(learners)
    per_exercise = []
    for m in matrices:
        t = through_class(m.similar, m.sizes >= COUNTED)
        e = evidence(m.similar, t)
        sizes = m.sizes
        per_exercise.append((m, t, e, sizes))
    pairs = []
    for i in range(n):
        for j in list(range(i + 1, n)) + [n]:
            found = []
            for m, t, e, sizes in per_exercise:
                size = int(sizes[i]) if j == n else int(min(sizes[i], sizes[j]))
                found.append(ExerciseEvidence(m.name, float(m.similar[i, j]), float(t[i, j]), float(e[i, j]),
                                              size, (i, j)))
            pairs.append(Pair(learners[i], REFERENCE if j == n else learners[j], found))
    return sorted(pairs, key=lambda p: (p.score is None, -(p.score or 0.0), p.left, p.right))


def quantised(x: float) -> int:
    """A score in hundredths, rounded down: what the page and the CSV show, and what is compared with the
    threshold (so a row never reads above the threshold and unflagged, or below it and flagged)."""
    return math.floor(x * 100 + 1e-9)


def threshold_hundredths(threshold: float) -> int:
    return math.ceil(threshold * 100 - 1e-9)


def is_flagged(pair: Pair, threshold: float) -> bool:
    return pair.score is not None and quantised(pair.score) >= threshold_hundredths(threshold)


def carriers(pair: Pair, threshold: float) -> list[ExerciseEvidence]:
    """The exercises that carry a flagged pair, the strongest first (none for a pair not flagged)."""
    return pair.carried_by(threshold) if is_flagged(pair, threshold) else []
