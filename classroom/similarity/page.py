"""The instructor's page, ``similarity/<assignment>.html``: the flagged pairs, then the next ones, each with
the exercises that carry it and the code side by side.

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
    carriers,
    is_flagged,
    quantised,
    threshold_hundredths,
)
from classroom.similarity.compare import ExerciseMatrix, Side
from classroom.similarity.reading import ClassCode

#: unflagged pairs listed after the flagged ones
NEXT = 10
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


def code_html(side: Side, other: Side) -> str:
    """A side's code (its exercise function and the helpers it reaches, each under its cell), the lines that
    wrote features the other side has too highlighted."""
    e = html.escape
    hot = {line for f in side.counts if f in other.counts for line in side.lines.get(f, ())}
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


def render(cls: ClassCode, matrices: list[ExerciseMatrix], pairs: list[Pair], threshold: float) -> str:
    """The page (see the module's text)."""
    e = html.escape
    by_name = {m.name: m for m in matrices}
    names = class_names(matrices)
    flagged = [p for p in pairs if is_flagged(p, threshold)]
    shown = flagged + [p for p in pairs if not is_flagged(p, threshold)][:NEXT]
    limit = f"{threshold_hundredths(threshold) / 100:.2f}"
    out = [f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>Similarity: {e(cls.slug)}</title>",
           f"<style>{STYLE}</style></head><body>",
           f"<h1>Similarity report: {e(cls.slug)}</h1>",
           "<p class='note'><strong>This report never changes a grade.</strong> It points at code to read: a high "
           "score says two learners' code is far more alike than this class's code usually is, not why. Grades "
           "come from <code>make grade</code> alone.</p>",
           f"<p>{len(cls.learners)} submissions compared with each other and with the reference (course_lib and "
           f"the solution notebook): <strong>{len(flagged)} of {len(pairs)} pairs flagged</strong>, at a score at "
           f"or above {limit}.</p>",
           "<details><summary>How the score is measured</summary><p>Each exercise is compared on the structure "
           "of what the code computes, not its text: local names, statement order, temporaries, dead code, "
           "helpers (inlined where they are called, in whatever cell they are), loop style and the spelling of a "
           "call (keyword or positional, method or function) leave no trace. The release's own code never counts. "
           "<em>Alike</em> is the share of the two sides' structure they have in common (against the reference, "
           "the share of the learner's code found in it); <em>class</em> is how alike both sides are to the "
           f"third participant nearest to both (the {NEAREST}-th nearest), so that a form others share is the "
           "class's, not the pair's. "
           f"An exercise's evidence is ln((1 - class + {EPSILON}) / (1 - alike + {EPSILON})): how many times "
           "closer the pair is than the class. A pair's score is the evidence of its counted exercises (at least "
           f"{COUNTED} structure features on both sides), each weighing by its size, or {SINGLE:g} times the "
           f"evidence of one substantial exercise (at least {SUBSTANTIAL} features), if larger. Identical names "
           "that few learners chose are shown beside the code; they do not count in the score.</p></details>"]
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
    out.append(f"<h2>Ranked pairs: the {len(flagged)} flagged, then the next {len(shown) - len(flagged)}</h2>"
               "<table><tr><th>#</th><th>pair</th><th>score</th><th>carried by</th>"
               + "".join(f"<th>{e(m.name)}<br><span class='short'>alike / class</span></th>" for m in matrices)
               + "</tr>")
    for rank, p in enumerate(shown, 1):
        mark = is_flagged(p, threshold)
        carried = ", ".join(e(c.exercise) for c in carriers(p, threshold))
        cells = "".join(f"<td{'' if x.counted else ' class=short'}>{percent(x.similar)} / {percent(x.classmates)}"
                        f"</td>" for x in p.exercises)
        out.append(f"<tr class={'flagged' if mark else 'other'}><td>{rank}</td>"
                   f"<td><a href='#pair{rank}'>{e(p.left)} / {e(p.right)}</a></td><td>{score_text(p.score)}</td>"
                   f"<td>{carried}</td>{cells}</tr>")
    out.append("</table><p class='short'>Grey: not counted (fewer than the minimum of code on a side).</p>")
    out.append("<h2>The pairs, side by side</h2>" + ("" if shown else "<p>None.</p>"))
    for rank, p in enumerate(shown, 1):
        out.append(f"<h3 id='pair{rank}'>{rank}. {e(p.left)} / {e(p.right)}: score {score_text(p.score)}"
                   f"{' (flagged)' if is_flagged(p, threshold) else ''}</h3>")
        for x in carriers(p, threshold) or [max(p.exercises, key=lambda x: (x.evidence, x.similar))]:
            left, right = sides_of(by_name, x)
            if right is None:
                continue
            common = shared_names(names, x.exercise, left, right)
            origin = f" ({e(right.code.origin)})" if right.code.origin else ""
            out.append(f"<h4>{e(x.exercise)}: alike {percent(x.similar)}, class {percent(x.classmates)}, evidence "
                       f"{score_text(x.evidence)} ({left.size} and {right.size} features)</h4>"
                       + (f"<p>Identical names few others chose: {e(', '.join(common))}</p>" if common else "")
                       + f"<div class='side'><div><p>{e(p.left)}</p>{code_html(left, right)}</div>"
                       f"<div><p>{e(p.right)}{origin}</p>{code_html(right, left)}</div></div>")
    out.append("</body></html>\n")
    return "\n".join(out)
