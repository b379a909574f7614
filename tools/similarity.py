"""`make similarity`: which learners' exercise code is too alike, for the instructor to read; never a grade.

    python -m tools.similarity [--root DIR] [--assignment SLUG ...] [--threshold F] [--out DIR]

For each assignment (every one with submissions when none is named), every
learner's code of each exercise (the solution cell named by the exercise's
grade_id in ``submitted/<student>/<slug>/<notebook>``) is compared with every
other learner's and with the reference: the course_lib function the hidden
tests compare against (the course_lib function a grader wrapper calls) and the
solution cell of ``solutions/``. The comparison is copydetect's (winnowed
k-gram fingerprints of the code with every identifier made one symbol, so
renaming changes nothing and reordering lines only breaks the k-grams that
span them); everything here decides what is compared and how the exercise
scores add up:

* the release is the base that never counts: the lines of the exercise's cell
  in ``exercises/`` (signature, docstring, given lines) are dropped from every
  side, and any fingerprint of the release left over is dropped too;
* an exercise whose release-free code has fewer than ``MIN_TOKENS`` tokens is
  shown but not counted: two independent learners write a one-line solution
  the same way;
* a pair's score is the matched share of the code its counted exercises hold
  (both learners' code for a pair of learners, the learner's for the
  reference), so an exercise weighs by its size; pairs at or above the
  threshold are flagged, ranked, in ``similarity/<slug>.html`` with the code
  side by side.

A submission that is missing or not a valid notebook is named and skipped;
the others are still compared. The exit status is 0, 1 when a submission was
skipped, and 2 on a usage error. Nothing here reads or writes the gradebook.
"""

from __future__ import annotations

import argparse
import ast
import html
import inspect
import io
import json
import sys
import textwrap
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from copydetect import CodeFingerprint, compare_files
from copydetect import __version__ as COPYDETECT_VERSION
from copydetect.utils import get_token_coverage, highlight_overlap
from pygments.lexers import PythonLexer
from pygments.token import Comment, Text

from grader.notebook import cells_of

#: the k of the k-grams, in characters of copydetect's filtered code (a name is one character, spaces are
#: dropped): copydetect's own default, about a statement. Every k-gram is a fingerprint (its guarantee
#: threshold equals k, so the winnowing window is 1), which also makes the scores the same in every run
NOISE = 25
#: an exercise whose release-free code has fewer Python tokens than this is shown, never counted, because
#: independent learners write it alike: 15 of the course's 56 solution cells, 14 to 38 tokens, one to four
#: short lines (``return torch.ones(n, n, dtype=torch.bool).tril()`` is 18); of the solutions of one or two
#: lines only two long ones reach it (43 and 46 tokens)
MIN_TOKENS = 40
#: a pair whose score reaches this is flagged. Measured (tests/grading/test_similarity.py's planted class,
#: 02-attention and 03-multi-head-attention): the planted pairs score 0.82 to 1.00, the highest independent
#: pair 0.30; over all 11 assignments, the catalogues' right implementations against each other and against
#: the reference score at most 0.44
THRESHOLD = 0.6
#: the pseudo-learner that stands for the course's own code (not a valid student id, so it names no learner)
REFERENCE = "(reference)"
#: nbgrader's markers around the solution in solutions/ (not code anyone wrote)
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


class SimilarityError(Exception):
    """A usage error: its message names the value and the rule."""


# --------------------------------------------------------------------------
# The code that counts
# --------------------------------------------------------------------------
def release_free(code: str, release: str) -> str:
    """``code`` without the release's lines (signature, docstring, given lines) and nbgrader's solution
    markers, dedented."""
    given = {line.strip() for line in release.splitlines() if line.strip()} | set(MARKERS)
    kept = [line for line in code.splitlines() if line.strip() and line.strip() not in given]
    return textwrap.dedent("\n".join(kept)).strip("\n")


def function_body(source: str) -> str:
    """A function's statements without its header and docstring (what a learner would write)."""
    source = textwrap.dedent(source)
    fn = ast.parse(source).body[0]
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return ""
    return textwrap.dedent("\n".join(source.splitlines()[body[0].lineno - 1:fn.end_lineno]))


def token_count(code: str) -> int:
    """Python tokens of ``code``, whitespace and comments left out."""
    return sum(1 for kind, value in PythonLexer().get_tokens(code)
               if value.strip() and kind not in Text and kind not in Comment)


