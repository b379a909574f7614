"""One nbgrader autograde: its command line, its environment, and what its result says.

Every grading run, local or on a cluster worker, grades a batch of learners' submissions of one assignment as one
``nbgrader autograde`` (:func:`autograde_arguments`: the rest of the class excluded), run inside a long-lived
nbgrader process (:mod:`grader.nbgrader_processes`) so nbgrader's start is paid once. Each batch's kernels share
the machine's cores (:func:`kernel_threads`); the learners a batch could not grade are what its process reported
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


def autograde_arguments(root: Path, assignment: str, students: list[str], everyone: list[str],
                        timeout: int | None) -> list[str]:
    """nbgrader's arguments to autograde some students' submissions in one run (``--force``: a resubmission
    replaces the earlier autograded copy); the rest of the class is excluded from the run."""
    args = ["autograde", assignment, "--force", "--log-level=INFO"]
    others = sorted(set(everyone) - set(students))
    if others:
        args.append(f"--CourseDirectory.student_id_exclude={','.join(others)}")
    args = nbgrader_command(*args, root=root, timeout=timeout)[1:]
    if timeout is not None:
        args.append(f"--GuardedExecute.timeout={timeout}")
    return args


def autograde(root: Path, assignment: str, students: list[str], everyone: list[str],
              timeout: int | None, threads: int | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Autograde some students' submissions as one ``nbgrader autograde`` command would
    (:func:`autograde_arguments`), in an nbgrader process of its own (:mod:`grader.nbgrader_processes`), which
    reports the learners it could not grade (``.failed``). ``env``: the process's environment (default: this
    one's)."""
    argv = autograde_arguments(root, assignment, students, everyone, timeout)
    process = NbgraderProcess(root, dict(grading_environment(threads, base=env), COURSE_GRADING_OWN_THREADS=""))
    try:
        res = process.run(argv, {})
        if locked(res):  # SQLite and a parallel grader
            res = process.run(argv, {})
    finally:
        process.close()
    return res


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
