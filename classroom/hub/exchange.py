"""nbgrader's exchange for the course: a submission is its learner's own, and the exchange cannot be replaced.

nbgrader's filesystem exchange trusts folder names and leaves its folders open: its root is writable by everyone
(nbgrader #1225), so a learner can rename a course's folder away and put their own in its place; a submission is
taken as the learner's its name says, with a warning when another made it (#1097); a submission folder is
writable by everyone, and collect copies what a learner's links point to. The course's classes below keep
nbgrader's flow and close those doors (``nbgrader_config.py`` and the hub's role settings name them for
nbgrader's ``ExchangeFactory``). ngshare, the exchange as a hub service, was the other way; its client needs
jupyter_core < 4.11.2, and the course pins 5.9.1.

The exchange's folders, as ``make hub`` lays them out (:func:`lay_out`)::

    exchange/                          root, 0755: nobody else can rename what is inside
    exchange/<course>/                 the instructor, 0755
        outbound/                      the instructor, 0755: the releases, which learners read
        inbound/                       the instructor and the instructors' group, 3733 (set-group-id, sticky):
                                       learners make their submissions here, list nothing, rename nobody's
        inbound/<id>+<assignment>+<time>+<random>   the learner and the instructors' group, 0750, files 0640
        feedback/                      the instructor, 0711: each page named by a hash of its submission's secret

* every class checks the exchange before it acts (:class:`SafeRoot`): its root and course folder are real
  folders, not links, that no one but their owner can write;
* :class:`CourseSubmit` leaves a submission readable by its learner and the instructors' group alone;
* :class:`CourseCollect` takes an inbound submission only from the learner it names (its owner) and only the
  learner's own regular files (:mod:`classroom.learner_files`): what it refuses is named in its output. The
  submission's time is when its files were last changed on this machine (their status-change time, which no
  learner can set back), not the time the learner wrote into ``timestamp.txt``.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import pwd
import shutil
import stat
from collections import defaultdict
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default import (
    ExchangeCollect,
    ExchangeFetchAssignment,
    ExchangeFetchFeedback,
    ExchangeList,
    ExchangeReleaseAssignment,
    ExchangeReleaseFeedback,
    ExchangeSubmit,
)
from nbgrader.utils import check_mode, ignore_patterns, parse_utc

from classroom.learner_files import TooLarge, take

#: how far before the files' own time a learner's timestamp.txt may lie and still be the submission's time (the
#: submit's own copying happens after it writes the time)
CLOCK_SLACK = dt.timedelta(seconds=60)
#: a submission's modes in an inbound folder that gives its submissions the instructors' group
SUBMISSION_DIR, SUBMISSION_FILE = 0o750, 0o640


def exchange_problems(root: str, course_id: str | None = None, groupshared: bool = False) -> list[str]:
    """What makes the exchange (and its course folder) replaceable by someone other than its owner; empty if safe."""
    problems = []
    places = [(root, "the exchange's root")]
    if course_id:
        places.append((os.path.join(root, course_id), f"the course folder of {course_id!r}"))
    for path, what in places:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if path == root:
                problems.append(f"{what}, {path}, does not exist: the hub's set-up makes it (make hub)")
            continue
        if stat.S_ISLNK(st.st_mode):
            problems.append(f"{what}, {path}, is a symbolic link (to {os.readlink(path)}): it must be a folder")
            continue
        writable = stat.S_IWOTH | (0 if groupshared else stat.S_IWGRP)
        if st.st_mode & writable:
            problems.append(f"{what}, {path}, is writable by others (mode {stat.S_IMODE(st.st_mode):04o}): anyone "
                            "could rename what is inside and put their own in its place")
        if path == root and st.st_uid not in (0, os.geteuid()):
            problems.append(f"{what}, {path}, belongs to {_name(st.st_uid)}, not root: its owner could replace "
                            "any course in it")
    return problems


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class SafeRoot:
    """Every exchange action first checks that the exchange cannot have been replaced (nbgrader's own check
    wanted a root everyone can write)."""

    def ensure_root(self):
        problems = exchange_problems(self.root, self.coursedir.course_id or None, self.coursedir.groupshared)
        if problems:
            self.fail("the exchange is not safe to use, so nothing was done; tell the instructor: "
                      + "; ".join(problems))


class CourseReleaseAssignment(SafeRoot, ExchangeReleaseAssignment):
    pass


class CourseReleaseFeedback(SafeRoot, ExchangeReleaseFeedback):
    """nbgrader's release_feedback, each page then readable by whoever knows its name (nbgrader copies the page's
    mode, which an instructor's umask 077 leaves closed to the learner it is for); the folder lists nothing."""

    def copy_files(self):
        super().copy_files()
        me = os.geteuid()
        with os.scandir(self.dest_path) as pages:
            for page in pages:
                if page.name.endswith(".html") and page.is_file(follow_symlinks=False) and page.stat(
                        follow_symlinks=False).st_uid == me:
                    os.chmod(page.path, 0o644, follow_symlinks=False)


