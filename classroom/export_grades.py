"""`make export-grades`: the gradebook as CSV files a learning-management system imports.

    python -m classroom.export_grades [--root DIR] [--out DIR] [--roster roster.csv] [--missing blank|zero]

Writes three files into ``--out`` (default ``ROOT/exports``), one column per assignment, one row per learner,
each score the points after any late penalty (``classroom/late.py``):

* ``canvas.csv``: Canvas's gradebook import layout. The columns ``Student, ID, SIS User ID, SIS Login ID,
  Section`` come first and a ``Points Possible`` row second; Canvas matches learners on ``SIS Login ID``,
  here the learner's id in the course.
* ``moodle.csv``: for Moodle's "Import grades from CSV". ``Username, Full name, Email address`` then the
  assignments; on import, map ``Username`` (or ``Email address``) to the user field and each assignment
  column to its grade item.
* ``nbgrader.csv``: nbgrader's own ``nbgrader export``, one row per learner and assignment.

``--roster`` (``id,name,email``, the class list) adds names and email addresses and a row for every
learner on it, submitted or not; a learner graded but missing from the roster is still exported and named.
A learner without a submission gets an empty cell (``--missing zero``: 0). A roster that breaks a rule (a
missing column, an empty or duplicate id) is refused before anything is written, naming the row.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from classroom.gradebook import gradebook_url, score_after_penalty
from classroom.roster import RosterError, read_roster
from classroom.text_out import csv_writer

CANVAS_IDS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDS = ["Username", "Full name", "Email address"]


@dataclass(frozen=True)
class Learner:
    id: str
    name: str = ""
    email: str = ""


def read_learners(path: Path) -> dict[str, Learner]:
    """The class list: learner id -> Learner, in the file's order; :class:`RosterError` on the first broken row."""
    entries, unusable = read_roster(path)
    if unusable:
        row = unusable[0]
        if row.first is None:
            raise RosterError(f"{path}, line {row.line}: the id is empty; every learner needs one")
        raise RosterError(f"{path}, line {row.line}: the id {row.id!r} is already on line {row.first}; ids are unique")
    return {e.id: Learner(e.id, e.name, e.email) for e in entries}


def gradebook_scores(root: Path) -> tuple[dict[str, float], dict[str, Learner], dict[tuple[str, str], float]]:
    """(max score per assignment, learners in the gradebook, score after penalty per (learner, assignment))."""
    from nbgrader.api import Gradebook

    with Gradebook(gradebook_url(root)) as gb:
        max_scores = {a.name: a.max_score for a in sorted(gb.assignments, key=lambda a: a.name)}
        learners = {}
        for s in sorted(gb.students, key=lambda s: s.id):
            name = " ".join(part for part in (s.first_name, s.last_name) if part)
            learners[s.id] = Learner(s.id, name, s.email or "")
        scores = {}
        for assignment in max_scores:
            for sub in gb.assignment_submissions(assignment):
                if sub.notebooks:
                    scores[sub.student.id, assignment] = score_after_penalty(sub)
    return max_scores, learners, scores


def export(root: Path, out: Path, roster: dict[str, Learner] | None, missing: str) -> list[str]:
    """Write the three files; return the ids of graded learners the roster lacks (empty without a roster)."""
    max_scores, in_gradebook, scores = gradebook_scores(root)
    learners = dict(roster or {})
    strangers = [i for i in in_gradebook if roster is not None and i not in roster]
    for ident in in_gradebook:
        learners.setdefault(ident, in_gradebook[ident])
    assignments = list(max_scores)

    def cell(ident: str, assignment: str) -> str:
        if (ident, assignment) in scores:
            return f"{scores[ident, assignment]:g}"
        return "0" if missing == "zero" else ""

    out.mkdir(parents=True, exist_ok=True)
    with (out / "canvas.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv_writer(fh)
        w.writerow(CANVAS_IDS + assignments)
        w.writerow(["Points Possible", "", "", "", ""] + [f"{max_scores[a]:g}" for a in assignments])
        for ident, who in learners.items():
            w.writerow([who.name or ident, "", "", ident, ""] + [cell(ident, a) for a in assignments])
    with (out / "moodle.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv_writer(fh)
        w.writerow(MOODLE_IDS + assignments)
        for ident, who in learners.items():
            w.writerow([ident, who.name, who.email] + [cell(ident, a) for a in assignments])
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "export", "--log-level=ERROR",
                          f"--CsvExportPlugin.to={out / 'nbgrader.csv'}"], cwd=root, env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"nbgrader export failed:\n{res.stdout}{res.stderr}")
    inert_csv(out / "nbgrader.csv")  # nbgrader's own writer quotes, but leaves a name's formula as it is
    return strangers


def inert_csv(path: Path) -> None:
    """Rewrite a CSV file another program wrote with every cell inert in a spreadsheet (:mod:`classroom.text_out`)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv_writer(fh).writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make export-grades", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--out", type=Path, default=None, help="folder of the CSV files (default: ROOT/exports)")
    parser.add_argument("--roster", type=Path, default=None, help="the class list: id,name,email")
    parser.add_argument("--missing", choices=("blank", "zero"), default="blank",
                        help="the cell of a learner without a submission (default: blank)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    roster = None
    if args.roster is not None:
        if not args.roster.is_file():
            print(f"make export-grades: ROSTER={args.roster} does not exist or is not a file", file=sys.stderr)
            return 2
        try:
            roster = read_learners(args.roster)
        except (RosterError, UnicodeDecodeError) as exc:
            print(f"make export-grades: {exc}; nothing was written", file=sys.stderr)
            return 2
    out = (args.out or root / "exports").resolve()
    strangers = export(root, out, roster, args.missing)
    for name in ("canvas.csv", "moodle.csv", "nbgrader.csv"):
        print(f"wrote {out / name}")
    if strangers:
        print(f"note: graded but not on the roster (exported without a name): {', '.join(strangers)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
