"""The grading run: every assignment's new or changed submissions graded, then ``grades.csv``.

A submission's path, module by module (:func:`grade_class`):

1. :mod:`classroom.intake` finds it (``submitted/<student>/<assignment>/``) and checks it before grading: a
   notebook that cannot be read, a wrong name, a link or another's file is a :class:`~classroom.intake.Problem`,
   and that submission is left alone, its earlier grade kept;
2. :mod:`classroom.gradebook` records the assignment in the gradebook from ``solutions/``, when its copy may be
   out of date, with its due date, and :mod:`classroom.late` the learner's extension;
3. a :class:`classroom.grading.Grading` grades it, :class:`~classroom.local.LocalGrading` here or
   :class:`~classroom.cluster.client.ClusterGrading` on a cluster (:func:`open_grading` picks one; the run never
   asks which): ``nbgrader autograde`` in the fenced kernel of :mod:`grader.autograde` writes ``autograded/`` and
   the scores;
4. :mod:`classroom.late` applies the late policy deadlines.toml gives now;
5. :mod:`classroom.report` writes ``grades.csv`` with the notes grading left, and prints the table.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from classroom.cluster.client import ClusterGrading
from classroom.gradebook import sync_gradebook
from classroom.grading import Grading
from classroom.intake import Problem, check_submission, find_submissions, needs_grading
from classroom.late import Deadlines, apply_late_policy, grant_extensions
from classroom.local import LocalGrading
from classroom.report import notes_on, print_table, write_csv
from classroom.text_out import shown


def open_grading(root: Path, jobs: int, timeout: int | None, scheduler: str | None = None,
                 secret_file: str | None = None) -> Grading:
    """Grading for this run, opened: on the Dask cluster at ``scheduler`` (each task carrying the grading secret
    of ``secret_file``, which the workers never read themselves; None: the registry's seeds), or here, ``jobs``
    submissions at a time, whose graders read the secret where nbgrader_config.py names it. Raises
    :class:`classroom.grading.GradingUnavailable` when it cannot grade."""
    if scheduler:
        secret = Path(secret_file).read_bytes() if secret_file else None
        grading: Grading = ClusterGrading(root, scheduler, timeout, secret)
    else:
        grading = LocalGrading(root, jobs, timeout)
    grading.open()
    return grading


#: where a learner's earlier autograded folder waits while they are regraded (put back if the regrade fails)
EARLIER = ".autograded-earlier"


@contextlib.contextmanager
def earlier_kept(root: Path, assignment: str, students: list[str]):
    """Each learner's earlier autograded folder of ``assignment``, set aside while ``students`` are graded: the
    block names the learners whose grading failed in the list it is given, and theirs is put back (whatever the
    failed grading left is removed); the others' are removed. A regrade that fails never costs the earlier
    autograded copy (its feedback, its notes)."""
    import shutil

    kept = root / EARLIER / assignment
    for student in students:
        folder = root / "autograded" / student / assignment
        aside = kept / student
        if aside.exists():  # a run that stopped before putting it back: the earlier copy is this one
            shutil.rmtree(folder, ignore_errors=True)
            continue
        if folder.is_dir() and not folder.is_symlink():
            aside.parent.mkdir(parents=True, exist_ok=True)
            folder.rename(aside)
    failed: list[str] = []
    try:
        yield failed
    finally:
        for student in students:
            aside = kept / student
            if not aside.exists():
                continue
            folder = root / "autograded" / student / assignment
            if student in failed or not folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
                aside.rename(folder)
            else:
                shutil.rmtree(aside, ignore_errors=True)
        with contextlib.suppress(OSError):
            kept.rmdir()
            kept.parent.rmdir()


def grade_class(root: Path, sources: list[str], deadlines: Deadlines, grading: Grading, problems: list[Problem],
                students: list[str] | None = None, out: Path | None = None) -> int:
    """Grade every assignment of ``sources``' new or changed submissions with ``grading`` (``students``: these
    learners' again, changed or not), then write ``out`` (default: ``root/grades.csv``). ``problems``: what was
    found before (a zip's import); the exit status: 0 when everything was graded, 1 when something was not."""
    graded: list[str] = []
    notes: dict[tuple[str, str], list[str]] = {}
    if students or any(needs_grading(root, a, s) for a in sources for s in find_submissions(root, a)):
        grading.warm_up()
    for assignment in sources:
        submissions = find_submissions(root, assignment)
        if not submissions:
            continue
        graded.append(assignment)
        sync_gradebook(root, assignment, deadlines.due.get(assignment))
        todo = []
        for student, notebooks in submissions.items():
            found = check_submission(root, student, assignment, notebooks)
            problems.extend(found)
            if not found:
                todo.append(student)
        if students:
            fresh = [s for s in todo if s in students]
            who = shown(", ".join(fresh), 2000) or "nobody"
            print(f"{assignment}: regrading {who} ({len(fresh)} of {len(submissions)} submission(s))")
        else:
            fresh = [s for s in todo if needs_grading(root, assignment, s)]
            print(f"{assignment}: {len(todo)} of {len(submissions)} submission(s) gradable, "
                  f"{len(fresh)} new or changed, {grading.describe()}")
        grant_extensions(root, assignment, todo, deadlines)

        with earlier_kept(root, assignment, fresh) as failed:
            for student, why in grading.grade(assignment, fresh, list(submissions)):
                problems.append(Problem(student, assignment, Path("submitted") / student / assignment, why))
                failed.append(student)
        apply_late_policy(root, assignment, todo, deadlines)
        for student in todo:
            found_notes = notes_on(root, assignment, student)
            if found_notes:
                notes[(student, assignment)] = found_notes

    if not graded and not problems:
        print(f"make grade: no submissions under {root / 'submitted'} "
              f"(expected submitted/<student>/<assignment>/*.ipynb for an assignment in {sources}); nothing to grade")
        return 0
    out = out or root / "grades.csv"
    rows = write_csv(root, out, graded, problems, notes) if graded else []
    print_table(rows)
    print(f"\nwrote {out} ({len(rows)} rows)")
    peak = grading.peak_memory_mb()
    if peak:
        print(f"grading's own processes reached {peak:.0f} MiB of memory at most (the kernels have limits of "
              "their own)")
    for (student, assignment), found_notes in sorted(notes.items()):
        print(f"  note: student '{shown(student)}', {assignment}: {shown('; '.join(found_notes), 2000)}")
    # grades.csv keeps every learner's status; a regrade of some learners reports and fails on theirs alone
    problems = [p for p in problems if not students or p.student in students]
    if problems:
        print(f"\n{len(problems)} submission(s) could not be graded:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    return 0