#: a learner's fetched assignment remembers what it was fetched from: each released file's digest (the course's fetch
#: writes it), so that an updated release can be told apart from the learner's own changes
FETCHED = ".course-release.json"


def _digest(path: str) -> str | None:
    """A regular file's SHA-256 (not following a link); None for anything else."""
    import hashlib

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return hashlib.sha256(fh.read()).hexdigest()


def release_digests(root: str, ignore: list[str]) -> dict[str, str]:
    """{path relative to ``root``: digest} for every regular file of a release (nbgrader's ignore patterns apart)."""
    import fnmatch

    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not any(fnmatch.fnmatch(d, pat) for pat in ignore)]
        for name in files:
            if any(fnmatch.fnmatch(name, pat) for pat in ignore):
                continue
            path = os.path.join(folder, name)
            digest = _digest(path)
            if digest:
                found[os.path.relpath(path, root)] = digest
    return found


def _fetched_from(dest: str) -> dict[str, str] | None:
    try:
        with open(os.path.join(dest, FETCHED)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def beside(path: str) -> str:
    """Where an updated release's file goes when the learner changed theirs: name.updated.ext (then .updated-2...)."""
    stem, ext = os.path.splitext(path)
    candidate, n = f"{stem}.updated{ext}", 1
    while os.path.lexists(candidate):
        n += 1
        candidate = f"{stem}.updated-{n}{ext}"
    return candidate


class CourseFetchAssignment(SafeRoot, ExchangeFetchAssignment):
    """nbgrader's fetch, which also brings an updated release to a learner who already has the assignment without
    losing their work: a file the release changed is replaced where the learner left it as fetched, and kept where
    they changed it, the release's new one beside it (``name.updated.ext``, named in the output); a file new in the
    release is added; nothing the learner wrote is overwritten or removed. What each copy was fetched from is
    remembered in :data:`FETCHED`."""

    def init_dest(self):
        self.replace_missing_files = True  # an assignment already fetched is updated (do_copy), not refused
        super().init_dest()

    def do_copy(self, src, dest):
        ignore = list(self.coursedir.ignore)
        new = release_digests(src, ignore)
        if not os.path.isdir(dest):
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*ignore))
        else:
            before = _fetched_from(dest) or {}
            for rel, digest in sorted(new.items()):
                mine = os.path.join(dest, rel)
                if before.get(rel) == digest:
                    continue  # the release did not change it since this copy was fetched: the learner's, as is
                theirs = _digest(mine)
                if theirs == digest:
                    continue
                os.makedirs(os.path.dirname(mine), exist_ok=True)
                if theirs is None and not os.path.lexists(mine):
                    shutil.copy(os.path.join(src, rel), mine)
                    self.log.info("added %s: new in the updated release", rel)
                elif theirs is not None and theirs == before.get(rel):
                    shutil.copy(os.path.join(src, rel), mine)
                    self.log.info("updated %s: you had not changed it", rel)
                else:
                    kept = beside(mine)
                    shutil.copy(os.path.join(src, rel), kept)
                    self.log.warning("kept your %s (you changed it); the updated release's is beside it: %s", rel,
                                     os.path.relpath(kept, dest))
        with open(os.path.join(dest, FETCHED), "w") as fh:
            json.dump(new, fh, indent=0, sort_keys=True)


class CourseFetchFeedback(SafeRoot, ExchangeFetchFeedback):
    pass


class CourseList(SafeRoot, ExchangeList):
    """nbgrader's list, where an assignment the learner fetched and the instructor has since released anew shows as
    released again (the Assignments tab's Fetch button then brings the update: :class:`CourseFetchAssignment`)."""

    def parse_assignments(self):
        assignments = super().parse_assignments()
        if self.inbound or self.cached:
            return assignments
        for info in assignments:
            if info.get("status") != "fetched":
                continue
            before = _fetched_from(info["path"])
            release = os.path.join(self.root, info["course_id"], "outbound", info["assignment_id"])
            if before is not None and os.path.isdir(release) and \
                    release_digests(release, list(self.coursedir.ignore)) != before:
                info["status"] = "released"
                info["path"] = release
                info["updated"] = True
        return assignments


