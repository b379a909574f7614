"""`make grade`: autograde every new or changed submission under submitted/ and write grades.csv.

    python -m classroom.grade [--root DIR] [--assignment ID ...] [--timeout SECONDS] [--zip FILE] [--jobs N]
                              [--student ID ...] [--scheduler tcp://HOST:8786]

This module is the command: it reads the options, the deadlines (:mod:`classroom.late`) and the grading secret
(:mod:`grader.secret`), imports a zip of submissions (:mod:`classroom.intake`), and hands the run to
:func:`classroom.run.grade_class`, whose docstring follows a submission from ``submitted/`` to ``grades.csv``.

Each learner's hidden cases are their own, drawn from the course's grading secret (``grading-secret`` in the course
folder, or the file ``GRADING_SECRET_FILE`` names; the first run creates it and says so);
``GRADING_SECRET_FILE=none`` grades on the registry's seeds. A cell that runs past the per-cell timeout is
interrupted and scores zero; a cell that kills the kernel scores zero and grading goes on; a deleted test cell
scores zero and is named.

The exit status is 0 when every submission was graded, 1 when some could not be (they are listed), and 2 on a
usage error, with nothing graded.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from classroom.grading import GradingUnavailable
from classroom.intake import Problem, find_submissions
from classroom.late import DeadlineError, read_deadlines
from classroom.run import grade_class, open_grading
from classroom.zip_import import import_zip
from grader.autograde import grading_secret_file
from grader.secret import GradingSecretError, read_or_create


def unprivileged_grading(root: Path) -> str | None:
    """Grading as a user other than root: each kernel in control groups of its own, below this user's delegated
    group (joined first, from any shell, where the course's hub.toml names the instructor's), or the process limits
    alone where GRADER_ISOLATION=process-limits asks for them by name; why grading must not start otherwise."""
    from grader import cgroups
    from grader.sandbox import isolation_problem

    isolation = os.environ.get("GRADER_ISOLATION", "").strip() or "groups"
    if os.environ.get("GRADER_OS_FENCE", "bwrap").strip() == "none":
        return None  # the Python fence alone, asked for by name: grading says so as it starts
    if isolation == "groups" and not cgroups.memory_isolation():
        delegated = hub_control_groups(root)
        refused = cgroups.join_delegated(delegated)
        if delegated and not refused:
            print(f"make grade: grading in {getpass.getuser()}'s control group on the course's hub")
    why = isolation_problem(isolation)
    if not why and isolation == "process-limits":
        print(f"make grade: grading as {getpass.getuser()} with the process limits alone (GRADER_ISOLATION="
              "process-limits): a kernel's memfd and shared memory do not count against its memory limit")
    return why


def hub_control_groups(root: Path) -> list[str]:
    """The ``cgroup.procs`` files of the instructor's control group, as the course's hub.toml names them (make
    hub-users writes it in the instructor's copy of the course); [] where there is none."""
    import tomllib

    try:
        with (root / "hub.toml").open("rb") as fh:
            found = tomllib.load(fh).get("control_groups", [])
    except (OSError, ValueError):
        return []
    return [p for p in found if isinstance(p, str) and p.startswith("/sys/fs/cgroup/")] if isinstance(found, list) \
        else []


def main(argv: list[str] | None = None) -> int:
    """``make grade``'s command line; returns its exit status."""
    parser = argparse.ArgumentParser(prog="make grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="course directory (default: here)")
    parser.add_argument("--assignment", action="append", help="grade only this assignment (repeatable)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    parser.add_argument("--csv", type=Path, default=None, help="output file (default: ROOT/grades.csv)")
    parser.add_argument("--zip", type=Path, default=None, help="a zip export of submissions, one folder per student")
    parser.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: CPU count)")
    parser.add_argument("--scheduler", default=None, help="grade on this Dask cluster, tcp://HOST:8786 "
                                                             "(make grade SCHEDULER=...; classroom/cluster/)")
    parser.add_argument("--student", action="append", help="regrade only this learner, whether or not the "
                                                            "submission changed (repeatable; make grade STUDENT=id)")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    solutions = root / "solutions"
    sources = sorted(p.name for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []
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
    deadlines_path = root / (os.environ.get("DEADLINES", "").strip() or "deadlines.toml")
    try:
        deadlines = read_deadlines(deadlines_path, sorted(p.name for p in solutions.iterdir() if p.is_dir()))
    except DeadlineError as exc:
        print(f"make grade: {exc}; nothing was graded", file=sys.stderr)
        return 2
    jobs = args.jobs if args.jobs is not None else max(1, min(4, os.cpu_count() or 1))
    if jobs <= 0:
        print(f"make grade: --jobs must be a positive number of submissions, got {jobs}", file=sys.stderr)
        return 2

    try:  # cases per learner: the secret is made once here, before the graders start, and read by each of them
        secret_file = grading_secret_file(str(root), os.environ.get("GRADING_SECRET_FILE"))
        created = bool(secret_file) and read_or_create(secret_file)[1]
    except (GradingSecretError, OSError) as exc:
        print(f"make grade: {exc}; nothing was graded", file=sys.stderr)
        return 2
    if created:
        print(f"make grade: created the grading secret {secret_file}: each learner's hidden cases are drawn "
              "from it. Back it up with the gradebook: a regrade with another secret draws other cases.")
    elif not secret_file:
        print("make grade: GRADING_SECRET_FILE=none: the hidden cases are the registry's, which every learner "
              "can draw from the repository")
    if os.geteuid() != 0 and not args.scheduler:
        why = unprivileged_grading(root)
        if why:
            print(f"make grade: {why}; nothing was graded", file=sys.stderr)
            return 2

    problems: list[Problem] = []
    if args.zip is not None:
        if not args.zip.is_file():
            print(f"make grade: SUBMISSIONS={args.zip} does not exist or is not a file", file=sys.stderr)
            return 2
        imported = import_zip(root, args.zip.resolve(), sources, deadlines.timezone)
        problems += imported.problems
        for note in imported.notes:
            print(f"make grade: {note}")
    if args.student:  # one learner's regrade (after a zip's import): every named learner has a submission
        have = {student for a in sources for student in find_submissions(root, a)}
        unknown = sorted(set(args.student) - have)
        if unknown:
            print(f"make grade: STUDENT={','.join(unknown)} has no submission under {root / 'submitted'} for "
                  f"{', '.join(sources)}; learners with one: {', '.join(sorted(have)) or 'none'}; nothing was graded",
                  file=sys.stderr)
            return 2

    try:
        grading = open_grading(root, jobs, args.timeout, args.scheduler, secret_file)
    except GradingUnavailable as exc:
        print(f"make grade: {exc}", file=sys.stderr)
        return 2
    try:
        return grade_class(root, sources, deadlines, grading, problems, args.student, args.csv)
    finally:
        grading.close()


if __name__ == "__main__":
    sys.exit(main())
