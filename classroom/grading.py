"""The one interface a grading run uses, wherever its kernels run: :class:`Grading`.

:class:`classroom.local.LocalGrading` grades on this machine, ``jobs`` submissions at a time;
:class:`classroom.cluster.client.ClusterGrading` sends each submission to a Dask cluster as a task and records
what comes back. :func:`classroom.run.open_grading` picks one from ``make grade``'s options, and the run
(:func:`classroom.run.grade_class`) never asks which it has.
"""

from __future__ import annotations

from typing import Protocol


class GradingUnavailable(RuntimeError):
    """Grading cannot start (a cluster that cannot be reached, or without a worker of this course): nothing is
    graded, and the message says why."""


class Grading(Protocol):
    """Where the submissions of a run are graded. ``open`` before the first assignment, ``close`` after the last."""

    def open(self) -> None:
        """Get ready to grade (raises :class:`GradingUnavailable` when it cannot)."""

    def warm_up(self) -> None:
        """Start what grading needs now, while the gradebook is prepared (called only when there is work)."""

    def describe(self) -> str:
        """How it grades, for the line ``make grade`` prints per assignment ("graded 2 at a time")."""

    def grade(self, assignment: str, students: list[str], everyone: list[str]) -> list[tuple[str, str]]:
        """Autograde ``students``' submissions of ``assignment`` into ``autograded/`` and the gradebook (the rest of
        ``everyone``, the assignment's submitters, left as they are); returns (learner, why) for each that could not
        be graded."""

    def peak_memory_mb(self) -> float | None:
        """The largest memory one of this machine's grading processes reached (nbgrader, the judge; not the
        kernels, which have limits of their own), in MiB; None where grading runs elsewhere."""

    def close(self) -> None:
        """Stop what it started."""