class CourseSubmit(SafeRoot, ExchangeSubmit):
    """nbgrader's submit, then the submission closed to everyone but its learner and the instructors' group
    (nbgrader leaves it writable by everyone, so that the instructor can delete it)."""

    def do_copy(self, src, dest, log=None):
        """nbgrader's copy into the inbound folder without copying the folders' modes: nbgrader's copies the
        learner's folder's mode onto the submission's, which drops the set-group-id bit it took from the inbound
        folder, and the files written after it (timestamp.txt, submission_secret.txt) would be the learner's group's,
        which the instructor cannot read. Elsewhere (the learner's cache) nbgrader's own copy."""
        if os.path.dirname(os.path.abspath(dest)) != os.path.abspath(self.inbound_path):
            return super().do_copy(src, dest, log)
        size, limit = self.get_size(src), 1000 * self.coursedir.max_dir_size
        if size > limit:
            raise RuntimeError(f"Directory size is too big. Size is {size}, maximum size is {limit}")
        leave_out = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                    max_file_size=self.coursedir.max_file_size, log=self.log)
        for folder, subfolders, names in os.walk(src):
            target = os.path.normpath(os.path.join(dest, os.path.relpath(folder, src)))
            os.makedirs(target, exist_ok=True)  # in the inbound folder: its group, and set-group-id for those below
            skipped = set(leave_out(folder, subfolders + names))
            subfolders[:] = [d for d in subfolders if d not in skipped]
            for name in names:
                if name not in skipped:
                    shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))

    def copy_files(self):
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        inbound = os.stat(self.inbound_path)
        shared_group = bool(inbound.st_mode & stat.S_ISGID) and os.stat(dest).st_gid == inbound.st_gid
        # without the inbound folder's group, the instructor reads the submission as anyone does: never writes it
        dirs, files = (SUBMISSION_DIR, SUBMISSION_FILE) if shared_group else (0o755, 0o644)
        for folder, _, names in os.walk(dest, topdown=False):
            for name in names:
                os.chmod(os.path.join(folder, name), files, follow_symlinks=False)
            os.chmod(folder, dirs)


class CourseCollect(SafeRoot, ExchangeCollect):
    """nbgrader's collect, taking only what each learner made: a submission whose folder another made is refused,
    and a submission's links, hard links, devices and others' files are refused; each refusal is named."""

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        self.refused: list[str] = []
        student = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student}+{self.coursedir.assignment_id}+*")
        records = []
        for path in sorted(glob.glob(pattern)):
            record, why = self._record(path)
            if why:
                self._refuse(f"{path}: {why}")
            else:
                records.append(record)
        by_learner = defaultdict(list)
        for record in records:
            by_learner[record["username"]].append(record)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.src_records = []
        for mine in by_learner.values():
            mine = sorted(mine, key=lambda r: r["timestamp"], reverse=True)
            on_time = [r for r in mine if self.duedate is not None and r["timestamp"] <= self.duedate]
            self.src_records.append(on_time[0] if self.before_duedate and on_time else mine[0])

    def _record(self, path: str) -> tuple[dict | None, str | None]:
        """nbgrader's record of an inbound submission, or why it is refused: a name that is no submission's, a
        link or a file in place of its folder, a folder that its learner did not make."""
        name = os.path.basename(path)
        parts = name.rsplit("+", 3)
        try:
            if len(parts) < 3:
                raise ValueError(name)
            learner, when = parts[0], parse_utc(parts[2])
        except (ValueError, OverflowError):
            return None, "not a submission's name (<learner>+<assignment>+<time>+<random>): refused"
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a folder"
            return None, f"{kind}, not a submission folder: refused, never followed"
        try:
            uid = pwd.getpwnam(learner).pw_uid
        except KeyError:
            return None, f"no account is named {learner!r}, so no learner made it: refused"
        if st.st_uid != uid:
            return None, (f"made by {_name(st.st_uid)}, not by {learner}: a submission in another's name is "
                          "refused, not collected")
        return {"username": learner, "filename": name, "timestamp": when, "uid": uid}, None

    def _refuse(self, message: str) -> None:
        self.refused.append(message)
        self.log.error("refused %s", message)

    def copy_files(self):
        if not self.src_records:
            self.log.warning(f"No submissions of '{self.coursedir.assignment_id}' for course "
                             f"'{self.coursedir.course_id}' to collect")
        for record in self.src_records:
            self._collect(record)
        if self.refused:
            self.log.error(f"collect refused {len(self.refused)} thing(s), named above; nothing of theirs was taken")

    def _collect(self, record: dict) -> None:
        learner, assignment = record["username"], self.coursedir.assignment_id
        src = os.path.join(self.inbound_path, record["filename"])
        dest = self.coursedir.format_path(self.coursedir.submitted_directory, learner, assignment)
        if os.path.isdir(dest):
            existing = self.coursedir.get_existing_timestamp(dest)
            newer = existing is None or record["timestamp"] > existing
            if not ((self.update and newer) or (self.before_duedate and existing != record["timestamp"])):
                self.log.info(f"Submission already collected: {learner} {assignment}"
                              + ("" if self.update else " (--update collects a newer one)"))
                return
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        scratch = f"{dest}.collecting"
        shutil.rmtree(scratch, ignore_errors=True)
        leave_out = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                    max_file_size=self.coursedir.max_file_size, log=self.log)
        try:
            found = take(Path(src), Path(scratch), {record["uid"]}, leave_out=leave_out,
                         max_bytes=1000 * self.coursedir.max_dir_size)
        except TooLarge as exc:
            self._refuse(f"{exc} (CourseDirectory.max_dir_size); any earlier submission of {learner}'s stays")
            return
        for refusal in found.refused:
            self._refuse(str(refusal))
        if not os.path.isdir(scratch):
            return
        when = self._submitted_at(src, found.files, record["timestamp"], scratch)
        with open(os.path.join(scratch, "timestamp.txt"), "w") as fh:
            fh.write(f"{when:%Y-%m-%d %H:%M:%S.%f} UTC")
        if os.path.isdir(dest):
            self.log.info(f"Updating submission: {learner} {assignment}")
            shutil.rmtree(dest)
        else:
            self.log.info(f"Collecting submission: {learner} {assignment}")
        os.rename(scratch, dest)

    def _submitted_at(self, src: str, files: list[str], named: dt.datetime, scratch: str) -> dt.datetime:
        """When the submission's files were last changed here (their status-change time, which no learner can set
        back). The learner's timestamp.txt is kept where it lies at most :data:`CLOCK_SLACK` before that (nbgrader's
        submit writes it before it copies the files); any other is named and replaced."""
        changed = max(os.lstat(os.path.join(src, f)).st_ctime for f in ["", *files])
        observed = dt.datetime.fromtimestamp(changed, dt.timezone.utc).replace(tzinfo=None)
        claimed = self.coursedir.get_existing_timestamp(scratch) or named
        if observed - CLOCK_SLACK <= claimed <= observed:
            return claimed
        self.log.warning(f"{src}: its timestamp.txt says {claimed}, but its files were last changed at {observed} "
                         "(UTC): the files' time is the submission's time")
        return observed


