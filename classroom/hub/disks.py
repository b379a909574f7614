"""Each learner's disk: their home is a filesystem of its own, of a fixed size, and so is the exchange.

Without a bound, one learner could fill the disk that holds the gradebook, the exchange and everyone's work
(issue 50). Filesystem quotas would bound each account on a shared filesystem, but they need the kernel's quota
formats (``CONFIG_QFMT_V2`` for ext4, ``CONFIG_XFS_QUOTA``), which not every kernel has (this course's machine has
neither). A loop-mounted image needs nothing but the loop driver, so each learner's home is one::

    <prefix>/disks/<learner>.img   an ext4 image of HUB_DISK bytes, mounted on the learner's home (nosuid, nodev)
    <prefix>/disks/exchange.img    an ext4 image of HUB_EXCHANGE_DISK bytes, mounted on <prefix>/exchange

Each image is allocated in full when it is made (``fallocate``; never sparse), so the machine's disk cannot run out
under a learner's image while they write (a sparse image on a full disk would fail the filesystem inside it), and
``make hub`` refuses to make one that would leave the machine less than :data:`RESERVE` free. A learner over their
size gets "No space left on device" (JupyterLab's save says, in the course's words, that their home is full:
:class:`FullHomeContentsManager`), and only they do: the others, the exchange, the instructor's course and the
gradebook are on other filesystems. Everything else a learner's server could write outside their home (/tmp,
/var/tmp, /dev/shm, /run/lock) is memory of their own, inside their memory limit (:mod:`classroom.hub.spawner`).

The exchange is one filesystem for the whole class: a learner who writes into it by hand, past the course's submit,
can fill it, and then the others' submissions wait; the machine's disk, homes and gradebook stay untouched.

``make hub`` and ``make hub-users`` mount the images (making those missing: a learner's home from before is copied
into theirs), ``make hub-stop`` unmounts them; the images, the learners' work, stay. While unmounted, a home is an
empty folder of root's that its learner cannot write.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import shutil
import sqlite3
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from tornado import web

from classroom.hub.cgroups import gib, parse_size
from classroom.hub.layout import HubError, Layout, run

#: what make hub leaves free on the machine's disk, whatever the images take
RESERVE = 8 * 2**30
#: the class a machine's defaults are sized for
CLASS = 30
#: the smallest image: an ext4 journal and the course's files fit in it with room to work
SMALLEST = 64 * 2**20
MOUNT_OPTIONS = "loop,nosuid,nodev,noatime"


@dataclass(frozen=True)
class DiskSizes:
    """Each learner's home, and the exchange (every learner's submissions, the releases and the feedback)."""

    home: int
    exchange: int

    def __post_init__(self):
        for name in ("home", "exchange"):
            if getattr(self, name) < SMALLEST:
                raise ValueError(f"{name} disk = {getattr(self, name):,} bytes is below {SMALLEST // 2**20} MiB")

    def describe(self) -> str:
        return f"each learner's home {gib(self.home)}, the exchange {gib(self.exchange)}"


def default_sizes(free: int | None = None) -> DiskSizes:
    """The sizes make hub chooses when the instructor names none (guides/hub.md, "Disk").

    A learner's home after a term holds the 11 assignments they fetched (0.4 MB as released, up to 5 MB each with
    their outputs), nbgrader's copy of each submission (as large), their feedback pages, and Jupyter's and
    matplotlib's caches (under 1 MB): under 100 MB for a diligent learner who submits each assignment five times.
    1 GiB leaves room for data they make and a package or two of their own, ten times that. The exchange holds every
    submission (each learner's last ones, about the same 60 MB at most per learner) and the releases: 256 MiB per
    learner of the class of :data:`CLASS`, and 512 MiB more, 8 GiB. All of it allocated: 38 GiB, which this machine
    (72 GiB free) holds with :data:`RESERVE` to spare; a smaller disk gets proportionally less per learner.
    """
    free = shutil.disk_usage("/").free if free is None else free
    room = max(0, free - RESERVE)
    home = min(2**30, room * 30 // 38 // CLASS)
    exchange = min(8 * 2**30, room * 8 // 38)
    return DiskSizes(home=max(SMALLEST, home // 2**20 * 2**20), exchange=max(SMALLEST, exchange // 2**20 * 2**20))


def sizes_from(home: str, exchange: str) -> DiskSizes:
    """make hub's HUB_DISK and HUB_EXCHANGE_DISK, each left out this machine's default."""
    chosen = asdict(default_sizes())
    try:
        if home:
            chosen["home"] = parse_size(home, "HUB_DISK")
        if exchange:
            chosen["exchange"] = parse_size(exchange, "HUB_EXCHANGE_DISK")
        return DiskSizes(**chosen)
    except ValueError as exc:
        raise HubError(str(exc)) from None


def why_not() -> str | None:
    """None when learners' disks can be bounded here, else why not."""
    if os.geteuid() != 0:
        return "only root can mount filesystems"
    missing = [t for t in ("mkfs.ext4", "e2fsck", "mount", "umount", "fallocate") if not shutil.which(t)]
    if missing:
        return f"{', '.join(missing)} missing (Debian's e2fsprogs, mount and util-linux)"
    if not Path("/dev/loop-control").exists():
        return "this machine has no loop devices (/dev/loop-control)"
    with open("/proc/filesystems") as fh:
        if "ext4" not in fh.read().split():
            return "this kernel has no ext4"
    return None


def mounts() -> dict[str, str]:
    """{mount point: the image file behind it} for every loop mount of this machine."""
    found = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(rest) < 2 or not rest[1].startswith("/dev/loop"):
                continue
            backing = Path("/sys/block") / Path(rest[1]).name / "loop" / "backing_file"
            with contextlib.suppress(OSError):
                point = fields[4].encode().decode("unicode_escape")  # mountinfo writes spaces as \040
                found[point] = backing.read_text().strip()
    return found


class Disks:
    """The images of the hub whose folder is ``layout.prefix``."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.settings = layout.state / "disks.json"

    def image(self, name: str) -> Path:
        return self.layout.disks / f"{name}.img"

    def sizes(self) -> DiskSizes | None:
        """The sizes make hub was last started with (None: HUB_DISK=none, or never started)."""
        try:
            raw = json.loads(self.settings.read_text())
        except (OSError, ValueError):
            return None
        return DiskSizes(**raw) if raw else None

    def remember(self, sizes: DiskSizes | None) -> None:
        self.settings.write_text(json.dumps(asdict(sizes) if sizes else {}) + "\n")

    # -- one image
    def _make(self, image: Path, size: int, fill_from: Path | None, owner: tuple[int, int], mode: int) -> None:
        """A new ext4 image of ``size`` bytes, allocated in full, its root folder ``owner``'s with ``mode``, holding
        a copy of ``fill_from`` (owners, modes and times kept) when given."""
        self.layout.disks.mkdir(mode=0o700, exist_ok=True)
        free = shutil.disk_usage(self.layout.disks).free
        if free - size < RESERVE:
            raise HubError(f"{image.name} would take {gib(size)} of the {gib(free)} free on {self.layout.disks}, "
                           f"leaving less than {gib(RESERVE)}: free some disk or choose smaller sizes (HUB_DISK=, "
                           "HUB_EXCHANGE_DISK=)")
        partial = image.with_suffix(".new")
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        try:
            run(["fallocate", "-l", str(size), str(partial)])
            # nodiscard: a discard would punch the allocation back out of the image's file
            run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", f"nodiscard,root_owner={owner[0]}:{owner[1]}",
                 str(partial)])
            with tempfile.TemporaryDirectory(dir=self.layout.disks) as scratch:
                run(["mount", "-o", MOUNT_OPTIONS, str(partial), scratch])
                try:
                    shutil.rmtree(Path(scratch) / "lost+found", ignore_errors=True)
                    if fill_from is not None and fill_from.is_dir():
                        run(["cp", "-a", "--", f"{fill_from}/.", scratch])
                    os.chown(scratch, *owner)
                    os.chmod(scratch, mode)
                finally:
                    run(["umount", scratch])
            partial.rename(image)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def _mount(self, image: Path, point: Path) -> bool:
        """Mount ``image`` on ``point`` unless it is already; True if mounted now."""
        if mounts().get(str(point)) == str(image):
            return False
        if str(point) in mounts():
            raise HubError(f"{point} already has another filesystem mounted on it: unmount it first")
        subprocess.run(["e2fsck", "-p", str(image)], capture_output=True)  # a crash's leftovers, if any
        run(["mount", "-o", MOUNT_OPTIONS, str(image), str(point)])
        return True

    @staticmethod
    def _empty_underneath(point: Path) -> None:
        """What was under ``point`` before its image (copied into it) goes, and the folder becomes root's, 0700: a
        learner cannot write to the machine's disk there while the image is not mounted."""
        for child in point.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        os.chown(point, 0, 0)
        point.chmod(0o700)

    # -- the class's disks
    def home(self, user: str, size: int) -> list[str]:
        """The learner's home on their own image (made from their home as it is, the first time); mounted."""
        entry = pwd.getpwnam(user)
        home, image = Path(entry.pw_dir), self.image(user)
        said = []
        if not image.is_file():
            home.mkdir(mode=0o700, exist_ok=True)
            self._make(image, size, home, (entry.pw_uid, entry.pw_gid), 0o700)
            self._empty_underneath(home)
            said.append(f"{user}'s home: {gib(size)} of its own ({image})")
        if self._mount(image, home):
            said.append(f"{user}'s home mounted ({gib(image.stat().st_size)})")
        return said

    def exchange(self, size: int) -> list[str]:
        """The exchange on its own image (made from the exchange as it is, the first time); mounted."""
        point, image = self.layout.exchange, self.image("exchange")
        said = []
        if not image.is_file():
            point.mkdir(mode=0o755, exist_ok=True)
            self._make(image, size, point, (0, 0), 0o755)
            self._empty_underneath(point)
            point.chmod(0o755)
            said.append(f"the exchange: {gib(size)} of its own ({image})")
        if self._mount(image, point):
            said.append(f"the exchange mounted ({gib(image.stat().st_size)})")
        return said

    def mount_all(self, learners: list[str], sizes: DiskSizes) -> list[str]:
        """The exchange's disk and each learner's, made where missing and mounted."""
        why = why_not()
        if why:
            raise HubError(f"each learner's disk cannot be bounded on this machine: {why}. Start with HUB_DISK=none "
                           "to run without (not for a class: one learner could fill the disk everyone shares)")
        said = self.exchange(sizes.exchange)
        for user in learners:
            said += self.home(user, sizes.home)
        return said

    def unmount_all(self) -> list[str]:
        """Unmount every image of this hub (a busy one lazily: it goes when its last user lets go); one line each."""
        said = []
        ours = str(self.layout.disks.resolve()) + os.sep
        for point, backing in sorted(mounts().items(), key=lambda kv: -len(kv[0])):
            if not backing.startswith(ours):
                continue
            res = subprocess.run(["umount", point], capture_output=True, text=True)
            if res.returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True)
                said.append(f"{point} unmounted once its last process lets go ({res.stderr.strip()})")
            else:
                said.append(f"{point} unmounted")
        return said


def _full(exc: BaseException) -> bool:
    """Whether an error came from a full disk (the exception or what caused it)."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc):  # the notebooks' trust records
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def home_is_full(path: str, what: str) -> web.HTTPError:
    st = os.statvfs(os.path.expanduser("~"))
    return web.HTTPError(507, f"Your home folder is full: it holds {gib(st.f_blocks * st.f_frsize)}, the space the "
                         f"instructor gives each learner, and nothing more fits, so {path} could not be {what}. Delete "
                         "what you no longer need (copies, large outputs, data files) and try again; `du -sh ~/* "
                         "~/.[!.]*` in a terminal shows what takes the space.")


class FullHomeContentsManager(AsyncLargeFileManager):
    """JupyterLab's file saving and opening, which say in the course's words when the learner's home is full (opening
    a notebook writes its trust record)."""

    async def save(self, model, path=""):
        try:
            return await super().save(model, path)
        except Exception as exc:
            if _full(exc):
                raise home_is_full(path, "saved") from exc
            raise

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        try:
            return await super().get(path, content=content, type=type, format=format, **kwargs)
        except Exception as exc:
            if _full(exc):
                raise home_is_full(path, "opened") from exc
            raise
