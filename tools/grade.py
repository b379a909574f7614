"""`make grade`: autograde every submission under submitted/ and write grades.csv.

    python -m tools.grade [--root DIR] [--assignment ID ...] [--timeout SECONDS]

For each assignment that has submissions (``submitted/<student>/<assignment>/``):

1. the gradebook learns (or re-learns) the assignment from ``solutions/``,
   with ``nbgrader generate_assignment`` writing its release to a scratch
   folder, so ``exercises/`` is never touched here;
2. every submitted notebook is read and validated *before* grading. A file
   that is not a valid notebook (broken JSON, say) is reported with the
   student's id and the file, and that student's submission is left alone:
   the file stays where it is and any earlier grade stays in the gradebook;
3. all other students are autograded in one ``nbgrader autograde`` run. A
   cell that runs past the per-cell timeout is interrupted and scores zero;
   the rest of the notebook is still graded;
4. ``grades.csv`` lists every student and assignment with the score from
   the gradebook and a status column.

The exit status is 0 when every submission was graded, 1 when some could
not be (they are listed), and 2 on a usage error.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat


@dataclass
class Problem:
    student: str
    assignment: str
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"student '{self.student}', {self.path}: {self.reason}"


def nbgrader_command(*args: str, root: Path, timeout: int | None = None) -> list[str]:
    exe = Path(sys.executable).with_name("nbgrader")
    cmd = [str(exe) if exe.exists() else "nbgrader", *args, f"--CourseDirectory.root={root}"]
    if timeout is not None:
        cmd.append(f"--Execute.timeout={timeout}")
    return cmd


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")  # nbgrader calls alembic and jupyter by name
    return env


def check_notebook(path: Path) -> str | None:
    """Why ``path`` is not a gradable notebook, or None if it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); the file was left as it is"
    try:
        nb = nbformat.from_dict(raw)
        if nb.get("nbformat") != 4:
            return f"not an nbformat 4 notebook (nbformat={nb.get('nbformat')!r})"
        nbformat.validate(nb)
    except Exception as exc:  # nbformat.ValidationError and malformed structures
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"not a valid notebook ({first})"
    return None


def find_submissions(root: Path, assignment: str) -> dict[str, list[Path]]:
    base = root / "submitted"
    found: dict[str, list[Path]] = {}
    if not base.is_dir():
        return found
    for student_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        adir = student_dir / assignment
        if adir.is_dir():
            found[student_dir.name] = sorted(adir.glob("*.ipynb"))
    return found


def sync_gradebook(root: Path, assignment: str) -> None:
    """Record the assignment's notebooks, cells and points in the gradebook."""
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        cmd = nbgrader_command(
            "generate_assignment", assignment, "--force", "--log-level=ERROR",
            f"--CourseDirectory.release_directory={scratch}", root=root,
        )
        res = subprocess.run(cmd, cwd=root, env=_env(), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{res.stdout}{res.stderr}")


def autograde(root: Path, assignment: str, exclude: list[str], timeout: int | None) -> subprocess.CompletedProcess:
    args = ["autograde", assignment, "--log-level=INFO"]
    if exclude:
        args.append(f"--CourseDirectory.student_id_exclude={','.join(exclude)}")
    return subprocess.run(
        nbgrader_command(*args, root=root, timeout=timeout), cwd=root, env=_env(), capture_output=True, text=True
    )


def write_csv(root: Path, out: Path, assignments: list[str], problems: list[Problem]) -> list[dict]:
    from nbgrader.api import Gradebook, MissingEntry

    bad = {(p.student, p.assignment): p for p in problems}
    rows = []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        students = sorted(s.id for s in gb.students)
        for assignment in assignments:
            try:
                max_score = gb.find_assignment(assignment).max_score
            except MissingEntry:
                continue
            for student in sorted(set(students) | {p.student for p in problems if p.assignment == assignment}):
                try:
                    sub = gb.find_submission(assignment, student)
                    score, graded = sub.score, True
                except MissingEntry:
                    score, graded = 0.0, False
                status = "graded" if graded else "no submission"
                problem = bad.get((student, assignment))
                if problem:
                    status = "not graded" + ("; earlier grade kept" if graded else "")
                rows.append({
                    "student_id": student,
                    "assignment": assignment,
                    "score": f"{score:g}",
                    "max_score": f"{max_score:g}",
                    "status": status,
                    "message": problem.reason if problem else "",
                })
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["student_id", "assignment", "score", "max_score", "status", "message"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--assignment", action="append", help="grade only this assignment (repeatable)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    parser.add_argument("--csv", type=Path, default=None, help="output file (default: ROOT/grades.csv)")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    sources = sorted(p.name for p in (root / "solutions").iterdir() if p.is_dir()) if (root / "solutions").is_dir() else []
    if not sources:
        print(f"make grade: no assignments under {root / 'solutions'}", file=sys.stderr)
        return 2
    if args.assignment:
        unknown = sorted(set(args.assignment) - set(sources))
        if unknown:
            print(f"make grade: unknown assignment(s) {unknown}; known: {sources}", file=sys.stderr)
            return 2
        sources = [a for a in sources if a in args.assignment]
    if args.timeout is not None and args.timeout <= 0:
        print(f"make grade: --timeout must be a positive number of seconds, got {args.timeout}", file=sys.stderr)
        return 2

    problems: list[Problem] = []
    graded: list[str] = []
    for assignment in sources:
        submissions = find_submissions(root, assignment)
        if not submissions:
            continue
        graded.append(assignment)
        sync_gradebook(root, assignment)
        exclude = []
        for student, notebooks in submissions.items():
            student_problems = [Problem(student, assignment, nb.relative_to(root), why) for nb in notebooks if (why := check_notebook(nb))]
            if not notebooks:
                student_problems.append(Problem(student, assignment, (root / "submitted" / student / assignment).relative_to(root), "no notebook in the submission"))
            if student_problems:
                exclude.append(student)
                problems.extend(student_problems)
        print(f"{assignment}: grading {len(submissions) - len(exclude)} of {len(submissions)} submission(s)")
        res = autograde(root, assignment, exclude, args.timeout)
        if res.returncode != 0:
            # nbgrader goes on past a failing student and reports at the end.
            failed = set(re.findall(rf"error processing assignment '{re.escape(assignment)}' for student '([^']+)'", res.stdout + res.stderr))
            for student in sorted(failed):
                problems.append(Problem(student, assignment, Path("submitted") / student / assignment, "nbgrader could not grade it (see its log above)"))
            print(res.stdout + res.stderr, file=sys.stderr)

    if not graded:
        print(f"make grade: no submissions under {root / 'submitted'} (expected submitted/<student>/<assignment>/*.ipynb "
              f"for an assignment in {sources}); nothing to grade")
        return 0
    out = args.csv or root / "grades.csv"
    rows = write_csv(root, out, graded, problems)
    print(f"wrote {out} ({len(rows)} rows)")
    for row in rows:
        print(f"  {row['student_id']:<20} {row['assignment']:<28} {row['score']:>6} / {row['max_score']:<6} {row['status']}")
    if problems:
        print(f"\n{len(problems)} submission(s) could not be graded:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