#: nbgrader's ExchangeFactory names for the course's classes (nbgrader_config.py and the hub's settings use them)
EXCHANGE_CLASSES = {
    "fetch_assignment": CourseFetchAssignment, "fetch_feedback": CourseFetchFeedback,
    "release_assignment": CourseReleaseAssignment, "release_feedback": CourseReleaseFeedback,
    "list": CourseList, "submit": CourseSubmit, "collect": CourseCollect,
}


def factory_settings() -> dict[str, str]:
    """``ExchangeFactory`` settings naming the course's classes (for a configuration file)."""
    return {name: f"{cls.__module__}.{cls.__qualname__}" for name, cls in EXCHANGE_CLASSES.items()}


def lay_out(root: Path, course_id: str, owner: str | None = None, group: str | None = None) -> list[str]:
    """The exchange's folders with the owners and modes of the module's table (as root); what was changed.

    The course's folder is made for ``owner``, the instructor, in the instructors' ``group``; once made, it stays
    its first instructor's (nbgrader's release and collect want to own it), and only its modes are set again.
    """
    import grp

    done: list[str] = []
    for path in (root, root / course_id):
        if path.is_symlink():
            raise OSError(f"{path} is a symbolic link (to {os.readlink(path)}): the exchange's folders must be folders")
    root.mkdir(parents=True, exist_ok=True)
    _own(root, 0, 0, 0o755, done)
    course = root / course_id
    if not course.exists():
        if owner is None:
            return done
        course.mkdir()
        os.chown(course, pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid)
        done.append(f"{course}: made for {owner}")
    st = course.stat()
    _own(course, st.st_uid, st.st_gid, 0o755, done)
    for name, mode in (("outbound", 0o755), ("inbound", 0o3733), ("feedback", 0o711)):
        path = course / name
        if path.is_symlink():
            raise OSError(f"{path} is a symbolic link (to {os.readlink(path)}): it must be a folder")
        path.mkdir(exist_ok=True)
        _own(path, st.st_uid, st.st_gid, mode, done)
    return done


def _own(path: Path, uid: int, gid: int, mode: int, done: list[str]) -> None:
    st = path.lstat()
    if (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) != (uid, gid, mode):
        os.chown(path, uid, gid, follow_symlinks=False)
        path.chmod(mode)
        done.append(f"{path}: {_name(uid)}, mode {mode:04o}")
