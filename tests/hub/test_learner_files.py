"""Taking a learner's files (classroom/learner_files.py): what a hostile folder holds is refused and named, never read.

Each test builds a learner's folder with the instructor's secret outside it, which nothing may copy. As root (as
make test runs), its files belong to two made-up owners (no accounts needed): the learner (LEARNER) and someone
else (OTHER, standing for the instructor or another learner), and a device is among them; as another user, the
files are that user's, and another owner is stood for by taking them for someone else.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from classroom import learner_files
from classroom.learner_files import TooLarge, inspect, take, write_file

AS_ROOT = os.geteuid() == 0
LEARNER, OTHER = (40001, 40002) if AS_ROOT else (os.geteuid(), os.geteuid() + 1)
SECRET = b"the grading secret"


def chown(path: Path, owner: int) -> None:
    if AS_ROOT:
        os.chown(path, owner, owner, follow_symlinks=False)


@pytest.fixture
def land(tmp_path):
    """(the learner's folder, the instructor's secret file outside it) with a first notebook of the learner's."""
    secret = tmp_path / "instructor" / "grading-secret"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    folder = tmp_path / "inbound" / "learner+02-attention+2026-01-01 00:00:00 UTC"
    folder.mkdir(parents=True)
    mine(folder / "attention.ipynb", b'{"cells": []}')
    chown(folder, LEARNER)
    return folder, secret


def mine(path: Path, data: bytes, owner: int = LEARNER) -> Path:
    path.write_bytes(data)
    chown(path, owner)
    return path


def mkdir(path: Path, owner: int = LEARNER) -> Path:
    path.mkdir()
    chown(path, owner)
    return path


def everything_under(dest: Path) -> dict[str, bytes]:
    return {str(p.relative_to(dest)): p.read_bytes() for p in dest.rglob("*") if p.is_file()}


def refused(found) -> dict[str, str]:
    return {Path(r.path).name: r.why for r in found.refused}


def test_the_learners_own_files_are_taken_with_their_time(land, tmp_path):
    folder, _ = land
    sub = mkdir(folder / "data")
    mine(sub / "table.csv", b"a,b\n1,2\n")
    os.utime(folder / "attention.ipynb", (1_700_000_000, 1_700_000_000))
    found = take(folder, tmp_path / "copy", {LEARNER})
    assert found.refused == [] and found.files == ["attention.ipynb", "data/table.csv"], found
    assert everything_under(tmp_path / "copy") == {"attention.ipynb": b'{"cells": []}', "data/table.csv": b"a,b\n1,2\n"}
    assert (tmp_path / "copy" / "attention.ipynb").stat().st_mtime == 1_700_000_000
    assert found.size == len(b'{"cells": []}') + len(b"a,b\n1,2\n")


def test_a_symbolic_link_is_refused_and_named_never_followed(land, tmp_path):
    folder, secret = land
    os.symlink(secret, folder / "submission_secret.txt")
    os.symlink(secret.parent, folder / "instructor")
    chown(folder / "submission_secret.txt", LEARNER)
    found = take(folder, tmp_path / "copy", {LEARNER})
    why = refused(found)
    assert why["submission_secret.txt"] == f"a symbolic link (to {secret}): refused, never followed", why
    assert why["instructor"] == f"a symbolic link (to {secret.parent}): refused, never followed", why
    assert found.files == ["attention.ipynb"]
    assert SECRET not in b"".join(everything_under(tmp_path / "copy").values())
    assert not any(p.is_symlink() for p in (tmp_path / "copy").rglob("*"))


def test_a_folder_that_is_a_link_is_refused_whole(land, tmp_path):
    folder, secret = land
    link = folder.parent / "learner+02-attention+2026-01-02 00:00:00 UTC"
    os.symlink(secret.parent, link)
    found = take(link, tmp_path / "copy", {LEARNER})
    assert [str(r) for r in found.refused] == [f"{link}: a symbolic link (to {secret.parent}): refused, never followed"]
    assert not (tmp_path / "copy").exists()


def test_hard_links_are_refused_whoever_owns_them(land, tmp_path):
    folder, secret = land
    os.link(secret, folder / "secret-again")  # another's file under the learner's name (root can link it)
    own = mine(folder.parent / "own.txt", b"mine")
    os.link(own, folder / "own-again")  # the learner's own file with a second name elsewhere
    found = take(folder, tmp_path / "copy", {LEARNER, os.geteuid()})  # even where the other owner is accepted
    why = refused(found)
    assert why["secret-again"].startswith("a hard link (one of 2 names of the same file"), why
    assert why["own-again"].startswith("a hard link (one of 2 names of the same file"), why
    assert SECRET not in b"".join(everything_under(tmp_path / "copy").values())


