"""Cases per learner: each hidden test draws its cases from a seed only the instructor can compute.

The registry's seeds (``grader/assignments/``) are in every learner's copy of
the repository, so anyone could draw the hidden cases at home and fit a
function to them. With ``GRADING_SECRET_FILE`` set (say, to ``grading-secret``
in the course folder: git-ignored, closed to the grading kernel like the rest
of the course folder), the seed comes instead from that **grading secret**,
32 random bytes ``make grade`` creates there on its first run (mode 0600),
and from the learner's id, the assignment and the exercise
(:func:`learner_seed`, an HMAC-SHA256). So every learner gets cases of their
own, the same ones at every regrade while the secret is kept, and nobody
without the secret can draw them.

It is off by default (``nbgrader_config.py`` says why): the hidden tests'
cases were tuned on the registry's seeds, and on other seeds a few catalogued
mistakes are named as another mistake (``python -m tools.secret_sweep``).

Back the secret up with the gradebook: with another secret, a regrade draws
other cases (a right function keeps full marks on any cases; a function that
is right only on some may score differently).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets

#: the secret's file's usual name, in the course folder (git-ignored)
SECRET_FILE = "grading-secret"
_FORMAT = re.compile(r"^[0-9a-f]{64}$")


class GradingSecretError(ValueError):
    """The grading secret's file cannot be read as a secret."""


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
