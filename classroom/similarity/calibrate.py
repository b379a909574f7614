"""What is unusual in this class: each pair's evidence of shared code, measured against its classmates.

Two learners who write the one natural form of an exercise are alike, and so
are most of their classmates: their likeness says nothing. Two who share a
form nobody else comes near are the pair to read. So a pair's likeness on an
exercise, ``s`` (:mod:`classroom.similarity.compare`), is set against the
likeness it has *through the class*, ``t``: for every third participant (a
classmate, or the reference), how alike it is to both sides (the lesser of
its two likenesses), and of those the :data:`NEAREST`-th largest, so that a
form which three others share is the class's, not the pair's. The learners
who share the pair's *rare* form (:mod:`classroom.similarity.forms`: one the
reference does not write and at most a sizeable share of the class does) are
not third participants: they are the pair's group, so a solution passed round
a group of eight stands out from the class as a copy between two does. The
evidence of the exercise is how many times closer the pair is than that::

    evidence = ln((1 - t + EPSILON) / (1 - s + EPSILON))

0 when the class is as close (or the pair is not alike), about 2.4 for a pair
identical where the class comes within 80%, and ``EPSILON`` keeps two short
identical functions from counting as infinitely close. Between two learners,
an exercise on which one of them writes the reference's form has no evidence
(0): what they share there is the book's, which learners who follow the book
write alike on most exercises at once (:mod:`classroom.similarity.forms`).
A learner against the reference is measured as above: a learner whose code is
the book's where the class's is not is what a pasted solution looks like, and
the report shows those pairs apart, as *matches the book's code*.

A pair's score is the evidence of all its counted exercises, each weighing
by its amount of code (an exercise counts from :data:`COUNTED` features on
both sides; a whole of at least :data:`SUBSTANTIAL`), or, if larger, half the
evidence of one substantial exercise (at least :data:`SUBSTANTIAL` features
on both sides): one large exercise copied into otherwise own work is found,
and one exercise needs twice the evidence of the whole, because it is the
best of several. A pair with no counted exercise has no score.

A pair of learners also has its joint evidence (:class:`~classroom.similarity.forms.Joint`): on how many
exercises they write one form, and how many pairs of this class would match on so many by chance. A pair is
flagged when its score reaches the threshold or when fewer than :data:`~classroom.similarity.forms.CHANCE`
pairs would match so by chance; learners linked by flagged pairs are a group
(:mod:`classroom.similarity.groups`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from classroom.similarity.compare import ExerciseMatrix
from classroom.similarity.forms import ExerciseForms, Joint, class_forms, joint

#: the third participant that measures the class's closeness is the NEAREST-th closest to both sides
NEAREST = 3
#: in a class too small to be its own yardstick (fewer than NEAREST third participants who solved the exercise),
#: the missing ones count
#: as this alike to both sides: independent solutions of an exercise are about half alike (the median pair of
#: the planted classes' exercises: 0.38 to 0.56)
PRIOR = 0.5
#: keeps identical short code from counting as infinitely close (see the module's text)
EPSILON = 0.02
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
#: a pair whose score reaches this is flagged. Set on class A (tests/grading/similarity) and on class A's
#: independent learners with generated rings and whole-notebook copies (rings.py), the classes tuned on, and kept
#: when the book's code became no evidence between two learners: there, the highest independent pair of learners
#: scores 0.67 (02-attention: ada and hana, 87% alike on masked_softmax) and 0.42 (09-vision-transformer), the
#: highest learner against the reference 0.92 (09: jo, whose code is the book's on 6 of 7 exercises); the lowest
#: copy flagged on its score 1.36 (02: a verbatim copy of ada) and 1.29 (09: dee, who pasted the reference)
THRESHOLD = 1.1
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
    shared: bool = False  # both sides write it in one form (against the reference: the reference's form)
    holders: int = 0  # how many learners of the class write that form (the pair included)
    written: int = 0  # how many learners of the class wrote the exercise
    book: bool = False  # a side writes the reference's form (the book's code): between learners, no evidence

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
    joint: Joint | None = field(init=False, default=None)  # for two learners
    group: int | None = field(init=False, default=None)  # the group both are in (classroom.similarity.groups)

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


def through_class(similar: np.ndarray, solved: np.ndarray, forms: ExerciseForms | None = None) -> np.ndarray:
    """``t[i, j]``: the NEAREST-th largest, over every third participant ``c`` who solved the exercise
    (``solved[c]``: counted code) and does not share a rare form with ``i`` and ``j``
    (:meth:`~classroom.similarity.forms.ExerciseForms.rare`), of ``min(similar[i, c], similar[j, c])``; PRIOR
    stands for each such participant a small class lacks. A learner who left the exercise as released says
    nothing of how alike its solutions are; a learner who shares the pair's rare form is of the pair's group, not
    of the class it is measured against."""
    n = similar.shape[0]
    learners = n - 1
    out = np.full((n, n), PRIOR)
    rows = np.arange(n)
    thirds = int(solved.sum()) - solved[:, None].astype(int) - solved[None, :].astype(int)  # (i, j)
    for i in range(n):
        both = np.minimum(similar[i][None, :], similar)  # row j, column c
        both[:, ~solved] = -1.0
        both[:, i] = -1.0
        both[rows, rows] = -1.0
        left = thirds[i].copy()
        if forms is not None and i < learners:
            for j in range(learners):
                if forms.rare(i, j):
                    group = np.zeros(n, dtype=bool)
                    group[:learners] = forms.holders(i, j)
                    group[[i, j]] = False
                    left[j] -= int((group & solved).sum())
                    both[j, group] = -1.0
        missing = np.maximum(0, NEAREST - left)  # per row j
        prior = np.where(np.arange(NEAREST)[None, :] < missing[:, None], PRIOR, -1.0)
        out[i] = np.partition(np.concatenate([both, prior], axis=1), -NEAREST, axis=1)[:, -NEAREST]
    return out


def calibrate(matrices: list[ExerciseMatrix], forms: list[ExerciseForms] | None = None) -> list[Pair]:
    """Every pair of learners and every learner with the reference, highest score first (no score last);
    ``forms``: the exercises' forms (:func:`~classroom.similarity.forms.class_forms`), when already made."""
    if not matrices:
        return []
    learners = matrices[0].learners
    n = len(learners)
    pairs_in_class = n * (n - 1) // 2
    forms = forms if forms is not None else class_forms(matrices)
    per_exercise = []
    for m, f in zip(matrices, forms):
        t = through_class(m.similar, m.sizes >= COUNTED, f)
        e = evidence(m.similar, t)
        book = f.reference[:, None] | f.reference[None, :]  # (n, n): a side writes the book's code
        e[:n, :n] = np.where(book, 0.0, e[:n, :n])
        per_exercise.append((m, f, t, e, m.sizes))
    pairs = []
    for i in range(n):
        for j in list(range(i + 1, n)) + [n]:
            found = []
            for m, f, t, e, sizes in per_exercise:
                size = int(sizes[i]) if j == n else int(min(sizes[i], sizes[j]))
                if j == n:
                    shared = book = bool(f.reference[i])
                    holders = int(f.reference.sum()) if shared else 0
                else:
                    shared, book = bool(f.same[i, j]), f.book(i, j)
                    holders = int(f.holders(i, j).sum()) if shared else 0
                found.append(ExerciseEvidence(m.name, float(m.similar[i, j]), float(t[i, j]), float(e[i, j]),
                                              size, (i, j), shared, holders, int(f.written.sum()), book))
            pair = Pair(learners[i], REFERENCE if j == n else learners[j], found)
            pair.joint = None if j == n else joint(forms, i, j, pairs_in_class)
            pairs.append(pair)
    return sorted(pairs, key=lambda p: (p.score is None, -(p.score or 0.0), p.left, p.right))


