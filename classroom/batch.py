"""One nbgrader autograde: its command line, its environment, and what its result says.

Every grading run, local or on a cluster worker, grades each learner's submission of an assignment as one
``nbgrader autograde`` of that learner alone (:func:`autograde_arguments`), a request to a long-lived nbgrader
process (:mod:`grader.nbgrader_processes`), so that nbgrader's start is paid once and whatever one submission does
to nbgrader ends its own request: a submission is the unit of failure. The kernels graded at once share the
machine's cores (:func:`kernel_threads`); whether a request failed is what its process reported
(:func:`failed_students`), never read from its log's text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from grader.nbgrader_processes import THREAD_VARIABLES, NbgraderProcess


def nbgrader_executable() -> str:
    """The nbgrader beside this Python, or the one on ``PATH``."""
    exe = Path(sys.executable).with_name("nbgrader")
    return str(exe) if exe.exists() else "nbgrader"


def nbgrader_command(*args: str, root: Path, timeout: int | None = None) -> list[str]:
    """``nbgrader *args`` for the course in ``root``, with a per-cell ``timeout`` in seconds if given."""
    cmd = [nbgrader_executable(), *args, f"--CourseDirectory.root={root}"]
    if timeout is not None:
        cmd.append(f"--Execute.timeout={timeout}")
    return cmd


def kernel_threads(jobs: int) -> int:
    """Threads per grading kernel when ``jobs`` kernels run at once: the cores shared out, at least one.

    Each kernel's torch would otherwise start one thread per core, and with
    two kernels on two cores OpenMP's threads wait on each other: measured,
    grading 2 at a time took 8 to 13 s of kernel time per notebook instead of
    1.2 to 1.8 s.
    """
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def grading_environment(threads: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an nbgrader process: ``base`` (default: this one's) with the environment's programs first
    on ``PATH`` and, given ``threads``, each kernel's thread count unless the instructor set one."""
    env = dict(os.environ if base is None else base)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")  # nbgrader calls alembic and jupyter by name
    if threads is not None:
        for name in THREAD_VARIABLES:
            env.setdefault(name, str(threads))  # an instructor's own setting wins
    return env


def autograde_arguments(root: Path, assignment: str, student: str, timeout: int | None) -> list[str]:
    """nbgrader's arguments to autograde one learner's submission (``--force``: a resubmission replaces the earlier
    autograded copy). The learner is named (``CourseDirectory.student_id``), never the rest of the class excluded by
    a list: a folder whose name is no learner's id (a comma, a line feed) is never in nbgrader's view, and the
    learner's id is one :func:`classroom.intake.student_id_problem` accepted, which nbgrader reads as itself."""
    args = ["autograde", assignment, "--force", "--log-level=INFO", f"--CourseDirectory.student_id={student}"]
    args = nbgrader_command(*args, root=root, timeout=timeout)[1:]
    if timeout is not None:
        args.append(f"--GuardedExecute.timeout={timeout}")
    return args


def autograde(root: Path, assignment: str, student: str, timeout: int | None, threads: int | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Autograde one learner's submission as one ``nbgrader autograde`` command would (:func:`autograde_arguments`),
    in an nbgrader process of its own (:mod:`grader.nbgrader_processes`), which reports the learners it could not
    grade (``.failed``). ``env``: the process's environment (default: this one's)."""
    argv = autograde_arguments(root, assignment, student, timeout)
    process = NbgraderProcess(root, dict(grading_environment(threads, base=env), COURSE_GRADING_OWN_THREADS=""))
    try:
        res = process.run(argv, {})
        if locked(res):  # SQLite and a parallel grader
            res = process.run(argv, {})
    finally:
        process.close()
    return res


def why_not_graded(res: subprocess.CompletedProcess) -> str:
    """Why nbgrader could not grade a submission, in a line: its process's end if it died, else the last error its
    request logged (a request grades one submission, so the line is that learner's own), printable and short."""
    from grader.failures import printable

    if res.stderr.strip():  # the process itself: it died, or refused the request
        return f"nbgrader could not grade it ({printable(res.stderr.strip().splitlines()[-1])[:300]})"
    errors = [line for line in res.stdout.splitlines() if "| ERROR]" in line]
    said = printable(errors[-1].split("]", 1)[-1].strip())[:300] if errors else "see its log above"
    return f"nbgrader could not grade it ({said})"


def locked(res: subprocess.CompletedProcess) -> bool:
    """Whether a failed autograde met a SQLite gradebook another grader was writing (worth one more try)."""
    return res.returncode != 0 and "database is locked" in res.stdout + res.stderr


def failed_students(res: subprocess.CompletedProcess, assignment: str, students: list[str]) -> list[str]:
    """The learners of a batch nbgrader could not grade, as its process reported them (``res.failed``, never read
    from its log's text); every learner of the batch when the process died or named none."""
    if res.returncode == 0:
        return []
    named = {student for a, student in (getattr(res, "failed", None) or []) if a == assignment}
    return sorted(named & set(students)) if named else list(students)
