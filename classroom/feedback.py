"""`make feedback`: nbgrader's HTML feedback for every autograded submission, ready to deliver.

    python -m classroom.feedback [--root DIR] [--assignment ID ...]

The feedback shows each test's visible part and its result; the hidden tests'
code is removed and an error is cut to its last line, the diagnosis (see
``HideHiddenTests`` in :mod:`grader.autograde`, wired in
``nbgrader_config.py``). Files land in ``feedback/<student>/<assignment>/``.

Two ways out, whichever way the work came in:

- **the exchange** (the class hub): ``nbgrader release_feedback <assignment>``
  puts each page where its learner's Assignments tab fetches it. It names a
  page by the submission's secret and reads its time, which nbgrader's collect
  writes and a zip's import writes too (:func:`classroom.intake.write_submission_record`);
  for a submission that came any other way (copied into ``submitted/`` by hand),
  this step writes them, so one such learner never stops the class's release;
- **a learning-management system**: ``exports/feedback-<assignment>.zip`` holds
  ``<student>/<notebook>.html``, one folder per learner, the layout
  ``make grade SUBMISSIONS=`` takes in, to upload as the LMS's feedback files.

A page shows everything the learner wrote through one renderer (:mod:`grader.pages`): it runs nothing of
theirs and fetches nothing. A learner's notebook that still cannot be rendered ends that learner's feedback,
named with nbgrader's error, and the command exits 1; every other learner gets their page and the LMS zip is
written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from classroom.batch import grading_environment, nbgrader_command
from classroom.intake import (
    SUBMISSION_SECRET,
    TIMESTAMP,
    expected_notebooks,
    read_plain,
    submission_secret,
    timestamp_text,
)
from classroom.learner_files import write_file
from grader.failures import printable


def complete_release_record(root: Path, student: str, assignment: str) -> bool:
    """Give a submission's feedback folder the secret and time release_feedback reads; True if any was missing.

    The secret is kept in ``submitted/`` too, so a later regrade's feedback keeps the same name; the time
    (the submitted notebooks' newest file time) only labels the feedback, the late policy never reads it.
    """
    folder = root / "feedback" / student / assignment
    sent = root / "submitted" / student / assignment
    added = False
    where = [student, assignment]
    if read_plain(folder / SUBMISSION_SECRET) is None:
        write_file(root / "feedback", [*where, SUBMISSION_SECRET], submission_secret(sent).encode())
        added = True
    if read_plain(folder / TIMESTAMP) is None:
        newest = max((p.lstat().st_mtime for p in sent.glob("*.ipynb") if not p.is_symlink()), default=0.0)
        when = dt.datetime.fromtimestamp(newest, dt.timezone.utc)
        write_file(root / "feedback", [*where, TIMESTAMP], timestamp_text(when).encode())
        added = True
    return added


def feedback_pages(root: Path, assignment: str) -> set[str]:
    """The names of an assignment's feedback pages: one per notebook of the assignment, as the course renders it."""
    return {f"{name.removesuffix('.ipynb')}.html" for name in expected_notebooks(root, assignment)}


def keep_only_feedback(root: Path, student: str, assignment: str) -> list[str]:
    """Remove from a learner's feedback folder whatever is not the feedback: nbgrader copies every other file of
    the graded folder there (the learner's own files), and the exchange and the LMS zip would carry them.
    Links are removed, never followed. Returns what was removed."""
    import shutil
    import stat

    folder = root / "feedback" / student / assignment
    keep = feedback_pages(root, assignment) | {TIMESTAMP, SUBMISSION_SECRET}
    removed = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []:
        mode = entry.lstat().st_mode
        if entry.name in keep and stat.S_ISREG(mode):
            continue
        if stat.S_ISDIR(mode):
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry.name)
    return removed


def has_pages(root: Path, student: str, assignment: str) -> bool:
    """Whether a learner's feedback folder holds every page of the assignment."""
    folder = root / "feedback" / student / assignment
    return all((folder / page).is_file() for page in feedback_pages(root, assignment))


