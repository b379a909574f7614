"""The instructor's page, ``similarity/<assignment>.html``: the groups (learners linked by flagged pairs), each with
what its members share shown once; the flagged pairs of learners and the next ones; then, apart, the learners
whose code *matches the book's code* (flagged against the reference, as a pasted solution is, which says nothing
of copying between learners) and the next ones; each pair with the exercises that carry it and the code side by
side (a pair inside a group points at its group instead).

The page reads offline (no script, no link out) and escapes everything a learner wrote, their student id
included. A number on it is rounded down (:func:`classroom.similarity.calibrate.quantised`), as the flag is
decided, so a row never reads above the threshold and unflagged.
"""

from __future__ import annotations

import html
from collections import Counter

from classroom.similarity.calibrate import (
    COUNTED,
    EPSILON,
    NEAREST,
    SINGLE,
    SUBSTANTIAL,
    ExerciseEvidence,
    Pair,
    by_joint,
    by_score,
    carriers,
    is_flagged,
    quantised,
    threshold_hundredths,
)
from classroom.similarity.compare import ExerciseMatrix, Side
from classroom.similarity.forms import CHANCE, MAX_SHARE, SAME
from classroom.similarity.groups import Group
from classroom.similarity.reading import ClassCode

#: unflagged pairs of learners listed after the flagged ones
NEXT = 10
#: unflagged learners against the reference listed after the flagged ones
NEXT_BOOK = 5
#: a name both sides chose is shown as evidence when at most this many learners use it for the exercise
RARE_NAME = 2

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 90em; }
.note { background: #fff8dc; border-left: 4px solid #e0b000; padding: .6em 1em; }
table { border-collapse: collapse; margin: .6em 0; }
td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
.flagged { background: #fde8e8; }
.short { color: #999; }
.side { display: flex; gap: 1em; }
.side > div { flex: 1; min-width: 0; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: 90%; }
.hl { background: #ffd27f; }
"""


def score_text(score: float | None) -> str:
    return "n/a" if score is None else f"{quantised(score) / 100:.2f}"


def percent(x: float) -> str:
    return f"{int(x * 100 + 1e-9)}%"


def shared_names(cls_names: dict[str, Counter], exercise: str, left: Side, right: Side) -> list[str]:
    """Names both sides chose for the exercise that at most RARE_NAME learners of the class use."""
    counts = cls_names.get(exercise, Counter())
    return sorted(n for n in left.code.names & right.code.names if counts[n] <= RARE_NAME)


def class_names(matrices: list[ExerciseMatrix]) -> dict[str, Counter]:
    """Per exercise, how many learners chose each name."""
    return {m.name: Counter(n for s in m.sides for n in s.code.names) for m in matrices}


def code_html(side: Side, other: Side | None) -> str:
    """A side's code (its exercise function and the helpers it reaches, each under its cell), the lines that
    wrote features the other side has too highlighted (none without another side)."""
    e = html.escape
    hot = set() if other is None else {line for f in side.counts if f in other.counts
                                       for line in side.lines.get(f, ())}
    if side.code.graph is None:
        return f"<p class='short'>{e(side.code.problem or 'no code')}</p>"
    parts = []
    for cell, first, source in side.code.shown:
        lines = []
        for k, text in enumerate(source.split("\n")):
            line = e(text) or " "
            lines.append(f"<span class='hl'>{line}</span>" if (cell, first + k) in hot else line)
        where = "" if side.code.origin else f"<p class='short'>cell {cell + 1}</p>"
        parts.append(f"{where}<pre>{chr(10).join(lines)}</pre>")
    return "".join(parts)


def sides_of(matrices: dict[str, ExerciseMatrix], ev: ExerciseEvidence) -> tuple[Side, Side]:
    m = matrices[ev.exercise]
    i, j = ev.index
    n = len(m.learners)
    right = m.reference[m.source[i]] if j == n and m.reference else (m.sides[j] if j < n else None)
    return m.sides[i], right


def chance_text(x: float) -> str:
    return f"{x:.2g}"


def form_text(x: ExerciseEvidence, reference: bool) -> str:
    """How rare the form a pair shares is (empty when they do not share one)."""
    if not x.shared:
        return ""
    whose = "the reference's form" if x.book else "a form the reference does not write"
    book = "; the book's code, no evidence between two learners" if x.book and not reference else ""
    return f"{whose}, written by {x.holders} of the {x.written} learners who wrote the exercise{book}"


def group_html(g: Group, by_name: dict[str, ExerciseMatrix], threshold: float) -> str:
    """One group: its members, how many of its pairs are flagged, and what they share: each exercise's form once,
    with how rare it is in the class."""
    e = html.escape
    flagged = sum(is_flagged(p, threshold) for p in g.pairs)
    out = [f"<h3 id='group{g.number}'>Group {g.number}: {e(', '.join(g.members))} ({len(g.members)} learners)</h3>",
           f"<p>{flagged} of its {len(g.pairs)} pairs flagged"
           + (f"; the least likely by chance: {chance_text(g.chance)} pairs of this class would match so"
              if g.chance is not None else "") + ".</p>"]
    if g.book:
        out.append("<p>Where members write the book's code (the reference's form), evidence of nothing between "
                   "them: "
                   + "; ".join(f"{e(x)}: {e(', '.join(who))}" for x, who in g.book.items()) + ".</p>")
    if not g.exercises:
        out.append("<p>No exercise on which two members or more write one form that is not the book's.</p>")
        return "".join(out)
    out.append("<table><tr><th>exercise</th><th>members who write the group's form</th><th>learners of the class who "
               "write it</th></tr>")
    for x in g.exercises:
        out.append(f"<tr><td>{e(x.exercise)}</td><td>{len(x.members)} of {len(g.members)}: "
                   f"{e(', '.join(x.members))}</td><td>{x.holders} of {x.written}</td></tr>")
    out.append("</table>")
    for x in g.exercises:
        m = by_name[x.exercise]
        side = m.sides[x.shown]
        others = [k for k in g.members if k not in x.members]
        rest = ""
        if others:
            alike = [f"{k} {percent(m.similar[x.shown, m.learners.index(k)])}" for k in others]
            rest = f"<p class='short'>The other members' code is this alike to it: {e(', '.join(alike))}.</p>"
        out.append(f"<h4>{e(x.exercise)}: the form of {e(', '.join(x.members))} ({side.size} features; "
                   f"{x.holders} of {x.written} learners write it)</h4>"
                   f"<p>{e(m.learners[x.shown])}'s code:</p>{code_html(side, None)}{rest}")
    return "".join(out)


def row_html(p: Pair, rank: int, threshold: float, middle: str) -> str:
    """A pair's row of a ranked table: rank, pair, score, ``middle`` (cells of its table's own), what carries it,
    then each exercise's likeness to each other and to the class."""
    e = html.escape
    carried = ", ".join(e(c.exercise) for c in carriers(p, threshold))
    cells = "".join(f"<td{'' if x.counted else ' class=short'}>{percent(x.similar)} / {percent(x.classmates)}"
                    f"{' =' if x.shared else ''}{' book' if x.book and not p.reference else ''}</td>"
                    for x in p.exercises)
    return (f"<tr class={'flagged' if is_flagged(p, threshold) else 'other'}><td>{rank}</td>"
            f"<td><a href='#pair{rank}'>{e(p.left)} / {e(p.right)}</a></td><td>{score_text(p.score)}"
            f"{' (flagged)' if by_score(p, threshold) else ''}</td>{middle}<td>{carried}</td>{cells}</tr>")


def pair_html(p: Pair, rank: int, by_name: dict[str, ExerciseMatrix], names: dict[str, Counter],
              threshold: float) -> list[str]:
    """A pair side by side: its joint evidence, then the exercises that carry it (the strongest one if none)."""
    e = html.escape
    out = [f"<h3 id='pair{rank}'>{rank}. {e(p.left)} / {e(p.right)}: score {score_text(p.score)}"
           f"{' (flagged)' if is_flagged(p, threshold) else ''}</h3>"]
    if p.joint:
        out.append(f"<p>Identical on {len(p.joint.identical)} of the {p.joint.comparable} exercises both wrote, "
                   "neither in the book's code"
                   + (f" ({e(', '.join(p.joint.identical))})" if p.joint.identical else "")
                   + f": {chance_text(p.joint.chance)} pairs of this class would match on so many by chance"
                   + (" (flagged)" if by_joint(p) else "") + ".</p>")
        book = [x.exercise for x in p.exercises if x.book]
        if book:
            out.append(f"<p>One of them writes the book's code on {e(', '.join(book))}: no evidence there.</p>")
    if p.group is not None:
        out.append(f"<p>Both are in <a href='#group{p.group}'>group {p.group}</a>, where the code they share "
                   "is shown.</p>")
        return out
    for x in carriers(p, threshold) or [max(p.exercises, key=lambda x: (x.evidence, x.similar))]:
        left, right = sides_of(by_name, x)
        if right is None:
            continue
        common = shared_names(names, x.exercise, left, right)
        origin = f" ({e(right.code.origin)})" if right.code.origin else ""
        rarity = form_text(x, p.reference)
        out.append(f"<h4>{e(x.exercise)}: alike {percent(x.similar)}, class {percent(x.classmates)}, evidence "
                   f"{score_text(x.evidence)} ({left.size} and {right.size} features)</h4>"
                   + (f"<p>One form: {rarity}.</p>" if rarity else "")
                   + (f"<p>Identical names few others chose: {e(', '.join(common))}</p>" if common else "")
                   + f"<div class='side'><div><p>{e(p.left)}</p>{code_html(left, right)}</div>"
                   f"<div><p>{e(p.right)}{origin}</p>{code_html(right, left)}</div></div>")
    return out


def render(cls: ClassCode, matrices: list[ExerciseMatrix], pairs: list[Pair], groups: list[Group],
           threshold: float) -> str:
    """The page (see the module's text); ``pairs`` in the report's order
    (:func:`classroom.similarity.calibrate.ranked`)."""
    e = html.escape
    by_name = {m.name: m for m in matrices}
    names = class_names(matrices)
    learners = [p for p in pairs if not p.reference]
    book = [p for p in pairs if p.reference]
    flagged = [p for p in learners if is_flagged(p, threshold)]
    matched = [p for p in book if is_flagged(p, threshold)]
    shown = flagged + [p for p in learners if not is_flagged(p, threshold)][:NEXT]
    shown_book = matched + [p for p in book if not is_flagged(p, threshold)][:NEXT_BOOK]
    limit = f"{threshold_hundredths(threshold) / 100:.2f}"
    out = [f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>Similarity: {e(cls.slug)}</title>",
           f"<style>{STYLE}</style></head><body>",
           f"<h1>Similarity report: {e(cls.slug)}</h1>",
           "<p class='note'><strong>This report never changes a grade.</strong> It points at code to read: a high "
           "score says two learners' code is far more alike than this class's code usually is, not why. Grades "
           "come from <code>make grade</code> alone.</p>",
           f"<p>{len(cls.learners)} submissions compared with each other and with the reference (course_lib and "
           f"the solution notebook): <strong>{len(flagged)} of {len(learners)} pairs of learners flagged</strong>, "
           f"at a score at or above {limit} or on their joint evidence (fewer than {CHANCE:g} pairs of this class "
           f"would match on so many exercises by chance), <strong>{len(groups)} group"
           f"{'' if len(groups) == 1 else 's'}</strong> of learners linked by flagged pairs; and, apart, "
           f"<strong>{len(matched)} of {len(book)} learners whose code matches the book's code</strong> (flagged "
           "against the reference at the same threshold: what a pasted solution looks like, and what a learner who "
           "follows the book closely writes; it says nothing of copying between learners).</p>",
           "<details><summary>How the score is measured</summary><p>Each exercise is compared on the structure "
           "of what the code computes, not its text: local names, statement order, temporaries, dead code, "
           "helpers (inlined where they are called, in whatever cell they are), loop style and the spelling of a "
           "call (keyword or positional, method or function) leave no trace. The release's own code never counts. "
           "<em>Alike</em> is the share of the two sides' structure they have in common (against the reference, "
           "the share of the learner's code found in it). Two sides at least "
           f"{percent(SAME)} alike write the exercise in one <em>form</em>; a form is rare when the reference does "
           f"not write it and at most {percent(MAX_SHARE)} of the learners who wrote the exercise do. A learner "
           f"at least {percent(SAME)} of whose code is in the reference writes the <em>book's code</em> there: "
           "between two learners, an exercise on which one of them does has no evidence and is not one they match "
           "on, since learners who follow the book write it alike on most exercises at once. "
           "<em>Class</em> is how alike both sides are to the "
           f"third participant nearest to both (the {NEAREST}-th nearest), leaving out the learners who share the "
           "pair's rare form (the pair's group, not the class), so that a form others share is the class's, not "
           "the pair's, however many pass one solution round. "
           f"An exercise's evidence is ln((1 - class + {EPSILON}) / (1 - alike + {EPSILON})): how many times "
           "closer the pair is than the class. A pair's score is the evidence of its counted exercises (at least "
           f"{COUNTED} structure features on both sides), each weighing by its size, or {SINGLE:g} times the "
           f"evidence of one substantial exercise (at least {SUBSTANTIAL} features), if larger. "
           "<em>Identical on</em> says on how many exercises two learners write one form, of how many both wrote, "
           "neither in the book's code; "
           "<em>chance</em> how many pairs of this class would match on so many, each exercise matched at the rate "
           "this class's pairs (neither in the book's code) match on it, apart from the others: a whole notebook "
           "copied stands out even where "
           "each of its exercises alone is common. A <em>group</em> is three or more learners linked by flagged "
           "pairs; what its members share is shown once. Identical names that few learners chose are shown "
           "beside the code; they do not count in the score.</p></details>"]
    if len(cls.learners) < 10:
        out.append(f"<p class='note'>Only {len(cls.learners)} submissions: the class is the yardstick of what is "
                   "usual, and a small class is a short one; read the scores with that in mind.</p>")
    if cls.skipped:
        out.append("<h2>Skipped submissions</h2><ul>" + "".join(f"<li>{e(s)}</li>" for s in cls.skipped) + "</ul>")
    unparsed = [(s, nb.unparsed) for s, nb in sorted(cls.learners.items()) if nb.unparsed]
    if unparsed:
        out.append("<h2>Cells that do not parse (not compared)</h2><ul>" + "".join(
            f"<li>{e(s)}: cell{'s' if len(c) > 1 else ''} {', '.join(str(i + 1) for i in c)}</li>"
            for s, c in unparsed) + "</ul>")
    large = [(m.learners[i], m.name, side.code.problem) for m in matrices for i, side in enumerate(m.sides)
             if side.code.problem.startswith("too large")]
    if large:
        out.append("<h2>Code not compared</h2><ul>" + "".join(
            f"<li>{e(who)}: {e(name)}, {e(why)}</li>" for who, name, why in sorted(large)) + "</ul>")
    out.append(f"<h2>Groups: {len(groups)}</h2>" + ("" if groups else "<p>None.</p>"))
    out += [group_html(g, by_name, threshold) for g in groups]
    out.append(f"<h2>Pairs of learners: the {len(flagged)} flagged, then the next {len(shown) - len(flagged)}</h2>"
               "<table><tr><th>#</th><th>pair</th><th>score</th><th>identical on</th><th>chance</th>"
               "<th>group</th><th>carried by</th>"
               + "".join(f"<th>{e(m.name)}<br><span class='short'>alike / class</span></th>" for m in matrices)
               + "</tr>")
    for rank, p in enumerate(shown, 1):
        joint = (f"<td>{len(p.joint.identical)} of {p.joint.comparable}</td><td>{chance_text(p.joint.chance)}"
                 f"{' (flagged)' if by_joint(p) else ''}</td>") if p.joint else "<td></td><td></td>"
        group = f"<a href='#group{p.group}'>{p.group}</a>" if p.group is not None else ""
        out.append(row_html(p, rank, threshold, joint + f"<td>{group}</td>"))
    out.append("</table><p class='short'>Grey: not counted (fewer than the minimum of code on a side). "
               "=: the two sides write the exercise in one form. book: one of them writes the book's code (the "
               "reference's form) there, which is evidence of nothing between them.</p>")
    first = len(shown) + 1
    out.append(f"<h2>Matches the book's code: the {len(matched)} flagged, then the next "
               f"{len(shown_book) - len(matched)}</h2>"
               "<p>Each learner against the reference, measured against the class as a pair of learners is: a "
               "flagged learner's code is the book's where the class's is not. A pasted solution looks like this, "
               "and so does the work of a learner who follows the book closely; it is not copying between "
               "learners, and two learners who both match the book are not flagged for it.</p>"
               "<table><tr><th>#</th><th>learner / the reference</th><th>score</th><th>carried by</th>"
               + "".join(f"<th>{e(m.name)}<br><span class='short'>alike / class</span></th>" for m in matrices)
               + "</tr>")
    for rank, p in enumerate(shown_book, first):
        out.append(row_html(p, rank, threshold, ""))
    out.append("</table><p class='short'>=: the learner's code is the reference's form there (at least "
               f"{percent(SAME)} of it in the reference).</p>")
    out.append("<h2>The pairs, side by side</h2>" + ("" if shown or shown_book else "<p>None.</p>"))
    for rank, p in enumerate(shown + shown_book, 1):
        out += pair_html(p, rank, by_name, names, threshold)
    out.append("</body></html>\n")
    return "\n".join(out)
