"""The machine-readable report, ``similarity/<assignment>.csv``: one row per pair, for a spreadsheet and for
tests.

Columns: ``learner_a``, ``learner_b`` (a learner, or ``(reference)``), ``score`` (as the page shows it,
rounded down to hundredths; empty when no exercise counts), ``flagged`` (``yes`` or ``no``), ``carried_by``
(the exercises that carry a flagged pair, ``;``-separated, the strongest first), then per exercise
``<exercise> alike`` (0-1, how alike the pair's code is), ``<exercise> class`` (how alike both sides are to
the class) and ``<exercise> evidence``. Pairs come in the page's order, highest score first.

A student id is written as it is, except that one starting like a spreadsheet formula (``=``, ``+``, ``-``,
``@``) gets a leading apostrophe, so that a spreadsheet shows it instead of running it.
"""

from __future__ import annotations

import csv
import io

from classroom.similarity.calibrate import Pair, carriers, is_flagged, quantised

COLUMNS = ("learner_a", "learner_b", "score", "flagged", "carried_by")
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def cell(text: str) -> str:
    return "'" + text if text.startswith(FORMULA) else text


def rows(pairs: list[Pair], exercises: list[str], threshold: float) -> list[list[str]]:
    header = list(COLUMNS) + [f"{x} {what}" for x in exercises for what in ("alike", "class", "evidence")]
    out = [header]
    for p in pairs:
        by_name = {x.exercise: x for x in p.exercises}
        row = [cell(p.left), cell(p.right), "" if p.score is None else f"{quantised(p.score) / 100:.2f}",
               "yes" if is_flagged(p, threshold) else "no", ";".join(c.exercise for c in carriers(p, threshold))]
        for name in exercises:
            x = by_name[name]
            row += [f"{x.similar:.3f}", f"{x.classmates:.3f}", f"{quantised(x.evidence) / 100:.2f}"]
        out.append(row)
    return out


def render(pairs: list[Pair], exercises: list[str], threshold: float) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows(pairs, exercises, threshold))
    return buffer.getvalue()