def write_lms_zip(root: Path, assignment: str) -> tuple[Path, int]:
    """exports/feedback-<assignment>.zip: <student>/<notebook>.html for every learner with feedback: the pages the
    course rendered, nothing else of the learner's folder, no link followed."""
    out = root / "exports" / f"feedback-{assignment}.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    names = feedback_pages(root, assignment)
    pages = sorted(p for p in (root / "feedback").glob(f"*/{assignment}/*.html")
                   if p.name in names and not p.is_symlink() and p.is_file()
                   and not p.parent.is_symlink() and not p.parent.parent.is_symlink())
    scratch = out.with_name(out.name + ".part")
    with zipfile.ZipFile(scratch, "w", zipfile.ZIP_DEFLATED) as zf:
        for page in pages:
            zf.write(page, f"{page.parent.parent.name}/{page.name}")
    scratch.replace(out)  # a half-written zip never stands where the LMS upload is taken from
    return out, len(pages)


def failed_learners(log: str) -> dict[str, str]:
    """The learners nbgrader's generate_feedback could not render, from its log: {student: the error's last line}.

    nbgrader carries on past a notebook that raises (it removes that learner's feedback folder), logs the path
    and the traceback (indented, after a log line of its own), and names the learner at the end."""
    reasons, named, block = {}, set(), None
    for line in log.splitlines():
        if m := _NAMED.search(line):
            named.add(m.group(1))
        if m := _FAILED_AT.search(line):
            block = Path(m.group(1).strip()).parent.name
            reasons[block] = ""
        elif line.startswith("[") and "Traceback (most recent call last)" not in line:
            block = None
        elif block is not None and line.strip() and not line.strip().startswith(("^", "~")):
            reasons[block] = line.strip()  # the last line of the traceback is the error
    return {s: printable(reasons.get(s) or "see nbgrader's log")[:300] for s in named}


_FAILED_AT = re.compile(r"\| ERROR\] There was an error processing assignment: (.+)$")
_NAMED = re.compile(r"\| ERROR\] There was an error processing assignment '.*' for student '(.+)'$")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make feedback", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    base = root / "autograded"
    done = sorted({p.name for p in base.glob("*/*") if p.is_dir()}) if base.is_dir() else []
    if args.assignment:
        unknown = sorted(set(args.assignment) - set(done))
        if unknown:
            print(f"make feedback: nothing autograded for {unknown}; autograded: {done}", file=sys.stderr)
            return 2
        done = [a for a in done if a in args.assignment]
    if not done:
        print("make feedback: nothing autograded yet (run `make grade` first)")
        return 0
    status = 0
    for assignment in done:
        command = nbgrader_command("generate_feedback", assignment, "--force", "--log-level=ERROR", root=root)
        res = subprocess.run(command, cwd=root, env=grading_environment(), capture_output=True, text=True)
        # One learner's notebook that cannot be rendered ends that learner's feedback, named, never the class's:
        # nbgrader goes on past it, and the others' pages and the LMS zip are written.
        failed = failed_learners(res.stdout + res.stderr) if res.returncode != 0 else {}
        graded = {p.parent.parent.name for p in base.glob(f"*/{assignment}/*.ipynb")}
        unnamed = sorted(s for s in graded - set(failed) if not has_pages(root, s, assignment))
        if res.returncode != 0 and (not failed or unnamed):  # nbgrader stopped for a reason of its own
            print(f"make feedback: {assignment} failed:\n{res.stdout}{res.stderr}", file=sys.stderr)
            status = 1
            continue
        learners = sorted(p.parent.name for p in (root / "feedback").glob(f"*/{assignment}")
                          if p.is_dir() and not p.is_symlink() and not p.parent.is_symlink())
        for student in learners:
            removed = keep_only_feedback(root, student, assignment)
            if removed:
                print(f"  {student}: not feedback, left out of the pages and the LMS zip: "
                      f"{', '.join(printable(r) for r in removed)}")
        completed = [s for s in learners if complete_release_record(root, s, assignment)]
        lms, n = write_lms_zip(root, assignment)
        print(f"{assignment}: feedback for {n} notebook(s) in {root / 'feedback'}/<student>/{assignment}/; "
              f"for an LMS: {lms.relative_to(root)}")
        if completed:
            print(f"  {len(completed)} submission(s) had no secret or time from the exchange or a zip "
                  f"({', '.join(completed)}): written, so release_feedback can release them")
        for student, reason in sorted(failed.items()):
            print(f"make feedback: {assignment}: no feedback page for {printable(student)} ({reason}); every other "
                  "learner's page is written and in the LMS zip", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
