"""Taking a learner's files: regular files the learner owns, each read through a handle, never through a link.

Every folder a learner wrote is hostile ground for the instructor's tools, which run with the instructor's rights:
a symbolic link in a submission makes a plain copy read the instructor's files (the grading secret, the class
list, another learner's feedback) into the learner's graded copy, where the learner's code prints them. So the
course's tools take a learner's folder (an inbound submission of nbgrader's exchange, a submission under
``submitted/`` before it is graded) through this module, and a zip's import writes through it:

* a file is taken only if it is a **regular file** owned by one of the accepted **owners** (the learner; in the
  instructor's ``submitted/``, the instructor, who collected it) with **one link**: a symbolic link, a hard link
  (another name of a file, which may be anyone's), a device, a FIFO or a socket is refused, and so is a folder the
  owners do not own;
* nothing is followed: each folder is opened by name inside the folder above it, refusing a link
  (``O_NOFOLLOW``), and each file's checks are made on the handle it is then read from, so a name swapped
  for a link between the look and the read is refused too, not followed;
* what is refused is named (:class:`Refused`, its path and why) for the tool's output, and the rest is taken.

:func:`inspect` says what would be taken and what refused, reading no contents; :func:`take` copies what it may
into a new folder; :func:`write_file` writes one file below a folder without following a link on the way.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

#: folders below a submission's own, at most (a deeper tree is refused, not walked)
MAX_DEPTH = 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused once its handle shows what it is)
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}


@dataclass(frozen=True)
class Refused:
    """A file or folder left out, with why (``path`` as the caller named the folder, plus the name inside it)."""

    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


@dataclass
class Taken:
    """What :func:`take` (or :func:`inspect`) found: the files taken (paths inside the folder) and those refused."""

    files: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    size: int = 0  # bytes in the files taken


class TooLarge(ValueError):
    """The files to take hold more bytes than the limit allows; the message names the folder and both sizes."""


#: leave_out(folder, names) -> the names to skip without a word (shutil.copytree's ``ignore``, e.g. nbgrader's
#: CourseDirectory.ignore patterns): the caller's choice, not a refusal
LeaveOut = Callable[[str, list[str]], "set[str] | list[str]"]


def owner_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _why_not(st: os.stat_result, owners: frozenset[int], regular: bool) -> str | None:
    """Why this file (``regular``) or folder is refused, from its handle's status; None if it may be taken."""
    wanted = stat.S_ISREG(st.st_mode) if regular else stat.S_ISDIR(st.st_mode)
    if not wanted:
        return f"{_kind(st.st_mode)}: refused"
    if st.st_uid not in owners:
        whose = " or ".join(sorted(owner_name(u) for u in owners))
        return f"owned by {owner_name(st.st_uid)}, not {whose}: refused"
    if regular and st.st_nlink != 1:
        return (f"a hard link (one of {st.st_nlink} names of the same file, which may be another's): refused; a "
                "submission's file is a file of its own")
    return None


def _link_target(name: str | Path, dir_fd: int | None) -> str:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return "?"


def _entries(folder: Path, dir_fd: int, rel: str, owners: frozenset[int], leave_out: LeaveOut | None,
             depth: int) -> Iterator[tuple[str, int | None, Refused | None]]:
    """(path inside the folder, an open handle or None, refusal or None) for each file below ``dir_fd``; a file's
    handle is open for the caller to read and close, a folder is walked here."""
    with os.scandir(dir_fd) as it:
        names = sorted(e.name for e in it)
    skipped = set(leave_out(str(folder / rel), names)) if leave_out else set()
    for name in names:
        path = f"{rel}/{name}" if rel else name
        if name in skipped:
            continue
        if not name.isprintable():
            yield path, None, Refused(str(folder / path), "a name with control characters: refused")
            continue
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # gone meanwhile: nothing to take
        if stat.S_ISLNK(st.st_mode):
            yield path, None, Refused(str(folder / path),
                                      f"a symbolic link (to {_link_target(name, dir_fd)}): refused, never followed")
            continue
        if stat.S_ISDIR(st.st_mode):
            if depth >= MAX_DEPTH:
                yield path, None, Refused(str(folder / path), f"folders nested deeper than {MAX_DEPTH}: refused")
                continue
            sub, why = _open_checked(name, dir_fd, owners, regular=False)
            if why:
                yield path, None, Refused(str(folder / path), why)
                continue
            try:
                yield path, -1, None  # a folder the caller may make in its copy
                yield from _entries(folder, sub, path, owners, leave_out, depth + 1)
            finally:
                os.close(sub)
            continue
        if not stat.S_ISREG(st.st_mode):  # a FIFO, a socket or a device: never opened
            yield path, None, Refused(str(folder / path), f"{_kind(st.st_mode)}: refused")
            continue
        fd, why = _open_checked(name, dir_fd, owners, regular=True)
        yield path, fd, (Refused(str(folder / path), why) if why else None)