def reference_functions(exercise) -> list:
    """The functions the hidden tests compare an exercise against; a grader wrapper is followed to the
    course_lib functions it calls."""
    found = []
    for comparison in exercise.comparisons:
        ref = inspect.unwrap(comparison.reference)
        called = [ref.__globals__.get(name) for name in ref.__code__.co_names]
        called = [f for f in called if inspect.isfunction(f) and f.__module__.startswith("course_lib")]
        for f in ([ref] if ref.__module__.startswith("course_lib") else []) + called:
            if f not in found:
                found.append(f)
    return found


def solution_cells(path: Path) -> dict[str, str]:
    """The solution cells of a notebook file, by grade_id (raises ValueError for a file that is not one)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {c.grade_id: c.source for c in cells_of(raw) if c.solution and c.kind == "code" and c.grade_id}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a readable notebook ({type(exc).__name__}: {exc})") from None


# --------------------------------------------------------------------------
# Fingerprints and scores (copydetect)
# --------------------------------------------------------------------------
@dataclass
class Code:
    """One side's release-free code of one exercise, fingerprinted with the release's fingerprints removed."""

    text: str
    tokens: int
    print: CodeFingerprint
    origin: str = ""  # for the reference: where this code comes from

    @classmethod
    def of(cls, text: str, base: set, origin: str = "") -> Code:
        fp = CodeFingerprint("code.py", NOISE, 1, language="python", fp=io.StringIO(text))
        for h in fp.hashes & base:
            del fp.hash_idx[h]
        fp.hashes = fp.hashes - base
        fp.token_coverage = get_token_coverage(fp.hash_idx, NOISE, len(fp.filtered_code))
        return cls(text, token_count(text), fp, origin)


def base_prints(release: str) -> set:
    """Every fingerprint of the release's own cell: the base that never counts."""
    return set(CodeFingerprint("release.py", NOISE, 1, language="python", fp=io.StringIO(release)).hashes)


@dataclass
class ExerciseMatch:
    """One exercise of one pair: the matched share of each side's code and whether the exercise counts."""

    exercise: str
    left: Code
    right: Code
    matched: tuple[float, float]  # filtered characters of each side inside shared fingerprints
    counted: bool
    reference: bool = False  # the right side is the reference: only the learner's (left) side is scored
    slices: tuple = ()

    @property
    def coverage(self) -> tuple[float, float]:
        return self.left.print.token_coverage, self.right.print.token_coverage

    @property
    def score(self) -> float:
        matched, total = (self.matched[0], self.coverage[0]) if self.reference else \
            (sum(self.matched), sum(self.coverage))
        return matched / total if total else 0.0


def match(exercise: str, left: Code, right: Code, *, reference: bool) -> ExerciseMatch:
    _, (s1, s2), slices = compare_files(left.print, right.print)
    cov1, cov2 = left.print.token_coverage, right.print.token_coverage
    counted = left.tokens >= MIN_TOKENS and (reference or right.tokens >= MIN_TOKENS)
    return ExerciseMatch(exercise, left, right, (s1 * cov1, s2 * cov2), counted, reference, slices)


@dataclass
class Pair:
    """Two learners (or a learner and the reference) over an assignment's exercises."""

    left: str
    right: str
    exercises: list[ExerciseMatch]

    @property
    def reference(self) -> bool:
        return self.right == REFERENCE

    @property
    def score(self) -> float | None:
        """The matched share of the counted code (the learner's only, against the reference); None if no
        exercise counts."""
        counted = [m for m in self.exercises if m.counted]
        if not counted:
            return None
        if self.reference:
            total = sum(m.coverage[0] for m in counted)
            return sum(m.matched[0] for m in counted) / total if total else 0.0
        total = sum(sum(m.coverage) for m in counted)
        return sum(sum(m.matched) for m in counted) / total if total else 0.0


def best_reference_match(exercise: str, code: Code, sources: list[Code]) -> ExerciseMatch:
    """The learner's code against the reference source it matches most (of the learner's code)."""
    matches = [match(exercise, code, src, reference=True) for src in sources]
    return max(matches, key=lambda m: (m.matched[0], -len(m.right.text)))


# --------------------------------------------------------------------------
# An assignment's class
# --------------------------------------------------------------------------
@dataclass
class ClassCode:
    """Every learner's release-free code of one assignment, the reference's, and what was skipped."""

    slug: str
    exercises: list[str]
    learners: dict[str, dict[str, Code]]
    reference: dict[str, list[Code]]
    skipped: list[str] = field(default_factory=list)


