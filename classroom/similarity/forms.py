"""Forms: which learners wrote an exercise the same way, how many of the class did, and how unlikely it is that two
learners match on so many exercises at once.

Two learners write an exercise in one *form* when their code of it is at least :data:`SAME` alike
(:mod:`classroom.similarity.compare`: after normalisation a copy under a disguise is 85-100% alike its source,
almost always identical, and the planted classes' independent learners are either identical, on short code
written the one natural way, or at most 89% alike). A learner writes *the reference's form* (the book's code)
when at least SAME of their code is in the reference. A form is *rare* when the reference does not write it and
at most :data:`MAX_SHARE` of the learners who wrote the exercise do: a ring of eight in a class of thirty shares a
rare form; the one natural way to write a two-line function, which half the class writes, or the book's own, is
common.

*The book's code is evidence of nothing between two learners.* Learners who follow the book write its code, and
they do so on most exercises at once, not one exercise at a time: three who do in a class of fourteen are as
alike as a copy and its source on those exercises, and nothing in the code tells them from one. So where one of
two learners writes the reference's form (:meth:`ExerciseForms.book`), what they have in common is the book's,
as what the release gives is the release's: the exercise carries no evidence in their score
(:mod:`classroom.similarity.calibrate`), is not one they match on in their joint evidence, and is not a form a
group shares (:mod:`classroom.similarity.groups`). A learner whose code is the book's is still measured against
the reference, as a pasted solution is; a copy of such a learner's notebook is found by what of it is not the
book's (a notebook that is the book's on every exercise is, between two learners, evidence of nothing).

Rare forms make the class's yardstick (:mod:`classroom.similarity.calibrate`): the learners who share a pair's
rare form are left out of "the class" the pair is measured against, so a solution passed around a group does not
become the class's own as the group grows.

*Joint evidence.* On each exercise, of the class's pairs of learners who both wrote it, neither in the book's
form, the share who match (share a form, common or rare), ``q``, is this class's own rate of matching on it. A
pair who match on ``m`` of the ``M`` exercises both wrote, neither in the book's form, is set against it: the
probability that two learners match on at least ``m`` of those ``M`` exercises if each exercise were matched at
its rate, apart from the others (a Poisson binomial tail), times the number of pairs in the class, is
:attr:`Joint.chance`: how many pairs of this class would match so by chance. Whole-notebook copies match on every
exercise; independent learners match where an exercise has one natural form, and rarely on all at once.
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
#: most independent learners of classes A and B share is 4 of 16 (25%), of class C 5 of 14 (36%: the natural
#: prepend_cls_and_distillation_tokens, a rare form by this rule)
MAX_SHARE = 0.4
#: a pair is flagged on its joint evidence when fewer than this many pairs of the class would match on so many
#: exercises by chance. Set on the classes tuned on (class A, and class A's independent learners with generated
#: rings and whole-notebook copies, tests/grading/similarity/rings.py), 09-vision-transformer, when the book's code
#: still counted as a match. Without it, independent pairs of learners of classes A and B and their ring classes
#: are at least 41; whole-notebook copies and rings, whose matches are then what they share beyond the book's
#: code, are flagged on their score, and the joint evidence flags none of them alone
CHANCE = 0.002


@dataclass
class ExerciseForms:
    """One exercise's forms over a class of ``n`` learners (the reference is not a learner here)."""

    name: str
    written: np.ndarray  # (n,) bool: the learner wrote code of the exercise (WRITTEN features or more)
    same: np.ndarray  # (n, n) bool: both wrote it, in one form (a learner is in their own form)
    reference: np.ndarray  # (n,) bool: the learner's form is the reference's (the book's code)
    rate: float  # q: of the pairs of learners who both wrote it, neither in the book's form, the share who match

    @classmethod
    def of(cls, m: ExerciseMatrix) -> ExerciseForms:
        n = len(m.learners)
        written = m.sizes[:n] >= WRITTEN
        same = (m.similar[:n, :n] >= SAME) & written[:, None] & written[None, :]
        reference = (m.similar[:n, n] >= SAME) & written
        own = written & ~reference
        pairs = int(own.sum()) * (int(own.sum()) - 1) // 2
        matched = (int(same[own][:, own].sum()) - int(own.sum())) // 2
        return cls(m.name, written, same, reference, matched / pairs if pairs else 0.0)

    def book(self, i: int, j: int) -> bool:
        """Whether what learners ``i`` and ``j`` have in common on the exercise is the book's: one of them writes
        the reference's form (see the module's text)."""
        return bool(self.reference[i] or self.reference[j])

    def holders(self, i: int, j: int) -> np.ndarray:
        """The learners who write the form ``i`` and ``j`` share (bool mask), theirs included."""
        return self.same[i] | self.same[j]

    def common(self, i: int, j: int) -> bool:
        """Whether the form ``i`` and ``j`` share is the class's: the reference's, or too many learners'."""
        return self.book(i, j) or bool(self.holders(i, j).sum() > MAX_SHARE * self.written.sum())

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
    """A pair of learners' joint evidence: on how many exercises they match, of how many both wrote (neither in
    the book's form), and how many pairs of the class would match so by chance."""

    identical: list[str]  # the exercises they match on, neither in the book's form
    comparable: int  # the exercises both wrote, neither in the book's form
    tail: float  # P(two learners match on at least len(identical) of them), at the class's rates
    chance: float  # tail times the class's number of pairs

    @property
    def flagged(self) -> bool:
        return self.chance <= CHANCE


def joint(forms: list[ExerciseForms], i: int, j: int, pairs: int) -> Joint:
    """Learners ``i`` and ``j``'s joint evidence in a class of ``pairs`` pairs (see the module's text)."""
    both = [f for f in forms if f.written[i] and f.written[j] and not f.book(i, j)]
    identical = [f.name for f in both if f.same[i, j]]
    tail = at_least([f.rate for f in both], len(identical))
    return Joint(identical, len(both), tail, tail * pairs)
