"""Grading on this machine: :class:`LocalGrading`, ``make grade``'s default (``JOBS=N`` at a time).

It is one :class:`classroom.grading.Grading`; :class:`classroom.cluster.client.ClusterGrading` is the same
interface on a Dask cluster.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from classroom.batch import (
    autograde_arguments,
    failed_students,
    grading_environment,
    kernel_threads,
    locked,
    why_not_graded,
)
from grader import warm
from grader.failures import printable
from grader.nbgrader_processes import THREAD_VARIABLES, NbgraderProcesses


@dataclass
class LocalGrading:
    """Grading on this machine: ``jobs`` long-lived nbgrader processes (:mod:`grader.nbgrader_processes`), each
    grading one submission at a time, nbgrader's start paid once per process for the whole run."""

    root: Path
    jobs: int
    timeout: int | None = None
    _warm: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)
    _processes: NbgraderProcesses | None = field(default=None, repr=False)

    def open(self) -> None:
        """The nbgrader processes of this run share their warm processes (grader.warm): one per view of the
        machine and thread count, started by the first to need it, not one per nbgrader process."""
        self._warm.enter_context(warm.shared_warm_processes())
        self._processes = NbgraderProcesses(self.root, self.jobs, grading_environment())
        self._warm.callback(self._processes.close)

    def warm_up(self) -> None:
        """Start the nbgrader processes now, where there is work for them: their imports overlap the gradebook's
        preparation (a run with nothing to grade starts none)."""
        self._processes.start()

    def close(self) -> None:
        """Stop the nbgrader processes and the warm processes they shared."""
        self._warm.close()

    def describe(self) -> str:
        """How this run grades, for the line printed per assignment."""
        return f"graded {self.jobs} at a time"

    def peak_memory_mb(self) -> float | None:
        """The largest memory one of the nbgrader processes reached so far, in MiB."""
        return self._processes.peak_mb() if self._processes is not None else None

    def grade(self, assignment: str, students: list[str], everyone: list[str]) -> list[tuple[str, str]]:
        """Autograde ``students`` (``everyone`` else untouched), each submission a request of its own on the next free
        nbgrader process: whatever one submission does to nbgrader ends its own request, never a classmate's.
        Returns (learner, why) for what failed."""
        del everyone  # each request names its learner: the rest of the class is never in its view
        threads = {name: str(kernel_threads(min(self.jobs, len(students)))) for name in THREAD_VARIABLES}

        def grade_one(student: str) -> subprocess.CompletedProcess:
            argv = autograde_arguments(self.root, assignment, student, self.timeout)
            res = self._processes.run(argv, threads)
            return self._processes.run(argv, threads) if locked(res) else res

        failed = []
        with ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(students)))) as pool:
            for student, res in zip(students, pool.map(grade_one, students)):
                if failed_students(res, assignment, [student]):
                    failed.append((student, why_not_graded(res)))
                    print(printable(res.stdout + res.stderr)[-8000:], file=sys.stderr)
        return failed
