"""Classes with rings, made by a program: one learner's notebook passed around a group, and whole-notebook copies.

A *ring* of size k is an independent learner (the source) and k - 1 classmates who each handed in the source's
whole notebook under a disguise of their own; a *whole-notebook copy* is a ring of 2. :func:`build` puts rings
and copies on top of a planted class's independent learners (class A's, B's, C's or D's), each
copy under one of :data:`RING_DISGUISES`:

* ``comment``: verbatim, a comment added to every cell (the copy that changes nothing);
* ``rename``, ``extract``, ``inline``, ``reorder``, ``loops``, ``respell``, ``move``, ``dead``: one disguise of
  :mod:`~tests.grading.similarity.disguise`;
* ``several``: three of them at once (renamed, reordered, respelled, then helpers extracted).

A disguise that finds nothing to change in its source is not used for it (the next one in the rotation is),
so every copy's disguise changed something; the copy records the disguise it got. Everything is drawn from
``random.Random`` seeded by the seed and the layout: a layout and a seed give the same class every time.

A disguise keeps what the code computes: the 181 copies the layouts make of classes A's, B's and C's independent
learners all passed the hidden checks when this was written, and so do the 59 made of class D's.

Two layouts cover rings of 3 to 8 in classes of about thirty: :data:`LAYOUTS` ``"odd"`` (rings of 3, 5 and 8:
with class A's 17 independent learners of 02-attention, a class of 30, the ring of 8 a quarter of it) and
``"even"`` (rings of 4 and 6, and one whole-notebook copy per disguise).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.grading.similarity.disguise import DISGUISES, disguise
from tests.grading.similarity.planted import Copy, Submission

RING_DISGUISES = ("comment", "rename", "extract", "inline", "reorder", "loops", "respell", "move", "dead",
                  "several")
#: the ring sizes (source included) and the number of whole-notebook copies of each layout
LAYOUTS = {"odd": ((3, 5, 8), 0), "even": ((4, 6), len(RING_DISGUISES))}
COMMENTS = ("# my solution", "# TODO: tidy up", "# works now", "# checked against the tests", "# v2")


@dataclass(frozen=True)
class Ring:
    """A source and the classmates who handed in its notebook (a whole-notebook copy is a ring of 2)."""

    source: str
    copiers: tuple[str, ...]
    disguises: tuple[str, ...]  # each copier's

    @property
    def members(self) -> frozenset[str]:
        return frozenset((self.source,) + self.copiers)


def commented(sub: Submission, rng: random.Random) -> Submission:
    """The submission verbatim, a comment line added at the top of every cell."""
    note = rng.choice(COMMENTS)
    return Submission({k: f"{note}\n{v}" for k, v in sub.cells.items()}, [(a, f"{note}\n{v}") for a, v in sub.added])


def apply(name: str, sub: Submission, rng: random.Random) -> Submission | None:
    """The submission under one of RING_DISGUISES, or None where it changes nothing."""
    if name == "comment":
        return commented(sub, rng)
    if name == "several":
        out, applied = disguise(sub, ["rename", "reorder", "respell", "extract"], rng)
        return out if len(applied) >= 3 else None
    return DISGUISES[name](sub, rng)


def build(slug: str, independent: dict[str, Submission], layout: str, seed: int, prefix: str = "r",
          exclude: frozenset[str] = frozenset()) -> tuple[dict[str, Submission], list[Ring], list[Copy]]:
    """The independent learners plus the layout's rings: (learners, rings, the copies as planted pairs).

    Sources are distinct learners, none of ``exclude``. A ring's copiers take the disguises in a shuffled
    rotation; the whole-notebook copies take one disguise each, every one of RING_DISGUISES, from a source it
    changes. Copiers are named ``<prefix><ring size><letter>`` (``r8c``: the third copier of the ring of 8),
    whole-notebook copiers ``<prefix>w<letter>``."""
    rng = random.Random(f"{seed}-{layout}")
    sizes, whole = LAYOUTS[layout]
    free = sorted(set(independent) - exclude)
    rng.shuffle(free)
    rotation = list(RING_DISGUISES)
    rng.shuffle(rotation)
    turn = 0
    learners = dict(independent)
    rings: list[Ring] = []
    copies: list[Copy] = []

    made: dict[tuple[str, str], Submission | None] = {}

    def copy_of(source: str, name: str) -> Submission | None:
        if (name, source) not in made:
            made[name, source] = apply(name, independent[source], random.Random(f"{seed}-{layout}-{name}-{source}"))
        return made[name, source]

    for k in sizes:
        source = free.pop()
        copiers, used = [], []
        for c in range(k - 1):
            for attempt in range(len(rotation)):
                name = rotation[(turn + attempt) % len(rotation)]
                out = copy_of(source, name)
                if out is not None:
                    break
            else:
                raise ValueError(f"no disguise changes {source}'s code")
            turn += attempt + 1
            copier = f"{prefix}{k}{chr(ord('a') + c)}"
            learners[copier] = out
            copiers.append(copier)
            used.append(name)
            copies.append(Copy(slug, copier, source, name))
        rings.append(Ring(source, tuple(copiers), tuple(used)))
    # the whole-notebook copies: one per disguise, the disguises that change fewest sources first
    names = list(RING_DISGUISES[:whole])
    changes = {name: [s for s in free if copy_of(s, name) is not None] for name in names}
    for name in sorted(names, key=lambda n: (len(changes[n]), names.index(n))):
        options = [s for s in free if s in changes[name]]
        if not options:
            continue  # no source left that this disguise changes: the class has one copy fewer
        source = options[0]
        free.remove(source)
        copier = f"{prefix}w{chr(ord('a') + names.index(name))}"
        learners[copier] = copy_of(source, name)
        copies.append(Copy(slug, copier, source, name))
        rings.append(Ring(source, (copier,), (name,)))
    return learners, rings, copies
