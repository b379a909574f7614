"""``make hub-users``: the class list's learners and the instructor as Unix accounts, each with a first password
for the instructor to hand out; the instructor with a copy of the course to grade in and the exchange's course
folder. A bad row is named and skipped; nothing is half-created."""

from __future__ import annotations

import csv
import grp
import json
import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from classroom.hub import exchange
from classroom.hub.layout import COURSE_ID, USERNAME, Groups, HubError, Layout, require_root, run
from classroom.roster import Entry, RosterError, read_roster
from classroom.text_out import csv_writer


def read_class_list(path: Path) -> tuple[list[Entry], list[str]]:
    """The class list's learners who can be accounts, and why each other row is skipped (named by line)."""
    try:
        entries, unusable = read_roster(path)
    except RosterError as exc:
        raise HubError(str(exc)) from None
    problems = [(u.line, f"line {u.line}: id {u.id!r} is already on line {u.first}: skipped") for u in unusable
                if u.first is not None]
    rows = []
    for e in [Entry(u.line, "") for u in unusable if u.first is None] + entries:
        if not USERNAME.match(e.id):
            problems.append((e.line, f"line {e.line}: id {e.id!r} is not an account name (lower-case letters, "
                                     "digits, '_' and '-', starting with a letter or '_', at most 32): skipped"))
        elif any(ch in e.name for ch in ":,\n"):
            problems.append((e.line, f"line {e.line}: the name {e.name!r} holds ':' or ',', which account records "
                                     "cannot: skipped"))
        else:
            rows.append(e)
    return rows, [message for _, message in sorted(problems)]


def ensure_group(name: str) -> None:
    try:
        grp.getgrnam(name)
    except KeyError:
        run(["groupadd", "--system", name])


def in_group(user: str, group: str) -> bool:
    try:
        return user in grp.getgrnam(group).gr_mem
    except KeyError:
        return False


def create_account(ident: str, name: str, group: str) -> str:
    """A new account in ``group`` with a private home and a first password (returned); all or nothing."""
    run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", name or ident, "--groups", group,
         ident])
    try:
        home = Path(pwd.getpwnam(ident).pw_dir)
        home.chmod(0o700)  # Debian's default 0755 would let classmates read each other's work
        password = new_password()
        run(["chpasswd"], input=f"{ident}:{password}\n")
        return password
    except BaseException:
        subprocess.run(["userdel", "--remove", ident], capture_output=True)
        raise


def new_password() -> str:
    """A fresh password of 16 URL-safe characters, starting with a letter or digit (a spreadsheet opening
    passwords.csv would take a leading '-' for a formula's start)."""
    while True:
        password = secrets.token_urlsafe(12)
        if password[0].isalnum():
            return password


def record_passwords(layout: Layout, new: dict[str, str]) -> None:
    path = layout.state / "passwords.csv"
    old = {}
    if path.is_file():
        old = {r["id"]: r["password"] for r in csv.DictReader(path.open())}
    old.update(new)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", newline="") as fh:
        w = csv_writer(fh)
        w.writerow(["id", "password"])
        w.writerows(sorted(old.items()))


def give_course_copy(layout: Layout, user: str) -> Path:
    """The instructor's own course folder, ~/course: the course's files, theirs to grade in, with hub.toml naming
    the hub's exchange (the course's nbgrader_config.py reads it, wherever nbgrader runs from: see there)."""
    entry = pwd.getpwnam(user)
    course = Path(entry.pw_dir) / "course"
    if not course.exists():
        shutil.copytree(layout.course, course)
        run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(course)])
        run(["chmod", "-R", "u+w", str(course)])
    settings = course / "hub.toml"
    if settings.is_symlink() or settings.exists() and settings.stat().st_uid not in (0, entry.pw_uid):
        raise HubError(f"{settings} is a link or belongs to another account: remove it and run make hub-users again")
    from classroom.hub.cgroups import HubGroups

    groups = HubGroups(layout.prefix).procs_files("instructors", user)  # grading joins them from any shell
    settings.write_text(f"# The hub this copy of the course belongs to (make hub-users writes this file).\n"
                        f"exchange = {json.dumps(str(layout.exchange))}\n"
                        f"# the instructor's control group, delegated to them: make grade joins it from any shell\n"
                        f"control_groups = {json.dumps(groups)}\n")
    os.chown(settings, entry.pw_uid, entry.pw_gid)
    return course


def instructor_course(layout: Layout, user: str, groups: Groups) -> list[str]:
    """The instructor's ~/course and the exchange's course folder (theirs, unless an earlier instructor's)."""
    lines = [f"{user}'s course folder: {give_course_copy(layout, user)}"]
    laid = exchange.lay_out(layout.exchange, COURSE_ID, user, groups.instructors)
    return lines + [f"exchange: {line}" for line in laid]


def add_users(layout: Layout, roster: Path | None, instructor: str | None, groups: Groups = Groups()) -> list[str]:
    """Create the accounts; return one line per row: created, already there, or why it was skipped."""
    require_root()
    ensure_group(groups.learners)
    ensure_group(groups.instructors)
    disks_said = learners_disks(layout, groups)  # the exchange's disk mounted before anything is laid out in it
    rows, report = read_class_list(roster) if roster else ([], [])
    wanted = [(r, groups.learners) for r in rows]
    if instructor:
        if not USERNAME.match(instructor):
            raise HubError(f"--instructor {instructor!r} is not an account name (lower-case letters, digits, '_' "
                           "and '-', starting with a letter or '_')")
        wanted.insert(0, (Entry(0, instructor, instructor, ""), groups.instructors))
    passwords = {}
    for row, group in wanted:
        where = f"line {row.line}: " if row.line else "instructor: "
        try:
            pwd.getpwnam(row.id)
            exists = True
        except KeyError:
            exists = False
        if exists:
            if in_group(row.id, group):
                report.append(f"{where}{row.id} is already on the hub")
                if group == groups.instructors:
                    report += [f"{where}{line}" for line in instructor_course(layout, row.id, groups)]
            else:
                report.append(f"{where}{row.id} is an existing account that is not the course's: skipped")
            continue
        try:
            passwords[row.id] = create_account(row.id, row.name, group)
        except HubError as exc:
            report.append(f"{where}{row.id} could not be created ({str(exc).splitlines()[0]}): skipped")
            continue
        report.append(f"{where}{row.id} created")
        if group == groups.instructors:
            report += [f"{where}{line}" for line in instructor_course(layout, row.id, groups)]
    if passwords:
        record_passwords(layout, passwords)
        report.append(f"first passwords: {layout.state / 'passwords.csv'} (root only)")
    return report + disks_said + learners_disks(layout, groups)


def learners_disks(layout: Layout, groups: Groups) -> list[str]:
    """Each learner's home on a disk of its own, and the exchange on its own (classroom/hub/disks.py), at the sizes
    make hub last started with (or this machine's defaults); nothing where make hub was started with HUB_DISK=none."""
    from classroom.hub.disks import Disks, default_sizes

    disks = Disks(layout)
    if disks.settings.is_file() and disks.sizes() is None:
        return []
    try:
        members = sorted(grp.getgrnam(groups.learners).gr_mem)
    except KeyError:
        members = []
    return [f"disk: {line}" for line in disks.mount_all(members, disks.sizes() or default_sizes())]
