"""Cases per learner: each hidden test draws its cases from a seed only the instructor can compute.

The registry's seeds (``grader/assignments/``) are in every learner's copy of
the repository, so anyone could draw those cases at home and fit a function to
them. ``make grade`` draws each learner's cases instead from a seed derived
(:func:`learner_seed`, an HMAC-SHA256) from the course's **grading secret**,
the learner's id, the assignment and the exercise. So every learner gets
cases of their own, the same ones at every regrade while the secret is kept,
and nobody without the secret can draw them.

The secret is 32 random bytes that the first grading writes (mode 0600) to
``grading-secret`` in the course folder, next to the default gradebook
(``GRADING_SECRET_FILE`` names another file; :func:`secret_path`). The
course folder is git-ignored there and closed to the grading kernel, and the
fence hides the file itself wherever it lies (:class:`grader.autograde.
GuardedExecute`). ``GRADING_SECRET_FILE=none`` grades on the registry's
public seeds instead.

Back the secret up with the gradebook: with another secret, a regrade draws
other cases (a right function keeps full marks on any cases; a function that
is right only on some may score differently). ``python -m tools.secret_sweep``
judges every catalogued implementation on the cases other secrets draw.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets

#: the secret's file's usual name, in the course folder (git-ignored)
SECRET_FILE = "grading-secret"
#: the value of ``GRADING_SECRET_FILE`` that grades on the registry's public seeds
OFF = "none"
_FORMAT = re.compile(r"^[0-9a-f]{64}$")


class GradingSecretError(ValueError):
    """The grading secret's file cannot be read as a secret."""


def secret_path(course_root: str, value: str | None, readable: list[str] = ()) -> str:
    """The grading secret's file: ``value`` (``GRADING_SECRET_FILE``; relative to the course folder), by default
    ``grading-secret`` in the course folder; ``""`` where ``value`` is ``none`` (the registry's seeds).

    ``readable``: folders of the course the grading kernel may read (the
    fence's public folders, the learners' submissions); a secret inside one
    of them is refused, since the kernel would see it.
    """
    value = (value or "").strip()
    if value.lower() == OFF:
        return ""
    path = os.path.abspath(os.path.join(course_root, value or SECRET_FILE))
    for folder in readable:
        folder = os.path.abspath(os.path.join(course_root, folder))
        if path == folder or path.startswith(folder.rstrip(os.sep) + os.sep):
            raise GradingSecretError(
                f"GRADING_SECRET_FILE={value!r} lies in {folder}, which the grading kernel can read: keep the "
                f"grading secret where learners' code cannot (the default, {SECRET_FILE} in the course folder, "
                f"or a file outside the course), or set GRADING_SECRET_FILE={OFF} for the registry's seeds")
    return path


def read_or_create(path: str) -> tuple[bytes, bool]:
    """The course's secret from ``path``, created there first if there is none; returns ``(secret, created)``.

    A new secret is written whole to a file of its own and then linked into place, so that graders starting
    together agree on one secret and none reads a half-written file.
    """
    created = False
    if not os.path.exists(path):
        scratch = f"{path}.{os.getpid()}-{secrets.token_hex(4)}.new"
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(32) + "\n")
        try:
            os.link(scratch, path)
            created = True
        except FileExistsError:  # another grader made it first: theirs it is
            pass
        finally:
            os.unlink(scratch)
    with open(path, encoding="ascii", errors="replace") as source:
        text = source.read().strip()
    if not _FORMAT.match(text):
        raise GradingSecretError(
            f"{path} does not hold a grading secret: it must be the 64 lowercase hexadecimal characters "
            "`make grade` wrote there. Restore it from your back-up (kept with the gradebook); removing it "
            "makes a new secret, and every learner's hidden cases change with it")
    return bytes.fromhex(text), created


def learner_seed(secret: bytes, student: str, assignment: str, exercise: str) -> int:
    """The seed of one learner's hidden cases for one exercise: 31 bits of HMAC-SHA256 under the secret."""
    message = "\0".join((student, assignment, exercise)).encode()
    return int.from_bytes(hmac.new(secret, message, hashlib.sha256).digest()[:4], "big") & 0x7FFF_FFFF
