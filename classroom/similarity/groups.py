"""Groups: learners linked by flagged pairs, as when one solution is passed around a study group.

A group is :data:`MIN_SIZE` or more learners connected by flagged pairs of learners
(:func:`classroom.similarity.calibrate.is_flagged`; the reference is never a member, and two learners alone are a
pair, not a group). A ring of eight who handed in one learner's notebook is one group: every pair of it shares
that learner's forms, which the rest of the class does not write, so every pair of it is flagged
(:mod:`classroom.similarity.calibrate` leaves the ring's own members out of the class it measures them against).

What a group shares is shown once: on each exercise, the form most of its members write
(:class:`GroupExercise`), the code of one member who writes it, which members do, and how rare the form is
in the class (how many learners write it). The book's code is not a form a group shares: where a member writes
the reference's form, that is evidence of nothing between them and the others (:mod:`classroom.similarity.forms`);
the group names the exercises on which members write it (:attr:`Group.book`), apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from classroom.similarity.calibrate import Pair, is_flagged
from classroom.similarity.forms import ExerciseForms

#: the fewest learners a group has
MIN_SIZE = 3


@dataclass
class GroupExercise:
    """The form most of a group's members write on one exercise."""

    exercise: str
    shown: int  # the learner (index in the class, name order) whose code stands for the form
    members: list[str]  # the group's members who write it
    holders: int  # the learners of the class who write it (the members included)
    written: int  # the learners of the class who wrote the exercise


@dataclass
class Group:
    """Learners linked by flagged pairs (see the module's text), numbered in the report's order."""

    number: int
    members: list[str]
    pairs: list[Pair]  # every pair of two members, flagged or not
    exercises: list[GroupExercise]  # the exercises on which two members or more write one form, not the book's
    book: dict[str, list[str]]  # exercise: the members who write the reference's form on it

    @property
    def chance(self) -> float | None:
        """The smallest chance of a pair of the group (:class:`~classroom.similarity.forms.Joint`)."""
        return min((p.joint.chance for p in self.pairs if p.joint), default=None)

    @property
    def score(self) -> float | None:
        """The highest score of a pair of the group."""
        return max((p.score for p in self.pairs if p.score is not None), default=None)


def components(names: list[str], links: list[tuple[str, str]]) -> list[list[str]]:
    """The connected components of a graph (union-find), each sorted, in no particular order."""
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, b in links:
        parent[root(a)] = root(b)
    found: dict[str, list[str]] = {}
    for n in names:
        found.setdefault(root(n), []).append(n)
    return [sorted(c) for c in found.values()]


def shared_forms(members: list[str], learners: list[str], forms: list[ExerciseForms]) -> list[GroupExercise]:
    """On each exercise, the form most members write, if two or more do and it is not the book's."""
    index = [learners.index(m) for m in members]
    out = []
    for f in forms:
        own = [k for k in index if f.written[k] and not f.reference[k]]
        best: list[int] = []
        for r in own:
            with_r = [k for k in own if f.same[r, k]]
            if len(with_r) > len(best):
                best = with_r
        if len(best) >= 2:
            r = best[0]
            out.append(GroupExercise(f.name, r, [learners[k] for k in best], int(f.same[r].sum()),
                                     int(f.written.sum())))
    return out


def book_forms(members: list[str], learners: list[str], forms: list[ExerciseForms]) -> dict[str, list[str]]:
    """The exercises on which members write the reference's form, with those members."""
    out = {}
    for f in forms:
        who = [m for m in members if f.reference[learners.index(m)]]
        if who:
            out[f.name] = who
    return out


def find_groups(pairs: list[Pair], learners: list[str], forms: list[ExerciseForms], threshold: float) -> list[Group]:
    """The class's groups, largest first (then the least likely by chance), and each pair of two members of one
    group given its number (:attr:`Pair.group`)."""
    for p in pairs:
        p.group = None
    links = [(p.left, p.right) for p in pairs if not p.reference and is_flagged(p, threshold)]
    found = [c for c in components(list(learners), links) if len(c) >= MIN_SIZE]
    groups = []
    for members in found:
        inside = set(members)
        own = [p for p in pairs if not p.reference and p.left in inside and p.right in inside]
        groups.append(Group(0, members, own, shared_forms(members, learners, forms),
                            book_forms(members, learners, forms)))
    groups.sort(key=lambda g: (-len(g.members), g.chance if g.chance is not None else 1e300, g.members))
    for number, g in enumerate(groups, 1):
        g.number = number
        for p in g.pairs:
            p.group = number
    return groups
