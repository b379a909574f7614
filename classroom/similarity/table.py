"""The machine-readable report, for a spreadsheet and for tests: ``similarity/<assignment>.csv``, one row per pair,
and ``similarity/<assignment>-groups.csv``, one row per member of a group.

The pairs' columns: ``learner_a``, ``learner_b`` (a learner, or ``(reference)``), ``score`` (as the page shows it,
rounded down to hundredths; empty when no exercise counts), ``flagged`` (``yes`` or ``no``), ``flagged_by``
(``score``, ``joint`` or both, ``;``-separated), ``carried_by`` (the exercises that carry a flagged pair,
``;``-separated, the strongest first), ``identical_on`` and ``comparable`` (on how many exercises two learners
write one form, of how many both wrote; empty against the reference), ``chance`` (how many pairs of the class
would match on so many by chance, two significant digits), ``group`` (the number of the group both learners are
in, empty if none), then per exercise ``<exercise> alike`` (0-1, how alike the pair's code is), ``<exercise>
class`` (how alike both sides are to the class), ``<exercise> evidence``, ``<exercise> holders`` (when the pair
writes the exercise in one form, how many learners of the class write it; empty otherwise) and ``<exercise> book``
(``yes`` when a side writes the reference's form: between two learners the exercise then has no evidence; against
the reference, the learner's code is the book's there). Pairs come in the page's order: the flagged pairs of
learners first, then the learners flagged against the reference (*matches the book's code*), then the rest by
score.

The groups' file has one row per member, groups in the page's order: ``group`` (its number), ``size``,
``learner``, ``shares`` (the exercises on which the learner writes the group's form, ``;``-separated), then per
exercise ``<exercise> members`` (how many of the group write its form; empty if fewer than two do, or it is the
book's), ``<exercise> holders`` (how many learners of the class write it), ``<exercise> written`` (how many wrote
the exercise) and ``<exercise> book`` (``yes`` if the learner writes the reference's form on it, evidence of
nothing between learners).

Every cell goes through :func:`classroom.text_out.csv_writer`: a student id that starts like a spreadsheet
formula (``=``, ``+``, ``-``, ``@``, ...) gets a leading apostrophe, so that a spreadsheet shows it instead of
running it.
"""

from __future__ import annotations

import io

from classroom.similarity.calibrate import Pair, carriers, flagged_by, is_flagged, quantised
from classroom.similarity.groups import Group
from classroom.text_out import csv_writer

COLUMNS = ("learner_a", "learner_b", "score", "flagged", "flagged_by", "carried_by", "identical_on", "comparable",
           "chance", "group")
GROUP_COLUMNS = ("group", "size", "learner", "shares")


def hundredths(x: float) -> str:
    return f"{quantised(x) / 100:.2f}"


def chance(x: float) -> str:
    return f"{x:.2g}"


def rows(pairs: list[Pair], exercises: list[str], threshold: float) -> list[list[str]]:
    header = list(COLUMNS) + [f"{x} {what}" for x in exercises
                              for what in ("alike", "class", "evidence", "holders", "book")]
    out = [header]
    for p in pairs:
        by_name = {x.exercise: x for x in p.exercises}
        j = p.joint
        row = [p.left, p.right, "" if p.score is None else hundredths(p.score),
               "yes" if is_flagged(p, threshold) else "no", ";".join(flagged_by(p, threshold)),
               ";".join(c.exercise for c in carriers(p, threshold)),
               "" if j is None else str(len(j.identical)), "" if j is None else str(j.comparable),
               "" if j is None else chance(j.chance), "" if p.group is None else str(p.group)]
        for name in exercises:
            x = by_name[name]
            row += [f"{x.similar:.3f}", f"{x.classmates:.3f}", hundredths(x.evidence),
                    str(x.holders) if x.shared else "", "yes" if x.book else "no"]
        out.append(row)
    return out


def group_rows(groups: list[Group], exercises: list[str]) -> list[list[str]]:
    header = list(GROUP_COLUMNS) + [f"{x} {what}" for x in exercises
                                    for what in ("members", "holders", "written", "book")]
    out = [header]
    for g in groups:
        by_name = {x.exercise: x for x in g.exercises}
        for learner in g.members:
            shares = [x.exercise for x in g.exercises if learner in x.members]
            row = [str(g.number), str(len(g.members)), learner, ";".join(shares)]
            for name in exercises:
                x = by_name.get(name)
                row += ["", "", ""] if x is None else [str(len(x.members)), str(x.holders), str(x.written)]
                row.append("yes" if learner in g.book.get(name, ()) else "no")
            out.append(row)
    return out


def csv_text(table: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv_writer(buffer, lineterminator="\n").writerows(table)
    return buffer.getvalue()


def render(pairs: list[Pair], exercises: list[str], threshold: float) -> str:
    """The pairs' CSV (see the module's text)."""
    return csv_text(rows(pairs, exercises, threshold))


def render_groups(groups: list[Group], exercises: list[str]) -> str:
    """The groups' CSV (see the module's text)."""
    return csv_text(group_rows(groups, exercises))