def read_class(root: Path, slug: str) -> ClassCode:
    from grader.registry import assignments

    table = assignments()
    if slug not in table:
        raise SimilarityError(f"unknown assignment {slug!r}: it must be one of {', '.join(sorted(table))}")
    assignment = table[slug]
    names = [e.name for e in assignment.exercises]
    release_path = root / "exercises" / slug / assignment.notebook
    solution_path = root / "solutions" / slug / assignment.notebook
    try:
        release, solution = solution_cells(release_path), solution_cells(solution_path)
    except ValueError as exc:
        raise SimilarityError(f"the release {release_path} or its source {solution_path} is unreadable: {exc}; "
                              "`make exercises` writes the release") from None
    base = {name: base_prints(release.get(name, "")) for name in names}
    reference: dict[str, list[Code]] = {}
    for ex in assignment.exercises:
        rel = release.get(ex.name, "")
        sources = [Code.of(release_free(function_body(inspect.getsource(f)), rel), base[ex.name],
                           f"{f.__module__}.{f.__qualname__}") for f in reference_functions(ex)]
        sources.append(Code.of(release_free(solution.get(ex.name, ""), rel), base[ex.name],
                               f"solutions/{slug}/{assignment.notebook}"))
        reference[ex.name] = sources

    folder = root / "submitted"
    students = sorted(p.name for p in folder.iterdir() if (p / slug).is_dir()) if folder.is_dir() else []
    if not students:
        raise SimilarityError(f"no submissions of {slug!r}: a submission is {folder}/<student>/{slug}/"
                              f"{assignment.notebook}")
    learners: dict[str, dict[str, Code]] = {}
    skipped = []
    for student in students:
        path = folder / student / slug / assignment.notebook
        if not path.is_file():
            skipped.append(f"student {student!r}, {path.relative_to(root)}: missing (the assignment's notebook "
                           f"is {assignment.notebook})")
            continue
        try:
            cells = solution_cells(path)
        except ValueError as exc:
            skipped.append(f"student {student!r}, {path.relative_to(root)}: {exc}")
            continue
        learners[student] = {name: Code.of(release_free(cells.get(name, ""), release.get(name, "")), base[name])
                             for name in names}
    return ClassCode(slug, names, learners, reference, skipped)


