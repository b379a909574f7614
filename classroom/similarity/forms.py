"""Forms: which learners wrote an exercise the same way, how many of the class did, and how unlikely it is that two
learners match on so many exercises at once.

Two learners write an exercise in one *form* when their code of it is at least :data:`SAME` alike
(:mod:`classroom.similarity.compare`: after normalisation a copy under a disguise is 85-100% alike its source,
almost always identical, and the planted classes' independent learners are either identical, on short code
written the one natural way, or at most 89% alike). A learner writes *the reference's form* when at least SAME
of their code is in the reference. A form is *rare* when the reference does not write it and at most
:data:`MAX_SHARE` of the learners who wrote the exercise do: a ring of eight in a class of thirty shares a rare
form; the one natural way to write a two-line function, which half the class writes, or the book's own, is
common.

Rare forms make the class's yardstick (:mod:`classroom.similarity.calibrate`): the learners who share a pair's
rare form are left out of "the class" the pair is measured against, so a solution passed around a group does not
become the class's own as the group grows.

*Joint evidence.* On each exercise, the share of the class's pairs of learners who match (share a form, common
or rare), ``q``, is this class's own rate of matching on it. A pair who match on ``m`` of the ``M`` exercises both
wrote is set against it: the probability that two learners match on at least ``m`` of those ``M`` exercises if
each exercise were matched at its rate, apart from the others (a Poisson binomial tail), times the number of
pairs in the class, is :attr:`Joint.chance`: how many pairs of this class would match so by chance. Whole-notebook
copies match on every exercise; independent learners match where an exercise has one natural form, and rarely on
all at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from classroom.similarity.compare import ExerciseMatrix

#: two sides write an exercise in one form from this likeness on. Measured on the planted classes A and B and
#: class A's ring classes: of 556 exercises of a whole-notebook copy, 553 are identical to their source's (1.00)
#: and the rest 0.85, 0.87 and 0.92 alike; independent learners' are identical or at most 0.89 alike
SAME = 0.9
#: a side with fewer features wrote nothing of the exercise to share (the release's stub, a line begun)
WRITTEN = 12
#: a form that more than this share of the learners who wrote the exercise write is the class's, not a group's:
#: a ring of eight in a class of thirty (27%) is a group; of the forms the reference does not write, the
#: most independent learners of the planted classes share is 4 of 16 (25%)
MAX_SHARE = 0.4
#: a pair is flagged on its joint evidence when fewer than this many pairs of the class would match on so many
#: exercises by chance. Measured on the classes tuned on (class A, and class A's independent learners with
#: generated rings and whole-notebook copies, tests/grading/similarity/rings.py), 09-vision-transformer: every
#: whole-notebook copy and ring pair at most 0.00032 (jo and wes: jo's code, the reference's form on 6 of 7
#: exercises, copied), every independent pair at least 0.016 (jo and dee, who pasted the reference: 5 of 7).
#: 02-attention's four exercises never reach it: its copies are flagged on their score
CHANCE = 0.002


@dataclass
class ExerciseForms:
    """One exercise's forms over a class of ``n`` learners (the reference is not a learner here)."""

    name: str
    written: np.ndarray  # (n,) bool: the learner wrote code of the exercise (WRITTEN features or more)
    same: np.ndarray  # (n, n) bool: both wrote it, in one form (a learner is in their own form)
    reference: np.ndarray  # (n,) bool: the learner's form is the reference's
    rate: float  # q: the share of pairs of learners who both wrote it that match on it

    @classmethod
    def of(cls, m: ExerciseMatrix) -> ExerciseForms:
        n = len(m.learners)
        written = m.sizes[:n] >= WRITTEN
        same = (m.similar[:n, :n] >= SAME) & written[:, None] & written[None, :]
        pairs = int(written.sum()) * (int(written.sum()) - 1) // 2
        matched = (int(same.sum()) - int(written.sum())) // 2
        return cls(m.name, written, same, (m.similar[:n, n] >= SAME) & written, matched / pairs if pairs else 0.0)

    def holders(self, i: int, j: int) -> np.ndarray:
        """The learners who write the form ``i`` and ``j`` share (bool mask), theirs included."""
        return self.same[i] | self.same[j]

    def common(self, i: int, j: int) -> bool:
        """Whether the form ``i`` and ``j`` share is the class's: the reference's, or too many learners'."""
        return bool(self.reference[i] or self.reference[j]
                    or self.holders(i, j).sum() > MAX_SHARE * self.written.sum())

    def rare(self, i: int, j: int) -> bool:
        """Whether learners ``i`` and ``j`` share a rare form (see the module's text)."""
        return bool(self.same[i, j]) and i != j and not self.common(i, j)


def class_forms(matrices: list[ExerciseMatrix]) -> list[ExerciseForms]:
    return [ExerciseForms.of(m) for m in matrices]


def at_least(rates: list[float], m: int) -> float:
    """P(at least ``m`` successes) of independent trials that succeed with these probabilities."""
    dist = np.zeros(len(rates) + 1)
    dist[0] = 1.0
    for q in rates:
        dist[1:] = dist[1:] * (1 - q) + dist[:-1] * q
        dist[0] *= 1 - q
    return float(min(1.0, dist[m:].sum()))


@dataclass
class Joint:
    """A pair of learners' joint evidence: on how many exercises they match, of how many both wrote, and how many
    pairs of the class would match so by chance."""

    identical: list[str]  # the exercises they match on
    comparable: int  # the exercises both wrote
    tail: float  # P(two learners match on at least len(identical) of them), at the class's rates
    chance: float  # tail times the class's number of pairs

    @property
    def flagged(self) -> bool:
        return self.chance <= CHANCE


def joint(forms: list[ExerciseForms], i: int, j: int, pairs: int) -> Joint:
    """Learners ``i`` and ``j``'s joint evidence in a class of ``pairs`` pairs (see the module's text)."""
    both = [f for f in forms if f.written[i] and f.written[j]]
    identical = [f.name for f in both if f.same[i, j]]
    tail = at_least([f.rate for f in both], len(identical))
    return Joint(identical, len(both), tail, tail * pairs)
