"""The hub's folders under its prefix (:class:`Layout`), its names, and what every part of the hub shares."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: the repository this module runs from (the hub's copy of the course is made from it)
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PREFIX = Path("/opt/transformers-course")
COURSE_ID = "transformers-course"
LEARNERS, INSTRUCTORS = "course-learners", "course-instructors"
#: a Unix account name as Debian's useradd accepts it by default
USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


class HubError(RuntimeError):
    """Something the hub needs is missing or wrong; the message names it."""


@dataclass(frozen=True)
class Layout:
    """The hub's folders under its prefix."""

    prefix: Path

    env = property(lambda self: self.prefix / "env")
    course = property(lambda self: self.prefix / "course")
    proxy = property(lambda self: self.prefix / "proxy")
    etc = property(lambda self: self.prefix / "etc")
    exchange = property(lambda self: self.prefix / "exchange")
    state = property(lambda self: self.prefix / "state")
    wheels = property(lambda self: self.prefix / "wheels")
    run = property(lambda self: self.prefix / "run")  # the hub's and each user's server's Unix sockets
    disks = property(lambda self: self.prefix / "disks")  # each learner's disk, and the exchange's


@dataclass(frozen=True)
class Groups:
    """The Unix groups of a class's learners and instructors."""

    learners: str = LEARNERS
    instructors: str = INSTRUCTORS


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """Run ``cmd``; :class:`HubError` with its output when it fails."""
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        raise HubError(f"{' '.join(map(str, cmd))} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return res


def require_root() -> None:
    """:class:`HubError` unless this runs as root on a Debian or Ubuntu machine."""
    if os.geteuid() != 0:
        raise HubError("the hub is set up and run as root (it creates accounts and starts servers as them): "
                       "run it with sudo")
    if not shutil.which("apt-get") and not shutil.which("useradd"):
        raise HubError("the hub needs a Debian or Ubuntu machine (apt-get and useradd are missing)")


def digest(*parts: bytes) -> str:
    """A short hash of ``parts`` (what a step of the set-up was made from)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]