def quantised(x: float) -> int:
    """A score in hundredths, rounded down: what the page and the CSV show, and what is compared with the
    threshold (so a row never reads above the threshold and unflagged, or below it and flagged)."""
    return math.floor(x * 100 + 1e-9)


def threshold_hundredths(threshold: float) -> int:
    return math.ceil(threshold * 100 - 1e-9)


def by_score(pair: Pair, threshold: float) -> bool:
    return pair.score is not None and quantised(pair.score) >= threshold_hundredths(threshold)


def by_joint(pair: Pair) -> bool:
    return pair.joint is not None and pair.joint.flagged


def is_flagged(pair: Pair, threshold: float) -> bool:
    return by_score(pair, threshold) or by_joint(pair)


def flagged_by(pair: Pair, threshold: float) -> list[str]:
    """Why a pair is flagged: ``score`` (its score reaches the threshold), ``joint`` (its joint evidence)."""
    return [why for why, yes in (("score", by_score(pair, threshold)), ("joint", by_joint(pair))) if yes]


def ranked(pairs: list[Pair], threshold: float) -> list[Pair]:
    """The flagged pairs of learners first, then the learners flagged against the reference (*matches the book's
    code*), then the rest; each part by score, highest first, then by joint evidence."""
    return sorted(pairs, key=lambda p: (not is_flagged(p, threshold), is_flagged(p, threshold) and p.reference,
                                        p.score is None, -(p.score or 0.0),
                                        p.joint.chance if p.joint else math.inf, p.left, p.right))


def carriers(pair: Pair, threshold: float) -> list[ExerciseEvidence]:
    """The exercises that carry a flagged pair, the strongest first: those whose own evidence reaches the
    threshold, then (flagged on its joint evidence) those it matches on; none for a pair not flagged."""
    if not is_flagged(pair, threshold):
        return []
    out = pair.carried_by(threshold) if by_score(pair, threshold) else []
    if by_joint(pair):
        out += sorted((e for e in pair.exercises if e.exercise in pair.joint.identical and e not in out),
                      key=lambda e: -e.evidence * e.size)
    return out
