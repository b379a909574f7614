"""What a hidden test raises when it finds a learner's function wrong."""

from __future__ import annotations

#: what a solution cell holds in the release, under ``# YOUR CODE HERE`` (nbgrader's code stub, nbgrader_config.py)
STUB_MESSAGE = "not implemented yet"
STUB = f'raise NotImplementedError("{STUB_MESSAGE}")'


class ExerciseFailure(AssertionError):
    """A hidden test found the learner's function wrong; the message says how."""


class ForbiddenCall(ExerciseFailure):
    """The learner's function called the reference or a fused routine."""


#: how much of a text the learner's code chose (an exception's message, a type's name) a diagnosis quotes
LEARNER_TEXT = 200
#: how long a hidden test's message may be in the graded notebook
MESSAGE = 2000


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab written as an escape (a terminal's ``\\x1b``
    shown as text, never obeyed)."""
    return "".join(c if c in "\n\t" or c.isprintable() else repr(c)[1:-1] for c in text)


def learner_text(value: object, limit: int = LEARNER_TEXT) -> str:
    """A text the learner's code chose, as a diagnosis may quote it: printable and at most ``limit`` characters
    (an exception's message can carry anything the function saw; a diagnosis says what went wrong, not that)."""
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - a learner's __str__ that raises
        text = f"<{type(value).__name__[:40]}>"
    text = printable(text)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters not shown)"


class NotWritten(ExerciseFailure):
    """The learner's function still raises the release's stub: it is not written yet."""