def compare_class(cls: ClassCode) -> list[Pair]:
    """Every pair of learners and every learner with the reference, highest score first (None last)."""
    pairs = [Pair(a, b, [match(e, cls.learners[a][e], cls.learners[b][e], reference=False) for e in cls.exercises])
             for a, b in combinations(sorted(cls.learners), 2)]
    pairs += [Pair(a, REFERENCE, [best_reference_match(e, cls.learners[a][e], cls.reference[e])
                                  for e in cls.exercises]) for a in sorted(cls.learners)]
    return sorted(pairs, key=lambda p: (p.score is None, -(p.score or 0.0), p.left, p.right))


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
.note { background: #fff8dc; border-left: 4px solid #e0b000; padding: .6em 1em; }
table { border-collapse: collapse; margin: .6em 0; }
td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
.flagged { background: #fde8e8; }
.short { color: #888; }
.side { display: flex; gap: 1em; }
.side > div { flex: 1; min-width: 0; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: 90%; }
.hl { background: #ffd27f; }
"""


def _highlight(code: Code, slices) -> str:
    if len(slices) == 0 or len(slices[0]) == 0:
        return html.escape(code.text)
    return highlight_overlap(code.text, slices, "<span class='hl'>", "</span>", escape_html=True)[0]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def flagged_count(pairs: list[Pair], threshold: float) -> int:
    """How many pairs, ranked as :func:`compare_class` ranks them, score at least ``threshold`` (the first ones)."""
    return sum(p.score is not None and p.score >= threshold for p in pairs)


def render(cls: ClassCode, pairs: list[Pair], threshold: float, unflagged: int = 10) -> str:
    """The report: every flagged pair ranked, then the next ``unflagged`` pairs, and the flagged pairs' code."""
    e = html.escape
    n_flagged = flagged_count(pairs, threshold)
    out = [f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>Similarity: {e(cls.slug)}</title>",
           f"<style>{STYLE}</style></head><body>",
           f"<h1>Similarity report: {e(cls.slug)}</h1>",
           "<p class='note'><strong>This report never changes a grade.</strong> It points at code to read: a high "
           "score says two pieces of code share long runs of the same structure, not why. Grades come from "
           "<code>make grade</code> alone.</p>",
           f"<p>{len(cls.learners)} submissions compared with each other and with the reference "
           f"(course_lib and the solution notebook); {n_flagged} of {len(pairs)} pairs at or above "
           f"{_pct(threshold)}. Tool: copydetect {e(COPYDETECT_VERSION)} (fingerprints of every {NOISE}-character "
           "run of the code with each name made one symbol). The release's own code (signatures, docstrings, given "
           f"lines) never counts; an exercise with fewer than {MIN_TOKENS} tokens of a learner's own code is shown "
           "but not counted. A pair's score is the share of its counted code inside shared fingerprints (the "
           "learner's code only, against the reference).</p>"]
    if cls.skipped:
        out.append("<h2>Skipped submissions</h2><ul>" + "".join(f"<li>{e(s)}</li>" for s in cls.skipped) + "</ul>")
    out.append(f"<h2>Ranked pairs: the {n_flagged} flagged, then the next {unflagged}</h2>"
               "<table><tr><th>#</th><th>pair</th><th>score</th>"
               + "".join(f"<th>{e(x)}</th>" for x in cls.exercises) + "</tr>")
    for i, p in enumerate(pairs[:n_flagged + unflagged], 1):
        cells = "".join(f"<td{'' if m.counted else ' class=short'}>{_pct(m.score)}</td>" for m in p.exercises)
        name = f"{e(p.left)} / {e(p.right)}"
        out.append(f"<tr class={'flagged' if i <= n_flagged else 'other'}><td>{i}</td>"
                   f"<td>{f'<a href=#pair{i}>{name}</a>' if i <= n_flagged else name}</td>"
                   f"<td>{_pct(p.score)}</td>{cells}</tr>")
    out.append("</table><p class='short'>Grey: fewer than the minimum tokens on a side, not counted.</p>")
    out.append("<h2>Flagged pairs, side by side</h2>" + ("" if n_flagged else "<p>None.</p>"))
    for i, p in enumerate(pairs[:n_flagged], 1):
        out.append(f"<h3 id='pair{i}'>{i}. {e(p.left)} / {e(p.right)}: {_pct(p.score)}</h3>")
        for m in p.exercises:
            if not m.counted:
                continue
            right = e(p.right) + (f" ({e(m.right.origin)})" if m.right.origin else "")
            out.append(f"<h4>{e(m.exercise)}: {_pct(m.score)} ({m.left.tokens} and {m.right.tokens} tokens)</h4>"
                       f"<div class='side'><div><p>{e(p.left)}</p><pre>{_highlight(m.left, m.slices[0])}</pre></div>"
                       f"<div><p>{right}</p><pre>{_highlight(m.right, m.slices[1])}</pre></div></div>")
    out.append("</body></html>\n")
    return "\n".join(out)


# --------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------
def report(root: Path, slug: str, out_dir: Path, threshold: float) -> tuple[ClassCode, list[Pair], Path]:
    cls = read_class(root, slug)
    pairs = compare_class(cls)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{slug}.html"
    path.write_text(render(cls, pairs, threshold), encoding="utf-8")
    return cls, pairs, path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make similarity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--assignment", action="append", help="compare this assignment (repeatable; default: "
                                                              "every assignment with submissions)")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help=f"flag pairs scoring at least this "
                                                                           f"(0-1; default {THRESHOLD})")
    parser.add_argument("--out", type=Path, default=None, help="folder of the reports (default: ROOT/similarity)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    out_dir = (args.out if args.out is not None else root / "similarity").resolve()
    try:
        if not 0.0 < args.threshold <= 1.0:
            raise SimilarityError(f"--threshold must be a share above 0 and at most 1, got {args.threshold}")
        if out_dir.is_relative_to(root / "submitted"):
            raise SimilarityError(f"--out {out_dir} is inside the learners' submitted/ folder; write the report "
                                  "elsewhere (default: ROOT/similarity)")
        slugs = args.assignment
        if not slugs:
            folder = root / "submitted"
            slugs = sorted({a.name for s in folder.iterdir() if s.is_dir() for a in s.iterdir() if a.is_dir()}) \
                if folder.is_dir() else []
            if not slugs:
                raise SimilarityError(f"no submissions under {folder}: a submission is "
                                      "submitted/<student>/<assignment>/<notebook>.ipynb")
        skipped = False
        for slug in slugs:
            cls, pairs, path = report(root, slug, out_dir, args.threshold)
            flagged = flagged_count(pairs, args.threshold)
            for s in cls.skipped:
                print(f"make similarity: skipped {s}", file=sys.stderr)
            skipped = skipped or bool(cls.skipped)
            print(f"{slug}: {len(cls.learners)} submissions, {flagged} of {len(pairs)} pairs flagged "
                  f"(threshold {args.threshold:g}); report: {path}")
    except SimilarityError as exc:
        print(f"make similarity: {exc}", file=sys.stderr)
        return 2
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