def _open_checked(name: str, dir_fd: int, owners: frozenset[int], regular: bool) -> tuple[int | None, str | None]:
    """(an open handle, None) for a file (``regular``) or folder that may be taken, or (None, why not): its checks
    are made on the handle, so the file read is the one checked, whatever its name points at meanwhile."""
    try:
        fd = os.open(name, _FILE_FLAGS if regular else _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        return None, _open_error(exc, name, dir_fd)
    why = _why_not(os.fstat(fd), owners, regular)
    if why:
        os.close(fd)
        return None, why
    return fd, None


def _open_error(exc: OSError, name: str | Path, dir_fd: int | None = None) -> str:
    """Why ``name`` could not be opened, as a refusal (a link, where it is one, is named with its target)."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW: ELOOP for a file, ENOTDIR with O_DIRECTORY
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        if is_link:
            return f"a symbolic link (to {_link_target(name, dir_fd)}): refused, never followed"
        if exc.errno == errno.ENOTDIR:
            return "not a folder when opened (replaced meanwhile, or never one): refused"
    return f"cannot be opened ({exc.strerror}): refused"


def _open_folder(folder: Path, owners: frozenset[int]) -> tuple[int | None, Refused | None]:
    """The folder itself, opened without following a link at its last step, and checked like its contents."""
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError as exc:
        return None, Refused(str(folder), _open_error(exc, folder))
    why = _why_not(os.fstat(fd), owners, regular=False)
    if why:
        os.close(fd)
        return None, Refused(str(folder), why)
    return fd, None


def _takeable(folder: Path, owners: frozenset[int], leave_out: LeaveOut | None,
              found: Taken) -> Iterator[tuple[str, int]]:
    """(path inside ``folder``, an open handle; -1 for a folder, "" the folder itself, first) for what may be
    taken, each refusal added to ``found``; the caller reads and closes each file's handle."""
    fd, refused = _open_folder(folder, owners)
    if refused:
        found.refused.append(refused)
        return
    try:
        yield "", -1
        for path, handle, refused in _entries(folder, fd, "", owners, leave_out, 0):
            if refused:
                found.refused.append(refused)
            else:
                yield path, handle
    finally:
        os.close(fd)


def inspect(folder: Path, owners: set[int] | frozenset[int], leave_out: LeaveOut | None = None) -> Taken:
    """What :func:`take` would take from ``folder`` and what it would refuse; no file's contents are read."""
    found = Taken()
    for path, handle in _takeable(folder, frozenset(owners), leave_out, found):
        if handle >= 0:
            found.size += os.fstat(handle).st_size
            os.close(handle)
            found.files.append(path)
    return found


def take(folder: Path, dest: Path, owners: set[int] | frozenset[int], *, leave_out: LeaveOut | None = None,
         max_bytes: int | None = None) -> Taken:
    """Copy what may be taken from ``folder`` into ``dest`` (a new folder; its parent must exist), refusing the rest.

    Each file's contents come from the handle its checks were made on; its modification time is kept (``make
    grade`` compares it with the graded copy's). Files that would hold more than ``max_bytes`` together are not
    taken at all: :class:`TooLarge` names the folder and the limit, and ``dest`` is removed.
    """
    found = Taken()
    made = False  # dest is ours to remove only once this call made it
    try:
        for path, handle in _takeable(folder, frozenset(owners), leave_out, found):
            if handle == -1:
                os.mkdir(dest / path if path else dest, 0o755)
                made = True
                continue
            room = None if max_bytes is None else max_bytes - found.size
            try:
                found.size += _copy(handle, dest / path, room)
            except TooLarge:
                raise TooLarge(f"{folder}: its files hold more than the {max_bytes:,} bytes a submission may "
                               f"(at {path}): nothing was taken") from None
            finally:
                os.close(handle)
            found.files.append(path)
    except BaseException:
        if made:
            shutil.rmtree(dest, ignore_errors=True)
        raise
    return found


def _copy(src_fd: int, dest: Path, limit: int | None = None) -> int:
    """The contents of an open file into a new file ``dest`` (never an existing one, never through a link);
    TooLarge if it holds more than ``limit`` bytes (a file growing as it is read included)."""
    st = os.fstat(src_fd)
    if limit is not None and st.st_size > limit:
        raise TooLarge(dest)
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    size = 0
    try:
        while chunk := os.read(src_fd, 1 << 20):
            size += len(chunk)
            if limit is not None and size > limit:
                raise TooLarge(dest)
            os.write(out, chunk)
    finally:
        os.close(out)
    os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    return size


def write_file(root: Path, parts: list[str] | tuple[str, ...], data: bytes) -> Path:
    """Write ``data`` to ``root/parts[0]/.../parts[-1]``, making the folders on the way, following no link.

    Each folder below ``root`` is opened inside the one above it without following a link (a link where a
    folder should be is an error naming it); the file is replaced by a new one written beside it and renamed
    over it, so a link planted at its name is replaced, never written through. Raises OSError naming the path.
    """
    *folders, name = parts
    if not name or any(p in ("", ".", "..") or "/" in p for p in parts):
        raise ValueError(f"{'/'.join(parts)!r} is not a path below {root}")
    fd = os.open(root, _DIR_FLAGS)
    try:
        where = root
        for part in folders:
            where = where / part
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise OSError(f"{where}: {_open_error(exc, part, fd)}") from None
            os.close(fd)
            fd = sub
        scratch = f".{name}.{os.getpid()}.new"
        out = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                      dir_fd=fd)
        try:
            with os.fdopen(out, "wb", closefd=False) as fh:
                fh.write(data)
        finally:
            os.close(out)
        os.rename(scratch, name, src_dir_fd=fd, dst_dir_fd=fd)
        return where / name
    finally:
        os.close(fd)