def test_another_owners_file_or_folder_is_refused(land, tmp_path):
    folder, _ = land
    if not AS_ROOT:  # the folder is this user's: taken for another, all of it is another's
        found = take(folder, tmp_path / "copy", {OTHER})
        assert [r.why for r in found.refused] == [f"owned by {learner_files.owner_name(LEARNER)}, not "
                                                  f"{learner_files.owner_name(OTHER)}: refused"], found
        assert not (tmp_path / "copy").exists()
        return
    mine(folder / "planted.ipynb", b"{}", owner=OTHER)
    planted = mkdir(folder / "planted", owner=OTHER)
    mine(planted / "inside.txt", b"x")
    found = take(folder, tmp_path / "copy", {LEARNER})
    why = refused(found)
    assert why == {"planted.ipynb": "owned by uid 40002, not uid 40001: refused",
                   "planted": "owned by uid 40002, not uid 40001: refused"}, why
    assert found.files == ["attention.ipynb"]


def test_fifos_sockets_and_devices_are_refused_without_waiting(land, tmp_path):
    folder, _ = land
    os.mkfifo(folder / "pipe")
    chown(folder / "pipe", LEARNER)
    with socket.socket(socket.AF_UNIX) as s:
        short = tmp_path / "s"  # a Unix socket's path has a short limit: made here, then moved in
        s.bind(str(short))
        os.rename(short, folder / "sock")
        chown(folder / "sock", LEARNER)
        if AS_ROOT:  # only root makes a device
            os.mknod(folder / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
            chown(folder / "null", LEARNER)
        done = []
        worker = threading.Thread(target=lambda: done.append(take(folder, tmp_path / "copy", {LEARNER})), daemon=True)
        worker.start()
        worker.join(timeout=10)
    assert done, "taking the folder blocked (a FIFO opened for reading waits for a writer)"
    why = refused(done[0])
    assert why == {"pipe": "a FIFO (named pipe): refused", "sock": "a socket: refused",
                   **({"null": "a character device: refused"} if AS_ROOT else {})}, why


def test_a_file_swapped_for_a_link_after_the_look_is_refused_by_its_handle(land, tmp_path, monkeypatch):
    """The race: the name is a file when looked at, a link when opened. The open refuses to follow it."""
    folder, secret = land
    mine(folder / "answer.ipynb", b"{}")
    looked = os.stat

    def look_then_swap(name, *args, **kwargs):
        st = looked(name, *args, **kwargs)
        if name == "answer.ipynb":
            os.remove(name, dir_fd=kwargs["dir_fd"])
            os.symlink(secret, name, dir_fd=kwargs["dir_fd"])
        return st

    monkeypatch.setattr(learner_files.os, "stat", look_then_swap)
    found = take(folder, tmp_path / "copy", {LEARNER})
    monkeypatch.undo()
    assert refused(found)["answer.ipynb"] == f"a symbolic link (to {secret}): refused, never followed", found
    assert SECRET not in b"".join(everything_under(tmp_path / "copy").values())


def test_too_many_bytes_are_not_taken_at_all(land, tmp_path):
    folder, _ = land
    mine(folder / "big.bin", b"\0" * 5000)
    with pytest.raises(TooLarge, match=r"more than the 4,000 bytes a submission may \(at big.bin\)"):
        take(folder, tmp_path / "copy", {LEARNER}, max_bytes=4000)
    assert not (tmp_path / "copy").exists()
    assert inspect(folder, {LEARNER}).size == 5000 + len(b'{"cells": []}')


def test_what_the_caller_leaves_out_is_skipped_without_a_word(land, tmp_path):
    folder, _ = land
    mkdir(folder / ".ipynb_checkpoints")
    mine(folder / ".ipynb_checkpoints" / "attention-checkpoint.ipynb", b"{}")
    found = take(folder, tmp_path / "copy", {LEARNER},
                 leave_out=lambda where, names: {n for n in names if n == ".ipynb_checkpoints"})
    assert found.files == ["attention.ipynb"] and found.refused == []


def test_inspect_reads_no_contents(land):
    folder, secret = land
    os.symlink(secret, folder / "x")
    before = secret.stat().st_atime_ns
    os.utime(secret, ns=(before - 10**9, secret.stat().st_mtime_ns))
    atime = secret.stat().st_atime_ns
    time.sleep(0.01)
    found = inspect(folder, {LEARNER})
    assert found.files == ["attention.ipynb"] and [Path(r.path).name for r in found.refused] == ["x"]
    assert secret.stat().st_atime_ns == atime


def test_write_file_follows_no_link_on_its_way(tmp_path):
    root = tmp_path / "submitted"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "bob")
    with pytest.raises(OSError, match="bob: a symbolic link"):
        write_file(root, ["bob", "02-attention", "attention.ipynb"], b"{}")
    assert list(elsewhere.iterdir()) == []
    target = write_file(root, ["ada", "02-attention", "attention.ipynb"], b"{}")
    assert target.read_bytes() == b"{}"
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    os.symlink(secret, root / "ada" / "02-attention" / "timestamp.txt")
    write_file(root, ["ada", "02-attention", "timestamp.txt"], b"2026-01-01 00:00:00 UTC")
    assert secret.read_bytes() == SECRET, "the link's target was written through"
    assert not (root / "ada" / "02-attention" / "timestamp.txt").is_symlink()
    with pytest.raises(ValueError):
        write_file(root, ["..", "x"], b"")


