"""What a hidden test raises when it finds a learner's function wrong."""

from __future__ import annotations

#: what a solution cell holds in the release, under ``# YOUR CODE HERE`` (nbgrader's code stub, nbgrader_config.py)
STUB_MESSAGE = "not implemented yet"
STUB = f'raise NotImplementedError("{STUB_MESSAGE}")'


class ExerciseFailure(AssertionError):
    """A hidden test found the learner's function wrong; the message says how."""


class ForbiddenCall(ExerciseFailure):
    """The learner's function called the reference or a fused routine."""


class NotWritten(ExerciseFailure):
    """The learner's function still raises the release's stub: it is not written yet."""