# --- make grade's two ways in: the zip's import and its reading of submitted/ (classroom/grade.py) -------------------

@pytest.fixture
def course(tmp_path):
    """A course folder with one assignment's notebook name, and the instructor's secret beside it."""
    import nbformat

    root = tmp_path / "course"
    (root / "solutions" / "02-attention").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), root / "solutions" / "02-attention" / "attention.ipynb")
    (root / "grading-secret").write_bytes(SECRET)
    return root


def notebook_bytes() -> bytes:
    import nbformat

    return nbformat.writes(nbformat.v4.new_notebook()).encode()


def test_make_grade_does_not_grade_a_submission_holding_a_link(course):
    from classroom import intake

    folder = course / "submitted" / "bob" / "02-attention"
    folder.mkdir(parents=True)
    (folder / "attention.ipynb").write_bytes(notebook_bytes())
    os.symlink(course / "grading-secret", folder / "submission_secret.txt")
    elsewhere = course.parent / "elsewhere" / "02-attention"
    elsewhere.mkdir(parents=True)
    (elsewhere / "attention.ipynb").write_bytes(notebook_bytes())
    os.symlink(elsewhere.parent, course / "submitted" / "eve")
    found = intake.find_submissions(course, "02-attention")
    assert sorted(found) == ["bob", "eve"]
    (bob,) = intake.check_submission(course, "bob", "02-attention", found["bob"])
    assert str(bob.path) == "submitted/bob/02-attention/submission_secret.txt"
    assert bob.reason == (f"a symbolic link (to {course / 'grading-secret'}): refused, never followed; not graded "
                          "until it is removed"), bob
    (eve,) = intake.check_submission(course, "eve", "02-attention", found["eve"])
    assert str(eve.path) == "submitted/eve" and eve.reason.startswith("a symbolic link (to "), eve
    if AS_ROOT:
        mine(folder / "notes.txt", b"x", owner=OTHER)
        os.remove(folder / "submission_secret.txt")
        (other,) = intake.check_submission(course, "bob", "02-attention", found["bob"])
        assert other.reason.startswith("owned by uid 40002, not "), other


def test_a_zips_links_are_left_out_and_its_import_writes_through_no_link(course):
    import zipfile

    from classroom import zip_import

    archive = course.parent / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        link = zipfile.ZipInfo("export/bob/attention.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, str(course / "grading-secret"))
        zf.writestr("export/ann/attention.ipynb", notebook_bytes())
        zf.writestr("export/cy/attention.ipynb", notebook_bytes())
    elsewhere = course.parent / "elsewhere"
    elsewhere.mkdir()
    (course / "submitted").mkdir()
    os.symlink(elsewhere, course / "submitted" / "ann")  # planted before the import
    problems = {p.student: p.reason for p in zip_import.import_zip(course, archive, ["02-attention"]).problems}
    assert problems["bob"] == "a symbolic link in the zip file: left out", problems
    assert problems["ann"].startswith(f"not imported: {course / 'submitted' / 'ann'}: a symbolic link"), \
        problems
    assert list(elsewhere.iterdir()) == [], "the import wrote through the planted link"
    assert not (course / "submitted" / "bob").exists()
    cy = course / "submitted" / "cy" / "02-attention"
    assert (cy / "attention.ipynb").read_bytes() == notebook_bytes()
    assert {p.name for p in cy.iterdir()} == {"attention.ipynb", "timestamp.txt", "submission_secret.txt"}
